"""Build a compilewatch store at team-year scale, for the page-latency benchmark.

    python benchmarks/gen_team_year.py --db .bench/team_year/compilewatch.duckdb [--runs 10000]

One team, one year: ``--runs`` runs over ``--days`` days ending today (UTC), a dozen models,
PyTorch 2.5 .. 2.14 nightlies rolling forward through the year, labels and git commits of the
team's own code, single- and multi-rank jobs on a few GPU hosts. At the default 10,000 runs it
holds >= 1,000,000 graph_breaks and >= 1,000,000 recompiles rows, with guard_failures,
limit_hits, compiles, compile_phases, cache_events, bench_results, step_timings (the iteration
period too), timing_summaries, files and ingest_errors in the proportions a real year of logs has,
and the runs' hardware and run_metrics derived from them as ingest derives them.

Every event text comes from a real log: graph-break and guard-failure rows are parsed with
compilewatch's own parsers (ingest.text / ingest.trace) from
``benchmarks/templates/torch_logs_2.13_eager.txt`` (PyTorch 2.13's own messages, recorded by
``benchmarks/templates/harvest_torch_logs.py``), ``sample_logs/``, ``tests/fixtures/`` and the
public tlparse logs in ``../shared/public_logs/tlparse/``. When no parser is importable the
built-in ``BUILTIN_*`` rows below stand in: they are the same PyTorch 2.13 messages, copied from
that log by hand. The generator then varies what changes from run to run (run ids, timestamps,
ranks, sizes and ids inside guard texts, counts, user code locations) in DuckDB SQL over range():
no Python loop touches a row, so a year builds in well under a minute on two cores.

Deterministic for a given --seed, --runs, --days and --end.

    python benchmarks/gen_team_year.py --db .bench/y/compilewatch.duckdb --lake ducklake:postgres:... --data-path DIR

also fills an empty DuckLake team store with the same rows (`compilewatch store copy`, checked by
counts), so the page benchmark can compare the two backends on identical data.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.store import open_store  # noqa: E402
from compilewatch.store.derived import refresh_all  # noqa: E402

TEMPLATE_DIR = ROOT / "benchmarks" / "templates"
PUBLIC_LOGS = ROOT.parent / "shared" / "public_logs" / "tlparse"

TORCH_VERSIONS = ["2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0"]
NIGHTLY = "2.14.0.dev"

# name, weight, eager step ms, base speedup, compile s, repo module, functions the model compiles
MODELS = [
    ("resnet50", 10, 38.0, 1.45, 42.0, "torchvision/models/resnet.py", ["forward", "_forward_impl", "Bottleneck.forward"]),
    ("vit_b_16", 8, 55.0, 1.62, 61.0, "torchvision/models/vision_transformer.py", ["forward", "Encoder.forward", "EncoderBlock.forward"]),
    ("bert_base", 9, 31.0, 1.38, 48.0, "transformers/models/bert/modeling_bert.py", ["forward", "BertLayer.forward", "BertSelfAttention.forward", "get_extended_attention_mask"]),
    ("gpt2", 8, 44.0, 1.51, 57.0, "transformers/models/gpt2/modeling_gpt2.py", ["forward", "GPT2Block.forward", "GPT2Attention._attn"]),
    ("llama3_8b", 12, 410.0, 1.33, 212.0, "llm/model/llama.py", ["forward", "TransformerBlock.forward", "Attention.forward", "apply_rotary_emb", "RMSNorm.forward"]),
    ("mixtral_moe", 5, 690.0, 1.18, 305.0, "llm/model/moe.py", ["forward", "MoELayer.forward", "route_tokens", "Expert.forward"]),
    ("t5_small", 5, 27.0, 1.29, 39.0, "transformers/models/t5/modeling_t5.py", ["forward", "T5Block.forward", "T5Attention.compute_bias"]),
    ("whisper_small", 5, 73.0, 1.41, 88.0, "transformers/models/whisper/modeling_whisper.py", ["forward", "WhisperEncoderLayer.forward", "WhisperDecoder.forward"]),
    ("sd_unet", 6, 240.0, 1.56, 145.0, "diffusers/models/unets/unet_2d_condition.py", ["forward", "CrossAttnDownBlock2D.forward", "Transformer2DModel.forward", "get_time_embed"]),
    ("detr_r50", 4, 96.0, 1.22, 77.0, "detr/models/detr.py", ["forward", "Transformer.forward", "HungarianMatcher.forward"]),
    ("dlrm", 4, 12.0, 1.12, 33.0, "torchrec/models/dlrm.py", ["forward", "InteractionArch.forward", "SparseArch.forward"]),
    ("yolov8n", 4, 9.5, 1.27, 29.0, "ultralytics/nn/tasks.py", ["forward", "_predict_once", "C2f.forward", "Detect.forward"]),
]

GPU_HOSTS = [("gpu-h100-%02d" % i, "NVIDIA H100 80GB HBM3") for i in range(1, 13)] + \
            [("gpu-a100-%02d" % i, "NVIDIA A100-SXM4-80GB") for i in range(1, 9)]

# -- built-in templates: PyTorch 2.13's own messages as ingest would store them -----------------
# Copied from benchmarks/templates/torch_logs_2.13_eager.txt; used only while no parser is
# importable (the parsed rows of that same log replace them).
_HINT_EAGER = ("Your code may result in an error when running in eager. Please double check that your code doesn't "
               "contain a similar error when actually running eager/uncompiled.")
BUILTIN_GRAPH_BREAKS = [
    dict(gb_type="Failed to trace builtin operator", gb_code="GB0059",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nFailed to trace builtin operator",
         explanation="Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)",
         hints="Avoid calling builtin `print` with argument types ['str']. Consider using an equivalent alternative function/method to `print`.\n"
               "If you are attempting to call a logging function (e.g. `print`), you can try adding it to `torch._dynamo.config.reorderable_logging_functions`.\n"
               "Please report an issue to PyTorch."),
    dict(gb_type="Data-dependent branching", gb_code="GB0170",
         reason="Data-dependent branching",
         explanation="Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.",
         hints="For the common pattern `if tensor_cond: x = transform(x)` (e.g. clamping inf/nan values), consider making the code branchless by always applying the transform.\n"
               "This graph break is fundamental - it is unlikely that Dynamo will ever be able to trace through your code. Consider finding a workaround.\n"
               "Use `torch.cond` to express dynamic control flow."),
    dict(gb_type="Unsupported Tensor.item() call with capture_scalar_outputs=False", gb_code="GB0124",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nUnsupported Tensor.item() call with capture_scalar_outputs=False",
         explanation="Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.",
         hints="Set `torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` to include these operations in the captured graph."),
    dict(gb_type="Tensor.tolist() with non-integer tensor", gb_code="GB0109",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nTensor.tolist() with non-integer tensor",
         explanation="Dynamo currently does not support tracing `tolist()` on non-integer tensors.",
         hints="Ensure the input tensor to `tolist()` is an integer type (e.g., int8, int16, int32, int64)."),
    dict(gb_type="Attempted to call function marked as skipped", gb_code="GB0007",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nAttempted to call function marked as skipped",
         explanation="Dynamo does not know how to trace the builtin `<unknown module>.Random.random.` This function is either a Python builtin (e.g. _warnings.warn) or a third-party C/C++ Python extension (perhaps created with pybind).",
         hints="If it is a Python builtin, please file an issue on GitHub so the PyTorch team can add support for it and see the next case for a workaround.\n"
               "If it is a third-party C/C++ Python extension, please either wrap it into a PyTorch-understood custom operator or, if it is traceable, use `torch.compiler.allow_in_graph`."),
    dict(gb_type="Dynamic shape operator", gb_code="GB0036",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nDynamic shape operator",
         explanation="Operator `aten.nonzero.default`'s output shape depends on input Tensor data.",
         hints="Enable tracing of dynamic shape operators with `torch._dynamo.config.capture_dynamic_output_shape_ops = True`"),
    dict(gb_type="Call to `torch._dynamo.graph_break()`", gb_code="GB0025",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nCall to `torch._dynamo.graph_break()`",
         explanation="User-inserted graph break. Message: None",
         hints="Remove the `torch._dynamo.graph_break()` call."),
    dict(gb_type="Unsupported context manager", gb_code="GB0142",
         reason="Failed to handle graph break gracefully. Skipping the function and falling back to eager. Graph break encountered:\n\nUnsupported context manager",
         explanation="Dynamo does not know how to enter a `lock` context manager.",
         hints="Avoid using the unsupported context manager.\n"
               "File an issue to PyTorch. Simple context managers can potentially be supported, but note that context managers can't be supported in general"),
    dict(gb_type="Unsupported Tensor.backward() call", gb_code="GB0123",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nUnsupported Tensor.backward() call",
         explanation="Dynamo currently does not support tracing `Tensor.backward()` when trace_autograd_ops is off.",
         hints="Set torch._dynamo.trace_autograd_ops=True"),
    dict(gb_type="Unsupported Tensor.requires_grad_() call", gb_code="GB0125",
         reason="Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nUnsupported Tensor.requires_grad_() call",
         explanation="Dynamo does not support changes to a Tensor's `requires_grad` through calling `requires_grad_()`.",
         hints=""),
    # the pre-2.7 format (no gb_type), from tlparse's comp_metrics@5dc9d1a.log
    dict(gb_type=None, gb_code=None,
         reason="Unsupported: 'skip function graph_break in file /data/users/willfeng/pytorch/torch/_dynamo/decorators.py'",
         explanation=None, hints=None),
]
BUILTIN_GUARD_FAILURES = [
    "tensor 'x' size mismatch at index 0. expected 2, actual 3",
    "tensor 'x' dtype mismatch. expected Float, actual Double",
    "tensor 'x' requires_grad mismatch. expected requires_grad=0",
    "tensor 'x' stride mismatch at index 0. expected 4, actual 1",
    "GLOBAL_STATE changed: grad_mode ",
    "len(xs) == 2                                             # return sum(xs)  # benchmarks/templates/harvest_torch_logs.py:80 in f_len",
    "flag == True                                             # return x + 1 if flag else x - 1  # benchmarks/templates/harvest_torch_logs.py:84 in f_flag",
    "y == 1                                                   # return x + y  # benchmarks/templates/harvest_torch_logs.py:88 in f_scalar",
    "c.v == 0                                                 # return x + c.v  # benchmarks/templates/harvest_torch_logs.py:96 in f_attr",
    "___check_obj_id(fn, 139645370122560)                   ",  # tlparse multi_rank_runtime logs
]

# how often a team meets each guard category (size mismatches dominate real recompile storms)
CATEGORY_WEIGHT = {"size_mismatch": 10, "object_identity": 5, "constant": 4, "dtype": 2, "requires_grad": 3,
                   "global_state": 3, "length": 2, "stride_mismatch": 2, "type": 2, "dict_keys": 1, "other": 1}


# -- templates from real logs ----------------------------------------------------------------
def _open_log(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _classify(paths, text: list[Path], trace: list[Path]) -> None:
    for p in paths:
        if not p.is_file() or p.stat().st_size > 50_000_000 or not p.name.endswith((".log", ".txt", ".gz")):
            continue
        name = p.name.lower()
        if "trace" in p.parts or "torch_trace" in name:
            trace.append(p)
        elif name.startswith("torch_logs") or "text" in p.parts:
            text.append(p)


def _log_files(unpack_dir: Path) -> tuple[list[Path], list[Path]]:
    """(TORCH_LOGS files, TORCH_TRACE files) of every real log we have; collector bundles
    (sample_logs/**/*.tar.gz) are unpacked into unpack_dir first."""
    from compilewatch.ingest.bundle import extract_archive, is_archive

    text, trace = sorted(TEMPLATE_DIR.glob("*.txt")), []
    for base in (ROOT / "sample_logs", ROOT / "tests" / "fixtures"):
        if not base.is_dir():
            continue
        files = sorted(base.rglob("*"))
        _classify([p for p in files if not is_archive(p)], text, trace)
        for i, archive in enumerate(p for p in files if p.is_file() and is_archive(p)):
            try:
                root = extract_archive(archive, unpack_dir / f"{i}")
            except Exception as e:  # one bad archive must not stop the benchmark
                print(f"  cannot unpack {archive.name}: {e}", file=sys.stderr)
                continue
            _classify(sorted(root.rglob("*")), text, trace)
    if PUBLIC_LOGS.is_dir():
        trace += sorted(PUBLIC_LOGS.glob("*.log"))
    return text, trace


def parsed_templates() -> tuple[list[dict], list[str], list[str], bool]:
    """(graph-break rows, guard-failure raw texts, files they came from, whether the TORCH_LOGS
    text parser took part), parsed from real logs with compilewatch's own parsers."""
    parsers = []
    try:
        from compilewatch.ingest.text import parse_text
        parsers.append(("text", parse_text))
    except ImportError:
        pass
    try:
        from compilewatch.ingest.trace import parse_trace
        parsers.append(("trace", parse_trace))
    except ImportError:
        pass
    if not parsers:
        return [], [], [], False
    from compilewatch.ingest.records import CollectingSink

    unpack = tempfile.TemporaryDirectory(prefix="cw-templates-")
    text_files, trace_files = _log_files(Path(unpack.name))
    gbs, guards, used = [], [], []
    for kind, parse in parsers:
        for path in (text_files if kind == "text" else trace_files):
            sink = CollectingSink()
            try:
                with _open_log(path) as fh:
                    parse(fh, sink)
            except Exception as e:  # a parser bug on one file must not stop the benchmark
                print(f"  template parse of {path.name} failed: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            got = sink.rows.get("graph_breaks", []) + sink.rows.get("guard_failures", [])
            if got:
                used.append(f"{kind}:{path.parent.name}/{path.name}" if "cw-templates-" in str(path) else f"{kind}:{path.name}")
            gbs += sink.rows.get("graph_breaks", [])
            guards += [g["raw"] for g in sink.rows.get("guard_failures", []) if g.get("raw")]
    unpack.cleanup()
    return gbs, guards, used, any(kind == "text" for kind, _ in parsers)


def load_templates() -> tuple[pd.DataFrame, pd.DataFrame, str]:
    from compilewatch.ingest.normalize import classify_guard_failure, normalize_reason, strip_entry_prefix

    gb_rows, guard_raws, used, text_parsed = parsed_templates()
    gbs: dict[tuple, dict] = {}
    for r in gb_rows:
        reason = r.get("reason") or ""
        if not (r.get("gb_type") or reason.strip()):
            continue  # a location-only record (the "Graph break from `Tensor.item()`" warning)
        # one template per kind of break: the kind is what a team sees recur across its models
        key = (r.get("gb_type"), None if r.get("gb_type") else normalize_reason(reason))
        if key not in gbs:
            gbs[key] = dict(gb_type=r.get("gb_type"), gb_code=r.get("gb_code"), reason=reason,
                            explanation=r.get("explanation"), hints=r.get("hints"))
    source = "parsed: " + ", ".join(used) if used else ""
    raws = guard_raws
    if not text_parsed:
        # the built-in rows are torch_logs_2.13_eager.txt parsed by hand: they stand in for the
        # text parser until it can read that log itself
        for r in BUILTIN_GRAPH_BREAKS:
            gbs.setdefault((r["gb_type"], None if r["gb_type"] else normalize_reason(r["reason"])),
                           dict(r))
        raws = guard_raws + BUILTIN_GUARD_FAILURES
        source += ("; " if source else "") + "built-in rows for the TORCH_LOGS template (no text parser yet)"
    guards: dict[str, dict] = {}
    for raw in raws:
        _, text = strip_entry_prefix(raw)
        c = classify_guard_failure(text)
        # one template per guard kind; sizes, ids and sources are varied per row in SQL
        if c["category"] not in guards:
            guards[c["category"]] = dict(raw=text.rstrip(), category=c["category"], source_name=c["source_name"])
    gb_df = pd.DataFrame(list(gbs.values()))
    gb_df.insert(0, "tpl", range(len(gb_df)))
    guard_df = pd.DataFrame(list(guards.values()))
    guard_df.insert(0, "tpl", range(len(guard_df)))
    guard_df["weight"] = [CATEGORY_WEIGHT.get(c, 1) for c in guard_df["category"]]
    return gb_df, guard_df, source


# -- the small dimension tables (a few hundred rows, built in Python) ---------------------------
def _h(*parts) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


def _u(*parts) -> float:
    return (_h(*parts) % 1_000_003) / 1_000_003


_TENSOR_NAMES = ["L['x']", "L['input_ids']", "L['hidden_states']", "L['attention_mask']", "L['pixel_values']",
                 "L['batch']['labels']", "L['self']._modules['embed']._parameters['weight']"]
_OBJ_NAMES = ["L['fn']", "L['self']._modules['attn'].forward", "G['_rope_cache']", "L['hook']"]


def _vary_guard(tpl: dict, seed: int, i: int) -> tuple[str, str | None]:
    """Give a guard template a site-specific guarded source, as real models guard their own inputs."""
    raw, cat = tpl["raw"], tpl["category"]
    if raw.startswith("tensor '"):
        name = _TENSOR_NAMES[_h(seed, "tn", i) % len(_TENSOR_NAMES)]
        return re.sub(r"^tensor '.*?' ", f"tensor '{name}' ", raw), name
    if cat == "object_identity" and raw.startswith("___check_obj_id("):
        name = _OBJ_NAMES[_h(seed, "on", i) % len(_OBJ_NAMES)]
        return re.sub(r"^___check_obj_id\((.*?),", f"___check_obj_id({name},", raw), name
    return raw, tpl.get("source_name")


_GUARD_WHERE = re.compile(r"(#\s.*?\s#\s)\S+:\d+ in \S+$")


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in df.to_dict("records")]


