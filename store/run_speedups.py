"""A run's speedup as the Overview averages it: per model, the geometric mean of the run's bench rows'
speedups. Read by the Overview's per-run path (app/queries/overview.py) and summed per cell by the
day rollups (store/day_rollups.py), so both group a run's speedups the same way."""
from __future__ import annotations


# exp(avg(ln(x))) over positive values: PyTorch's dashboards geomean speedups the same way.
def geomean(expr: str) -> str:
    return f"exp(avg(ln(CASE WHEN {expr} > 0 THEN {expr} END)))"


def run_speedups(runs: str, keep: tuple[str, ...] = ()) -> str:
    """SELECT of run_id, bench_model and g, each run's geomean speedup per model, for the runs of the
    relation ``runs`` (aliased w; run_id and model), with w's columns ``keep`` first. A bench row's
    own model when it names one, its run's otherwise: a run that benchmarks several models has a
    speedup for each. g is null where no speedup of the model was positive."""
    cols = "".join(f"w.{c}, " for c in keep)
    return (f"SELECT {cols}b.run_id, coalesce(b.model, w.model) AS bench_model, {geomean('b.speedup')} AS g "
            f"FROM bench_results b JOIN {runs} w USING (run_id) GROUP BY ALL")
