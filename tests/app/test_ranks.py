"""Per-rank views and the divergence check, on real multi-rank logs.

tests/fixtures/ranks/ holds two real 2-rank DDP jobs (gloo, torch.compile) collected on the CPU
(commands in its README): ddp_same (every rank runs the same shapes) and ddp_diverge (rank 1 sees
a shorter batch from step 6 on and prints inside forward). The public tlparse multi-rank logs are
read from ../shared/public_logs/ when present.
"""
from __future__ import annotations

import gzip
import json
import re
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import compile_time, ranks
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.rank_names import rank_from_name
from compilewatch.store import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ranks"
_CID = re.compile(r'"frame_id": (\d+), "frame_compile_id": (\d+)')


@pytest.fixture(scope="module")
def ranks_db(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("ranks") / "cw.duckdb")
    report = ingest_paths(store, sorted(FIXTURES.glob("*.tar.gz")))
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    with store.read() as con:
        runs = dict(con.execute("SELECT label, run_id FROM runs").fetchall())
    return store, runs


def _trace_compile_ids(bundle: Path) -> dict[int, set[str]]:
    """Straight from the raw trace files: rank (file name) -> frame/compile ids of dynamo_start."""
    out: dict[int, set[str]] = defaultdict(set)
    with tarfile.open(bundle) as tar:
        for m in tar.getmembers():
            if "/trace/" not in m.name or not m.isfile():
                continue
            rank = rank_from_name(m.name)
            for line in tar.extractfile(m).read().decode().splitlines():
                if '"dynamo_start"' in line:
                    fid, fci = _CID.search(line).groups()
                    out[rank].add(f"{fid}/{fci}")
    return out


def test_rank_from_name():
    assert rank_from_name("b.tar.gz/trace/dedicated_log_torch_trace_rank_12_ab3x.log") == 12
    assert rank_from_name("job/timings.rank3.json") == 3
    assert rank_from_name("job/timings.json") is None
    assert rank_from_name("dedicated_log_torch_trace_rank_1_x/other.log") is None  # a folder's name does not count


def test_same_ranks_agree(ranks_db):
    store, runs = ranks_db
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id=runs["ranks-same"]))
        div = ranks.divergence(con, Filters(run_id=runs["ranks-same"]))
    assert list(per["rank"]) == [0, 1]
    ids = _trace_compile_ids(FIXTURES / "ddp_same.tar.gz")
    assert [set(x) for x in per["compile_ids"]] == [ids[0], ids[1]]
    assert div.empty, div.to_dict("records")


def test_diverging_ranks_flagged_with_the_difference(ranks_db):
    store, runs = ranks_db
    f = Filters(run_id=runs["ranks-diverge"])
    with store.read() as con:
        per = ranks.per_rank(con, f).set_index("rank")
        div = ranks.divergence(con, f).set_index("aspect")
        n_breaks = dict(con.execute("SELECT rank, count(*) FROM graph_breaks WHERE run_id = ? GROUP BY rank",
                                    [f.run_id]).fetchall())
    ids = _trace_compile_ids(FIXTURES / "ddp_diverge.tar.gz")
    only_rank1 = sorted(ids[1] - ids[0], key=ranks.compile_id_order)
    assert only_rank1 and not ids[0] - ids[1]
    assert set(div.index) >= {"compile ids", "graphs", "recompiles", "graph breaks"}
    row = div.loc["compile ids"]
    assert (row["ranks"], row["reference_ranks"]) == ("1", "0")
    assert row["difference"] == "has " + ", ".join(only_rank1)
    assert div.loc["graph breaks", "difference"].startswith(f"{n_breaks[1]} vs {n_breaks[0]} ")
    # the print() in forward breaks the graph on rank 1 only
    assert "Failed to trace builtin operator" in div.loc["graph breaks", "difference"]
    assert per.loc[0, "recompiles"] == 0 and per.loc[1, "recompiles"] > 0
    assert div.loc["recompiles", "difference"].startswith(f"{per.loc[1, 'recompiles']} vs 0 ")


