"""What a run ran on: device kind, GPU name, CPU model, world size, and the ``hardware`` key every
comparison groups by (a speedup or a step time is only comparable on the same hardware).

Read from, in order of trust: the bundle manifest (``device``, ``gpu_name``, ``cpu_model``,
``world_size``, written by ``compilewatch collect``), the hooks' per-process summaries
(timing_summaries), the benchmark rows' device, and the ranks seen in the trace. A run with none of
these (a loose log) is ``unknown``: never merged with a known kind.

The key reads "NVIDIA H200 ×1", "CPU (AMD EPYC 9654) ×2", "CPU ×1" (model not recorded), "unknown".
"""
from __future__ import annotations

from collections.abc import Sequence

from compilewatch.store.run_filter import runs_match, runs_param

UNKNOWN = "unknown"

# {flt} picks the runs refreshed (store/run_filter.py) or is "TRUE" for all; the same filter
# applies to every source.
_SQL = """
WITH ts AS (
    SELECT run_id, max(world_size) AS ws, count(*) AS files,
           any_value(device) AS device, any_value(gpu_name) AS gpu, any_value(cpu_model) AS cpu_model
    FROM timing_summaries WHERE {flt} GROUP BY run_id),
tr AS (
    SELECT run_id, count(DISTINCT rank) AS ranks FROM compiles
    WHERE {flt} AND rank IS NOT NULL GROUP BY run_id),
bn AS (
    SELECT run_id, any_value(device) AS device FROM bench_results WHERE {flt} GROUP BY run_id),
raw AS (
    SELECT r.run_id,
           lower(coalesce(json_extract_string(r.manifest_json, '$.device'), ts.device, bn.device)) AS device,
           -- "2x NVIDIA H200" is what the machine had, not what the job used: the job's count is world_size
           regexp_replace(coalesce(r.gpu_name, ts.gpu), '^[0-9]+x ', '') AS gpu,
           coalesce(json_extract_string(r.manifest_json, '$.cpu_model'), ts.cpu_model) AS cpu_model,
           coalesce(TRY_CAST(json_extract_string(r.manifest_json, '$.world_size') AS INTEGER), ts.ws,
                    nullif(greatest(coalesce(ts.files, 0), coalesce(tr.ranks, 0)), 0),
                    CASE WHEN r.manifest_json IS NOT NULL THEN 1 END) AS ws
    FROM runs r LEFT JOIN ts USING (run_id) LEFT JOIN tr USING (run_id) LEFT JOIN bn USING (run_id)
    WHERE {rflt}),
facts AS (
    SELECT run_id, gpu, cpu_model, ws,
           CASE WHEN device IS NOT NULL AND device <> '' THEN split_part(device, ':', 1)
                WHEN gpu IS NOT NULL THEN 'cuda' ELSE '{unknown}' END AS kind
    FROM raw)
UPDATE runs SET
    device_kind = facts.kind,
    world_size = facts.ws,
    cpu_model = facts.cpu_model,
    gpu_name = coalesce(runs.gpu_name, facts.gpu),
    hardware = CASE facts.kind
        WHEN 'cuda' THEN coalesce(facts.gpu, 'GPU') || ' ×' || coalesce(facts.ws, 1)
        WHEN 'cpu' THEN 'CPU' || coalesce(' (' || facts.cpu_model || ')', '') || ' ×' || coalesce(facts.ws, 1)
        WHEN '{unknown}' THEN '{unknown}' || CASE WHEN facts.ws > 1 THEN ' ×' || facts.ws ELSE '' END
        ELSE upper(facts.kind) || ' ×' || coalesce(facts.ws, 1) END
FROM facts WHERE runs.run_id = facts.run_id
"""


def refresh_hardware(con, run_ids: Sequence[str] | None = None) -> None:
    """Fill runs.device_kind / world_size / cpu_model / gpu_name / hardware for the runs ``run_ids``
    (or all when None)."""
    if run_ids is None:
        flt = rflt = "TRUE"
        params = []
    else:
        flt, rflt, params = runs_match(run_ids), runs_match(run_ids, "r.run_id"), [runs_param(run_ids)]
    sql = _SQL.replace("{rflt}", rflt).replace("{flt}", flt).replace("{unknown}", UNKNOWN)
    con.execute(sql, params).fetchall()
