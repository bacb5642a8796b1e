"""What a reader sees of Markdown source: log content reaches Streamlit escaped (app.ui.md), so a
test that looks for a name in an element's Markdown compares it with the escapes taken out."""
from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\(.)")


def shown(markdown_source) -> str:
    return _ESCAPE.sub(r"\1", str(markdown_source))
