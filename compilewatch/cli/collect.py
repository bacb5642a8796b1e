"""Command line for the collector: `compilewatch collect` and `compilewatch bench`.

The console script `compilewatch` (compilewatch.cli) calls ``add_subcommands(subparsers)``; each
subcommand's handler is ``args.func(args) -> int``.
Nothing here imports torch until a handler that needs it runs.
"""
from __future__ import annotations

import argparse
import sys

from compilewatch.collectors.collect import DEFAULT_LOGS as _LOGS
from compilewatch.collectors.version import __version__
from compilewatch.core.errors import CompileWatchError

DEFAULT_LOGS = ",".join(_LOGS)   # the same components, as the --logs flag spells them


def _fail(e: CompileWatchError) -> int:
    print(f"compilewatch: error: {e}", file=sys.stderr)
    return 2


def _command_after_dashes(cmd: list[str]) -> list[str]:
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return cmd


def cmd_collect(args) -> int:
    from compilewatch.collectors.collect import collect

    command = _command_after_dashes(args.cmd)
    if not command:
        print("compilewatch collect: error: give the command to run after --, e.g. "
              "`compilewatch collect -- python train.py`", file=sys.stderr)
        return 2
    try:
        result = collect(command, args.out, model=args.model, label=args.label, logs=args.logs,
                         timeout=args.timeout, archive=args.archive, hooks=not args.no_hooks)
    except CompileWatchError as e:
        return _fail(e)
    print(f"compilewatch: {result.end_reason} (exit status {result.exit_status}); bundle: {result.bundle}",
          file=sys.stderr)
    return result.exit_status


def cmd_bench(args) -> int:
    from compilewatch.collectors.models import describe_models

    if args.list_models:
        print(describe_models())
        return 0
    from compilewatch.collectors.bench import run_bench

    try:
        rows = run_bench(
            models=[m for m in args.models.split(",") if m.strip()],
            modes=[m for m in args.modes.split(",") if m.strip()],
            task="infer" if args.infer else "train",
            steps=args.steps, warmup=args.warmup, device=args.device, out_dir=args.out,
            batch_size=args.batch_size, amp=args.amp, repeats=args.repeats, timeout=args.timeout,
            archive=args.archive, logs=args.logs, skip_missing=args.skip_missing,
        )
    except CompileWatchError as e:
        return _fail(e)
    return 0 if rows and all(r.get("exit_status", 0) == 0 for r in rows) else 1


def add_subcommands(subparsers) -> None:
    """Register `collect` and `bench` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "collect", help="run a command under TORCH_LOGS/TORCH_TRACE and timing hooks, write a bundle",
        description="Run CMD with TORCH_LOGS and TORCH_TRACE pointed into a new bundle, timing every "
                    "torch.compile'd callable, and write the bundle however CMD ends. Exits with CMD's status.",
    )
    p.add_argument("--model", help="model name recorded in the manifest")
    p.add_argument("--label", help="free label recorded in the manifest (branch, experiment, ...)")
    p.add_argument("--out", default=".compilewatch/bundles", help="folder the bundle goes in (default: %(default)s)")
    p.add_argument("--logs", default=DEFAULT_LOGS, help="TORCH_LOGS components (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop CMD after S seconds (SIGTERM, then SIGKILL); the bundle says end_reason=timeout")
    p.add_argument("--archive", action="store_true", help="write <bundle>.tar.gz instead of a folder")
    p.add_argument("--no-hooks", action="store_true", help="don't inject the timing hooks (logs and trace only)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    p.set_defaults(func=cmd_collect)

    b = subparsers.add_parser(
        "bench", help="eager vs torch.compile on built-in models: speedup, compile latency, memory, graph breaks",
        description="For each model and mode, run eager and compiled on the same batches (warm-up excluded) "
                    "in a collected child process; one bundle per model and mode, plus <out>/bench.csv with "
                    "PyTorch benchmarks/dynamo columns.",
    )
    b.add_argument("--models", default="mlp", help="comma-separated built-in models (--list-models)")
    b.add_argument("--modes", default="default", help="comma-separated torch.compile modes (default: %(default)s)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--train", action="store_true", help="time training steps (forward, backward, SGD step); the default")
    g.add_argument("--infer", action="store_true", help="time inference (forward under no_grad)")
    b.add_argument("--steps", type=int, default=20, help="steady-state steps timed (default: %(default)s)")
    b.add_argument("--warmup", type=int, default=3, help="steps run after the first and not timed (default: %(default)s)")
    b.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    b.add_argument("--batch-size", type=int, default=None, help="default: each model's own")
    b.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA only), as PyTorch's dashboard runs training")
    b.add_argument("--repeats", type=int, default=1, help="run each model and mode N times, for run-to-run spread")
    b.add_argument("--timeout", type=float, default=None, metavar="S", help="per model and mode")
    b.add_argument("--out", default=".compilewatch/bench", help="folder for bundles and bench.csv (default: %(default)s)")
    b.add_argument("--logs", default=DEFAULT_LOGS, help="TORCH_LOGS components (default: %(default)s)")
    b.add_argument("--archive", action="store_true", help="write each bundle as .tar.gz")
    b.add_argument("--skip-missing", action="store_true",
                   help="skip models whose package (torchvision, timm, transformers) is not installed")
    b.add_argument("--list-models", action="store_true", help="list the built-in models and exit")
    b.set_defaults(func=cmd_bench)
