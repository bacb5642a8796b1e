"""One run's ranks (f.run_id): what each rank compiled, and the ranks that diverged.

A rank is the one its file's name gives (ingest.rank_names), else the one its records carry, as
tlparse's ``--all-ranks-html`` reads a job's per-rank traces. The divergence check compares the
ranks on the aspects tlparse flags (compile ids, graph count, cache hits and misses, recompiles,
graph breaks) and says, for each rank outside the reference group, how it differs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df
from compilewatch.core.errors import CompileWatchError
from compilewatch.deepdive import artifacts
from compilewatch.ingest.rank_names import RANK_IN_NAME
from compilewatch.store.compile_time import per_compile
from compilewatch.store.run_rows import run_filter

# The run's files with the rank their name gives; every per-rank query starts here.
_FILES = """fr AS (
    SELECT file_id, try_cast(nullif(regexp_extract(original_name, ?, 1), '') AS INTEGER) AS name_rank
    FROM files WHERE run_id = ?)"""
# A compile id without its restart attempt: "4/0_1" and "4/0" are the same frame compile.
_CID = r"regexp_replace(e.compile_id, '_\d+$', '')"


def _params(f: Filters) -> list:
    return [RANK_IN_NAME, f.run_id, f.run_id]


def per_rank(con, f: Filters) -> pd.DataFrame:
    """One row per rank: compiles, compile_ids (frame/compile ids without attempt, in order),
    graphs (compiles that produced a graph with ops), failures, compile_time_s, recompiles,
    recompiled (function names), graph_breaks, break_types, cache_hits, cache_misses, cache_pattern
    ("compile_id cache outcome" in log order), execution_order (compile ids of the graph calls, when
    the job logged graph_execution), collective_schedule ("compile_id op" of each graph's
    inductor_collective_schedule), files. Rank is null where neither the file name nor
    the records say."""
    run = run_filter(con, f.run_id, "e")
    compiles = df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, e.rank) AS rank, count(*) AS compiles,
           list(DISTINCT {_CID}) AS compile_ids,
           count(DISTINCT {_CID}) FILTER (WHERE e.graph_op_count > 0) AS graphs,
           count(*) FILTER (WHERE e.fail_type IS NOT NULL) AS failures,
           count(DISTINCT e.file_id) AS files
    FROM compiles e LEFT JOIN fr USING (file_id) WHERE {run} GROUP BY ALL""", _params(f))
    # what the rank waited for: forward, backward and runtime autotuning (store/compile_time.py)
    times = df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, e.rank) AS rank, sum(e.total_s) AS compile_time_s
    FROM ({per_compile(run_filter(con, f.run_id))}) e LEFT JOIN fr USING (file_id) GROUP BY ALL""",
                [RANK_IN_NAME, f.run_id, f.run_id, f.run_id])
    compiles = compiles.merge(times, on="rank", how="left")
    recompiles = df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, e.rank) AS rank, count(*) AS recompiles,
           string_agg(DISTINCT e.function, ', ' ORDER BY e.function) AS recompiled
    FROM recompiles e LEFT JOIN fr USING (file_id) WHERE {run} GROUP BY ALL""", _params(f))
    breaks = df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, e.rank) AS rank, count(*) AS graph_breaks,
           string_agg(DISTINCT coalesce(e.gb_type, e.reason_norm), ' | '
                      ORDER BY coalesce(e.gb_type, e.reason_norm)) AS break_types
    FROM graph_breaks e LEFT JOIN fr USING (file_id) WHERE {run} GROUP BY ALL""", _params(f))
    cache = df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, e.rank) AS rank,
           count(*) FILTER (WHERE e.outcome = 'hit') AS cache_hits,
           count(*) FILTER (WHERE e.outcome = 'miss') AS cache_misses,
           list(concat_ws(' ', {_CID}, e.cache, e.outcome) ORDER BY e.file_id, e.line_no) AS cache_pattern
    FROM cache_events e LEFT JOIN fr USING (file_id) WHERE {run} GROUP BY ALL""", _params(f))
    out = compiles
    for part in (recompiles, breaks, cache, _artifact_sequences(con, f)):
        out = out.merge(part, on="rank", how="outer")
    for col in ("compiles", "graphs", "failures", "recompiles", "graph_breaks", "cache_hits", "cache_misses", "files"):
        out[col] = out[col].fillna(0).astype(int)
    out["compile_time_s"] = out["compile_time_s"].astype(float)
    out["compile_ids"] = [sorted(_as_list(v), key=compile_id_order) for v in out["compile_ids"]]
    out["cache_pattern"] = [_as_list(v) for v in out["cache_pattern"]]
    for col in _SEQUENCES:
        out[col] = [_as_list(v) for v in out[col]]
    return out.sort_values("rank", na_position="last").reset_index(drop=True)


