"""Number-free keys for guard failures and graph breaks, so that one cause groups across runs.

The same guard failure prints differently from run to run (object ids, sizes, compile-id
prefixes like ``0/3:``) and from version to version (2.1 prints the failing guard's code part,
2.4+ the guard manager's verbose code parts or a C++ fail reason). These functions map each
text PyTorch prints onto a small fixed set of categories and a key made of the category, the
guarded source (``L['x']``) and whatever stays the same when the cause is the same (tensor
dimension, changed global-state field, dict key). Sizes, ids, addresses and values never
enter a key; they go into ``expected``/``actual`` instead. In keys, ``L['x']``/``G['x']`` are
written ``x`` as torch >= ~2.7 prints them, so one cause groups across versions too.

Formats handled, with the PyTorch code that prints them:
- ``tensor 'L['x']' size mismatch at index 0. expected 4, actual 8`` (guards.cpp TensorCheck,
  2.1..; 2.0 printed ``tensor 'x' strides mismatch``); stride / dtype / requires_grad /
  rank / device index / dispatch key set mismatch likewise.
- guard code parts: ``___check_obj_id(S, id)``, ``___check_type_id(S, id)``,
  ``S == value``, ``len(S) == n``, ``___dict_contains('k', S)``, ``not ___dict_contains(..)``,
  ``list(S.keys()) == [...]``, ``___is_grad_enabled()``, ``___check_global_state()``,
  shape-env guards ``L['x'].size()[0] == 8`` / ``2 <= L['x'].size()[0]``, each optionally
  followed by ``  # user code comment`` (2.1+) or ``, with LHS value: ..`` (2.1 report values).
- C++ guard manager reasons (2.4+): ``GLOBAL_STATE changed: grad_mode``, ``TYPE_MISMATCH(S)``,
  ``expected type of 'S' to be a tensor type, ' but found <class 'int'>``,
  ``Cache line invalidated because S got deallocated``.
"""
from __future__ import annotations

import re
from functools import lru_cache

CATEGORIES = (
    "size_mismatch",
    "stride_mismatch",
    "dtype",
    "requires_grad",
    "object_identity",
    "type",
    "constant",
    "length",
    "global_state",
    "dict_keys",
    "other",
)

# "0/1: " or "!0/0/1: " compile-id prefix that 2.2+ puts before each failing entry's reason
_ENTRY_PREFIX = re.compile(r"^\s*(?:-\s+)?(?P<entry>!?\d+/\d+(?:/\d+)?(?:_\d+)?):\s?")
_TENSOR = re.compile(r"^tensor '(?P<src>.*)' (?P<what>[a-z_ ]+?) mismatch\b\.?\s*(?P<rest>.*)$", re.S)
_AT_INDEX = re.compile(r"at index (?P<dim>\d+)\.?\s*expected (?P<exp>[^,]+), actual (?P<act>.+)$")
_EXPECTED_ACTUAL = re.compile(r"expected (?P<exp>[^,]+?)(?:, actual (?P<act>.+))?$")
_REQ_GRAD = re.compile(r"expected requires_grad=(?P<exp>\w+)")
_DEVICE_INDEX = re.compile(r"Tensor device index mismatch\. Expected device index to be (?P<exp>\S+), actual (?P<act>\S+)")
_CALL_SRC = r"\(\s*(?P<src>.*?)\s*,\s*(?P<id>-?\d+)\s*\)"
_OBJ_ID = re.compile(r"^___check_obj_id" + _CALL_SRC)
_TYPE_ID = re.compile(r"^___check_type_id" + _CALL_SRC)
_ID_EQ = re.compile(r"^id\((?P<src>.*)\)\s*==\s*\d+$")
_TYPE_ID_EQ = re.compile(r"^id\(type\((?P<src>.*)\)\)\s*==\s*\d+$")
_TYPE_MISMATCH = re.compile(r"^TYPE_MISMATCH\((?P<src>.*)\)$")
_TYPE_EXPECTED = re.compile(r"^expected type of '(?P<src>.*)' to be a tensor type, ?'? but found (?P<act>.*)$")
_ISINSTANCE = re.compile(r"^isinstance\((?P<src>.*),\s*(?P<exp>[\w.]+)\)$")
_INVALIDATED = re.compile(r"^Cache line invalidated because (?P<src>.*) got deallocated")
_LEN = re.compile(r"^(?:len|___tuple_iterator_len)\((?P<src>.*)\)\s*==\s*(?P<exp>\d+)$")
_DICT_CONTAINS = re.compile(r"^(?P<neg>not\s+)?___dict_contains\((?P<key>.*?),\s*(?P<src>[^,]*)\)$")
_DICT_KEYS = re.compile(r"^(?:list\((?P<src1>.*)\.keys\(\)\)|___key_to_id\((?P<src2>.*)\))\s*==\s*(?P<exp>\[.*\])$")
_DICT_VERSION = re.compile(r"^___dict_version\((?P<src>.*)\)\s*==\s*\d+$")
_SHAPE = re.compile(r"(?P<src>[\w.\[\]'\"()]*?)\.(?P<kind>size|stride)\(\)\[(?P<dim>\d+)\]")
_SHAPE_EQ = re.compile(r"^(?P<lhs>.*?\.(?:size|stride)\(\)\[\d+\])\s*==\s*(?P<rhs>-?\d+)$")
_EQUALS = re.compile(r"^(?P<src>[A-Za-z_][\w.]*(?:\[[^\]]*\][\w.]*)*)\s*(?P<op>==|!=|is not|is)\s*(?P<val>.+)$")
_GLOBAL_CHANGED = re.compile(r"^GLOBAL_STATE changed:\s*(?P<what>.*)$")
_LHS_VALUE = re.compile(r",\s*with LHS value:\s*(?P<act>.*)$")
# a "  # user code" comment after a code part; never inside a quoted string in practice
_COMMENT = re.compile(r"\s+#(?:\s|$)")

