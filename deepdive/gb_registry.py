"""PyTorch's graph-break registry: every structured graph break (torch 2.8+) has an id GBnnnn with
a page on the graph-break site; torch's own message links it (torch/_dynamo/exc.py,
get_gbid_documentation_link). The id comes from the log (graph_breaks.gb_code)."""
from __future__ import annotations

import json
import re

GRAPH_BREAK_SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/"
_CODE = re.compile(r"gb(\d+)\Z", re.I)


def registry_url(gb_code: str | None) -> str | None:
    """``GB0170`` -> its page on the graph-break site; None for a break without an id."""
    if not isinstance(gb_code, str):
        return None
    m = _CODE.match(gb_code.strip())
    return f"{GRAPH_BREAK_SITE}gb{m.group(1)}.html" if m else None


def hint_list(hints) -> list[str]:
    """The hints column as a list: parsers store one hint per line (a JSON list is read too)."""
    if not isinstance(hints, str) or not hints.strip():
        return []
    s = hints.strip()
    if s.startswith("["):
        try:
            value = json.loads(s)
            if isinstance(value, list):
                return [str(h).strip() for h in value if str(h).strip()]
        except ValueError:
            pass
    return [h.strip() for h in s.split("\n") if h.strip()]
