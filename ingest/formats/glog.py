"""The glog prefix torch's logging puts on every line (TORCH_LOGS text since 2.2, and every
TORCH_TRACE line), and the year it leaves out::

    [rank0]:V0703 10:34:13.273000 1403 torch/_dynamo/guards.py:2590] <message>

The level is one letter: V (DEBUG), I, W, E, C (CRITICAL), as torch's formatter prints them, and
glog's own D and F. The microseconds have 6 digits from torch, fewer in hand-edited logs.
"""
from __future__ import annotations

import calendar
import re
import time
from functools import lru_cache

RANK = r"(?:\[rank\d+\]:)?"
# level, month+day, time, microseconds, pid, path:line]. The path is matched greedily: it cannot
# hold "]", so it ends at the line's first "]" either way, and a lazy match would try ":" after
# every character of it (a quarter of the prefix's match time, on every record of a text log).
CORE = (r"(?P<level>[VIWEDCF])(?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<us>\d{1,6}) +(?P<pid>\d+) +"
        r"(?P<path>[^\]]*):(?P<lineno>\d+)\]")
LEVEL_LETTERS = "VIWEDCF"

# bytes, for the trace reader and sniffing: the prefix followed by the message's first space
PREFIX_BYTES = re.compile((RANK + CORE + " ").encode())


def epoch(md: str, hms: str, us: str = "0", now: float | None = None) -> float | None:
    """Seconds since the epoch (UTC assumed) of a glog time, its year inferred from `now` (the
    time the log was read, or its file's mtime): see _seconds."""
    base = _seconds(md, hms, int((time.time() if now is None else now) // 86400))
    if base is None:
        return None
    return base + int(us.ljust(6, "0")[:6]) / 1e6


@lru_cache(maxsize=4096)
def _seconds(md: str, hms: str, today: int) -> int | None:
    """glog prints no year: the year of `today` (days since the epoch), unless that puts the time
    more than a day after today (a log from late December read in January): then the year before."""
    year = time.gmtime(today * 86400).tm_year
    try:
        mon, day = int(md[:2]), int(md[2:])
        h, m, s = int(hms[:2]), int(hms[3:5]), int(hms[6:8])
        t = calendar.timegm((year, mon, day, h, m, s, 0, 0, 0))
        if t > (today + 2) * 86400:
            t = calendar.timegm((year - 1, mon, day, h, m, s, 0, 0, 0))
        return t
    except (ValueError, OverflowError):
        return None
