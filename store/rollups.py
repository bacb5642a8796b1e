"""Rollups: what the pages and the review aggregate from the event tables, kept per run and key
(tables in migrations/009_rollups_review.sql), so a page reads thousands of rollup rows where it read
millions of events. The event tables stay the truth: a run's rollups are rebuilt from its stored rows
by the SQL below, inside the transaction of each of its files (store/derived.py), after a reingest,
and for every run when migration 009 is applied; tests/ingest/test_rollups.py checks each against
the aggregate over the raw rows.

Each rollup is a function of its run's rows only (WHERE {flt}), never of what was there before: a
file whose rows were written in several batches, a duplicate refused, a file re-parsed or a store
copied all end with the same rollup rows.
"""
from __future__ import annotations

from collections.abc import Sequence

from compilewatch.store.compile_time import PER_COMPILE
from compilewatch.store.run_filter import run_slices, runs_match, runs_param

# The hotspot grouping of a graph break; parsers fill break_key, the fallback keeps rows from an
# older parser grouped too. The pages' drill-down into one key reads graph_breaks with the same text.
BREAK_KEY = ("coalesce(gb.break_key, concat_ws(' | ', gb.gb_type, gb.reason_norm, "
             "gb.user_file || ':' || gb.user_line))")

# Each phase of one compile's forward (``c``), in seconds (app/queries/compile_time.py says what
# each is). A compile missing a field counts that phase as 0, so the phases never add up to more
# than the forward's total. The backward and the runtime autotuning are phases of their own
# (store/compile_time.py: backward_s, runtime_autotune_s).
PHASE_EXPRS = (
    ("tracing_s", "greatest(coalesce(c.entire_frame_compile_time_s, 0) - coalesce(c.backend_compile_time_s, 0), 0)"),
    ("aot_s", "greatest(coalesce(c.backend_compile_time_s, 0) - coalesce(c.inductor_compile_time_s, 0), 0)"),
    ("inductor_s", "greatest(coalesce(c.inductor_compile_time_s, 0) - coalesce(c.autotune_time_s, 0), 0)"),
    ("autotune_s", "least(coalesce(c.autotune_time_s, 0), coalesce(c.inductor_compile_time_s, c.autotune_time_s, 0))"),
)
# a frame's file: its base name (paths differ across hosts and virtualenvs, base names do not)
CO_FILE = "regexp_extract(c.co_filename, '[^/\\\\]*$')"

# A frame's fingerprint parts (rollup_frame_fingerprints' columns, without their _fp) and the artifact
# kinds each is made of (ingest/formats/artifact_text.py: PARTS); the guards come from the C++ guard
# tree, or from the guard list a run before it logged (py_guards below).
FINGERPRINT_PARTS = (("dynamo", ("dynamo_output_graph",)), ("aot_fwd", ("aot_forward_graph", "aot_inference_graph")),
                     ("aot_bwd", ("aot_backward_graph",)), ("code", ("inductor_output_code",)),
                     ("guards", ("dynamo_cpp_guards_str",)))

