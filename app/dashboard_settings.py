"""The dashboard's view of the settings declared in compilewatch.core.settings: it adds the
``[compilewatch]`` section of ``.streamlit/secrets.toml`` as a source, and turns paths into Paths.

    [compilewatch]                 # .streamlit/secrets.toml
    db = "/data/team/compilewatch.duckdb"

A relative db path is relative to the directory the dashboard was started from (as for the CLI's
--db); a relative sample_logs path falls back to the repository's own sample_logs/.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from compilewatch.core import settings as table


def _secrets() -> Mapping | None:
    try:
        import streamlit as st

        return st.secrets.get(table.SECTION)
    except Exception:  # no secrets.toml, or not running under streamlit: not an error
        return None


def get(name: str) -> str:
    return table.get(name, _secrets())


def db_path() -> Path | str:
    """A database file's Path, or a DuckLake store's spec as given (a connection string, not a path)."""
    from compilewatch.store import is_lake
    value = get("db")
    return value if is_lake(value) else Path(value).expanduser()


def data_path() -> str | None:
    return get("data_path") or None


REPO = Path(__file__).resolve().parent.parent


def sample_logs_dir() -> Path:
    """A relative sample_logs path is looked up in the working directory, then next to app/: the
    dashboard may be started from anywhere (`compilewatch dashboard`)."""
    path = Path(get("sample_logs")).expanduser()
    if path.is_absolute() or path.exists():
        return path
    return REPO / path


def bootstrap_enabled() -> bool:
    return table.is_on("bootstrap", _secrets())


def as_rows() -> list[dict]:
    """For the settings table in the app: name, environment variable, default, current value, help."""
    return [
        {"setting": s.name, "env": s.env, "default": s.default, "value": get(s.name), "help": s.help}
        for s in table.SETTINGS
    ]
