"""Stack trie, Chrome trace export, graph-break registry links and the CLI, over real traces."""
from __future__ import annotations

import json

import pytest

from compilewatch.cli import main
from compilewatch.core.errors import NotFoundError
from compilewatch.deepdive import gb_registry, perfetto, stack_trie

from deep_support import public_paths, run_of


def _trie_text(store, name):
    with store.read() as con:
        return stack_trie.render(stack_trie.build(con, run_of(store, name)))


def test_trie_marks_each_compile_under_the_user_frames_that_led_to_it(deep_store):
    text = _trie_text(deep_store, "deep_dive.log.gz")
    lines = text.splitlines()
    # the script's module frame, then the compiled function, then its compile ids
    assert any(ln.endswith("in <module>") and "deep_dive.py" in ln for ln in lines)
    assert any("deep_dive.py" in ln and ln.endswith("in branchy") for ln in lines)
    marks = [ln.split("─ ", 1)[1] for ln in lines if "─ [" in ln]
    assert [m.split(" ", 1)[0] for m in marks] == ["[0/0]", "[1/0]", "[1/1]"]
    assert marks[2].startswith("[1/1] · recompile") and "recompile" not in marks[1]


def test_trie_shows_graph_breaks_and_recompiles(deep_store):
    text = _trie_text(deep_store, "graph_break_recompile.log.gz")
    assert "graph break: Unsupported Tensor.item() call with capture_scalar_outputs=False" in text
    assert "[3/1] · recompile" in text
    with deep_store.read() as con:
        root = stack_trie.build(con, run_of(deep_store, "graph_break_recompile.log.gz"))
        n = con.execute("SELECT count(DISTINCT regexp_replace(compile_id, '_\\d+$', '')) FROM compiles WHERE run_id = ?",
                        [run_of(deep_store, "graph_break_recompile.log.gz")]).fetchone()[0]
    assert stack_trie.count_marks(root) == n


@pytest.mark.skipif(not public_paths(), reason="public tlparse logs not present")
def test_trie_of_a_public_recompile_storm(deep_store):
    text = _trie_text(deep_store, "multi_rank_logs__dedicated_log_torch_trace_rank_3.log")
    assert "gen_many_frames.py:6 in kernel" in text
    assert "[0/6] · recompile: 0/5: tensor 'x' size mismatch at index 0. expected 7, actual 8" in text


def _check_chrome_trace(trace: dict) -> list[dict]:
    """The Trace Event Format's JSON object form, as Perfetto's importer reads it."""
    trace = json.loads(perfetto.to_json(trace))
    assert isinstance(trace["traceEvents"], list)
    spans = []
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["name"], str) and isinstance(e["ts"], int) and isinstance(e["dur"], int)
            assert e["dur"] >= 0
            spans.append(e)
        else:
            assert e["name"] in ("process_name", "thread_name") and e["args"]["name"]
    return spans


def test_chrome_trace_of_a_gpu_bundle_has_its_phases_and_steps(deep_store):
    with deep_store.read() as con:
        rid = con.execute("SELECT run_id FROM files WHERE original_name LIKE 'mlp_default_train_run1%' LIMIT 1").fetchone()[0]
        spans = _check_chrome_trace(perfetto.chrome_trace(con, rid))
        phases = con.execute("SELECT count(*), sum(duration_us) FROM compile_phases WHERE run_id = ? "
                             "AND start_us IS NOT NULL", [rid]).fetchone()
        steps = con.execute("SELECT count(*), sum(duration_ms) FROM step_timings WHERE run_id = ?", [rid]).fetchone()
    compile_spans = [e for e in spans if e["cat"] == "compile_phase"]
    step_spans = [e for e in spans if e["cat"] == "step"]
    assert len(compile_spans) == phases[0] > 0 and sum(e["dur"] for e in compile_spans) == phases[1]
    assert len(step_spans) == steps[0] > 0
    assert abs(sum(e["dur"] for e in step_spans) / 1000 - steps[1]) < len(step_spans)  # rounding to 1 us each
    assert {e["name"] for e in compile_spans} >= {"entire_frame_compile", "inductor_compile"}
    # steps sit on their own tracks, starting where the first compile phase starts
    assert min(e["ts"] for e in step_spans) == min(e["ts"] for e in compile_spans)


def test_chrome_trace_of_an_unknown_run_is_a_clear_error(deep_store):
    with deep_store.read() as con, pytest.raises(NotFoundError):
        perfetto.chrome_trace(con, "no-such-run")


def test_registry_url_is_the_one_torch_prints_in_the_log(deep_store):
    with deep_store.read() as con:
        rows = con.execute("SELECT gb_code, reason, hints FROM graph_breaks WHERE gb_code IS NOT NULL").fetchall()
    assert rows
    for code, reason, hints in rows:
        url = gb_registry.registry_url(code)
        assert url.startswith("https://meta-pytorch.github.io/compile-graph-break-site/gb/gb")
        assert url in reason  # torch's own message links the same page
        assert gb_registry.hint_list(hints) and all("\n" not in h for h in gb_registry.hint_list(hints))
    assert gb_registry.registry_url(None) is None and gb_registry.registry_url("not a code") is None
    assert gb_registry.hint_list('["a", "b"]') == ["a", "b"] and gb_registry.hint_list("a\n\nb\n") == ["a", "b"]


def test_cli_show_and_export_trace(deep_store, tmp_path, capsys):
    db = str(deep_store.db_path)
    rid = run_of(deep_store, "deep_dive.log.gz")
    assert main(["show", rid, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "stack trie" in out and "[1/1] · recompile" in out
    assert main(["show", rid, "0/0", "--db", db]) == 0
    assert "AOT backward graph" in capsys.readouterr().out
    assert main(["show", rid, "0/0", "--artifact", "aot_backward_graph", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("class GraphModule(torch.nn.Module):")
    assert main(["show", rid, "5/5", "--db", db]) == 2
    assert "known compile ids: 0/0, 1/0, 1/1" in capsys.readouterr().err
    assert main(["show", rid, "-", "--artifact", "torch_version", "--db", db]) == 0  # records without a compile id
    assert "2.13.0+cpu" in capsys.readouterr().out
    out_file = tmp_path / "run.json"
    assert main(["export-trace", rid, "--out", str(out_file), "--db", db]) == 0
    assert _check_chrome_trace(json.loads(out_file.read_text()))
    assert main(["export-trace", "nope", "--out", str(out_file), "--db", db]) == 2