def test_rank_steps_come_from_each_ranks_timings(ranks_db):
    store, runs = ranks_db
    f = Filters(run_id=runs["ranks-diverge"])
    with store.read() as con:
        steps = ranks.rank_steps(con, f)
    with tarfile.open(FIXTURES / "ddp_diverge.tar.gz") as tar:
        docs = {0 if m.name.endswith("timings.json") else rank_from_name(m.name): json.load(tar.extractfile(m))
                for m in tar.getmembers() if "timings" in m.name}
    for rank, doc in docs.items():
        got = steps[steps["rank"] == rank].set_index("callable")
        for c in doc["callables"]:
            compile_ms = sum(s["duration_ms"] for s in c["steps"] if s["phase"] == "compile")
            assert got.loc[c["name"], "steps"] == len(c["steps"])
            assert got.loc[c["name"], "compile_ms"] == pytest.approx(compile_ms)


def test_public_multi_rank_logs(public_logs, tmp_path):
    """multi_rank_runtime: six files, the sixth named rank_5 although its envelopes say rank 1;
    tlparse reads ranks from file names and so do we. Rank 5 compiled 0/0, 0/1 only."""
    store = open_store(tmp_path / "cw.duckdb")
    paths = sorted(public_logs.glob("tlparse__inputs__multi_rank_runtime__*.log"))
    assert len(paths) == 6
    report = ingest_paths(store, paths, run_id="mrr")
    assert report.ok
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id="mrr"))
        div = ranks.divergence(con, Filters(run_id="mrr")).set_index("aspect")
    assert list(per["rank"]) == [0, 1, 2, 3, 4, 5]
    assert div.loc["compile ids", "ranks"] == "5"
    assert div.loc["compile ids", "reference_ranks"] == "0, 1, 2, 3, 4"
    assert div.loc["compile ids", "difference"] == "lacks 0/2, 0/3"


def test_public_logs_without_rank_keys(public_logs, tmp_path):
    """multi_rank_logs: no `rank` key in any envelope; the names give ranks 0, 1 and 3."""
    store = open_store(tmp_path / "cw.duckdb")
    paths = sorted(public_logs.glob("tlparse__inputs__multi_rank_logs__*.log"))
    assert ingest_paths(store, paths, run_id="mrl").ok
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id="mrl")).set_index("rank")
        div = ranks.divergence(con, Filters(run_id="mrl"))
    assert list(per.index) == [0, 1, 3]
    assert (per.loc[1, "compiles"], per.loc[3, "compiles"], per.loc[1, "recompiles"]) == (15, 7, 14)
    ids = div[div["aspect"] == "compile ids"].set_index("ranks")["difference"]
    assert ids["3"] == "has " + ", ".join(f"0/{i}" for i in range(1, 7))


def test_public_graph_execution_order(public_logs, tmp_path):
    """graph_exec_order_tests: both ranks compiled 0/0 and 0/1 and hit/missed the caches alike, but
    called the graphs in a different order (tlparse: "Graph execution order differs across ranks");
    the order is each rank's graph_execution artifact."""
    store = open_store(tmp_path / "cw.duckdb")
    paths = sorted(public_logs.glob("tlparse__graph_exec_order_tests__*.log"))
    assert ingest_paths(store, paths, run_id="geo").ok
    logged = {}
    for p in paths:
        lines = p.read_text().splitlines()
        i = next(n for n, line in enumerate(lines) if '"name": "graph_execution"' in line)
        payload = []
        for line in lines[i + 1:]:
            if not line.startswith("\t"):
                break
            payload.append(line[1:])
        logged[rank_from_name(p.name)] = [c["compile_id"] for c in json.loads("\n".join(payload))["graph_execution_order"]]
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id="geo")).set_index("rank")
        div = ranks.divergence(con, Filters(run_id="geo"))
    assert {r: per.loc[r, "execution_order"] for r in (0, 1)} == logged
    # their collective schedules differ too (graph 0/1 on rank 1 adds a reduce_scatter), nothing else
    assert list(div["aspect"]) == ["execution order", "collective schedule"]
    first = next(i for i, (a, b) in enumerate(zip(logged[1], logged[0])) if a != b)
    assert div.iloc[0]["difference"] == (f"{len(logged[1])} call(s) vs {len(logged[0])}; call #{first + 1} is "
                                         f"{logged[1][first]} here, {logged[0][first]} in the reference")


