"""What a store holds: row counts per table, runs per model / hardware / torch version, size on disk,
backend and schema version. Read by `compilewatch stats` and `compilewatch store copy` (its check)."""
from __future__ import annotations

from compilewatch.store.files import migrations

SYSTEM_TABLES = {"_migrations", "stale_runs"}   # the store's bookkeeping, not data to copy


def table_names(con) -> list[str]:
    """The store's own tables (not those of other attached databases), in name order."""
    return [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
        "AND table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1").fetchall()]


def column_names(con, table: str, catalog: str | None = None) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = coalesce(?, current_database()) "
        "AND table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", [catalog, table]).fetchall()]


def row_counts(con) -> dict[str, int]:
    return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in table_names(con)}


def _runs_by(con, column: str, top: int) -> list[dict]:
    rows = con.execute(f"SELECT coalesce({column}, 'unknown') AS v, count(*) AS n FROM runs GROUP BY 1 "
                       "ORDER BY n DESC, v LIMIT ?", [top]).fetchall()
    return [{"value": v, "runs": n} for v, n in rows]


def store_stats(store, top: int = 20) -> dict:
    """One dict: every table's name -> its row count, plus backend, db, schema_version, migrations,
    size_on_disk (bytes by part) and runs_by_model / runs_by_hardware / runs_by_torch_version (top N)."""
    with store.read() as con:
        counts = row_counts(con)
        applied = sorted(r[0] for r in con.execute("SELECT name FROM _migrations").fetchall())
        run_cols = set(column_names(con, "runs"))
        hardware = "hardware" if "hardware" in run_cols else "gpu_name"
        by = {"runs_by_model": _runs_by(con, "model", top),
              "runs_by_hardware": _runs_by(con, hardware, top),
              "runs_by_torch_version": _runs_by(con, "torch_version", top)}
    known = [n for n, _ in migrations()]
    size = store.size_on_disk()
    return {
        **counts,
        "backend": store.backend,
        "db": str(store.db_path),
        "data_path": store.location.uri(),   # a folder, or s3://bucket/prefix
        "schema_version": int(applied[-1].split("_")[0]) if applied else 0,
        "migrations": applied,
        "migrations_pending": [n for n in known if n not in applied],
        "size_on_disk": {**size, "total_bytes": sum(v for v in size.values() if v)},
        **by,
    }