def build_sites(gb_df: pd.DataFrame, guard_df: pd.DataFrame, seed: int, days: int):
    """Per model: graph-break sites (template + user code location + life cycle) and recompiling
    functions (guard template + storm propensity)."""
    from compilewatch.ingest.normalize import classify_guard_failure, graph_break_key, normalize_reason

    n_versions = len(TORCH_VERSIONS) + 1
    sites, funcs = [], []
    gb_recs, g_recs = _records(gb_df), _records(guard_df)
    g_weights = [r["weight"] for r in g_recs]
    for m_idx, (model, _w, _ms, _sp, _cs, module, fns) in enumerate(MODELS):
        user_file = f"/workspace/{module}"
        n_sites = 26 + _h(seed, model, "ns") % 26
        for s in range(n_sites):
            t = gb_recs[_h(seed, model, s, "tpl") % len(gb_recs)]
            line = 40 + _h(seed, model, s, "line") % 900
            fn = fns[_h(seed, model, s, "fn") % len(fns)]
            # life cycle: most breaks are there all year; some appear mid-year (new code), some are
            # fixed by a PyTorch release, some by the team's own change
            intro = 0 if _u(seed, model, s, "intro") < 0.7 else int(_u(seed, model, s, "iday") * days)
            fix_ver = 1 + _h(seed, model, s, "fv") % (n_versions - 1) if _u(seed, model, s, "fix") < 0.25 else n_versions
            fix_day = int(days * (0.3 + 0.7 * _u(seed, model, s, "fd"))) if _u(seed, model, s, "tfix") < 0.15 else days + 1
            # the parsers' user_stack shape: one "file:line in function" per frame, outermost first
            stack = f"/workspace/train.py:212 in train_step\n/workspace/train.py:148 in main\n{user_file}:{line} in {fn}"
            sites.append(dict(
                model=model, site=s, frame_id=s, gb_type=t["gb_type"], gb_code=t["gb_code"], reason=t["reason"],
                reason_norm=normalize_reason(t["reason"]), explanation=t["explanation"], hints=t["hints"],
                user_file=user_file, user_line=line, user_function=fn, user_stack=stack,
                break_key=graph_break_key(t["gb_type"], t["reason"], user_file, line),
                intro_day=intro, fix_ver=fix_ver, fix_day=fix_day,
                hit_pct=40 + _h(seed, model, s, "hit") % 61, max_occ=1 + _h(seed, model, s, "occ") % 5,
                nested=_u(seed, model, s, "nest") < 0.03))
        n_funcs = 13 + _h(seed, model, "nf") % 10
        for f in range(n_funcs):
            # weighted pick of a guard kind
            x, acc, tpl = _u(seed, model, f, "gk") * sum(g_weights), 0.0, g_recs[-1]
            for rec, w in zip(g_recs, g_weights):
                acc += w
                if x < acc:
                    tpl = rec
                    break
            raw, src = _vary_guard(tpl, seed, m_idx * 100 + f)
            base = fns[f % len(fns)]
            fname = base if f < len(fns) else f"torch_dynamo_resume_in_{base.split('.')[-1]}_at_{100 + _h(seed, model, f) % 800}"
            line = 20 + _h(seed, model, f, "l") % 900
            # 2.1+ ends a guard's code part with "# <user code>  # <file>:<line> in <fn>": point it at this model
            raw = _GUARD_WHERE.sub(lambda m: f"{m.group(1)}{module}:{line + 1} in {fname.split('.')[-1]}", raw)
            c = classify_guard_failure(raw)
            funcs.append(dict(
                model=model, func=f, frame_id=100 + f, function=fname, file=user_file,
                line=line, raw=raw, category=c["category"], guard_key=c["guard_key"],
                source_name=c["source_name"] or src, numeric=bool(re.search(r"expected \d+, actual \d+", raw)),
                objid=bool(re.search(r"\d{9,}", raw)),
                storm_pct=[0, 0, 0, 2, 4, 8, 15, 25][_h(seed, model, f, "st") % 8],
                max_n=1 + _h(seed, model, f, "mx") % 5))
    return pd.DataFrame(sites), pd.DataFrame(funcs)


