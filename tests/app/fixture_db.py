"""A small but realistic team database, written through compilewatch.store, for dashboard tests.

Until parsed sample_logs cover every table, this builder is the test data: four weeks of runs of
four models on two torch versions ending at END, with graph breaks, recompiles and guard
failures, limit hits, compile phases, step timings, bench results and ingest errors shaped like
the real parsers' rows (reasons and guards copied from torch 2.5/2.6 logs).

What tests rely on:
- "hf_Bert" regressed in the last week: speedup 1.45x -> 1.20x and more recompiles;
- the `.item()` break (NEW_BREAK) first appears in the last week;
- run "run-storm" has a recompile storm on `forward` (size_mismatch, limit hit);
- run "run-errors" has ingest errors.
"""
from __future__ import annotations

import hashlib
import json
import random
from datetime import date, datetime, timedelta

import pandas as pd

END = date(2026, 11, 20)
MODELS = ["resnet50", "hf_Bert", "llama_7b", "timm_vit"]
VERSIONS = ["2.5.1", "2.6.0"]

BREAKS = [
    dict(gb_type="Data-dependent branching", gb_code="GB0170",
         reason="Data-dependent branching: generic_jump TensorVariable()",
         explanation="Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.",
         hints='["This graph break is fundamental - it is unlikely that Dynamo will ever be able to trace through your code.", "Use `torch.cond` to express dynamic control flow."]',
         user_file="/home/team/models/attention.py", user_line=88, user_function="forward"),
    dict(gb_type="Unsupported builtin call", gb_code="GB0051",
         reason="Failed to trace builtin operator `print` with argument types ['str']",
         explanation="Dynamo does not know how to trace builtin operator `print`.",
         hints='["Avoid calling builtin `print` in compiled code.", "Use torch._dynamo.config.reorderable_logging_functions."]',
         user_file="/home/team/train.py", user_line=131, user_function="training_step"),
    dict(gb_type="Attempted to call function marked as skipped", gb_code="GB0007",
         reason="Attempted to call function marked as skipped: numpy.random.rand",
         explanation="Dynamo developers have intentionally marked that the function `rand` in file `numpy/random/__init__.py` should not be traced.",
         hints='["Avoid calling the function `rand`.", "Wrap it in torch.compiler.disable."]',
         user_file="/home/team/data/augment.py", user_line=17, user_function="jitter"),
]
# torch < 2.7 text logs: no gb_type, code, explanation or hints; only the reason and the user frame.
OLD_STYLE_BREAK = dict(gb_type=None, gb_code=None, reason="call_function BuiltinVariable(open) [ConstantVariable()] {}",
                       explanation=None, hints=None, user_file="/home/team/data/loader.py", user_line=12,
                       user_function="read_shard")
NEW_BREAK = dict(gb_type="Unsupported Tensor.item() call with capture_scalar_outputs=False", gb_code="GB0124",
                 reason="Tensor.item() call with capture_scalar_outputs=False",
                 explanation="Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.",
                 hints='["Set `torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1`"]',
                 user_file="/home/team/models/loss.py", user_line=54, user_function="masked_mean")

GUARDS = [
    ("size_mismatch", "tensor 'L['x']' size mismatch at index 0. expected {e}, actual {a}", "tensor L['x'] size mismatch at index N", "L['x']", 0),
    ("requires_grad", "tensor 'L['x']' requires_grad mismatch. expected requires_grad=1", "tensor L['x'] requires_grad mismatch", "L['x']", None),
    ("object_identity", "___check_obj_id(L['self'].norm, 140{e}3928)", "___check_obj_id(L['self'].norm, N)", "L['self'].norm", None),
    ("constant", "L['step'] == {e}", "L['step'] == N", "L['step']", None),
]


def break_key(b: dict) -> str:
    return f"{b['gb_type'] or b['reason']}|{b['user_file']}:{b['user_line']}"


