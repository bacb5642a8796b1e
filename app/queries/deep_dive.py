"""One run's deep dive (f.run_id, f.compile_id): artifact listings without payloads, failures and
restarts, symbolic-shape specialisations, the stack trie. Payloads are fetched one at a time
(deepdive.artifacts.fetch), never by these listings."""
from __future__ import annotations

import json

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df
from compilewatch.deepdive import artifacts, stack_trie


def artifact_list(con, f: Filters) -> pd.DataFrame:
    """f.compile_id's artifacts in log order: file_id, line_no, rank, kind, name, title, size_bytes."""
    rows = [a for a in artifacts.list_artifacts(con, f.run_id, f.compile_id) if a["kind"] != "dynamo_start"]
    frame = pd.DataFrame(rows, columns=["file_id", "line_no", "compile_id", "rank", "kind", "name", "encoding",
                                        "size_bytes"])
    frame["title"] = [artifacts.title(k, n) for k, n in zip(frame["kind"], frame["name"])]
    return frame


def failures(con, f: Filters) -> pd.DataFrame:
    """Each attempt of f.compile_id that failed or restarted: fail type, reason, user frame, restart reasons."""
    return df(con, """
    SELECT compile_id, rank, fail_type, fail_reason,
           fail_user_frame_filename || ':' || fail_user_frame_lineno AS fail_at, restart_reasons
    FROM compiles
    WHERE run_id = ? AND (compile_id = ? OR regexp_replace(compile_id, '_\\d+$', '') = ?)
      AND (fail_type IS NOT NULL OR (restart_reasons IS NOT NULL AND restart_reasons NOT IN ('[]', '')))
    ORDER BY line_no""", [f.run_id, f.compile_id, f.compile_id])


def specialisations(con, f: Filters) -> pd.DataFrame:
    """f.compile_id's symbolic_shape_specialization records: symbol, sources, value, reason, user frame."""
    out = []
    for a in artifacts.list_artifacts(con, f.run_id, f.compile_id):
        if a["kind"] != "symbolic_shape_specialization":
            continue
        v = json.loads(artifacts.fetch(con, f.run_id, a["file_id"], a["line_no"]).text)
        user = (v.get("user_stack") or [None])[-1] or {}
        out.append({"symbol": v.get("symbol"), "sources": ", ".join(v.get("sources") or []), "value": v.get("value"),
                    "reason": v.get("reason"),
                    "user_code": f"{user.get('filename')}:{user.get('line')} in {user.get('name')}" if user else None})
    return pd.DataFrame(out, columns=["symbol", "sources", "value", "reason", "user_code"])


def trie(con, f: Filters) -> pd.DataFrame:
    """The run's stack trie as text (one row, column ``text``) and how many compile ids it marks."""
    root = stack_trie.build(con, f.run_id)
    return pd.DataFrame([{"text": stack_trie.render(root), "compiles": stack_trie.count_marks(root)}])