def dims(seed: int, end: datetime, days: int):
    models = pd.DataFrame([dict(m_idx=i, model=m[0], weight=m[1], eager_ms=m[2], base_speedup=m[3],
                                compile_s=m[4], module=m[5]) for i, m in enumerate(MODELS)])
    models["cum_hi"] = models["weight"].cumsum()
    models["cum_lo"] = models["cum_hi"] - models["weight"]
    models["cum_hi"] /= models["weight"].sum()
    models["cum_lo"] /= models["weight"].sum()
    # a regression per model: one torch version where the model runs slower, fixed in the next
    models["regress_ver"] = [(_h(seed, m[0], "reg") % 12) for m in MODELS]  # >= 9: none
    hosts = pd.DataFrame([dict(h_idx=i, host=h, gpu_name=g) for i, (h, g) in enumerate(GPU_HOSTS)])
    versions = pd.DataFrame([dict(v_idx=i, version=v) for i, v in enumerate(TORCH_VERSIONS)])
    return models, hosts, versions


# -- the SQL that grows a year out of the templates ---------------------------------------------
SQL_MACROS = """
CREATE OR REPLACE TEMP MACRO u(a, b) AS (hash(a, b, {seed}) % 1000003) / 1000003.0;
CREATE OR REPLACE TEMP MACRO ui(a, b, n) AS (hash(a, b, {seed}) % n)::INTEGER;
"""

