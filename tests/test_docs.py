"""Every command and setting a user can reach is documented in the README (datasette's habit)."""
from pathlib import Path

from compilewatch.cli import build_parser

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_subcommand_is_in_the_readme():
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [name for name in sub.choices if f"compilewatch {name}" not in README]
    assert not missing, f"README lacks: {missing}"


def test_settings_are_documented():
    from compilewatch.core.settings import SETTINGS
    for name in (s.env for s in SETTINGS):
        assert name in README, name
    assert README.index("scripts/dashboard.sh") < 600 and README.index("scripts/test.sh") < 600


def _commands(parser, path=()):
    """(path, parser) for every command and subcommand: ("ingest",), ("store", "copy"), ..."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
            return
    if path:
        yield path, parser


def _section(command: str) -> str:
    head = f"### `compilewatch {command}`"
    assert head in README, f"README has no section {head}"
    body = README[README.index(head) + len(head):]
    ends = [i for i in (body.find("\n### "), body.find("\n## ")) if i >= 0]
    return body[:min(ends)] if ends else body


def test_every_option_of_every_command_is_in_its_readme_section():
    """Each option in `compilewatch COMMAND --help` is documented in README's section for that
    command, and the section names no option the command does not take (sqlite-utils' habit)."""
    import re

    problems = []
    for path, parser in _commands(build_parser()):
        section = _section(" ".join(path))
        options = {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
        documented = set(re.findall(r"^\| `(--[\w-]+)`", section, re.M))
        problems += [f"{' '.join(path)}: {o} not in README" for o in sorted(options - documented)]
        problems += [f"{' '.join(path)}: README documents {o}, which it does not take" for o in sorted(documented - options)]
    assert not problems, "\n".join(problems)
