"""Quantiles that merge across cells: a DDSketch (Masson, Rim and Lee, VLDB 2019) kept as bin counts.

A value x > 0 lies in bin i = ceil(log_GAMMA(x)), the interval (GAMMA^(i-1), GAMMA^i], and is read
back as the bin's estimate 2 * GAMMA^i / (GAMMA + 1), which lies within relative error ALPHA of every
value in the bin (GAMMA = (1 + ALPHA) / (1 - ALPHA)). A negative value lies in the bin of its
magnitude on the negative side (sign -1) and zero in a bin of its own (sign 0), read back exactly.
Bins of several cells merge by adding their counts, so the bins of a month cell are the sums of its
days' bins, and a window's quantile is read from the sums of its cells' bins, without one row per run.

The rank of a quantile among the merged counts is exact (the counts are); only the value read at it
is the bin's estimate. A median over an even count averages the two middle values, as DuckDB's
median does; two estimates of values of one sign, each within ALPHA, average within ALPHA of theirs.
"""
from __future__ import annotations

import math

# 0.5%: under what the runs themselves move. One model's steady step on one GPU spreads 1.5-11%
# between runs in sample_logs/ (resnet18 1.5%, Llama.forward 5-8%), so a median over runs is not
# known to 0.5% anyway. Finer bins cost rows wherever a cell's runs spread: ~230 bins per decade of
# values at 0.5%, ~1,150 at 0.1%.
ALPHA = 0.005
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LN_GAMMA = math.log(GAMMA)


def sign_of(x: str) -> str:
    """SQL: the side of value ``x``: 1 positive, 0 zero, -1 negative (null for null)."""
    return f"sign({x})::TINYINT"


def bin_of(x: str) -> str:
    """SQL: the bin of |x| on its side (0 for zero; null for null)."""
    return f"CASE WHEN {x} = 0 THEN 0 ELSE ceil(ln(abs({x})) / {_LN_GAMMA!r})::INTEGER END"


def estimate(sign: str, bin_: str) -> str:
    """SQL: the value a bin stands for, within ALPHA of each of its values (exactly 0 for zero)."""
    return f"{sign} * 2 * exp({bin_} * {_LN_GAMMA!r}) / {GAMMA + 1!r}"


def medians(bins: str, keys: str) -> str:
    """SQL of (``keys``, metric, value): the median of each key's and metric's values, read from the
    bins of relation ``bins`` (columns ``keys``, metric, sign, bin, n), which may hold one bin
    several times (one row per cell): their counts are added first. Ranks lo and hi are the middle
    ones of the metric's count (the same one for an odd count); each is in the bin whose cumulative
    count first passes it. Both sums share one sort of the bins in value order."""
    def at(rank: str) -> str:   # the estimate of the bin holding ``rank``
        return estimate(*(f"any_value({c}) FILTER (WHERE below <= {rank} AND {rank} < upto)" for c in ("sign", "bin")))
    return f"""
        SELECT {keys}, metric, ({at("lo")} + {at("hi")}) / 2 AS value
        FROM (SELECT *, upto - n AS below, (total - 1) // 2 AS lo, total // 2 AS hi
              FROM (SELECT *, sum(n) OVER (w ROWS UNBOUNDED PRECEDING) AS upto,
                           sum(n) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS total
                    FROM (SELECT {keys}, metric, sign, bin, sum(n)::BIGINT AS n FROM {bins}
                          GROUP BY {keys}, metric, sign, bin)
                    WINDOW w AS (PARTITION BY {keys}, metric ORDER BY sign, sign * bin)))
        GROUP BY {keys}, metric"""