SQL_RUNS = """
CREATE TEMP TABLE g_runs AS
WITH base AS (
    SELECT i AS run_no,
           -- slightly more runs late in the year (the team grows) and on weekdays
           least({days} - 1, floor(sqrt(u(i, 'day')) * {days}))::INTEGER AS day,
           u(i, 'model') AS um, u(i, 'ver') AS uv, u(i, 'rank') AS ur, u(i, 'label') AS ul
    FROM range({runs}) t(i)
), dated AS (
    SELECT b.*, TIMESTAMP '{start}' + to_days(day) + to_seconds(ui(run_no, 'sec', 86400)) AS started_at,
           least(8, floor(day * 9.0 / {days}))::INTEGER AS stable_ver
    FROM base b
)
SELECT d.run_no, d.day, d.started_at,
       m.model, m.m_idx, m.eager_ms, m.base_speedup, m.compile_s, m.regress_ver,
       CASE WHEN d.day > {days} - 60 AND d.uv < 0.2 THEN 9
            WHEN d.uv > 0.75 AND d.stable_ver > 0 THEN d.stable_ver - 1
            ELSE d.stable_ver END AS v_idx,
       CASE WHEN d.ur < 0.5 THEN 1 WHEN d.ur < 0.65 THEN 2 WHEN d.ur < 0.8 THEN 4 ELSE 8 END AS ranks,
       CASE WHEN d.ul < 0.45 THEN 'nightly' WHEN d.ul < 0.65 THEN 'main'
            WHEN d.ul < 0.9 THEN 'pr-' || (1800 + ui(d.run_no, 'pr', 400))::VARCHAR
            ELSE 'release-' || strftime(d.started_at, '%Y.%m') END AS label,
       ui(d.run_no, 'host', {n_hosts}) AS h_idx
FROM dated d JOIN g_models m ON d.um >= m.cum_lo AND d.um < m.cum_hi;

CREATE TEMP TABLE g_all_runs AS
-- files are numbered in the order the runs happened, as a store that ingests each run after it ends
SELECT r.*, h.host, h.gpu_name, row_number() OVER (ORDER BY r.started_at, r.run_no) AS file_id, epoch(r.started_at) AS t0,
       strftime(r.started_at, '%Y%m%dT%H%M%SZ') || '-' || r.model || '-' || substr(md5(r.run_no::VARCHAR || '{seed}'), 1, 6) AS run_id,
       CASE WHEN r.v_idx = 9 THEN '{nightly}' || strftime(TIMESTAMP '{start}' + to_days(r.day - r.day % 7), '%Y%m%d')
            ELSE v.version END AS torch_version
FROM g_runs r JOIN g_hosts h USING (h_idx) LEFT JOIN g_versions v USING (v_idx);

INSERT INTO runs (run_id, model, label, command, started_at, ended_at, exit_status, end_reason, host, git_commit,
                  torch_version, triton_version, cuda_version, python_version, gpu_name, source, manifest_json, ingested_at)
SELECT run_id, model, label, command, started_at, ended_at, exit_status, end_reason, host, git_commit,
       torch_version, triton_version, '12.8', '3.11.' || (9 + v_idx % 3)::VARCHAR, gpu_name, 'bundle',
       json_object('run_id', run_id, 'format_version', 1, 'model', model, 'label', label, 'ranks', ranks,
                   'collector', 'compilewatch collect 0.1.0', 'host', host, 'torch_version', torch_version,
                   'device', 'cuda:0', 'world_size', ranks)::VARCHAR,
       ended_at + INTERVAL 3 MINUTE
FROM (
    SELECT r.*,
           CASE WHEN r.label LIKE 'pr-%' THEN r.label ELSE (r.day // 3)::VARCHAR END AS commit_key,
           '3.' || (1 + r.v_idx // 3)::VARCHAR || '.' || (r.v_idx % 3)::VARCHAR AS triton_version,
           -- the team's own code: a commit every ~3 days on main, PR heads in between
           substr(md5('commit' || commit_key) || md5(commit_key), 1, 40) AS git_commit,
           'torchrun --nproc-per-node ' || r.ranks::VARCHAR || ' train.py --model ' || r.model || ' --compile' AS command,
           r.started_at + to_seconds(300 + ui(r.run_no, 'dur', 3300)) AS ended_at,
           CASE WHEN u(r.run_no, 'crash') < 0.03 THEN 1 ELSE 0 END AS exit_status,
           CASE WHEN u(r.run_no, 'crash') < 0.03 THEN 'crashed' ELSE 'exited' END AS end_reason
    FROM g_all_runs r
) x;
"""

SQL_FILES = """
INSERT INTO files (file_id, run_id, sha256, size_bytes, kind, original_name, stored_path, status, parser_version, records, errors, ingested_at)
SELECT file_id, run_id, md5(run_id || 'a') || md5(run_id || 'b'), 200000 + ui(run_no, 'size', 60000000), 'torch_trace',
       'dedicated_log_torch_trace_rank_0_' || substr(md5(run_id), 1, 8) || '.log', NULL,
       CASE WHEN u(run_no, 'err') < 0.03 THEN 'partial' ELSE 'ok' END, 1, 0,
       CASE WHEN u(run_no, 'err') < 0.03 THEN 1 + ui(run_no, 'nerr', 4) ELSE 0 END,
       to_timestamp(t0 + 3600)::TIMESTAMP
FROM g_all_runs;
-- later ingests must not collide with the generated file ids
SELECT max(nextval('file_id_seq')) FROM range((SELECT max(file_id) FROM files));

INSERT INTO ingest_errors (run_id, file_id, original_name, line_no, kind, message, excerpt)
SELECT f.run_id, f.file_id, f.original_name, 1000 + ui(f.file_id, e.i, 90000),
       ['json', 'payload', 'glog', 'truncated'][1 + ui(f.file_id, e.i + 7, 4)],
       ['envelope JSON does not decode: EOF while parsing an object', 'payload has fewer lines than announced',
        'line has no glog prefix', 'file ends inside a payload'][1 + ui(f.file_id, e.i + 7, 4)],
       'V1122 01:48:27.345000 6657 torch/_dynamo/guards.py:5394] {{"dynamo_start": {{"stack": [{{"line": 2'
FROM files f JOIN range(4) e(i) ON e.i < f.errors;
"""

