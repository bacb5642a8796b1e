"""Run detail's deep dive as page queries (f.run_id, f.compile_id): artifact listings without
payloads, failures and restarts, symbolic-shape specialisations, the stack trie. What they read
and how is the deep dive's own (compilewatch.deepdive); these only shape it into DataFrames for
the page's cache. Payloads are fetched one at a time (deepdive.artifacts.fetch), never here."""
from __future__ import annotations

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.deepdive import artifacts, compiles, stack_trie


def artifact_list(con, f: Filters) -> pd.DataFrame:
    """f.compile_id's artifacts in log order but its stack (the trie shows it): file_id, line_no,
    rank, kind, name, title, size_bytes."""
    rows = [a for a in artifacts.list_artifacts(con, f.run_id, f.compile_id) if a["kind"] != "dynamo_start"]
    frame = pd.DataFrame(rows, columns=["file_id", "line_no", "compile_id", "rank", "kind", "name", "encoding",
                                        "size_bytes"])
    frame["title"] = [artifacts.title(k, n) for k, n in zip(frame["kind"], frame["name"])]
    return frame


def failures(con, f: Filters) -> pd.DataFrame:
    """Each attempt of f.compile_id that failed or restarted: fail type, reason, user frame, restart reasons."""
    return pd.DataFrame(compiles.failures(con, f.run_id, f.compile_id),
                        columns=["compile_id", "rank", "fail_type", "fail_reason", "fail_at", "restart_reasons"])


def specialisations(con, f: Filters) -> pd.DataFrame:
    """f.compile_id's symbolic_shape_specialization records: symbol, sources, value, reason, user frame."""
    return pd.DataFrame(artifacts.specialisations(con, f.run_id, f.compile_id),
                        columns=["symbol", "sources", "value", "reason", "user_code"])


def trie(con, f: Filters) -> pd.DataFrame:
    """The run's stack trie as text (one row, column ``text``) and how many compile ids it marks."""
    root = stack_trie.build(con, f.run_id)
    return pd.DataFrame([{"text": stack_trie.render(root), "compiles": stack_trie.count_marks(root)}])
