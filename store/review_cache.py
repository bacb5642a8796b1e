"""The Overview's review kept per store version (tables review_snapshots and review_rows, migration
009): computed once by whoever asks first after the data changed, then read as rows by every later
page load, on every host that shares the store.

The store version names what the review reads: the committed files (how many, the newest id, their
records) and the parser versions that read them. An ingest or a reingest under a new parser makes a
new version; a duplicate refused does not, and a copy of the store keeps its version and its review. What
is kept is plain data (JSON per row), so this module knows nothing of what a review is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

import pandas as pd


@dataclass(frozen=True)
class Kept:
    computed_at: datetime          # UTC
    seconds: float | None          # how long the computation took
    parts: dict[str, pd.DataFrame]


def store_version(con) -> str:
    """Changes whenever a file is stored, removed or parsed again with another parser version."""
    n, top, parsers, records = con.execute(
        "SELECT count(*), max(file_id), sum(parser_version), sum(records) FROM files").fetchall()[0]
    return f"{n}.{top}.{parsers}.{records}"


def is_kept(con, view_key: str, version: str) -> bool:
    """Whether the view's review is kept for this store version: one row read, none of the review."""
    return bool(con.execute("SELECT count(*) FROM review_snapshots WHERE view_key = ? AND store_version = ?",
                            [view_key, version]).fetchall()[0][0])


def load(con, view_key: str, version: str) -> Kept | None:
    """The view's review kept for this store version, or None when none is."""
    snap = con.execute("SELECT computed_at, seconds, columns_json FROM review_snapshots "
                       "WHERE view_key = ? AND store_version = ? ORDER BY computed_at DESC LIMIT 1",
                       [view_key, version]).fetchall()
    if not snap:
        return None
    computed_at, seconds, columns_json = snap[0]
    rows = con.execute("SELECT part, row_json FROM review_rows WHERE view_key = ? AND store_version = ? "
                       "AND computed_at = ? ORDER BY part, row_no", [view_key, version, computed_at]).fetchall()
    by_part: dict[str, list[dict]] = {}
    for part, row in rows:
        by_part.setdefault(part, []).append(json.loads(row))
    parts = {part: pd.DataFrame.from_records(by_part.get(part, []), columns=cols)
             for part, cols in json.loads(columns_json).items()}
    return Kept(computed_at.replace(tzinfo=timezone.utc), seconds, parts)


def keep(store, view_key: str, version: str, parts: dict[str, pd.DataFrame], seconds: float) -> Kept:
    """Store the view's review for this store version, dropping what was kept for older versions.
    Leaves the store's data_version alone: the data did not change, only what is derived from it.

    Keeps nothing when the store has moved past ``version`` meanwhile (a writer that read before
    another's ingest must not drop the newer version's review for its older one), nor when the view
    is already kept for it (two writers that computed it at once keep one copy); the Kept returned
    then holds these parts as computed."""
    computed_at = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [(part, i, json.dumps(r, default=str))
            for part, frame in parts.items()
            for i, r in enumerate(json.loads(frame.to_json(orient="records", date_format="iso", default_handler=str)))]
    columns = json.dumps({part: list(map(str, frame.columns)) for part, frame in parts.items()})
    for attempt in store.transactions(bump_version=False):
        with attempt as con:
            if store_version(con) != version or is_kept(con, view_key, version):
                break
            for table in ("review_snapshots", "review_rows"):
                con.execute(f"DELETE FROM {table} WHERE store_version <> ?", [version]).fetchall()
            con.execute("INSERT INTO review_snapshots (view_key, store_version, computed_at, seconds, columns_json) "
                        "VALUES (?, ?, ?, ?, ?)", [view_key, version, computed_at, seconds, columns]).fetchall()
            if rows:   # one statement, not one per row: a DuckLake statement is a catalog round trip
                con.execute("INSERT INTO review_rows (view_key, store_version, computed_at, part, row_no, row_json) "
                            "SELECT ?, ?, ?, unnest(?::VARCHAR[]), unnest(?::INTEGER[]), unnest(?::VARCHAR[])",
                            [view_key, version, computed_at, [p for p, _, _ in rows], [i for _, i, _ in rows],
                             [r for _, _, r in rows]]).fetchall()
    return Kept(computed_at.replace(tzinfo=timezone.utc), seconds, parts)