SQL_GRAPH_BREAKS = """
CREATE TEMP TABLE g_gb_hits AS
SELECT r.run_no, r.run_id, r.file_id, r.ranks, r.t0, s.*, 1 + ui(r.run_no, s.site, s.max_occ) AS occ
FROM g_run_ids r JOIN g_sites s
  ON s.model = r.model AND r.day >= s.intro_day AND r.v_idx < s.fix_ver AND r.day < s.fix_day
 AND ui(r.run_no, s.site + 1000, 100) < s.hit_pct;

INSERT INTO graph_breaks (run_id, file_id, line_no, compile_id, rank, source, gb_type, gb_code, reason, reason_norm,
                          explanation, hints, user_file, user_line, user_function, user_stack, nested, break_key)
SELECT h.run_id, h.file_id, 1000 + h.site * 400 + o.i * 40 + k.rank, h.frame_id::VARCHAR || '/' || o.i::VARCHAR, k.rank,
       'trace_artifact', h.gb_type, h.gb_code, h.reason, h.reason_norm, h.explanation, h.hints,
       h.user_file, h.user_line, h.user_function, h.user_stack, h.nested, h.break_key
FROM g_gb_hits h JOIN range(8) k(rank) ON k.rank < h.ranks JOIN range(5) o(i) ON o.i < h.occ;
"""

SQL_RECOMPILES = """
CREATE TEMP TABLE g_rc_fn AS
SELECT r.run_no, r.run_id, r.file_id, r.ranks, r.t0, r.v_idx, r.compile_s, f.*,
       CASE WHEN ui(r.run_no, f.func + 2000, 100) < f.storm_pct THEN 8
            ELSE ui(r.run_no, f.func + 3000, f.max_n + 1) END AS n
FROM g_run_ids r JOIN g_funcs f ON f.model = r.model;

-- one row per recompile: the k-th recompile of the function on that rank
CREATE TEMP TABLE g_rc AS
SELECT f.*, k.rank, c.k,
       row_number() OVER (PARTITION BY f.run_no ORDER BY c.k, f.func, k.rank)::INTEGER AS recompile_no,
       f.t0 + 30 + f.func * 7 + c.k * (20 + ui(f.run_no, f.func, 200)) + k.rank * 0.01 AS ts
FROM g_rc_fn f JOIN range(8) k(rank) ON k.rank < f.ranks JOIN range(1, 9) c(k) ON c.k <= f.n;

-- the guard failures of the k-th recompile: one per earlier cache entry, newest first; sizes and
-- ids take values that change with k, the way a growing batch or a new object does
CREATE TEMP TABLE g_gf AS
SELECT rc.run_id, rc.file_id, rc.recompile_no, rc.frame_id, rc.k, rc.rank, rc.function, rc.category,
       rc.guard_key, rc.source_name, rc.ts, e.j, rc.frame_id::VARCHAR || '/' || (rc.k - 1 - e.j)::VARCHAR AS failed_entry,
       failed_entry || ': ' || CASE WHEN rc.numeric THEN regexp_replace(rc.raw, 'expected \\d+, actual \\d+',
                                 'expected ' || (2 + rc.k - 1 - e.j)::VARCHAR || ', actual ' || (2 + rc.k)::VARCHAR)
            WHEN rc.objid THEN regexp_replace(rc.raw, '\\d{{9,}}', (139645370122560 + hash(rc.run_id, rc.k - 1 - e.j) % 100000000 * 16)::VARCHAR)
            ELSE rc.raw END AS raw,  -- "0/3: <guard failure>", as PyTorch prints it
       CASE WHEN rc.numeric THEN 2 + rc.k - 1 - e.j END AS expected_n,
       CASE WHEN rc.numeric THEN 2 + rc.k END AS actual_n
FROM g_rc rc JOIN range(8) e(j) ON e.j < rc.k;

CREATE TEMP TABLE g_rc_first AS
SELECT rc.*, gf.raw AS reason
FROM g_rc rc JOIN g_gf gf ON gf.run_id = rc.run_id AND gf.recompile_no = rc.recompile_no AND gf.j = 0;

INSERT INTO recompiles (run_id, file_id, line_no, recompile_no, compile_id, rank, function, file, line, ts, reason, source)
SELECT run_id, file_id, 50000 + recompile_no * 30, recompile_no, frame_id::VARCHAR || '/' || k::VARCHAR,
       rank, function, file, line, ts, reason, 'trace'
FROM g_rc_first;

INSERT INTO guard_failures (run_id, file_id, line_no, recompile_no, compile_id, rank, function, failed_entry, raw,
                            category, guard_key, source_name, dimension, expected, actual)
SELECT run_id, file_id, 50000 + recompile_no * 30 + 1 + j, recompile_no, frame_id::VARCHAR || '/' || k::VARCHAR, rank,
       function, failed_entry, raw, category, guard_key, source_name,
       CASE WHEN category IN ('size_mismatch', 'stride_mismatch') THEN 0 END,
       coalesce(expected_n::VARCHAR, CASE category WHEN 'dtype' THEN 'Float' WHEN 'requires_grad' THEN '0' END),
       coalesce(actual_n::VARCHAR, CASE category WHEN 'dtype' THEN 'Double' WHEN 'requires_grad' THEN '1' END)
FROM g_gf;

-- a function that recompiled up to the limit: dynamo says so once and runs it eagerly from then on
INSERT INTO limit_hits (run_id, file_id, line_no, compile_id, rank, limit_name, limit_value, function, file, line, reason)
SELECT run_id, file_id, 50000 + recompile_no * 30 + 20, frame_id::VARCHAR || '/8', rank,
       CASE WHEN v_idx = 0 THEN 'cache_size_limit' ELSE 'recompile_limit' END, 8, function, file, line,
       reason
FROM g_rc_first
WHERE k = 8;
"""