_GLOBAL_FUNCS = {
    "___is_grad_enabled": "grad_mode",
    "___check_global_state": "global_state",
    "___are_deterministic_algorithms_enabled": "deterministic_algorithms",
    "___is_torch_function_enabled": "torch_function",
    "___check_torch_function_mode_stack": "torch_function_mode_stack",
    "___check_current_backend": "backend",
    "___check_default_device": "default_device",
    "___autocast": "autocast",
}

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_BIG_NUMBER = re.compile(r"(?<![\w.])\d{5,}(?![\w.])")


_LG_NAME = re.compile(r"\b[LG]\[['\"](\w+)['\"]\]")


def _src_key(src: str | None) -> str:
    """Source names keep small indices (L['xs'][0] is a different input) but lose ids, and
    ``L['x']`` / ``G['x']`` become ``x``: torch up to ~2.6 printed locals and globals that way,
    later versions print the bare name, and a key should group the same input across versions."""
    if not src:
        return "?"
    s = _BIG_NUMBER.sub("N", _HEX.sub("0x?", src.strip()))
    if "['" in s or '["' in s:
        s = _LG_NAME.sub(r"\1", s)
    return s


def _result(category, key_parts, source=None, dimension=None, expected=None, actual=None) -> dict:
    key = ":".join([category, *[p for p in key_parts if p]])
    return {
        "category": category,
        "guard_key": key,
        "source_name": source,
        "dimension": dimension,
        "expected": None if expected is None else str(expected).strip(),
        "actual": None if actual is None else str(actual).strip(),
    }


def strip_entry_prefix(raw: str) -> tuple[str | None, str]:
    """("0/1", rest) for ``- 0/1: rest``; (None, text) when there is no compile-id prefix."""
    m = _ENTRY_PREFIX.match(raw)
    if m:
        return m.group("entry"), raw[m.end():]
    s = raw.strip()
    if s.startswith("- "):
        s = s[2:]
    return None, s


def classify_guard_failure(raw: str) -> dict:
    """Classify one guard failure text as PyTorch 2.0..2.14 prints it.

    Returns {category, guard_key, source_name, dimension, expected, actual}; category is one of
    CATEGORIES, guard_key is free of ids, addresses, sizes and compile-id prefixes. Never raises.
    The dict is shared between equal inputs (a recompile storm repeats the same texts): copy it
    before changing it.
    """
    return _classify_cached(raw if isinstance(raw, str) else str(raw))


@lru_cache(maxsize=8192)
def _classify_cached(raw: str) -> dict:
    try:
        return _classify(raw)
    except Exception:  # a classifier bug must not lose the row
        return _result("other", [normalize_reason(raw)[:200]])


def _classify(raw: str) -> dict:
    text, actual = _guard_text(raw)
    if not text:
        return _result("other", ["empty"])
    for rule in _RULES:
        found = rule(text, actual)
        if found is not None:
            return found
    return _result("other", [normalize_reason(text)[:120]])


def _guard_text(raw: str) -> tuple[str, str | None]:
    """The guard's expression without its compile-id prefix and trailing ``# user code`` comment,
    and the actual value when torch prints one (``..., with LHS value: 7``)."""
    _, text = strip_entry_prefix(raw)
    text = text.strip()
    actual = None
    m = _LHS_VALUE.search(text)
    if m:
        actual = m.group("act")
        text = text[: m.start()]
    m = _COMMENT.search(text)
    if m and not text.startswith("tensor '"):
        text = text[: m.start()].rstrip()
    return text, actual


