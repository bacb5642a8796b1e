"""ingest.normalize over guard-failure and graph-break texts as PyTorch printed them.

Every input string below is copied from a real log: PyTorch issues/PRs (URL in the comment) or
a CPU torch 2.13 run (tests/fixtures/text/README.md).
"""
import pytest

from compilewatch.ingest.normalize import (
    CATEGORIES,
    classify_guard_failure,
    graph_break_key,
    normalize_reason,
    strip_entry_prefix,
)

CASES = [
    # raw, category, guard_key, source, dimension, expected, actual
    # pytorch/pytorch#110325 (2.2 dev, old prefix)
    ("- tensor 'L['x']' size mismatch at index 0. expected 24, actual 25",
     "size_mismatch", "size_mismatch:x:dim0", "L['x']", 0, "24", "25"),
    # pytorch/torchdynamo#1673 (2.0-era name, "strides")
    ("tensor 'x' strides mismatch at index 0. expected 562500, actual 2447991",
     "stride_mismatch", "stride_mismatch:x:dim0", "x", 0, "562500", "2447991"),
    ("tensor 'L['x']' stride mismatch at index 1. expected 1, actual 3",
     "stride_mismatch", "stride_mismatch:x:dim1", "L['x']", 1, "1", "3"),
    ("0/0: tensor 'x' dtype mismatch. expected Float, actual Half",
     "dtype", "dtype:x", "x", None, "Float", "Half"),
    ("tensor 'L['x']' requires_grad mismatch. expected requires_grad=1",
     "requires_grad", "requires_grad:x", "L['x']", None, "1", "0"),
    ("tensor 'L['x']' rank mismatch. expected 2, actual 3",
     "size_mismatch", "size_mismatch:x:ndim", "L['x']", None, "2", "3"),
    # pytorch/pytorch#110928 (report_guard_failure_values, 2.2 dev)
    ("tensor '__as_tensor(L['i'])' size mismatch at index 0. expected 1, actual 5",
     "size_mismatch", "size_mismatch:__as_tensor(i):dim0", "__as_tensor(L['i'])", 0, "1", "5"),
    ("L['a'] == 0, with LHS value: 1", "constant", "constant:a", "L['a']", None, "0", "1"),
    # pytorch/pytorch#163329 (2.8, glog prefix, N/M: prefix)
    ("- 0/3: ___check_obj_id(self._modules['attn'].processor, 140576345756128)",
     "object_identity", "object_identity:self._modules['attn'].processor",
     "self._modules['attn'].processor", None, None, None),
    ("___check_type_id(L['x'], 94388376360064)", "type", "type:x", "L['x']", None, None, None),
    # pytorch/pytorch#114293 (2.1, code part + user-code comment)
    ("- L['end'] == 10                                                # for i in range(start+1, end):  # <ipython-input-6-4764417fa0ae>:9 in accumulate",
     "constant", "constant:end", "L['end']", None, "10", None),
    # pytorch/pytorch#127483 (2.4 dev)
    ("- G['_variable'] == 0                                         ",
     "constant", "constant:_variable", "G['_variable']", None, "0", None),
    ("L['self'].mode == 'a'", "constant", "constant:self.mode", "L['self'].mode", None, "'a'", None),
    # pytorch/pytorch#113585 (recompiles_verbose sample)
    ("- len(L['x']) == 3", "length", "length:x", "L['x']", None, "3", None),
    ("GLOBAL_STATE changed: grad_mode ", "global_state", "global_state:grad_mode", None, None, None, "grad_mode"),
    ("GLOBAL_STATE changed: grad_mode autocast ", "global_state", "global_state:grad_mode,autocast",
     None, None, None, "grad_mode autocast"),
    ("___check_global_state()", "global_state", "global_state:global_state", None, None, None, None),
    ("not ___is_grad_enabled()", "global_state", "global_state:grad_mode", None, None, "False", None),
    ("___dict_contains('a', L['d'])", "dict_keys", "dict_keys:d:present:'a'", "L['d']", None, "'a' present", None),
    ("not ___dict_contains('b', L['d'])", "dict_keys", "dict_keys:d:absent:'b'", "L['d']", None, "'b' absent", None),
    ("list(L['d'].keys()) == ['a', 'b']", "dict_keys", "dict_keys:d", "L['d']", None, "['a', 'b']", None),
    # sgl-project/sglang#7230 (2.7, shape-env guard)
    ("- 1/0: topk_index._base.size()[0] == topk_index.size()[0]  # (unknown var s1, please file a bug)",
     "size_mismatch", "size_mismatch:topk_index._base:dim0", "topk_index._base", 0, None, None),
    ("L['x'].size()[0] == 8  # return x * 2  # t.py:5 in f (_dynamo/variables/builder.py:3010 in <lambda>)",
     "size_mismatch", "size_mismatch:x:dim0", "L['x']", 0, "8", None),
    ("L['x'].stride()[0] == 3", "stride_mismatch", "stride_mismatch:x:dim0", "L['x']", 0, "3", None),
    ("expected type of 'L['x']' to be a tensor type, ' but found <class 'int'>",
     "type", "type:x", "L['x']", None, "tensor", "<class 'int'>"),
    ("Cache line invalidated because L['self'] got deallocated",
     "object_identity", "object_identity:self:deallocated", "L['self']", None, None, None),
    # pytorch/pytorch#154707 (2.6: empty reason)
    ("- 0/0: ", "other", "other:empty", None, None, None, None),
]