def build_rows(end: date = END, days: int = 28, runs_per_day: int = 2, seed: int = 7) -> dict[str, pd.DataFrame]:
    rng = random.Random(seed)
    rows: dict[str, list[dict]] = {t: [] for t in (
        "runs", "files", "compiles", "graph_breaks", "recompiles", "guard_failures", "limit_hits",
        "compile_phases", "step_timings", "bench_results", "ingest_errors")}
    file_id = 0
    start_day = end - timedelta(days=days - 1)
    plan = []
    for d in range(days):
        day = start_day + timedelta(days=d)
        for i in range(runs_per_day):
            model = MODELS[(d * runs_per_day + i) % len(MODELS)]
            plan.append((day, i, model))
    plan.append((end, 9, "hf_Bert"))   # the storm run
    for n, (day, i, model) in enumerate(plan):
        recent = (end - day).days < 7
        version = VERSIONS[1] if (end - day).days < 14 else VERSIONS[0]
        run_id = "run-storm" if i == 9 else ("run-errors" if n == 5 else f"run-{day:%m%d}-{i}-{model}")
        started = datetime.combine(day, datetime.min.time()) + timedelta(hours=9 + 3 * min(i, 3), minutes=rng.randint(0, 50))
        t0 = started.timestamp()
        label = "main" if i % 2 == 0 else "pr-417"
        commit = hashlib.sha1(f"{day}{label}".encode()).hexdigest()[:7]
        manifest = {"run_id": run_id, "model": model, "label": label, "torch_version": version,
                    "command": ["python", "train.py", "--model", model], "gpu_name": "NVIDIA H100 80GB HBM3"}
        rows["runs"].append(dict(run_id=run_id, model=model, label=label, command="python train.py --model " + model,
                                 started_at=started, ended_at=started + timedelta(minutes=20), exit_status=0,
                                 end_reason="exited", host="gpu-node-3", git_commit=commit, torch_version=version,
                                 triton_version="3.1.0", cuda_version="12.4", python_version="3.11.9",
                                 gpu_name="NVIDIA H100 80GB HBM3", source="bundle", manifest_json=json.dumps(manifest)))
        file_id += 1
        fid = file_id
        rows["files"].append(dict(file_id=fid, run_id=run_id, sha256=f"{fid:064x}", size_bytes=1_000_000 + fid,
                                  kind="torch_trace", original_name="dedicated_log_torch_trace_rank_0.log",
                                  stored_path=f"raw/{fid:064x}"[:6] + f"/{fid:064x}", status="ok",
                                  parser_version=1, records=100, errors=0))
        # compiles + phases
        n_frames = 3
        for frame in range(n_frames):
            cid = f"{frame}/0"
            ct = rng.uniform(2, 9) * (1.3 if version == "2.6.0" and model == "llama_7b" else 1.0)
            rows["compiles"].append(dict(run_id=run_id, file_id=fid, line_no=10 + frame, compile_id=cid, frame_id=frame,
                                         frame_compile_id=0, attempt=0, rank=0, co_name=["forward", "training_step", "jitter"][frame],
                                         co_filename="/home/team/models/attention.py", co_firstlineno=70 + frame,
                                         start_time=t0 + frame * 15, entire_frame_compile_time_s=ct,
                                         backend_compile_time_s=ct * 0.7, inductor_compile_time_s=ct * 0.6,
                                         code_gen_time_s=ct * 0.2, guard_count=40 + frame, shape_env_guard_count=3,
                                         graph_op_count=120, graph_node_count=300, graph_input_count=12, cache_size=0,
                                         accumulated_cache_size=0, is_recompile=False, metrics_json="{}"))
            base_us = int((t0 + frame * 15) * 1e6)
            for name, frac, off in [("entire_frame_compile", 1.0, 0.0), ("backend_compile", 0.7, 0.25),
                                    ("inductor_compile", 0.6, 0.3), ("code_gen", 0.2, 0.65)]:
                rows["compile_phases"].append(dict(run_id=run_id, file_id=fid, line_no=11 + frame, compile_id=cid, rank=0,
                                                   name=name, start_us=base_us + int(off * ct * 1e6),
                                                   duration_us=int(frac * ct * 1e6)))
        # graph breaks
        line = 100
        for b in BREAKS[: 1 + (n % 3)]:
            for k in range(1 + (n % 2)):
                line += 1
                rows["graph_breaks"].append(dict(run_id=run_id, file_id=fid, line_no=line, compile_id=f"{k}/0", rank=0,
                                                 source="trace_artifact", reason_norm=b["reason"], break_key=break_key(b),
                                                 user_stack=f'File "{b["user_file"]}", line {b["user_line"]}, in {b["user_function"]}',
                                                 nested=False, **b))
        if model == "resnet50":
            b = OLD_STYLE_BREAK
            rows["graph_breaks"].append(dict(run_id=run_id, file_id=fid, line_no=line + 2, compile_id="2/0", rank=0,
                                             source="text", reason_norm=b["reason"], break_key=break_key(b),
                                             user_stack=None, nested=False, **b))
        if recent and model in ("hf_Bert", "llama_7b"):
            b = NEW_BREAK
            rows["graph_breaks"].append(dict(run_id=run_id, file_id=fid, line_no=line + 1, compile_id="1/0", rank=0,
                                             source="trace_artifact", reason_norm=b["reason"], break_key=break_key(b),
                                             user_stack=f'File "{b["user_file"]}", line {b["user_line"]}, in masked_mean',
                                             nested=False, **b))
        # recompiles + guard failures
        n_rc = 1 + (n % 3)
        if model == "hf_Bert" and recent:
            n_rc += 3
        if i == 9:
            n_rc = 12
        for r in range(n_rc):
            cat, raw, key, src, dim = GUARDS[0] if i == 9 else GUARDS[(n + r) % len(GUARDS)]
            ts = t0 + 30 + r * (4 if i == 9 else 90)
            fn = "forward" if i == 9 or r % 2 == 0 else "training_step"
            cid = f"0/{r + 1}"
            rows["recompiles"].append(dict(run_id=run_id, file_id=fid, line_no=500 + r * 3, recompile_no=r + 1,
                                           compile_id=cid, rank=0, function=fn, file="/home/team/models/attention.py",
                                           line=72, ts=ts, reason=raw.format(e=32, a=17 + r), source="trace"))
            rows["guard_failures"].append(dict(run_id=run_id, file_id=fid, line_no=501 + r * 3, recompile_no=r + 1,
                                               compile_id=cid, rank=0, function=fn, failed_entry=f"0/{r}",
                                               raw=raw.format(e=32, a=17 + r), category=cat, guard_key=key,
                                               source_name=src, dimension=dim, expected="32", actual=str(17 + r)))
        if i == 9:
            rows["limit_hits"].append(dict(run_id=run_id, file_id=fid, line_no=600, compile_id="0/8", rank=0,
                                           limit_name="recompile_limit", limit_value=8, function="forward",
                                           file="/home/team/models/attention.py", line=72,
                                           reason="tensor 'L['x']' size mismatch at index 0. expected 32, actual 25"))
        # step timings: compiled + eager
        for mode in ("compiled", "eager"):
            for step in range(12):
                phase = "compile" if (mode == "compiled" and step == 0) else ("warmup" if step < 3 else "steady")
                base = 40.0 if mode == "eager" else 40.0 / 1.4
                dur = base * (60 if phase == "compile" else 1.2 if phase == "warmup" else 1.0) * rng.uniform(0.95, 1.05)
                rows["step_timings"].append(dict(run_id=run_id, file_id=fid, callable="Model.forward", mode=mode,
                                                 step=step, phase=phase, duration_ms=dur,
                                                 peak_mem_bytes=int((9 if mode == "eager" else 7.5) * 2**30)))
        # bench results
        speedup = {"resnet50": 1.32, "hf_Bert": 1.45, "llama_7b": 1.18, "timm_vit": 1.27}[model]
        if model == "hf_Bert" and recent:
            speedup = 1.20
        if version == "2.6.0" and model == "timm_vit":
            speedup *= 1.08
        speedup *= rng.uniform(0.99, 1.01)
        rows["bench_results"].append(dict(run_id=run_id, file_id=fid, model=model, mode="default", task="train",
                                          device="cuda", batch_size=32, steps=50, speedup=speedup,
                                          abs_latency_ms=40.0 / speedup, eager_latency_ms=40.0,
                                          compiled_spread_ms=0.4, eager_spread_ms=0.5,
                                          compilation_latency_s=rng.uniform(20, 60), compression_ratio=rng.uniform(1.1, 1.3),
                                          eager_peak_mem_gb=9.0, dynamo_peak_mem_gb=7.5, graph_breaks=len(BREAKS),
                                          unique_graphs=4, recompiles=n_rc, accuracy="pass"))
        if run_id == "run-errors":
            for ln, kind in ((17, "json"), (18, "json"), (402, "payload_md5")):
                rows["ingest_errors"].append(dict(run_id=run_id, file_id=fid, original_name="dedicated_log_torch_trace_rank_0.log",
                                                  line_no=ln, kind=kind, message=f"{kind} error on line {ln}",
                                                  excerpt='V1120 09:01:02.345 123 torch/_dynamo/{"bad'))
    return {t: pd.DataFrame(v) for t, v in rows.items()}


def build(store, **kw) -> dict[str, int]:
    """Insert the fixture rows through store.write(); returns rows per table."""
    frames = build_rows(**kw)
    counts = {}
    with store.write() as con:
        for table, frame in frames.items():
            if frame.empty:
                continue
            con.register("_fixture", frame)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _fixture")
            con.unregister("_fixture")
            counts[table] = len(frame)
        # hardware and run_metrics, derived from the rows as ingest derives them
        from compilewatch.store.derived import refresh_all
        refresh_all(con)
    return counts