# A call of a graph torch logged no compile id for: 2.11 records the id when Inductor compiles the
# graph, so a graph loaded from its FX graph cache is called with "compile_id": null.
UNNAMED_CALL = "(cached)"


def _graph_calls(doc) -> list[str]:
    # torch._inductor.debug.record_and_log_graph_execution_order() logs a ``graph_execution``
    # artifact per rank: {"graph_execution_order": [{"compile_id": "0/1"}, ...]}, in call order
    return [UNNAMED_CALL if c.get("compile_id") is None else str(c["compile_id"])
            for c in doc.get("graph_execution_order") or [] if isinstance(c, dict)]


def _comparable_orders(rank_rows) -> list[tuple]:
    """Each rank's graph calls with the calls at every position where some rank's call has no
    compile id (UNNAMED_CALL) masked on all ranks: one rank that compiled a graph and another that
    loaded the same graph from the cache must not read as a different order. Lengths stay."""
    orders = [tuple(r.execution_order) for r in rank_rows]
    unnamed = {i for o in orders for i, c in enumerate(o) if c == UNNAMED_CALL}
    return [tuple(UNNAMED_CALL if i in unnamed else c for i, c in enumerate(o)) for o in orders]


def _collectives(doc, compile_id) -> list[str]:
    # Inductor logs an ``inductor_collective_schedule`` artifact per compiled graph: the collective
    # ops in the order the generated code issues them (tlparse compares them across ranks)
    return [f"{compile_id} {op}" for op in doc] if isinstance(doc, list) else []


# column of per_rank -> (artifact name, payload JSON and compile id -> that rank's items)
_SEQUENCES = {"execution_order": ("graph_execution", lambda doc, cid: _graph_calls(doc)),
              "collective_schedule": ("inductor_collective_schedule", _collectives)}


