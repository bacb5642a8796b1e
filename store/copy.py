"""Copy a whole store into another one — a team's embedded DuckDB file into a DuckLake team store, or
back — verified by counting every table on both sides. Raw files go along (content-addressed: the
ones the destination has already are not copied again)."""
from __future__ import annotations

from compilewatch.core.errors import StoreError
from compilewatch.store.stats import SYSTEM_TABLES, column_names, row_counts, table_names

SOURCE = "cw_copy_source"


def copy_store(src, dst) -> dict:
    """Every row of every table of `src` into the empty store `dst`, in one transaction. Returns
    {"tables": {name: [source rows, destination rows]}, "raw_files_copied": n}. Raises StoreError
    when dst already holds runs or when any count differs afterwards (the copy is then rolled back)."""
    if str(src.db_path) == str(dst.db_path):
        raise StoreError("--from and --to name the same store", "copy into another database or DuckLake catalog")
    with src.read() as scon:
        src_counts = row_counts(scon)
    with dst.read() as dcon:
        if dcon.execute("SELECT count(*) FROM runs").fetchall()[0][0]:
            raise StoreError(f"the destination {dst.db_path} already holds runs",
                             "copy into a new, empty store (a fresh database file or catalog database)")

    # ATTACH and DETACH cannot sit inside the transaction that reads the attached store: the source is
    # attached around it.
    with dst.write() as con, src.attached(con, SOURCE):
        con.execute("BEGIN")
        try:
            tables = [t for t in table_names(con) if t not in SYSTEM_TABLES and t in src_counts]
            for t in tables:
                theirs = set(column_names(con, t, SOURCE))
                cols = ", ".join(f'"{c}"' for c in column_names(con, t) if c in theirs)
                con.execute(f'INSERT INTO "{t}" ({cols}) SELECT {cols} FROM {SOURCE}.main."{t}"').fetchall()
            counts = {t: [src_counts[t], con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0]] for t in tables}
            bad = {t: c for t, c in counts.items() if c[0] != c[1]}
            if bad:
                raise StoreError(f"row counts differ after the copy: {bad}", "nothing was copied; report this as a bug")
            top = con.execute("SELECT max(file_id) FROM files").fetchall()[0][0]
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    if top:
        dst.advance_file_ids(top)  # the next file ingested into dst gets a new id
    return {"tables": counts, "raw_files_copied": _copy_raw(src, dst)}


def _copy_raw(src, dst) -> int:
    """Each raw copy of src that dst lacks, through dst's scratch folder: a folder or an S3 prefix
    on either side (store/objects.py), published whole, so a reader never finds half a raw file."""
    n = 0
    for e in src.location.entries("raw"):
        if dst.location.exists(e.rel):
            continue
        tmp = dst.tmp_dir / f"copy-{e.rel.rsplit('/', 1)[-1]}"
        src.location.download(e.rel, tmp)
        n += dst.location.publish_new(e.rel, tmp)
    return n
