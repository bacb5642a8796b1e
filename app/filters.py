"""The dashboard's filters as plain data, and their round trip through the URL query string.

No streamlit here: pages turn ``st.query_params`` into a :class:`Filters` with
:func:`from_params` and write it back with :func:`to_params`, so a pasted link opens the same
view. Queries take a Filters and read only the fields they need.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, timedelta

DIMENSIONS = ("torch_version", "label", "git_commit")


@dataclass(frozen=True)
class Filters:
    models: tuple[str, ...] = ()
    torch_versions: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()     # hardware keys (GPU name, CPU...): figures never mix two
    start: date | None = None          # inclusive, UTC day of the run's start
    end: date | None = None            # inclusive
    run_id: str | None = None          # run detail; side A of a run comparison
    run_b: str | None = None           # side B of a run comparison
    dimension: str = "torch_version"   # what "version" means on trends and compare
    version_a: str | None = None
    version_b: str | None = None
    break_key: str | None = None
    function: str | None = None
    frame: str | None = None           # compile time: "co_name @ file:line" (file base name)
    compile_id: str | None = None      # run detail: the compile whose full metrics are shown
    search: str | None = None          # substring of break type / reason / file
    only_new: bool = False             # hotspots: breaks first seen in the last 7 days of the window
    limit: int = 50

    def replace(self, **changes) -> "Filters":
        return dataclasses.replace(self, **changes)

    def window_days(self) -> int:
        if self.start and self.end:
            return (self.end - self.start).days + 1
        return 7

    def previous_window(self) -> "Filters":
        """The window of the same length just before this one (the weekly review's baseline)."""
        if not self.end:
            return self
        days = self.window_days()
        return self.replace(start=self.end - timedelta(days=2 * days - 1), end=self.end - timedelta(days=days))


# URL name -> field. Lists repeat the key (?model=a&model=b), as st.query_params.get_all reads them.
_LIST_PARAMS = {"model": "models", "torch": "torch_versions", "label": "labels", "hw": "hardware"}
_STR_PARAMS = {"run": "run_id", "run_b": "run_b", "by": "dimension", "a": "version_a", "b": "version_b",
               "break": "break_key", "fn": "function", "frame": "frame", "cid": "compile_id",
               "q": "search"}
_DATE_PARAMS = {"from": "start", "to": "end"}


def _parse_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def from_params(params: dict[str, str | list[str]]) -> Filters:
    """Filters from a query-string mapping; values may be a str or a list of str. Bad values are ignored."""
    def _list(v):
        if v is None:
            return ()
        return tuple(x for x in ([v] if isinstance(v, str) else v) if x)

    def _single(v):
        if isinstance(v, (list, tuple)):
            v = v[-1] if v else None
        return v or None

    kw: dict = {}
    for key, name in _LIST_PARAMS.items():
        if key in params:
            kw[name] = _list(params[key])
    for key, name in _STR_PARAMS.items():
        if _single(params.get(key)):
            kw[name] = _single(params.get(key))
    for key, name in _DATE_PARAMS.items():
        d = _parse_date(_single(params.get(key)))
        if d:
            kw[name] = d
    if kw.get("start") and kw.get("end") and kw["start"] > kw["end"]:
        kw["start"], kw["end"] = kw["end"], kw["start"]
    if _single(params.get("new")) in ("1", "true", "yes"):
        kw["only_new"] = True
    if kw.get("dimension") not in DIMENSIONS:
        kw.pop("dimension", None)
    return Filters(**kw)


def to_params(f: Filters) -> dict[str, str | list[str]]:
    """The query-string mapping for f; defaults are left out so links stay short."""
    out: dict[str, str | list[str]] = {}
    for key, name in _LIST_PARAMS.items():
        if getattr(f, name):
            out[key] = list(getattr(f, name))
    for key, name in _STR_PARAMS.items():
        value = getattr(f, name)
        if value and not (name == "dimension" and value == "torch_version"):
            out[key] = value
    for key, name in _DATE_PARAMS.items():
        if getattr(f, name):
            out[key] = getattr(f, name).isoformat()
    if f.only_new:
        out["new"] = "1"
    return out


# The global filters that pick runs by one of their keys: Filters field -> the key's column, as
# app/queries/common.py's runs_cte names it. The day rollups' cells hold the same keys (app/cells.py).
RUN_KEY_FILTERS = (("models", "model"), ("torch_versions", "torch_version"), ("labels", "label"),
                   ("hardware", "hardware"))


def key_clauses(f: Filters, column, skip: tuple[str, ...] = ()) -> tuple[list[str], list]:
    """One ``list_contains`` clause per global key filter that is set (``column(name)`` gives the
    key's SQL), and their parameters."""
    clauses: list[str] = []
    params: list = []
    for field, col in RUN_KEY_FILTERS:
        values = getattr(f, field)
        if values and field not in skip:
            clauses.append(f"list_contains(?::VARCHAR[], {column(col)})")
            params.append(list(values))
    return clauses, params
