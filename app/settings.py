"""Dashboard settings, each with a name, a default and a help text (after datasette's settings).

Resolution order for every setting: the environment variable, then ``.streamlit/secrets.toml``
under ``[compilewatch]``, then the default. A relative db path is relative to the directory the
dashboard was started from (as for the CLI's --db); a relative sample_logs path falls back to the
repository's own sample_logs/.

    [compilewatch]                 # .streamlit/secrets.toml
    db = "/data/team/compilewatch.duckdb"
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "db", "COMPILEWATCH_DB", ".compilewatch/compilewatch.duckdb",
        "The DuckDB store the dashboard reads; its folder also holds raw/ (the ingested files) "
        "and inbox/. The CLI's --db takes the same path.",
    ),
    Setting(
        "sample_logs", "COMPILEWATCH_SAMPLE_LOGS", "sample_logs",
        "Folder ingested once when the dashboard starts on an empty database, so a newcomer sees real data.",
    ),
    Setting(
        "bootstrap", "COMPILEWATCH_BOOTSTRAP", "1",
        "Set to 0 to skip ingesting sample_logs on first start (an empty database then shows how to add data).",
    ),
)
_BY_NAME = {s.name: s for s in SETTINGS}


def _from_secrets(name: str) -> str | None:
    try:
        import streamlit as st

        section = st.secrets.get("compilewatch")
        if section is not None and name in section:
            return str(section[name])
    except Exception:  # no secrets.toml, or not running under streamlit: not an error
        return None
    return None


def get(name: str) -> str:
    """The value of a setting: environment, then secrets, then default."""
    s = _BY_NAME[name]
    value = os.environ.get(s.env)
    if value:
        return value
    value = _from_secrets(name)
    return value if value else s.default


def db_path() -> Path:
    return Path(get("db")).expanduser()


REPO = Path(__file__).resolve().parent.parent


def sample_logs_dir() -> Path:
    """A relative sample_logs path is looked up in the working directory, then next to app/: the
    dashboard may be started from anywhere (`compilewatch dashboard`)."""
    path = Path(get("sample_logs")).expanduser()
    if path.is_absolute() or path.exists():
        return path
    return REPO / path


def bootstrap_enabled() -> bool:
    return get("bootstrap").strip().lower() not in ("0", "false", "no", "off", "")


def as_rows() -> list[dict]:
    """For the settings table in the app: name, environment variable, default, current value, help."""
    return [
        {"setting": s.name, "env": s.env, "default": s.default, "value": get(s.name), "help": s.help}
        for s in SETTINGS
    ]