@pytest.mark.parametrize("raw,cat,key,src,dim,exp,act", CASES, ids=[c[0][:40] for c in CASES])
def test_classify_real_guard_failures(raw, cat, key, src, dim, exp, act):
    got = classify_guard_failure(raw)
    assert got["category"] == cat
    assert got["category"] in CATEGORIES
    assert got["guard_key"] == key
    assert got["source_name"] == src
    assert got["dimension"] == dim
    if exp is not None or cat != "size_mismatch":
        assert got["expected"] == exp
    assert got["actual"] == act


def test_same_cause_same_key_across_versions():
    old = classify_guard_failure("- tensor 'L['x']' size mismatch at index 0. expected 24, actual 25")  # 2.2
    new = classify_guard_failure("- 3/0: tensor 'x' size mismatch at index 0. expected 2, actual 3")  # 2.13
    assert old["guard_key"] == new["guard_key"] == "size_mismatch:x:dim0"
    assert old["source_name"] == "L['x']" and new["source_name"] == "x"  # raw names are kept


def test_same_cause_same_key_across_runs_and_prefixes():
    a = classify_guard_failure("- 0/3: ___check_obj_id(L['self'].fn, 140576345756128)")
    b = classify_guard_failure("___check_obj_id(L['self'].fn, 139912345678)")
    assert a["guard_key"] == b["guard_key"] == "object_identity:self.fn"
    s1 = classify_guard_failure("tensor 'L['x']' size mismatch at index 0. expected 25, actual 26")
    s2 = classify_guard_failure("1/7: tensor 'L['x']' size mismatch at index 0. expected 4, actual 8")
    assert s1["guard_key"] == s2["guard_key"]
    s3 = classify_guard_failure("tensor 'L['x']' size mismatch at index 1. expected 4, actual 8")
    assert s3["guard_key"] != s1["guard_key"]  # the dimension is part of the cause


@pytest.mark.parametrize("raw", [
    "tensor 'L['x']' size mismatch at index 0. expected 24, actual 25",
    "___check_obj_id(L['self'].fn, 140576345756128)",
    "L['n'] == 3", "len(L['xs']) == 2", "utils_device.CURRENT_DEVICE == None",
])
def test_guard_key_has_no_numbers_but_dimension(raw):
    key = classify_guard_failure(raw)["guard_key"]
    assert not any(ch.isdigit() for ch in key.replace("dim0", ""))


def test_classify_never_raises_on_junk():
    for junk in ["", "   ", "tensor '", "___check_obj_id(", "(((", "\x00\xff", "- 0/0:", "== ==", 3]:
        assert classify_guard_failure(junk)["category"] in CATEGORIES


def test_strip_entry_prefix():
    assert strip_entry_prefix("    - 0/1: L['n'] == 3") == ("0/1", "L['n'] == 3")
    assert strip_entry_prefix("    - L['n'] == 3") == (None, "L['n'] == 3")


def test_normalize_reason_strips_paths_numbers_addresses_reprs():
    raw = ('call_method UserDefinedObjectVariable(Foo) bar [] {} <__main__.Foo object at 0x7f3a2c1b2d90> '
           'File "/home/me/proj/model.py", line 123 and C:\\Users\\me\\proj\\data.py:45 size 128')
    got = normalize_reason(raw)
    assert got == ("call_method UserDefinedObjectVariable(Foo) bar [] {} <__main__.Foo> "
                   "model.py and data.py size N")
    assert normalize_reason("Data-dependent branching") == "Data-dependent branching"
    # identifiers with digits stay: conv2d, float32
    assert normalize_reason("call_function conv2d float32 x 3") == "call_function conv2d float32 x N"
    assert normalize_reason(None) == ""


def test_graph_break_key():
    assert graph_break_key("Data-dependent branching", "ignored", "/a/b/model.py", 12) == \
        "Data-dependent branching @ model.py:12"
    k1 = graph_break_key(None, "call_function BuiltinVariable(print) [ConstantVariable(int: 5)] {}",
                         "C:\\work\\model.py", 7)
    k2 = graph_break_key(None, "call_function BuiltinVariable(print) [ConstantVariable(int: 9)] {}",
                         "/home/x/model.py", 7)
    assert k1 == k2 == "call_function BuiltinVariable(print) [ConstantVariable(int: N)] {} @ model.py:7"
    assert graph_break_key(None, None, None, None) == "unknown"