def _artifact_sequences(con, f: Filters) -> pd.DataFrame:
    """Per rank, the sequences that ranks of one job should share, read from named artifacts."""
    by_name = {name: col for col, (name, _) in _SEQUENCES.items()}
    found = df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, a.rank) AS rank, a.file_id, a.line_no, a.name, a.compile_id
    FROM artifacts a LEFT JOIN fr USING (file_id)
    WHERE {run_filter(con, f.run_id, 'a')} AND a.kind = 'artifact' AND list_contains(?::VARCHAR[], a.name)
    ORDER BY a.file_id, a.line_no""", _params(f)[:2] + [f.run_id, list(by_name)])
    seqs: dict = {}
    for row in found.itertuples():
        col = by_name[row.name]
        try:
            doc = json.loads(artifacts.fetch(con, f.run_id, row.file_id, row.line_no).text)
            items = _SEQUENCES[col][1](doc, row.compile_id)
        except (ValueError, AttributeError, CompileWatchError):
            continue  # a payload that is not the documented JSON says nothing about the order
        rank = None if pd.isna(row.rank) else int(row.rank)
        seqs.setdefault(rank, {c: [] for c in _SEQUENCES})[col].extend(items)
    return pd.DataFrame([{"rank": r, **v} for r, v in seqs.items()],
                        columns=["rank", *_SEQUENCES]).astype({"rank": "Int64"})


def _as_list(v) -> list:
    # an outer merge leaves NaN where a rank has no rows of that table
    return [] if v is None or isinstance(v, float) else list(v)


def rank_steps(con, f: Filters) -> pd.DataFrame:
    """Per rank and timed callable (and the iteration period, mode 'iteration'): steps, compile-step
    total and steady median/p90 (ms). Rank N is timings.rankN.json, else the rank the hooks wrote,
    else 0 (rank 0 writes timings.json)."""
    return df(con, f"""
    WITH {_FILES}
    SELECT coalesce(fr.name_rank, s.rank, 0) AS rank, s.callable, s.mode, count(*) AS steps,
           sum(s.duration_ms) FILTER (WHERE s.phase = 'compile') AS compile_ms,
           median(s.duration_ms) FILTER (WHERE s.phase = 'steady') AS steady_ms,
           quantile_cont(s.duration_ms, 0.9) FILTER (WHERE s.phase = 'steady') AS steady_p90_ms
    FROM step_timings s LEFT JOIN fr USING (file_id) WHERE {run_filter(con, f.run_id, 's')}
    GROUP BY ALL ORDER BY rank, s.callable, s.mode LIMIT 500""", _params(f))


_CID_NUMS = re.compile(r"\d+")


def compile_id_order(cid: str):
    """Sort key for "[!ca/]frame/compile[_attempt]": compiled-autograd id, frame, compile, attempt."""
    nums = [int(n) for n in _CID_NUMS.findall(cid or "")]
    if not cid or not cid.startswith("!"):
        nums = [-1] + nums
    return nums


@dataclass(frozen=True)
class _Aspect:
    name: str
    value: object      # column of per_rank, or a function of its row
    show: object       # value -> short text


def _ids_text(ids) -> str:
    return ", ".join(ids) if ids else "none"


def _pattern_text(p) -> str:
    hits = sum(1 for x in p if x.endswith(" hit"))
    misses = sum(1 for x in p if x.endswith(" miss"))
    return f"{hits} hit(s), {misses} miss(es)"




def _order_text(calls) -> str:
    if not calls:
        return "not logged"
    head = ", ".join(calls[:8]) + (" …" if len(calls) > 8 else "")
    return f"{len(calls)} graph call(s): {head}"


def _op(item: str) -> str:
    return item.replace("torch.ops._c10d_functional.", "").replace(".default", "")


def _schedule_text(ops) -> str:
    if not ops:
        return "not logged"
    return f"{len(ops)} collective(s): {', '.join(_op(o) for o in ops[:6])}{' …' if len(ops) > 6 else ''}"


def _names(text, sep: str) -> tuple:
    return tuple(text.split(sep)) if isinstance(text, str) and text else ()


def _ranks_text(ranks) -> str:
    return ", ".join("?" if r is None or pd.isna(r) else str(int(r)) for r in ranks)


def _difference(aspect: str, value, reference) -> str:
    if aspect == "compile ids":
        extra = [c for c in value if c not in set(reference)]
        missing = [c for c in reference if c not in set(value)]
        parts = ([f"has {_ids_text(extra)}"] if extra else []) + ([f"lacks {_ids_text(missing)}"] if missing else [])
        return "; ".join(parts) or "same ids in another order"
    if aspect == "cache hits/misses":
        extra = list(dict.fromkeys(c for c in value if c not in set(reference)))
        missing = list(dict.fromkeys(c for c in reference if c not in set(value)))
        text = f"{_pattern_text(value)} vs {_pattern_text(reference)}"
        detail = ([f"has {', '.join(extra[:6])}{' …' if len(extra) > 6 else ''}"] if extra else []) + \
                 ([f"lacks {', '.join(missing[:6])}{' …' if len(missing) > 6 else ''}"] if missing else [])
        return text + (f" ({'; '.join(detail)})" if detail else "")
    if aspect in ("execution order", "collective schedule"):
        what = "call" if aspect == "execution order" else "collective"
        first = next((i for i, (a, b) in enumerate(zip(value, reference)) if a != b), None)
        unnamed = max(list(value).count(UNNAMED_CALL), list(reference).count(UNNAMED_CALL))
        note = (f" ({unnamed} of the calls are of graphs loaded from Inductor's cache, logged without a "
                f"compile id, and are not compared)") if unnamed else ""
        if first is None:
            return f"{len(value)} {what}(s) vs {len(reference)}: the same order as far as both go{note}"
        return (f"{len(value)} {what}(s) vs {len(reference)}; {what} #{first + 1} is {_op(value[first])} here, "
                f"{_op(reference[first])} in the reference{note}")
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], tuple):
        (n, names), (ref_n, ref_names) = value, reference
        only_here = [x for x in names if x not in ref_names]
        only_there = [x for x in ref_names if x not in names]
        detail = ([f"only here: {', '.join(only_here)}"] if only_here else []) + \
                 ([f"only in reference: {', '.join(only_there)}"] if only_there else [])
        return f"{n} vs {ref_n} ({n - ref_n:+d})" + (f"; {'; '.join(detail)}" if detail else "")
    return f"{value} vs {reference} ({value - reference:+d})"


ASPECTS = (
    _Aspect("compile ids", lambda r: tuple(r.compile_ids), _ids_text),
    _Aspect("graphs", lambda r: int(r.graphs), str),
    _Aspect("cache hits/misses", lambda r: tuple(r.cache_pattern), _pattern_text),
    _Aspect("execution order", lambda r: tuple(r.execution_order), _order_text),
    _Aspect("collective schedule", lambda r: tuple(r.collective_schedule), _schedule_text),
    # counts, with the names behind them so the difference can say which ones
    _Aspect("recompiles", lambda r: (int(r.recompiles), _names(r.recompiled, ", ")), lambda v: str(v[0])),
    _Aspect("graph breaks", lambda r: (int(r.graph_breaks), _names(r.break_types, " | ")), lambda v: str(v[0])),
)


def compared() -> str:
    """What the divergence check compares, as one phrase (for "all ranks agree on ...")."""
    names = [a.name for a in ASPECTS]
    return ", ".join(names[:-1]) + " and " + names[-1]


def divergence_from(ranks: pd.DataFrame) -> pd.DataFrame:
    """Pure: per_rank's frame -> one row per (aspect, diverging group of ranks): aspect, ranks,
    value, reference_ranks, reference_value, difference. The reference group is the largest one
    (ties: the one holding the lowest rank); no rows when the ranks agree or there is one rank."""
    cols = ["aspect", "ranks", "value", "reference_ranks", "reference_value", "difference"]
    if len(ranks) < 2:
        return pd.DataFrame(columns=cols)
    rows = []
    rank_rows = list(ranks.itertuples(index=False))
    orders = _comparable_orders(rank_rows)
    for a in ASPECTS:
        groups: dict = {}
        for r, order in zip(rank_rows, orders):
            groups.setdefault(order if a.name == "execution order" else a.value(r), []).append(r.rank)
        if len(groups) < 2:
            continue
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(_rank_key(x) for x in kv[1])))
        ref_value, ref_ranks = ordered[0]
        for value, members in ordered[1:]:
            rows.append({"aspect": a.name, "ranks": _ranks_text(members), "value": a.show(value),
                         "reference_ranks": _ranks_text(ref_ranks), "reference_value": a.show(ref_value),
                         "difference": _difference(a.name, value, ref_value)})
    return pd.DataFrame(rows, columns=cols)


def _rank_key(r) -> int:
    return 1 << 30 if r is None or pd.isna(r) else int(r)


def divergence(con, f: Filters) -> pd.DataFrame:
    """The run's diverging ranks (see divergence_from); empty when every rank agrees."""
    return divergence_from(per_rank(con, f))


def multi_rank_runs(con, f: Filters) -> pd.DataFrame:
    """Runs whose compiles come from more than one rank (run_id, model, label, torch_version,
    run_time, ranks), newest first, f.limit rows."""
    return df(con, """
    WITH fr AS (
        SELECT file_id, try_cast(nullif(regexp_extract(original_name, ?, 1), '') AS INTEGER) AS name_rank
        FROM files),
    rr AS (SELECT e.run_id, count(DISTINCT coalesce(fr.name_rank, e.rank)) AS ranks
           FROM compiles e LEFT JOIN fr USING (file_id) GROUP BY e.run_id HAVING ranks > 1)
    SELECT r.run_id, r.model, r.label, r.torch_version, coalesce(r.started_at, r.ingested_at) AS run_time, rr.ranks
    FROM rr JOIN runs r USING (run_id) ORDER BY run_time DESC NULLS LAST, r.run_id LIMIT ?""",
              [RANK_IN_NAME, f.limit])


def run_exists(con, f: Filters) -> bool:
    cur = con.cursor()
    try:
        return cur.execute("SELECT count(*) FROM runs WHERE run_id = ?", [f.run_id]).fetchone()[0] > 0
    finally:
        cur.close()
