"""The detection's knobs, one named field each (after PyTorch's HUD and apache/otava's analysis).

The values and their help texts are declared once, in the settings table
(``core/settings.py``, ``review_<field>``): ``Rules()`` holds their defaults,
``Rules.from_settings()`` what the environment (or the dashboard's secrets) sets, so the CLI, the
report and the dashboard judge alike. Defaults follow PyTorch's own dashboard: baseline median;
speedup below 0.95x, compile time above 1.15x, step / iteration time and peak memory above 1.05x
flag a run; two flagged runs in a row are a regression, one is suspicious. On top, a run is
flagged only beyond ``noise_sigmas`` run-to-run standard deviations (see ``detect``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from compilewatch.core import settings

PREFIX = "review_"


def _default(name: str, kind=float):
    value = settings.BY_NAME[PREFIX + name].default
    return field(default=kind(float(value)))


@dataclass(frozen=True)
class Rules:
    speedup_min_ratio: float = _default("speedup_min_ratio")
    compile_time_max_ratio: float = _default("compile_time_max_ratio")
    step_time_max_ratio: float = _default("step_time_max_ratio")
    iteration_time_max_ratio: float = _default("iteration_time_max_ratio")
    peak_memory_max_ratio: float = _default("peak_memory_max_ratio")
    count_max_ratio: float = _default("count_max_ratio")
    noise_sigmas: float = _default("noise_sigmas")
    consecutive: int = _default("consecutive", int)
    group_max_pvalue: float = _default("group_max_pvalue")
    min_baseline_runs: int = _default("min_baseline_runs", int)
    cold_cache_drop: float = _default("cold_cache_drop")
    paired_min_ratio: float = _default("paired_min_ratio")
    changepoint_max_pvalue: float = _default("changepoint_max_pvalue")
    changepoint_penalty: float = _default("changepoint_penalty")
    changepoint_min_size: int = _default("changepoint_min_size", int)

    def max_ratio(self, metric: str) -> float | None:
        """For a lower-is-better metric: the highest candidate/baseline ratio that passes."""
        # the wait for the first step is mostly compiling: judged as compile time is
        return {"compile_time": self.compile_time_max_ratio, "time_to_first_step": self.compile_time_max_ratio,
                "step_time": self.step_time_max_ratio,
                "iteration_time": self.iteration_time_max_ratio, "peak_memory": self.peak_memory_max_ratio,
                "graph_breaks": self.count_max_ratio, "recompiles": self.count_max_ratio,
                "limit_hits": self.count_max_ratio, "failures": self.count_max_ratio}.get(metric)

    def min_ratio(self, metric: str) -> float | None:
        """For a higher-is-better metric: the lowest candidate/baseline ratio that passes."""
        return {"speedup": self.speedup_min_ratio}.get(metric)

    def replace(self, **changes) -> "Rules":
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_settings(cls, secrets=None) -> "Rules":
        """Every field from its setting: environment, then the dashboard's secrets, then the default."""
        values = {}
        for f in dataclasses.fields(cls):
            raw = settings.get_float(PREFIX + f.name, secrets)
            values[f.name] = int(raw) if f.type in ("int", int) else raw
        return cls(**values)


def pinned_baseline(secrets=None) -> str:
    """The team's pinned baseline SPEC from the settings ('' when none is pinned: 'previous')."""
    value = settings.get(PREFIX + "baseline", secrets).strip()
    return "" if value.lower() in ("", "previous") else value
