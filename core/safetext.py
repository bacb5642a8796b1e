"""Log content is data: the one place that turns text from a log or an upload (graph-break reasons,
file and function names, labels, model names, run ids) into something safe to show.

Anyone can upload a log, so its strings may hold Markdown, HTML, <script>, backticks, LaTeX, ANSI
escapes and other control characters. Wherever Markdown is rendered (Streamlit's st.markdown,
captions, headings, widget and link labels, alerts; the Markdown report) they go through
``markdown()``; where text goes to a terminal, through ``plain()``. HTML output uses html.escape.
A leaf module: every package may import it.
"""
from __future__ import annotations

import math
import re
import sys

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# every ASCII punctuation character: CommonMark lets each be backslash-escaped. A translation
# table, not a regex substitution: a page escapes hundreds of texts per render, each full of
# punctuation, and the substitution's per-match template expansion cost a warm Overview ~0.1 s.
_MD_ESCAPES = str.maketrans({c: "\\" + c for c in map(chr, range(0x21, 0x7f)) if not c.isalnum()})
# Renderers (Streamlit's remark-gfm among them) turn bare URLs, www. names and e-mail addresses into
# links after escapes are resolved, so a backslash cannot stop them: a word joiner (U+2060,
# invisible, zero width) inside the pattern does.
_AUTOLINK = re.compile(r"(?i)(:(?=//)|www(?=\.)|\w(?=@))")


def _str(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    # NA and NaT are not floats. Only a process that loaded pandas can hold them, so pandas is
    # never imported here: that alone cost a command-line ingest 125 MB of memory.
    pd = sys.modules.get("pandas")
    if pd is not None and not isinstance(value, str):
        try:
            if pd.isna(value):
                return ""
        except (TypeError, ValueError):
            pass
    return str(value)


def plain(value, *, lines: bool = True) -> str:
    """Text with control characters (ANSI escapes, NUL, bare CR, BEL) shown as \\xNN instead of
    acting on a terminal or breaking a line. Newlines and tabs are kept unless ``lines`` is False
    (one table cell, one line of terminal output)."""
    pattern = _CONTROL if lines else _CONTROL_ALL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", _str(value))


# Markdown that people also read as raw text (the report pasted into a terminal, an e-mail or a chat):
# only what would start markup is escaped - code spans, emphasis, links and images, HTML, entities,
# table pipes, strikethrough, GitHub's $math$ - so `train_x.py:22` and `2026-11-16 03:52` stay as typed.
_PROSE_ALWAYS = re.compile(r"([\\`*\[\]|~$])")
_PROSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")   # intraword _ never emphasises
_PROSE_HTML = re.compile(r"<(?=[A-Za-z/!?])")
_PROSE_ENTITY = re.compile(r"&(?=#?\w+;)")
_PROSE_LINE_START = re.compile(r"^[#>+=-]")
_PROSE_ORDERED = re.compile(r"^(\d+)([.)])")


def markdown_prose(value, *, one_line: bool = True, line_start: bool = False) -> str:
    """Text for Markdown that is also read unrendered (the Markdown report): rendered, it shows as
    the characters it is, never as markup (no link, image, HTML, code span, emphasis, table cell
    break, strikethrough or math); raw, it reads as it was logged, with few backslashes. Streamlit
    renders more directives than GitHub (colours, icons): text for the dashboard goes through
    ``markdown()``. ``line_start``: the text begins a line, where `#`, `>`, `-` or `1.` would open a
    block."""
    text = plain(value)
    text = text.replace("\n", " ") if one_line else text.replace("\n", "  \n")
    text = _AUTOLINK.sub("\\1\u2060", text)
    text = _PROSE_ALWAYS.sub(r"\\\1", text)
    text = _PROSE_UNDERSCORE.sub(r"\\_", text)
    text = _PROSE_HTML.sub(r"\\<", text)
    text = _PROSE_ENTITY.sub(r"\\&", text)
    if line_start:
        text = _PROSE_LINE_START.sub(lambda m: "\\" + m.group(), text)
        text = _PROSE_ORDERED.sub(r"\1\\\2", text)
    return text


def markdown(value, *, one_line: bool = True) -> str:
    """Text escaped for anything that renders Markdown: shown as the characters it is, never as a
    link, image, HTML, code span, emphasis, table cell break, LaTeX or colour directive."""
    text = plain(value)
    text = text.replace("\n", " ") if one_line else text.replace("\n", "  \n")
    text = _AUTOLINK.sub("\\1\u2060", text)
    return text.translate(_MD_ESCAPES)
