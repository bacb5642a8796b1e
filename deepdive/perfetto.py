"""A run as a Chrome trace (the JSON Perfetto and chrome://tracing open): its compile phases
(``chromium_event`` spans, kept in ``compile_phases``) and the timing hooks' steps.

Format: the Trace Event Format's JSON object form, ``{"traceEvents": [...]}``; every span is a
complete event (``ph: "X"``, ``ts``/``dur`` in microseconds) and ``ph: "M"`` metadata names the
tracks. Compile phases keep torch's own clock (epoch microseconds). The hooks record each step's
duration but not its start, so steps are laid back to back from the run's first compile phase
(or from 0): their lengths and order are measured, their gaps are not; each step says so in args.
"""
from __future__ import annotations

import json

from compilewatch.core.errors import NotFoundError

HOOKS_PID = 1_000_000  # a process id of its own for the hooks' steps, apart from the ranks
_STEP_PLACEMENT = "back to back: the timing hooks record durations, not start times"


def _rows(con, sql: str, params: list) -> list[tuple]:
    cur = con.cursor()
    try:
        return cur.execute(sql, params).fetchall()
    finally:
        cur.close()


def chrome_trace(con, run_id: str) -> dict:
    """The run's trace as a dict ready for json.dump. NotFoundError for an unknown run."""
    if not _rows(con, "SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
        raise NotFoundError(f"no run {run_id!r} in this store", "list runs in the dashboard or pass a run id from `compilewatch ingest` output")
    events: list[dict] = []
    phases = _rows(con, "SELECT compile_id, rank, name, start_us, duration_us, line_no FROM compile_phases "
                        "WHERE run_id = ? AND start_us IS NOT NULL AND duration_us IS NOT NULL "
                        "ORDER BY start_us, duration_us DESC", [run_id])
    ranks = sorted({r for _, r, *_ in phases}, key=lambda r: -1 if r is None else r)
    for r in ranks:
        pid = 0 if r is None else r
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": "compile" if r is None else f"rank {r} compile"}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "dynamo_timed"}})
    for cid, rank, name, start, dur, line_no in phases:
        events.append({"name": name, "cat": "compile_phase", "ph": "X", "ts": int(start), "dur": max(int(dur), 0),
                       "pid": 0 if rank is None else rank, "tid": 0,
                       "args": {"compile_id": cid, "log_line": line_no}})
    t0 = min((int(p[3]) for p in phases), default=0)
    steps = _rows(con, "SELECT callable, mode, rank, step, phase, duration_ms FROM step_timings "
                       "WHERE run_id = ? AND duration_ms IS NOT NULL ORDER BY rank NULLS FIRST, callable, mode, file_id, step",
                  [run_id])
    if steps:
        events.append({"ph": "M", "name": "process_name", "pid": HOOKS_PID, "tid": 0,
                       "args": {"name": "timing hooks (steps)"}})
    tracks: dict[tuple, int] = {}
    clock: dict[int, int] = {}
    for callable_, mode, rank, step, phase, ms in steps:
        key = (callable_, mode, rank)
        if key not in tracks:
            tid = tracks[key] = len(tracks) + 1
            clock[tid] = t0
            where = "" if rank is None else f", rank {rank}"
            events.append({"ph": "M", "name": "thread_name", "pid": HOOKS_PID, "tid": tid,
                           "args": {"name": f"{callable_ or '?'} ({mode or '?'}{where})"}})
        tid = tracks[key]
        dur = max(int(round(ms * 1000)), 0)
        events.append({"name": f"step {step} ({phase or '?'})", "cat": "step", "ph": "X", "ts": clock[tid],
                       "dur": dur, "pid": HOOKS_PID, "tid": tid,
                       "args": {"callable": callable_, "mode": mode, "rank": rank, "step": step, "phase": phase,
                                "duration_ms": ms, "placement": _STEP_PLACEMENT}})
        clock[tid] += dur
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run_id": run_id, "compile_phases": len(phases), "steps": len(steps)}}


def to_json(trace: dict) -> bytes:
    return json.dumps(trace, separators=(",", ":")).encode("utf-8")