# rollup table -> SELECT of its rows for the runs {flt} picks, in the table's column order
_ROLLUPS = {
    "rollup_graph_breaks": f"""
        SELECT gb.run_id, {BREAK_KEY}, count(*), any_value(gb.gb_type), any_value(gb.gb_code),
               any_value(coalesce(gb.reason_norm, gb.reason)), any_value(gb.reason), any_value(gb.explanation),
               any_value(gb.hints), any_value(gb.user_file), any_value(gb.user_line), any_value(gb.user_function),
               any_value(gb.user_stack) FILTER (WHERE gb.user_stack IS NOT NULL)
        FROM graph_breaks gb WHERE {{flt}} GROUP BY gb.run_id, {BREAK_KEY}""",
    "rollup_recompiles": """
        SELECT rc.run_id, rc.fn, count(*), any_value(rc.file), any_value(rc.line), arg_min(rc.reason, rc.line_no),
               min(rc.ts), max(rc.ts), coalesce(any_value(b.burst), 0)
        FROM (SELECT *, coalesce(function, '?') AS fn FROM recompiles WHERE {flt}) rc
        LEFT JOIN (SELECT run_id, fn, max(n) AS burst
                   FROM (SELECT run_id, coalesce(function, '?') AS fn, floor(ts / 60) AS minute, count(*) AS n
                         FROM recompiles WHERE {flt} AND ts IS NOT NULL GROUP BY ALL)
                   GROUP BY ALL) b USING (run_id, fn)
        GROUP BY rc.run_id, rc.fn""",
    "rollup_guard_failures": """
        SELECT run_id, function, category, guard_key, count(*), min(line_no), arg_min(raw, line_no), any_value(raw), any_value(source_name),
               any_value(expected), any_value(actual)
        FROM guard_failures WHERE {flt} GROUP BY ALL""",
    "rollup_limit_hits": """
        SELECT run_id, function, limit_name, count(*), any_value(limit_value), any_value(file),
               any_value(line), any_value(reason)
        FROM limit_hits WHERE {flt} GROUP BY ALL""",
    # total_s counts each compile's forward, backward and runtime autotuning (store/compile_time.py)
    "rollup_compile_time": f"""
        SELECT c.run_id, c.co_name, {CO_FILE}, c.co_firstlineno, any_value(c.co_filename),
               count(*) FILTER (WHERE c.has_forward), count(*) FILTER (WHERE c.is_recompile),
               sum(c.total_s),
               sum(coalesce(c.total_s, 0)) FILTER (WHERE c.is_recompile),
               {", ".join(f"sum({e})" for _, e in PHASE_EXPRS)},
               coalesce(sum(m.n), 0), coalesce(sum(coalesce(c.total_s, 0)) FILTER (WHERE m.n > 0), 0),
               sum(c.forward_s), sum(c.backward_s), sum(c.runtime_autotune_s)
        FROM ({PER_COMPILE}) c
        LEFT JOIN (SELECT file_id, compile_id, count(*) AS n FROM cache_events
                   WHERE {{flt}} AND outcome = 'miss' GROUP BY ALL) m USING (file_id, compile_id)
        GROUP BY c.run_id, c.co_name, {CO_FILE}, c.co_firstlineno""",
    "rollup_steps": """
        SELECT run_id, callable, mode, count(*), count(*) FILTER (WHERE phase = 'compile'),
               sum(duration_ms) FILTER (WHERE phase = 'compile'), count(*) FILTER (WHERE phase = 'steady'),
               median(duration_ms) FILTER (WHERE phase = 'steady')
        FROM step_timings WHERE {flt} GROUP BY run_id, callable, mode""",
    # Each frame's compiles in compile order (as `compilewatch diff` pairs them: frame id, compile
    # number, attempt, first line), each part's artifact fingerprints joined per compile (a compile's
    # forward and backward output code, in the order of their fingerprints: a run that loaded them
    # from the cache logs them in another order), then the compiles' joined per frame: numbered once
    # (k) and each part's list sorted by it, which costs a quarter less than five ordered aggregates.
    "rollup_frame_fingerprints": f"""
        WITH c AS (
            SELECT c.run_id, c.rank, c.compile_id, any_value(c.co_name) AS co_name, any_value({CO_FILE}) AS co_file,
                   any_value(c.co_firstlineno) AS co_firstlineno, min(c.frame_id) AS f, min(c.frame_compile_id) AS fc,
                   min(c.attempt) AS a, min(c.line_no) AS first
            FROM compiles c WHERE {{flt}} AND c.compile_id IS NOT NULL GROUP BY c.run_id, c.rank, c.compile_id),
        p AS (
            SELECT run_id, rank, compile_id, {", ".join(
                f"string_agg(fp, ' ' ORDER BY fp) FILTER (WHERE kind IN ({', '.join(repr(k) for k in kinds)})) AS {part}"
                for part, kinds in FINGERPRINT_PARTS)},
                   string_agg(fp, ' ' ORDER BY fp) FILTER (WHERE kind = 'dynamo_guards') AS py_guards
            FROM artifacts WHERE {{flt}} AND fp IS NOT NULL GROUP BY run_id, rank, compile_id),
        j AS (
            SELECT c.*, row_number() OVER (PARTITION BY c.run_id, c.rank, c.co_name, c.co_file, c.co_firstlineno
                                           ORDER BY c.f NULLS LAST, c.fc NULLS LAST, c.a NULLS LAST, c.first) AS k,
                   {", ".join(f"p.{part}" for part, _ in FINGERPRINT_PARTS[:-1])},
                   coalesce(p.guards, p.py_guards) AS guards
            FROM c LEFT JOIN p ON p.run_id = c.run_id AND p.rank IS NOT DISTINCT FROM c.rank
                               AND p.compile_id = c.compile_id),
        frames AS (
            SELECT run_id, rank, co_name, co_file, co_firstlineno, count(*) AS compiles, {", ".join(
                f"CASE WHEN count({part}) > 0 THEN left(md5(array_to_string(list_transform(list_sort("
                f"list(struct_pack(k := k, v := coalesce({part}, '-')))), x -> x.v), ',')), 16) END AS {part}"
                for part, _ in FINGERPRINT_PARTS)}
            FROM j GROUP BY run_id, rank, co_name, co_file, co_firstlineno)
        SELECT *, left(md5(concat_ws('|', {", ".join(f"coalesce({part}, '-')" for part, _ in FINGERPRINT_PARTS)})), 16)
        FROM frames""",
    # from the rollups above, so it comes after them
    "rollup_run_totals": """
        SELECT run_id, sum(gb), sum(rc), sum(lh), sum(gf), sum(cs) FROM (
            SELECT run_id, n AS gb, 0 AS rc, 0 AS lh, 0 AS gf, NULL::DOUBLE AS cs FROM rollup_graph_breaks WHERE {flt}
            UNION ALL SELECT run_id, 0, n, 0, 0, NULL FROM rollup_recompiles WHERE {flt}
            UNION ALL SELECT run_id, 0, 0, n, 0, NULL FROM rollup_limit_hits WHERE {flt}
            UNION ALL SELECT run_id, 0, 0, 0, n, NULL FROM rollup_guard_failures WHERE {flt}
            UNION ALL SELECT run_id, 0, 0, 0, 0, total_s FROM rollup_compile_time WHERE {flt})
        GROUP BY run_id""",
}
TABLES = tuple(_ROLLUPS)


def refresh_rollups(con, run_ids: Sequence[str] | None = None, tables: tuple[str, ...] = TABLES) -> None:
    """Rebuild the rollups of the runs ``run_ids``, or of every run when None, from the event
    tables. Runs inside the caller's transaction. ``tables`` (with run_ids None) rebuilds only
    those: a migration's backfill builds the tables it added, and no table a later migration adds."""
    if run_ids is None:
        slices = run_slices(con)   # a slice of runs per statement (store/run_filter.py)
    else:
        flt, param = runs_match(run_ids), [runs_param(run_ids)]
    for table, select in _ROLLUPS.items():
        if run_ids is None and table not in tables:
            continue
        if run_ids is None:
            con.execute(f"DELETE FROM {table}").fetchall()
            for flt in slices:
                con.execute(f"INSERT INTO {table} {select.replace('{flt}', flt)}").fetchall()
        else:
            con.execute(f"DELETE FROM {table} WHERE {flt}", param).fetchall()
            con.execute(f"INSERT INTO {table} {select.replace('{flt}', flt)}", param).fetchall()
