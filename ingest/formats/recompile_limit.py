"""The recompile limits Dynamo enforces, and how their warning starts in TORCH_LOGS text::

    torch._dynamo hit config.recompile_limit (8)

``cache_size_limit`` / ``accumulated_cache_size_limit`` until 2.5, ``recompile_limit`` /
``accumulated_recompile_limit`` after; standalone TorchDynamo (2022) wrote ``torchdynamo hit``.
TORCH_TRACE names the same limits inside compilation_metrics' fail_reason.
"""
from __future__ import annotations

import re

NAMES = ("accumulated_recompile_limit", "accumulated_cache_size_limit", "recompile_limit", "cache_size_limit")
NAME = re.compile(r"\b(" + "|".join(NAMES) + r")\b")
# the text warning's first line: which limit, and its value
TEXT_HEAD = re.compile(r"^torch\.?_?dynamo hit (?:config\.)?(?P<name>\w+) \((?P<value>\d+)\)")
TEXT_STARTS = ("torch._dynamo hit config.", "torchdynamo hit config.")
