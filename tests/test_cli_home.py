"""The command line's home: `compilewatch` and `python -m compilewatch` (with `collect` among its
commands) start; a command is one registered function; the dashboard's Streamlit options are stated once."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch import cli
from compilewatch.core import settings

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv", [[sys.executable, "-m", "compilewatch", "--help"],
                                  [str(Path(sys.executable).parent / "compilewatch"), "--help"],
                                  [sys.executable, "-m", "compilewatch", "collect", "--help"]])
def test_entry_points_start(argv, tmp_path):
    if not Path(argv[0]).exists():
        pytest.skip(f"{argv[0]} not installed")
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout


def test_every_command_is_reachable():
    import argparse

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert {"ingest", "summarize", "check", "reingest", "inbox", "dashboard", "collect", "bench"} <= set(sub.choices)


def test_a_command_is_one_registered_function(monkeypatch, capsys):
    """What another command (`report`, `store copy`) takes: one function and its registration."""
    monkeypatch.setattr(cli, "COMMANDS", list(cli.COMMANDS))

    @cli.command("demo copy", "copy one store into another", cli.db_arg(), cli.arg("--to", required=True))
    def demo_copy(args) -> int:
        print(f"{args.db} -> {args.to}")
        return 0

    monkeypatch.setenv("COMPILEWATCH_DB", "/tmp/a.duckdb")
    assert cli.main(["demo", "copy", "--to", "b.duckdb"]) == 0
    assert capsys.readouterr().out.strip() == "/tmp/a.duckdb -> b.duckdb"
    with pytest.raises(SystemExit) as e:
        cli.main(["demo"])
    assert e.value.code == 2


def test_db_setting_is_read_when_the_command_runs(monkeypatch, tmp_path):
    db = tmp_path / "s" / "x.duckdb"
    monkeypatch.setenv("COMPILEWATCH_DB", str(db))
    assert cli.main(["reingest"]) == 0
    assert db.exists()


def test_a_setting_with_a_bad_value_is_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COMPILEWATCH_LOCK_TIMEOUT", "soon")
    assert cli.main(["reingest", "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "COMPILEWATCH_LOCK_TIMEOUT='soon' is not a number" in capsys.readouterr().err


def test_settings_resolve_env_then_secrets_then_default(monkeypatch):
    monkeypatch.delenv("COMPILEWATCH_DB", raising=False)
    assert settings.get("db") == settings.BY_NAME["db"].default
    assert settings.get("db", {"db": "/team/x.duckdb"}) == "/team/x.duckdb"
    monkeypatch.setenv("COMPILEWATCH_DB", "/env/x.duckdb")
    assert settings.get("db", {"db": "/team/x.duckdb"}) == "/env/x.duckdb"
    # lock_timeout is read from the environment only (the store is opened outside the dashboard too)
    assert settings.get("lock_timeout", {"lock_timeout": "5"}) == settings.BY_NAME["lock_timeout"].default


def test_streamlit_options_are_the_same_for_both_ways_of_starting():
    from compilewatch.app import server

    tomllib = pytest.importorskip("tomllib")
    with open(REPO / ".streamlit" / "config.toml", "rb") as f:
        toml = tomllib.load(f)
    flat = {f"{section}.{key}": value for section, values in toml.items() for key, value in values.items()}
    assert flat == server.OPTIONS
    assert server.OPTIONS["client.toolbarMode"] in ("viewer", "minimal")
    assert "--client.toolbarMode=viewer" in server.streamlit_flags()
