"""Every command and setting a user can reach is documented in the README (datasette's habit)."""
from pathlib import Path

from compilewatch.cli import build_parser

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_subcommand_is_in_the_readme():
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [name for name in sub.choices if f"compilewatch {name}" not in README]
    assert not missing, f"README lacks: {missing}"


def test_settings_are_documented():
    from compilewatch.settings import SETTINGS
    for name in (s.env for s in SETTINGS):
        assert name in README, name
    assert README.index("scripts/dashboard.sh") < 600 and README.index("scripts/test.sh") < 600
