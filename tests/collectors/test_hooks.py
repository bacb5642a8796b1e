"""The timing hooks in-process, on the CPU: wrapping keeps modules what they were, phases are
labelled as the docs say, recompiles are caught, and timings.json reads back through ingest.
Compiles use backend="eager" (dynamo only), so no C++ compiler runs."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from compilewatch.collectors import hooks  # noqa: E402
from compilewatch.ingest.records import CollectingSink  # noqa: E402
from compilewatch.ingest.timings import parse_timings  # noqa: E402


@pytest.fixture
def recorder(monkeypatch):
    rec = hooks.Recorder()
    monkeypatch.setattr(hooks, "RECORDER", rec)
    torch._dynamo.reset()
    return rec


def test_wrapped_module_keeps_its_type_and_state(recorder):
    model = torch.nn.Linear(4, 4)
    compiled = torch.compile(model, backend="eager")
    wrapped = hooks.wrap_compiled(compiled, "Linear.forward")
    assert wrapped is compiled
    assert isinstance(wrapped, torch.nn.Module) and type(wrapped).__name__ == "OptimizedModule"
    assert set(wrapped.state_dict()) == {"_orig_mod.weight", "_orig_mod.bias"}
    wrapped.eval()
    assert not model.training
    for _ in range(6):
        wrapped(torch.randn(2, 4))
    d = recorder.timers[0].to_dict()
    assert d["calls"] == 6
    assert [s["phase"] for s in d["steps"]] == ["compile", "warmup", "warmup", "warmup", "steady", "steady"]
    assert d["graphs"] == 1 and d["recompiles"] == 0


def test_wrapped_module_pickles_as_the_original_class(recorder):
    import copy

    from torch._dynamo.eval_frame import OptimizedModule

    wrapped = hooks.wrap_compiled(torch.compile(torch.nn.Linear(2, 2), backend="eager"), "Linear.forward")
    fn, args = wrapped.__reduce__()[:2]
    assert fn is OptimizedModule and args[0] is wrapped._orig_mod
    clone = copy.deepcopy(wrapped)
    assert type(clone) is OptimizedModule and torch.equal(clone._orig_mod.weight, wrapped._orig_mod.weight)


def test_recompile_is_labelled_compile_and_counted(recorder):
    fn = hooks.wrap_compiled(torch.compile(lambda x: x * 2, backend="eager", dynamic=False), "double")
    for n in (3, 3, 3, 3, 3, 5, 5):
        fn(torch.randn(n))
    d = recorder.timers[0].to_dict()
    phases = [s["phase"] for s in d["steps"]]
    assert phases[0] == "compile" and phases[5] == "compile"      # the new size recompiled
    assert phases[6] == "warmup"                                   # warm-up restarts after a recompile
    assert d["recompiles"] == 1 and d["graphs"] == 2


def test_graph_breaks_are_attributed(recorder):
    def f(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2
    fn = hooks.wrap_compiled(torch.compile(f, backend="eager"), "f")
    fn(torch.randn(3))
    d = recorder.timers[0].to_dict()
    assert d["graph_breaks"] >= 1 and d["graphs"] == 2


def test_install_patches_compile_and_module_compile(recorder, monkeypatch):
    monkeypatch.setattr(torch, "compile", torch.compile)     # restored after the test
    monkeypatch.setattr(hooks, "_ITERATION_HANDLE", None)
    hooks.install(torch)
    assert hooks._ITERATION_HANDLE is not None               # optimizer steps are followed too
    try:
        m = torch.nn.Linear(3, 3)
        m.compile(backend="eager")                           # nn.Module.compile goes through torch.compile
        m(torch.randn(1, 3))
        deco = torch.compile(backend="eager")(lambda x: x + 1)   # decorator form with arguments
        deco(torch.randn(2))
        names = [t.name for t in recorder.timers]
        assert "Linear.forward" in names and any(n.endswith("<lambda>") for n in names)
    finally:
        hooks._ITERATION_HANDLE.remove()
        monkeypatch.undo()


def test_step_marks_phases_and_survives_an_exception(recorder):
    for i in range(6):
        with hooks.step("train"):
            pass
    with pytest.raises(ValueError):
        with hooks.step("train"):
            raise ValueError("bad batch")
    d = recorder.timers[0].to_dict()
    assert d["mode"] == "marked" and d["calls"] == 7
    assert len(d["steps"]) == 6                  # the raising step is not recorded
    assert [s["phase"] for s in d["steps"]][:4] == ["warmup"] * 4 and d["steps"][-1]["phase"] == "steady"


def test_timings_json_reads_back_through_ingest(recorder, tmp_path):
    fn = hooks.wrap_compiled(torch.compile(lambda x: x.sin(), backend="eager"), "sin")
    for _ in range(5):
        fn(torch.randn(8))
    path = recorder.write(str(tmp_path / "timings.json"))
    data = json.loads(open(path).read())
    assert data["format_version"] == 1 and data["device"] == "cpu"
    assert data["env"]["torch_version"] == torch.__version__
    assert "frames" in data["dynamo_counters"]
    sink = CollectingSink()
    with open(path, "rb") as f:
        parse_timings(f, sink)
    assert not sink.errors
    rows = sink.rows["step_timings"]
    assert [r["phase"] for r in rows if r["mode"] == "compiled"] == ["compile", "warmup", "warmup", "warmup", "steady"]
    # no optimizer stepped: the iteration period is the gap between calls of the one compiled callable
    assert [r["phase"] for r in rows if r["mode"] == "iteration"] == ["compile", "warmup", "warmup", "warmup"]
    (summary,) = sink.rows["timing_summaries"]
    assert summary["device"] == "cpu" and summary["iteration_source"] == "compiled_call"
    assert summary["peak_rss_bytes"] > 10 * 2**20 and summary["compile_time_s"] > 0


def test_called_inside_another_compiled_region_is_traced_through(recorder):
    inner = hooks.wrap_compiled(torch.compile(lambda x: x + 1, backend="eager"), "inner")
    outer = torch.compile(lambda x: inner(x) * 2, backend="eager", fullgraph=True)
    assert torch.equal(outer(torch.ones(2)), torch.full((2,), 4.0))   # fullgraph: no break from the hooks


def test_iteration_period_follows_optimizer_steps(recorder, monkeypatch):
    """The training-step period: between optimizer.step() calls, host work between steps included,
    warm-up intervals apart from steady ones, a recompile inside an interval labelled so."""
    import time

    monkeypatch.setattr(hooks, "_ITERATION_HANDLE", None)
    handle = hooks.install_iteration_hook(torch)
    try:
        model = hooks.wrap_compiled(torch.compile(torch.nn.Linear(8, 8), backend="eager", dynamic=False), "Linear.forward")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i in range(14):
            rows = 4 if i != 9 else 5             # one odd batch size: a recompile inside interval 9
            model(torch.randn(rows, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.03 if i >= 10 else 0.01)  # host-side work outside the compiled region
    finally:
        handle.remove()
    it = recorder.iteration()
    assert it["source"] == "optimizer_step" and it["name"] == "SGD.step" and it["clock"] == "host"
    assert it["calls"] == 14
    phases = [s["phase"] for s in it["steps"]]
    assert phases[:3] == ["warmup"] * 3 and phases[8] == "compile" and phases[9:12] == ["warmup"] * 3
    slow = [s["duration_ms"] for s in it["steps"] if s["phase"] == "steady" and s["step"] >= 12]
    fast = [s["duration_ms"] for s in it["steps"] if s["phase"] == "steady" and s["step"] < 9]
    assert min(slow) > 25 and max(fast) < 25          # the sleep outside the compiled call is in the period