SQL_COMPILES = """
-- every function's first compile, then one compile per recompile; graph-break sites add a frame each
INSERT INTO compiles (run_id, file_id, line_no, compile_id, frame_id, frame_compile_id, attempt, rank, co_name, co_filename,
                      co_firstlineno, start_time, entire_frame_compile_time_s, backend_compile_time_s, inductor_compile_time_s,
                      code_gen_time_s, guard_count, shape_env_guard_count, graph_op_count, graph_node_count, graph_input_count,
                      cache_size, accumulated_cache_size, restart_reasons, recompile_reason, is_recompile)
SELECT run_id, file_id, 40000 + frame_id * 50 + k, frame_id::VARCHAR || '/' || k::VARCHAR, frame_id, k, 0, rank,
       split_part(function, '.', -1), file, line, t0 + 20 + k * 20,
       ct * 1.25, ct, ct * 0.8, ct * 0.3, 20 + ui(run_no, frame_id, 400), CASE WHEN k > 0 THEN ui(run_no, frame_id + 1, 6) ELSE 0 END,
       40 + ui(run_no, frame_id + 2, 900), 60 + ui(run_no, frame_id + 2, 900) + 30, 3 + ui(run_no, frame_id + 3, 40),
       k, k, '[]', reason, k > 0
FROM (
    SELECT f.run_no, f.run_id, f.file_id, f.t0, f.frame_id, f.function, f.file, f.line, k.rank, 0 AS k, NULL::VARCHAR AS reason,
           f.compile_s / 20.0 * (1.0 - f.v_idx * 0.03) * (0.5 + u(f.run_no, f.func * 10)) AS ct
    FROM g_rc_fn f JOIN range(8) k(rank) ON k.rank < f.ranks
    UNION ALL
    SELECT run_no, run_id, file_id, t0, frame_id, function, file, line, rank, k, reason,
           compile_s / 20.0 * (1.0 - v_idx * 0.03) * (0.5 + u(run_no, func * 10 + k)) AS ct
    FROM g_rc_first
) x
UNION ALL
-- (one statement, so that a file's compiles lie together: ordered by file id, as ingest appends them)
SELECT h.run_id, h.file_id, 1000 + h.site * 400 + k.rank, h.frame_id::VARCHAR || '/0_1', h.frame_id, 0, 1, k.rank,
       split_part(h.user_function, '.', -1), h.user_file, h.user_line - 5, h.t0 + 15 + h.site,
       ct * 1.25, ct, ct * 0.8, ct * 0.3, 10 + ui(h.run_no, h.site, 200), NULL, 10 + ui(h.run_no, h.site + 1, 300),
       25 + ui(h.run_no, h.site + 1, 300), 2 + ui(h.run_no, h.site + 2, 20), 0, 0,
       to_json([coalesce(h.gb_type, h.reason)])::VARCHAR, NULL, FALSE
FROM (SELECT *, 0.4 + u(run_no, site) * 2.0 AS ct FROM g_gb_hits) h JOIN range(8) k(rank) ON k.rank < h.ranks;

-- compile phases and cache lookups of rank 0's first compiles (what the run-detail timeline draws)
INSERT INTO compile_phases (run_id, file_id, line_no, compile_id, rank, name, start_us, duration_us)
SELECT c.run_id, c.file_id, c.line_no, c.compile_id, 0, p.name,
       (c.start_time * 1e6)::BIGINT + (p.off * c.entire_frame_compile_time_s * 1e6)::BIGINT,
       (p.frac * c.entire_frame_compile_time_s * 1e6)::BIGINT
FROM compiles c, (VALUES ('entire_frame_compile', 0.0, 1.0), ('backend_compile', 0.2, 0.8),
                         ('inductor_compile', 0.25, 0.64), ('code_gen', 0.55, 0.24)) p(name, off, frac)
WHERE c.rank = 0 AND c.frame_compile_id = 0 AND c.attempt = 0 AND c.file_id BETWEEN {file_lo} AND {file_hi};

INSERT INTO cache_events (run_id, file_id, line_no, compile_id, rank, cache, outcome, reason)
SELECT run_id, file_id, line_no + 2, compile_id, 0, cache,
       CASE WHEN u(hash(run_id), frame_id + length(cache)) < 0.55 THEN 'hit' ELSE 'miss' END, NULL
FROM compiles, (VALUES ('fx_graph'), ('aotautograd')) t(cache)
WHERE rank = 0 AND frame_compile_id = 0 AND attempt = 0 AND file_id BETWEEN {file_lo} AND {file_hi};
"""

SQL_BENCH = """
CREATE TEMP TABLE g_bench AS
WITH counts AS (
    SELECT r.run_no, coalesce(g.n, 0) AS gb, coalesce(c.n, 0) AS rc
    FROM g_run_ids r
    LEFT JOIN (SELECT run_id, count(*) AS n FROM graph_breaks
               WHERE rank = 0 AND file_id BETWEEN {file_lo} AND {file_hi} GROUP BY run_id) g USING (run_id)
    LEFT JOIN (SELECT run_id, count(*) AS n FROM recompiles
               WHERE rank = 0 AND file_id BETWEEN {file_lo} AND {file_hi} GROUP BY run_id) c USING (run_id)
)
SELECT r.*, c.gb, c.rc,
       -- newer PyTorch is faster; each graph break and recompile costs a little; one version
       -- regresses each model by ~12% until the next release fixes it
       greatest(0.6, r.base_speedup * (1 + 0.035 * r.v_idx) * (1 - least(0.3, c.gb * 0.004 + c.rc * 0.002))
            * CASE WHEN r.v_idx = r.regress_ver THEN 0.88 ELSE 1.0 END * (0.96 + 0.08 * u(r.run_no, 'noise'))) AS speedup,
       r.compile_s * (1 - 0.03 * r.v_idx) * (1 + c.rc * 0.01) * (0.9 + 0.2 * u(r.run_no, 'cnoise')) AS compile_latency_s,
       r.eager_ms * (0.97 + 0.06 * u(r.run_no, 'enoise')) AS eager_ms_run,
       ['default', 'default', 'reduce-overhead', 'max-autotune'][1 + ui(r.run_no, 'mode', 4)] AS mode
FROM g_run_ids r JOIN counts c USING (run_no);

INSERT INTO bench_results (run_id, file_id, model, mode, task, device, batch_size, steps, speedup, abs_latency_ms,
                           eager_latency_ms, compiled_spread_ms, eager_spread_ms, compilation_latency_s, compression_ratio,
                           eager_peak_mem_gb, dynamo_peak_mem_gb, graph_breaks, unique_graphs, recompiles, accuracy)
SELECT b.run_id, b.file_id, b.model, b.mode, CASE WHEN u(b.run_no, 'task') < 0.7 THEN 'train' ELSE 'infer' END, 'cuda',
       [8, 16, 32, 64][1 + ui(b.run_no, 'bs', 4)], 30, b.speedup, b.eager_ms_run / b.speedup, b.eager_ms_run,
       b.eager_ms_run / b.speedup * 0.02, b.eager_ms_run * 0.015, b.compile_latency_s,
       0.95 + 0.35 * u(b.run_no, 'mem'), 8 + b.eager_ms * 0.05, (8 + b.eager_ms * 0.05) / (0.95 + 0.35 * u(b.run_no, 'mem')),
       b.gb, b.gb + 1, b.rc, CASE WHEN u(b.run_no, 'acc') < 0.01 THEN 'fail_accuracy' ELSE 'pass' END
FROM g_bench b
WHERE u(b.run_no, 'has_bench') < 0.85;

-- per step: the compiled callable's first step pays compilation, a few warm-up steps, then steady state
INSERT INTO step_timings (run_id, file_id, callable, mode, step, phase, duration_ms, peak_mem_bytes)
SELECT b.run_id, b.file_id, 'Model.forward', 'compiled', s.i,
       CASE WHEN s.i = 0 THEN 'compile' WHEN s.i < 5 THEN 'warmup' ELSE 'steady' END,
       CASE WHEN s.i = 0 THEN b.compile_latency_s * 1000
            WHEN s.i < 5 THEN b.eager_ms_run / b.speedup * (1.5 + 1.0 / s.i)
            ELSE b.eager_ms_run / b.speedup * (0.98 + 0.04 * u(b.run_no, s.i)) END,
       ((8 + b.eager_ms * 0.05) * 0.9 * 1e9)::BIGINT
FROM g_bench b, range(30) s(i)
UNION ALL
SELECT b.run_id, b.file_id, 'Model.forward', 'eager', s.i, CASE WHEN s.i < 3 THEN 'warmup' ELSE 'steady' END,
       b.eager_ms_run * (0.98 + 0.04 * u(b.run_no, s.i + 100)), ((8 + b.eager_ms * 0.05) * 1e9)::BIGINT
FROM g_bench b, range(20) s(i)
UNION ALL
-- the iteration period (between optimizer steps): forward + backward + optimizer + host work
SELECT b.run_id, b.file_id, 'AdamW.step', 'iteration', s.i,
       CASE WHEN s.i < 4 THEN 'warmup' ELSE 'steady' END,
       b.eager_ms_run / b.speedup * (2.9 + 0.2 * u(b.run_no, s.i + 200)), NULL
FROM g_bench b, range(1, 30) s(i);

INSERT INTO timing_summaries (run_id, file_id, rank, world_size, device, compile_time_s, peak_mem_bytes,
                              iteration_source, iteration_clock)
SELECT b.run_id, b.file_id, 0, 1, 'cuda:0', b.compile_latency_s, ((8 + b.eager_ms * 0.05) * 0.9 * 1e9)::BIGINT,
       'optimizer_step', 'cuda_event'
FROM g_bench b;

UPDATE files SET records = c.n FROM (
    SELECT run_id, count(*) AS n FROM graph_breaks WHERE file_id BETWEEN {file_lo} AND {file_hi} GROUP BY run_id
) c WHERE files.run_id = c.run_id;
"""