# Each rule: (guard text, actual value or None) -> the result for the kinds of guard it knows, or
# None. _RULES tries them in order; the first that knows the guard decides.
def _tensor_rule(text: str, actual: str | None) -> dict | None:
    m = _TENSOR.match(text)
    if m:
        return _classify_tensor(m.group("src"), m.group("what").strip(), m.group("rest"))
    m = _DEVICE_INDEX.search(text)
    if m:
        return _result("other", ["device_index"], expected=m.group("exp"), actual=m.group("act"))
    return None


def _identity_or_type_rule(text: str, actual: str | None) -> dict | None:
    m = _OBJ_ID.match(text) or _ID_EQ.match(text) if not text.startswith("id(type(") else None
    if m:
        src = m.group("src")
        return _result("object_identity", [_src_key(src)], source=src, actual=actual)
    m = _INVALIDATED.match(text)
    if m:
        src = m.group("src")
        return _result("object_identity", [_src_key(src), "deallocated"], source=src)
    m = _TYPE_ID.match(text) or _TYPE_ID_EQ.match(text) or _TYPE_MISMATCH.match(text)
    if m:
        src = m.group("src")
        return _result("type", [_src_key(src)], source=src, actual=actual)
    m = _TYPE_EXPECTED.match(text)
    if m:
        src = m.group("src")
        return _result("type", [_src_key(src)], source=src, expected="tensor", actual=m.group("act"))
    m = _ISINSTANCE.match(text)
    if m:
        src = m.group("src")
        return _result("type", [_src_key(src)], source=src, expected=m.group("exp"))
    return None


def _global_state_rule(text: str, actual: str | None) -> dict | None:
    m = _GLOBAL_CHANGED.match(text)
    if m:
        what = " ".join(m.group("what").split())
        return _result("global_state", [what.replace(" ", ",") or "changed"], actual=what or None)
    if text.startswith("GLOBAL_STATE") or text.startswith("___check_global_state"):
        return _result("global_state", ["global_state"])
    neg = text.startswith("not ")
    fn = (text[4:] if neg else text).split("(", 1)[0].strip()
    if fn in _GLOBAL_FUNCS and text.endswith(")"):
        return _result("global_state", [_GLOBAL_FUNCS[fn]], expected=None if fn != "___is_grad_enabled" else str(not neg))
    if text.startswith("utils_device.CURRENT_DEVICE") or "autocast" in fn or "deterministic" in text:
        return _result("global_state", [_GLOBAL_FUNCS.get(fn) or normalize_reason(text)[:80]])
    return None


def _length_rule(text: str, actual: str | None) -> dict | None:
    m = _LEN.match(text)
    if m:
        src = m.group("src")
        return _result("length", [_src_key(src)], source=src, expected=m.group("exp"), actual=actual)
    return None


def _dict_keys_rule(text: str, actual: str | None) -> dict | None:
    m = _DICT_CONTAINS.match(text)
    if m:
        src, key = m.group("src"), m.group("key").strip()
        verb = "absent" if m.group("neg") else "present"
        return _result("dict_keys", [_src_key(src), verb, _src_key(key)], source=src,
                       expected=f"{key} {verb}")
    m = _DICT_KEYS.match(text)
    if m:
        src = m.group("src1") or m.group("src2")
        return _result("dict_keys", [_src_key(src)], source=src, expected=m.group("exp"))
    m = _DICT_VERSION.match(text)
    if m:
        src = m.group("src")
        return _result("dict_keys", [_src_key(src), "version"], source=src)
    if text.startswith(("DICT_KEYS", "DICT_CONTAINS", "DICT_VERSION")):
        return _result("dict_keys", [normalize_reason(text)[:120]])
    return None


def _shape_env_rule(text: str, actual: str | None) -> dict | None:
    """Shape-env guards: L['x'].size()[0] == 8, 2 <= L['x'].size()[0], Eq(...)."""
    m = _SHAPE.search(text)
    if m and not text.startswith("hasattr("):
        cat = "size_mismatch" if m.group("kind") == "size" else "stride_mismatch"
        src, dim = m.group("src"), int(m.group("dim"))
        eq = _SHAPE_EQ.match(text)
        expected = eq.group("rhs") if eq else _shape_relation(text)
        return _result(cat, [_src_key(src), f"dim{dim}"], source=src, dimension=dim,
                       expected=expected, actual=actual)
    return None


def _constant_rule(text: str, actual: str | None) -> dict | None:
    if text.startswith(("hasattr(", "___guarded_code", "___check_tensors", "___odict_getitem")):
        return _result("other", [normalize_reason(text)[:120]])
    if text.startswith("EQUALS_MATCH") or text.startswith("CONSTANT_MATCH"):
        return _result("constant", [normalize_reason(text)[:120]])
    m = _EQUALS.match(text)
    if m:
        src, op, val = m.group("src"), m.group("op"), m.group("val")
        return _result("constant", [_src_key(src)], source=src,
                       expected=val if op in ("==", "is") else f"{op} {val}", actual=actual)
    return None


