"""The reason block of a graph break, as torch 2.7+ prints it in TORCH_LOGS text and in
TORCH_TRACE's ``dynamo_graph_break_reason`` artifact alike::

    Graph Break Reason: <context>:

    <gb_type>
      Explanation: <text, maybe continued on more lines>
      Hint: <one hint>
      Hint: <another>

      Developer debug context: ...

     For more details about this graph break, please visit: https://.../gb/gb0025.html

A nested break repeats the block after ``*** While handling this graph break, another graph
break occurred: ***``; the last block is the break that was raised, so it names the row.
Hints are stored as a JSON list (the dashboard shows one bullet per hint).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

NESTED = "While handling this graph break, another graph break occurred"
# gb0025.html (2.7-2.9), GB0025 without .html on the newer registry sites
_GB_CODE = re.compile(r"/gb/(gb\d+)(?:\.html)?\b", re.I)


@dataclass
class ReasonParts:
    gb_type: str | None = None
    explanation: str | None = None
    hints: list[str] | None = None
    gb_code: str | None = None

    @property
    def hints_json(self) -> str | None:
        return encode_hints(self.hints)


def encode_hints(hints: list[str] | None) -> str | None:
    """The stored form of a break's hints: a JSON list, or null when there are none. Written as
    ``json.dumps(hints, ensure_ascii=False)`` writes a list of strings, string by string with the
    json module's own C escaper: json.dumps itself costs as much as the rest of the reason's parse."""
    return "[" + ", ".join(map(_json_string, hints)) + "]" if hints else None


_json_string = json.encoder.encode_basestring


# compilation_metrics.restart_reasons also lists restarts that are no graph break: Dynamo starting
# its analysis over with more knowledge (e.g. TensorifyScalarRestartAnalysis). TORCH_LOGS text
# reports no break for them (seen in the sample bundles' text beside their trace).
_RESTART_ONLY = re.compile(r"^<class '[\w.]*RestartAnalysis'>$")


def is_break(restart_reason: str) -> bool:
    """Does a compile's restart reason report a graph break (or only a restarted analysis)?"""
    return not _RESTART_ONLY.match(restart_reason.strip())


def is_nested(text: str | None) -> bool:
    return bool(text) and NESTED in text


def parse_reason(reason: str) -> ReasonParts:
    """gb_type, explanation, hints and registry code of a 2.7+ reason block; all None for an older
    reason (a single message)."""
    part = reason.rsplit(NESTED, 1)[-1]
    lines = part.split("\n")
    out = ReasonParts()
    explanation: list[str] = []
    hints: list[str] = []
    in_explanation = False
    for i, ln in enumerate(lines):
        s = ln.strip()
        if s.startswith("Explanation:"):
            if out.gb_type is None:
                out.gb_type = _gb_type_above(lines, i)
            explanation.append(s[len("Explanation:"):].strip())
            in_explanation = True
        elif s.startswith("Hint:"):
            hints.append(s[len("Hint:"):].strip())
            in_explanation = False
        elif s.startswith(("Developer debug context:", "For more details")):
            in_explanation = False
        elif in_explanation and s:
            explanation.append(s)
    m = _GB_CODE.search(part)
    out.explanation = "\n".join(explanation) or None
    out.hints = hints or None
    out.gb_code = m.group(1).upper() if m else None
    return out


def _gb_type_above(lines: list[str], i: int) -> str | None:
    """The gb_type is the last non-blank line above the first Explanation."""
    for back in range(i - 1, -1, -1):
        cand = lines[back].strip()
        if cand:
            for prefix in ("Reason: ", "Unsupported: "):
                if cand.startswith(prefix):
                    cand = cand[len(prefix):]
            return cand
    return None