def build(db: Path, runs: int, days: int, end: datetime, seed: int, threads: int, quiet: bool = False,
          slice_files: int | None = None) -> dict:
    """Create the store at db (which must not exist) and fill it; returns row counts per table."""
    t_start = time.perf_counter()
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    gb_df, guard_df, source = load_templates()
    say(f"templates: {len(gb_df)} graph-break kinds, {len(guard_df)} guard kinds ({source})")
    sites, funcs = build_sites(gb_df, guard_df, seed, days)
    models, hosts, versions = dims(seed, end, days)
    start = (end - timedelta(days=days)).replace(hour=0, minute=0, second=0, microsecond=0)

    store = open_store(db)
    fmt = dict(seed=seed, runs=runs, days=days, start=start.strftime("%Y-%m-%d %H:%M:%S"),
               n_hosts=len(hosts), nightly=NIGHTLY)
    with store.write() as con:
        con.execute(f"SET threads = {threads}")
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET memory_limit = '2GB'")  # the machine is shared
        for name, frame in (("g_models", models), ("g_hosts", hosts), ("g_versions", versions),
                            ("g_sites", sites), ("g_funcs", funcs)):
            con.register(name + "_df", frame)
            con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM {name}_df")
            con.unregister(name + "_df")
        con.execute(SQL_MACROS.format(**fmt))
        for label, sql in (("runs", SQL_RUNS), ("files", SQL_FILES)):
            t = time.perf_counter()
            con.execute("BEGIN")
            for stmt in _statements(sql.format(**fmt)):
                con.execute(stmt if label == "runs" else in_file_order(stmt))
            con.execute("COMMIT")
            say(f"  {label:<14} {time.perf_counter() - t:6.1f} s")
        build_events_in_slices(con, fmt, say, slice_files or SLICE_FILES)
        # hardware and run_metrics, as ingest derives them (one set-based pass over all runs)
        t = time.perf_counter()
        refresh_all(con)
        say(f"  {'derived':<14} {time.perf_counter() - t:6.1f} s")
        con.execute("CHECKPOINT")
        t = time.perf_counter()
        bad = integrity_problems(con)
        say(f"  integrity      {time.perf_counter() - t:6.1f} s: " + ("ok" if not bad else "; ".join(bad)))
        if bad:
            raise SystemExit("generated store is inconsistent: " + "; ".join(bad))
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("runs", "files", "compiles", "graph_breaks", "recompiles", "guard_failures", "limit_hits",
                            "compile_phases", "cache_events", "step_timings", "bench_results", "ingest_errors",
                            "timing_summaries", "run_metrics")}
    counts["_seconds"] = round(time.perf_counter() - t_start, 1)
    return counts


# Runs' events are generated a slice of files at a time, in file order. One pass over all runs held
# every phase's temp tables at once: the recompiles' guard failures alone are ~29 M rows at 100,000
# runs, and that phase spilled 20.3 GB of temp blocks (a 300,000-run build would not fit the disk);
# a slice's rows fit in memory. Files are numbered in the order runs happened, and each insert is
# ordered by file id, so the tables come out in file order, as ingest appends them, with no
# rewrite afterwards (the whole-table rewrite, lay_out_in_file_order, took 456 s at 100,000 runs).
SLICE_FILES = 5000
EVENT_PHASES = (("graph_breaks", SQL_GRAPH_BREAKS), ("recompiles", SQL_RECOMPILES),
                ("compiles", SQL_COMPILES), ("bench", SQL_BENCH))
# the temp tables every slice reads; the rest are a slice's own and dropped with it
SHARED_TEMP = {"g_models", "g_hosts", "g_versions", "g_sites", "g_funcs", "g_all_runs"}


def build_events_in_slices(con, fmt: dict, say, slice_files: int) -> None:
    """Generate every run's events, a slice of `slice_files` files per transaction."""
    took = dict.fromkeys((label for label, _ in EVENT_PHASES), 0.0)
    hi_file = con.execute("SELECT coalesce(max(file_id), 0) FROM g_all_runs").fetchone()[0]
    con.execute("SET preserve_insertion_order = true")  # what makes ORDER BY file_id the stored order
    for lo in range(1, hi_file + 1, slice_files):
        span = dict(fmt, file_lo=lo, file_hi=lo + slice_files - 1)
        con.execute("BEGIN")
        con.execute("CREATE TEMP TABLE g_run_ids AS SELECT * FROM g_all_runs "
                    f"WHERE file_id BETWEEN {span['file_lo']} AND {span['file_hi']}")
        for i, (label, sql) in enumerate(EVENT_PHASES):
            t = time.perf_counter()
            for stmt in _statements(sql.format(**span)):
                con.execute(in_file_order(stmt))
            drop_finished_temp_tables(con, "".join(later for _, later in EVENT_PHASES[i + 1:]))
            took[label] += time.perf_counter() - t
        con.execute("COMMIT")
        drop_finished_temp_tables(con, "")
    con.execute("SET preserve_insertion_order = false")
    for label, seconds in took.items():
        say(f"  {label:<14} {seconds:6.1f} s")


def in_file_order(stmt: str) -> str:
    """An INSERT of event rows, ordered by file id (every table written here has one)."""
    code = "\n".join(ln for ln in stmt.splitlines() if not ln.lstrip().startswith("--"))
    return stmt + "\nORDER BY file_id" if code.lstrip().startswith("INSERT INTO") else stmt