_RULES = (_tensor_rule, _identity_or_type_rule, _global_state_rule, _length_rule, _dict_keys_rule,
          _shape_env_rule, _constant_rule)


def _shape_relation(text: str) -> str:
    return normalize_reason(text)


def _classify_tensor(src: str, what: str, rest: str) -> dict:
    w = what.lower()
    if w in ("size", "sizes", "stride", "strides"):
        cat = "size_mismatch" if w.startswith("size") else "stride_mismatch"
        m = _AT_INDEX.search(rest)
        if m:
            dim = int(m.group("dim"))
            return _result(cat, [_src_key(src), f"dim{dim}"], source=src, dimension=dim,
                           expected=m.group("exp"), actual=m.group("act"))
        return _result(cat, [_src_key(src)], source=src)
    if w == "rank":
        m = _EXPECTED_ACTUAL.search(rest)
        return _result("size_mismatch", [_src_key(src), "ndim"], source=src,
                       expected=m and m.group("exp"), actual=m and m.group("act"))
    if w == "dtype":
        m = _EXPECTED_ACTUAL.search(rest)
        return _result("dtype", [_src_key(src)], source=src,
                       expected=m and m.group("exp"), actual=m and m.group("act"))
    if w == "requires_grad":
        m = _REQ_GRAD.search(rest)
        exp = m.group("exp") if m else None
        # only "expected" is printed; the flag is boolean so the actual value is the other one
        act = {"1": "0", "0": "1", "True": "False", "False": "True"}.get(exp or "")
        return _result("requires_grad", [_src_key(src)], source=src, expected=exp, actual=act)
    # device index / dispatch key set / ... : keep the kind in the key
    m = _EXPECTED_ACTUAL.search(rest)
    return _result("other", [w.replace(" ", "_"), _src_key(src)], source=src,
                   expected=m and m.group("exp"), actual=m and m.group("act"))


# ---------------------------------------------------------------- reasons and graph-break keys

# a path token (has a / or \\), quoted or not, with an optional ", line N" or ":N" after it
_PATH_LINE = re.compile(
    r"""(?:File\s+(?=["']))?["']?(?P<path>(?:[A-Za-z]:)?[^\s"',:()\[\]{}]*[\\/][^\s"',:()\[\]{}]*)["']?"""
    r"""(?:,\s*line\s+\d+|:\d+)?""")
_PY_LINE = re.compile(r"""(?P<path>\b[\w.<>-]+\.py)(?::\d+|["']?,\s*line\s+\d+)""")
_URL = re.compile(r"https?://\S+")
_OBJ_REPR = re.compile(r"<(?P<name>[\w.]+(?: [\w.]+)*?) (?:object )?at 0x[0-9a-fA-F]+>")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")
_SYMBOL = re.compile(r"\b[suc]\d+\b")
_WS = re.compile(r"\s+")


_PATH_SEP = re.compile(r"[\\/]")


def _basename(path: str) -> str:
    return _PATH_SEP.split(path)[-1]


def normalize_reason(text: str | None) -> str:
    """A reason with file paths (keeping the base name), line numbers, hex addresses, object
    reprs, symbolic sizes (s0, u1) and numbers replaced, whitespace collapsed."""
    if not text:
        return ""
    return _normalize_cached(text)


@lru_cache(maxsize=8192)
def _normalize_cached(text: str) -> str:
    s = text
    if "://" in s:
        # a URL keeps only its last segment (the gbNNNN page of a graph break type is stable)
        s = _URL.sub(lambda m: "<url " + m.group(0).rstrip("/.").rsplit("/", 1)[-1] + ">", s)
    if "0x" in s:
        s = _OBJ_REPR.sub(lambda m: f"<{m.group('name')}>", s)
        s = _HEX.sub("0x?", s)
    if "/" in s or "\\" in s:
        s = _PATH_LINE.sub(lambda m: _basename(m.group("path")), s)
    if ".py" in s:
        s = _PY_LINE.sub(lambda m: m.group("path"), s)
    s = _SYMBOL.sub("s?", s)
    s = _NUMBER.sub("N", s)
    return " ".join(s.split())


def graph_break_key(gb_type: str | None, reason: str | None, user_file: str | None,
                    user_line: int | None) -> str:
    """``"<gb_type or normalised reason> @ <basename>:<line>"``: the same break in the same user
    code groups across runs and hosts (paths differ, base names and lines do not)."""
    head = (gb_type or "").strip() or normalize_reason(reason)[:200] or "unknown"
    if user_file:
        where = _basename(user_file)
        if user_line is not None:
            where += f":{user_line}"
        return f"{head} @ {where}"
    return head
