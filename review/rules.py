"""The detection's knobs, one named field each (after PyTorch's HUD and apache/otava's analysis).

Defaults follow PyTorch's own dashboard: the baseline is the median of its window; a candidate run
is flagged when speedup falls below 0.95x of it, compile time rises above 1.15x, step time,
iteration time or peak memory above 1.05x; two consecutive flagged runs are a regression, one is
suspicious. On top of that the rule is noise-aware: a run is flagged only when it is also more than
``noise_sigmas`` run-to-run standard deviations from the baseline median (see ``detect``).

Every field is a setting (``compilewatch/settings.py``, ``review_*``); ``Rules.from_settings()``
reads them, so the CLI, the report and the dashboard judge alike.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Rules:
    # ratio of candidate to baseline median beyond which a run is flagged (direction-aware)
    speedup_min_ratio: float = 0.95
    compile_time_max_ratio: float = 1.15
    step_time_max_ratio: float = 1.05
    iteration_time_max_ratio: float = 1.05
    peak_memory_max_ratio: float = 1.05
    # counts of compile events: any rise past the baseline's range, 1.0 = any rise at all
    count_max_ratio: float = 1.0
    # a change smaller than this many run-to-run standard deviations is noise, whatever its ratio
    noise_sigmas: float = 3.0
    # flagged candidate runs in a row that make a regression (fewer: suspicious)
    consecutive: int = 2
    # baseline runs needed to judge a timing (a count needs one run: it is exact)
    min_baseline_runs: int = 2
    # a compile-time regression whose candidate hit the compile caches this much less often than
    # the baseline (absolute, 0..1) is put down to a cold cache: suspicious, not a regression
    cold_cache_drop: float = 0.25
    # change points: significance level of the Welch t-test that confirms a split, and the
    # ruptures PELT penalty per log(n) on the noise-normalised series
    changepoint_max_pvalue: float = 0.05
    changepoint_penalty: float = 3.0
    changepoint_min_size: int = 2

    def max_ratio(self, metric: str) -> float | None:
        """For a lower-is-better metric: the highest candidate/baseline ratio that passes."""
        return {"compile_time": self.compile_time_max_ratio, "step_time": self.step_time_max_ratio,
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
        """Rules with every field read from its setting (``review_<field>``), default when unset."""
        try:
            from compilewatch import settings
        except ImportError:  # the settings table is not installed: defaults
            return cls()
        values = {}
        for field in dataclasses.fields(cls):
            name = f"review_{field.name}"
            if name in settings.BY_NAME:
                raw = settings.get_float(name, secrets)
                values[field.name] = int(raw) if field.type in ("int", int) else raw
        return cls(**values)


SETTING_HELP: dict[str, str] = {
    "speedup_min_ratio": "A run is flagged when its speedup falls below this fraction of the baseline median.",
    "compile_time_max_ratio": "A run is flagged when its compile time exceeds the baseline median by this factor.",
    "step_time_max_ratio": "A run is flagged when its compiled step time exceeds the baseline median by this factor.",
    "iteration_time_max_ratio": "A run is flagged when its iteration (training-step) period exceeds the baseline median by this factor.",
    "peak_memory_max_ratio": "A run is flagged when its peak memory exceeds the baseline median by this factor.",
    "count_max_ratio": "Graph breaks, recompiles, limit hits, failures: the factor over the baseline median a run may reach (1.0: any rise past the baseline's range).",
    "noise_sigmas": "A change smaller than this many run-to-run standard deviations (pooled over both sides, or the steps' own spread) is noise and not reported.",
    "consecutive": "Flagged candidate runs in a row that make a regression; fewer make it suspicious. A single candidate run is judged against the baseline's spread alone.",
    "min_baseline_runs": "Baseline runs needed to judge a timing; fewer give 'insufficient data'.",
    "cold_cache_drop": "A compile-time rise whose candidate hit the compile caches this much less often (0..1) is put down to a cold cache: suspicious, not a regression.",
    "changepoint_max_pvalue": "Significance level of the Welch t-test that confirms each change point.",
    "changepoint_penalty": "ruptures PELT penalty (times log n) on the noise-normalised series; higher finds fewer change points.",
    "changepoint_min_size": "Fewest runs on either side of a change point.",
}
