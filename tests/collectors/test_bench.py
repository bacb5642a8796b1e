"""`compilewatch bench` on the CPU: built-in models build and step, and one real bench run writes a
bundle whose bench.csv has PyTorch's benchmarks/dynamo columns and reads back through ingest."""
from __future__ import annotations

import csv
import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")

from compilewatch.collectors.bench_worker import CSV_COLUMNS, count_recompiles, make_step  # noqa: E402
from compilewatch.collectors.models import REGISTRY, build, get_spec  # noqa: E402
from compilewatch.core.errors import ModelUnavailableError, UnknownModelError  # noqa: E402
from compilewatch.ingest.bench_csv import parse_bench_csv  # noqa: E402
from compilewatch.ingest.bundle import read_manifest  # noqa: E402
from compilewatch.ingest.records import CollectingSink  # noqa: E402

DYNAMO_COLUMNS = ["dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
                  "eager_peak_mem", "dynamo_peak_mem", "calls_captured", "unique_graphs", "graph_breaks",
                  "unique_graph_breaks"]
OURS = ["mode", "task", "eager_latency", "compiled_spread", "eager_spread", "recompiles", "steps"]


def test_csv_columns_are_pytorchs_then_ours():
    assert CSV_COLUMNS == DYNAMO_COLUMNS + OURS


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_builtin_model_trains_one_eager_step(name):
    spec = REGISTRY[name]
    if spec.package and importlib.util.find_spec(spec.package) is None:
        with pytest.raises(ModelUnavailableError):
            get_spec(name)
        pytest.skip(f"{spec.package} not installed")
    wl = build(name, "cpu", batch_size=2)
    batches = [wl.make_batch(i) for i in range(2)]
    if wl.distinct_batches == 0:      # the storm models change shape every step
        assert batches[0][0][0].shape != batches[1][0][0].shape or name == "changing_constant"
    step = make_step(torch, wl, wl.model, batches, "train", False, "cpu")
    before = [p.detach().clone() for p in wl.model.parameters()][:1]
    step(0)
    after = next(iter(wl.model.parameters()))
    assert not torch.equal(before[0], after)   # the optimizer stepped


def test_unknown_model_names_the_builtin_ones():
    with pytest.raises(UnknownModelError) as e:
        get_spec("resnet9000")
    assert "resnet50" in str(e.value) and "--list-models" in str(e.value)


def test_count_recompiles_counts_compile_ids_not_records():
    class M:
        def __init__(self, cid):
            self.compile_id = cid

    class U:
        @staticmethod
        def get_compilation_metrics():
            return [M("0/0"), M("0/0"), M("0/1"), M("0/1"), M("0/2_1"), M("1/0"), M("!0/1/1")]
    assert count_recompiles(U) == 3     # 0/1, 0/2 (its restart counted once), !0/1/1


@pytest.mark.slow
def test_bench_run_writes_a_bundle_with_a_dynamo_csv_row(tmp_path, monkeypatch):
    from compilewatch.collectors.bench import run_bench

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rows = run_bench(["item_branch"], ["default"], task="infer", steps=4, warmup=1, device="cpu",
                     out_dir=tmp_path, tee=False)
    (row,) = rows
    assert row["exit_status"] == 0
    bundle = tmp_path / os.path.basename(row["bundle"])
    m = read_manifest(bundle)
    assert m.model == "item_branch" and m.label == "default/infer" and m.collector.startswith("compilewatch bench")
    assert m.extra["bench"]["steps"] == 4 and m.files["bench"] == "bench.csv" and m.files["torch_trace"]
    with open(bundle / "bench.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == CSV_COLUMNS
        r = next(reader)
    assert r["dev"] == "cpu" and float(r["speedup"]) > 0 and float(r["compilation_latency"]) > 0
    assert int(r["graph_breaks"]) >= 1 and int(r["unique_graphs"]) >= 2   # the .item() branch
    assert r["eager_peak_mem"] == ""                                         # no GPU, no figure
    sink = CollectingSink()
    with open(bundle / "bench.csv", "rb") as f:
        parse_bench_csv(f, sink)
    (stored,) = sink.rows["bench_results"]
    assert stored["model"] == "item_branch" and stored["mode"] == "default" and stored["task"] == "infer"
    # the summary CSV beside the bundles holds the same row
    with open(tmp_path / "bench.csv", newline="") as f:
        assert next(csv.DictReader(f))["name"] == "item_branch"