def drop_finished_temp_tables(con, later_sql: str) -> None:
    """Drop the temp tables of this slice that no later phase names. They live in memory and what
    does not fit spills to the temp folder; kept to the end, their spilled blocks were still held
    when the rollups' rebuild capped the temp folder at 8 GiB (store/derived.py: REBUILD_SETTINGS),
    which DuckDB then refused."""
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall():
        if name not in SHARED_TEMP and not re.search(rf"\b{re.escape(name)}\b", later_sql):
            con.execute(f"DROP TABLE {name}")


FILES_PER_SORT = 2000


def lay_out_in_file_order(con, only: tuple[str, ...] = (), files_per_sort: int | None = FILES_PER_SORT,
                          one_transaction: bool = False) -> None:
    """Rewrite each event table (or those in `only`) in file order. Ingest appends a file's rows
    together, so a real store's rows lie in file order and a run's rows in a few row groups, which
    one-run reads skip to (store/run_rows.py); the set-based inserts above write them in no order.
    `files_per_sort` None sorts each table whole, and `one_transaction` rewrites each table in one
    transaction, as this did before (bench_rebuild_spill.py measures each way)."""
    tables = [t for (t,) in con.execute("""
        SELECT table_name FROM duckdb_columns() WHERE column_name = 'file_id' AND table_name <> 'files'
          AND NOT internal AND schema_name = 'main'
        GROUP BY 1 HAVING bool_or(column_name = 'file_id') ORDER BY 1""").fetchall() if not only or t in only]
    con.execute("SET preserve_insertion_order = true")
    lo, hi = con.execute("SELECT min(file_id), max(file_id) FROM files").fetchall()[0]
    step = files_per_sort or (hi or 0) - (lo or 0) + 1

    def commit():
        if not one_transaction:
            con.execute("COMMIT")
            con.execute("BEGIN")
    for table in tables:
        con.execute("BEGIN")
        con.execute(f"CREATE TABLE _in_file_order AS SELECT * FROM {table}")
        commit()
        con.execute(f"DELETE FROM {table}")
        commit()
        # A range of files per sort: one sort of a whole table spilled it to the temp folder (3.35
        # GB at the peak over the event tables at 10,000 runs). And a transaction per range: rows a
        # transaction writes wait in its local storage until its commit, and past memory_limit they
        # spill: with one transaction a table (and the build's temp tables, then kept to the end), 32.5
        # GiB of temp blocks were held after this step at 100,000 runs with 2 GB of memory, their
        # shares not measured apart; committed a range at a time, one range waits. A crash
        # midway leaves the table short, which the count below says: this store is rebuilt, not mended.
        for first in range(lo or 0, (hi or 0) + 1, step):
            con.execute(f"INSERT INTO {table} SELECT * FROM _in_file_order "
                        f"WHERE file_id >= {first} AND file_id < {first + step} ORDER BY file_id")
            commit()
        kept, had = (con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in (table, "_in_file_order"))
        if kept != had:   # a row outside every range (a file id of NULL) would be lost
            con.execute("ROLLBACK")
            raise SystemExit(f"{table}: {had - kept} rows outside the files' ids")
        con.execute("DROP TABLE _in_file_order")
        con.execute("COMMIT")
    con.execute("SET preserve_insertion_order = false")


INTEGRITY_CHECKS = {
    "event rows whose run is missing": """
        SELECT count(*) FROM (SELECT run_id FROM graph_breaks UNION ALL SELECT run_id FROM recompiles
                              UNION ALL SELECT run_id FROM compiles UNION ALL SELECT run_id FROM bench_results) e
        ANTI JOIN runs USING (run_id)""",
    "event rows whose file is missing": """
        SELECT count(*) FROM (SELECT file_id FROM graph_breaks UNION ALL SELECT file_id FROM recompiles
                              UNION ALL SELECT file_id FROM step_timings) e ANTI JOIN files USING (file_id)""",
    "guard failures without their recompile": """
        SELECT count(*) FROM guard_failures g ANTI JOIN recompiles r USING (run_id, recompile_no)""",
    "recompiles without a guard failure": """
        SELECT count(*) FROM recompiles r ANTI JOIN guard_failures g USING (run_id, recompile_no)""",
    "recompiles without their compile": """
        SELECT count(*) FROM recompiles r ANTI JOIN compiles c USING (run_id, compile_id, rank)""",
    "duplicate recompile numbers in a run": """
        SELECT count(*) - count(DISTINCT (run_id, recompile_no)) FROM recompiles""",
}


def integrity_problems(con) -> list[str]:
    """What a real ingest guarantees and the pages rely on (links between tables), checked in SQL."""
    return [f"{n:,} {what}" for what, sql in INTEGRITY_CHECKS.items() if (n := con.execute(sql).fetchone()[0])]


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";\n") if s.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in s.strip().splitlines())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, type=Path, help="database file to create (its folder becomes the store)")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--end", help="last day, ISO date (default: today, UTC)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("COMPILEWATCH_BENCH_THREADS", "2")))
    ap.add_argument("--slice-files", type=int, default=SLICE_FILES,
                    help="files whose events are generated per transaction (memory and temp space, not the result)")
    ap.add_argument("--force", action="store_true", help="replace an existing database at --db")
    ap.add_argument("--lake", help="then copy the store into this empty DuckLake store (ducklake:postgres:...)")
    ap.add_argument("--data-path", help="the DuckLake store's data path (with --lake)")
    ap.add_argument("--reuse", action="store_true", help="with --lake: copy an existing --db instead of building it")
    args = ap.parse_args(argv)
    if args.lake and args.reuse and args.db.exists():
        return copy_to_lake(args.db, args.lake, args.data_path)

    if args.db.exists():
        if not args.force:
            print(f"{args.db} exists; pass --force to replace it", file=sys.stderr)
            return 2
        for p in (args.db, args.db.with_name(args.db.name + ".wal"), args.db.with_name(args.db.name + ".version")):
            p.unlink(missing_ok=True)
    end = (datetime.fromisoformat(args.end) if args.end else datetime.now(timezone.utc).replace(tzinfo=None))
    end = end.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    counts = build(args.db, args.runs, args.days, end, args.seed, args.threads, slice_files=args.slice_files)
    seconds = counts.pop("_seconds")
    width = max(map(len, counts))
    for table, n in counts.items():
        print(f"{table:<{width}} {n:>12,}")
    print(f"built {args.db} in {seconds} s ({args.db.stat().st_size / 1e6:.0f} MB)")
    short = [t for t in ("graph_breaks", "recompiles") if counts[t] < 100 * args.runs]
    if short:  # the page benchmark's scale promise: 100 of each per run, 1M at 10,000 runs
        print(f"warning: fewer than 100 rows per run in {', '.join(short)}", file=sys.stderr)
        return 1
    return copy_to_lake(args.db, args.lake, args.data_path) if args.lake else 0


def copy_to_lake(db: Path, lake: str, data_path: str | None) -> int:
    from compilewatch.store import open_store
    from compilewatch.store.copy import copy_store

    t = time.perf_counter()
    result = copy_store(open_store(db), open_store(lake, data_path))
    rows = sum(a for a, _ in result["tables"].values())
    bad = {k: v for k, v in result["tables"].items() if v[0] != v[1]}
    print(f"copied {rows:,} rows into {lake} in {time.perf_counter() - t:.1f} s" + (f"; DIFFER: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