def test_public_collective_schedule(public_logs, tmp_path):
    """multi_rank_schedule: both files' envelopes say rank 0, their names say 0 and 1; graph 0/0
    schedules 6 collectives on rank 0 and 4 on rank 1 (tlparse's test_collective_schedule_parsing)."""
    store = open_store(tmp_path / "cw.duckdb")
    paths = sorted(public_logs.glob("tlparse__inputs__multi_rank_schedule__*.log"))
    assert ingest_paths(store, paths, run_id="sch").ok
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id="sch")).set_index("rank")
        div = ranks.divergence(con, Filters(run_id="sch")).set_index("aspect")
    ops = {r: [x for x in per.loc[r, "collective_schedule"] if x.startswith("0/0 ")] for r in (0, 1)}
    assert (len(ops[0]), len(ops[1])) == (6, 4)
    assert list(div.index) == ["collective schedule"]
    assert (div.loc["collective schedule", "ranks"], div.loc["collective schedule", "reference_ranks"]) == ("1", "0")
    n = {r: len(per.loc[r, "collective_schedule"]) for r in (0, 1)}
    assert div.loc["collective schedule", "difference"] == \
        f"{n[1]} collective(s) vs {n[0]}; collective #4 is 0/0 wait_tensor here, 0/0 reduce_scatter_tensor in the reference"


def test_cli_ranks(ranks_db, capsys):
    from compilewatch import cli

    store, runs = ranks_db
    db = str(store.db_path)
    assert cli.main(["ranks", "--db", db, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["run_id"] for r in listed} == set(runs.values()) and {r["ranks"] for r in listed} == {2}

    assert cli.main(["ranks", runs["ranks-diverge"], "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ids = _trace_compile_ids(FIXTURES / "ddp_diverge.tar.gz")
    assert [set(r["compile_ids"]) for r in out["ranks"]] == [ids[0], ids[1]]
    flagged = {d["aspect"]: d for d in out["divergence"]}
    assert flagged["compile ids"]["difference"] == "has " + ", ".join(sorted(ids[1] - ids[0], key=ranks.compile_id_order))

    assert cli.main(["ranks", runs["ranks-diverge"], "--db", db, "--fail-on-divergence"]) == 1
    text = capsys.readouterr().out
    assert "RANKS DIVERGE" in text and "compile ids: rank(s) 1 vs 0: has 0/1" in text
    assert cli.main(["ranks", runs["ranks-same"], "--db", db, "--fail-on-divergence"]) == 0
    assert "all 2 ranks agree" in capsys.readouterr().out
    assert cli.main(["ranks", "no-such-run", "--db", db]) == 2
    assert "ranks` without a run lists" in capsys.readouterr().err


def test_cli_compile_time(ranks_db, capsys):
    from compilewatch import cli

    store, _ = ranks_db
    assert cli.main(["compile-time", "--db", str(store.db_path), "--json", "--search", "ddp_train"]) == 0
    out = json.loads(capsys.readouterr().out)
    codes = [f["code"] for f in out["frames"]]
    assert codes[0] == "ddp_train.py:31" and all(c.startswith("ddp_train.py:") for c in codes)
    # the figures themselves are checked against the logs in test_compile_time.py
    with store.read() as con:
        frame = compile_time.frame_hotspots(con, Filters(search="ddp_train", start=None, end=None)).iloc[0]
    assert (out["frames"][0]["compiles"], out["frames"][0]["total_s"]) == (frame["compiles"], pytest.approx(frame["total_s"]))
    assert out["runtime_linkage"][0]["callable"] == "DistributedDataParallel.forward"


def test_ranks_of_a_torchrun_text_log(tmp_path):
    """TORCH_LOGS text of a 2-rank torchrun job (tests/fixtures/text, one stream with [rank0]: and
    [rank1]: prefixes): each rank's graph breaks and recompiles are its own, and they agree."""
    log = FIXTURES.parent / "text" / "torch2.13_torchrun_2ranks.log"
    text = log.read_text()
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [log], run_id="tx").ok
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id="tx")).set_index("rank")
        div = ranks.divergence(con, Filters(run_id="tx"))
    for r in (0, 1):
        prefix = f"[rank{r}]:"
        assert per.loc[r, "graph_breaks"] == sum(1 for line in text.splitlines()
                                                 if line.startswith(prefix) and "Graph break in user code" in line)
        assert per.loc[r, "recompiles"] == sum(1 for line in text.splitlines()
                                               if line.startswith(prefix) and "Recompiling function" in line)
    assert div.empty
