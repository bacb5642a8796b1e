"""Two runs' compile ids paired as the same compile: by frame (function, file name, first line) and
the place among that frame's compiles (the frame's first compile with the other's first, a recompile
with the recompile), so `0/0` of one run meets `0/0` of the other even when the ids were numbered
differently. The deep dive's diff and the review's cache-miss explanation pair compiles alike."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath

from compilewatch.store.run_rows import run_filter


@dataclass
class CompileFrame:
    compile_id: str
    frame: tuple[str, str, int | None]    # function, file name, first line
    nth: int                              # 0: the frame's first compile in its run, 1: its first recompile ...


def _all(con, sql: str, params: list) -> list[tuple]:
    cur = con.cursor()   # one cursor per query: connections are not thread-safe
    try:
        return cur.execute(sql, params).fetchall()
    finally:
        cur.close()


def pick_rank(con, run_id: str, rank: int | None) -> int | None:
    """The rank to compare: the one asked for, else a single-process run's (None), else rank 0's."""
    if rank is not None:
        return rank
    # the run's rows by its file ids (store/run_rows.py): run_id alone reads that column of every run
    ranks = [r[0] for r in _all(con, f"SELECT DISTINCT rank FROM compiles WHERE {run_filter(con, run_id)}", [run_id])]
    return None if None in ranks or not ranks else min(ranks)


def frame_of(fn, file, line) -> tuple[str, str, int | None]:
    return (fn or "?", PurePath(file).name if file else "?", line)


def compile_frames(con, run_id: str, rank: int | None) -> list[CompileFrame]:
    """The run's compile ids (of one rank: ``pick_rank``) in compile order, each with its frame and place."""
    found = _all(con, f"""
        SELECT compile_id, any_value(co_name), any_value(co_filename), any_value(co_firstlineno)
        FROM compiles WHERE {run_filter(con, run_id)} AND compile_id IS NOT NULL AND rank IS NOT DISTINCT FROM ?
        GROUP BY compile_id
        ORDER BY min(frame_id) NULLS LAST, min(frame_compile_id) NULLS LAST, min(attempt) NULLS LAST, min(line_no)""",
                 [run_id, pick_rank(con, run_id, rank)])
    seen: Counter = Counter()
    out = []
    for cid, fn, file, line in found:
        frame = frame_of(fn, file, line)
        out.append(CompileFrame(cid, frame, seen[frame]))
        seen[frame] += 1
    return out


# Looser and looser: the same frame; then the same function in the same file (an edit above it moved
# its first line); then the same function name (the script was copied under another name).
_MATCH_KEYS = (lambda c: c.frame, lambda c: c.frame[:2], lambda c: c.frame[0])


def match(a_list: list, b_list: list) -> list[tuple]:
    """Pairs of compiles (anything with a ``frame``), each side's compiles of one key paired in their
    compile order; in the order of ``a_list``."""
    pairs: list[tuple] = []
    left_a, left_b = list(a_list), list(b_list)
    for key in _MATCH_KEYS:
        by_b: dict = {}
        for c in left_b:
            by_b.setdefault(key(c), []).append(c)
        still_a = []
        for c in left_a:
            queue = by_b.get(key(c))
            if queue:
                pairs.append((c, queue.pop(0)))
            else:
                still_a.append(c)
        taken = {id(b) for _, b in pairs}
        left_a, left_b = still_a, [c for c in left_b if id(c) not in taken]
    order = {id(c): i for i, c in enumerate(a_list)}
    return sorted(pairs, key=lambda p: order[id(p[0])])
