"""The bundle: the one contract between a collector and ingest.

A bundle is a directory (or a ``.tar.gz`` / ``.tgz`` / ``.zip`` holding one) laid out as::

    manifest.json          this module's Manifest, format_version 1
    torch_logs.txt         TORCH_LOGS text captured from the child's stderr (and stdout)
    trace/                 TORCH_TRACE output: one file per rank/process, plain or .gz
    timings.json           timing hooks' output (see TIMINGS_DOC below)
    bench.csv              eager-vs-compiled results, PyTorch benchmarks/dynamo column names
    stdout.txt             the command's stdout, when captured separately

Only manifest.json is required; every other entry is optional and listed in ``manifest.files``
so a reader never has to guess. Unknown manifest keys are kept (manifest_json in the runs table).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from compilewatch.core.errors import BundleError
from compilewatch.ingest import archives

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TORCH_LOGS = "torch_logs.txt"
TRACE_DIR = "trace"
TIMINGS = "timings.json"
BENCH_CSV = "bench.csv"

TIMINGS_DOC = """
timings.json, written by collectors/hooks (one per process: rank N of a multi-rank job writes
timings.rankN.json, listed in the manifest under the role "timings_ranks"):
{
  "format_version": 1,
  "callables": [                      # one per torch.compile'd callable (and per eager reference)
    {"name": "Model.forward", "mode": "compiled" | "eager" | "marked" | "iteration",
     "first_call_ms": 1834.2,         # includes compilation
     "steps": [{"step": 0, "phase": "compile" | "warmup" | "steady",
                "duration_ms": 12.3, "peak_mem_bytes": 123 | null}],
     "recompiles": 2, "graphs": 3, "graph_breaks": 1,
     "calls": 120, "sample_every": 1, "steady_median_ms": 12.1, "steady_iqr_ms": 0.4, "steady_samples": 110,
     "replayed_calls": 117 | null}    # calls during which a CUDA graph was replayed; null: not watched
  ],
  # At most one callable has mode "iteration": the iteration period, the training-step time the job
  # felt. Its steps are the intervals between consecutive iteration marks ("step" n is the interval
  # ending at mark n; phase "compile" when dynamo compiled inside it, then "warmup" for
  # COMPILEWATCH_WARMUP intervals, then "steady"), and it carries two more keys:
  #   "source": "trainer_step"     marks are a trainer's optimizer steps, from its callback
  #                                (compilewatch.integrations), name e.g. "Trainer steps"
  #           | "optimizer_step"   marks are optimizer.step() calls (a global post-hook; the first
  #                                optimizer that steps is followed), name e.g. "AdamW.step"
  #           | "compiled_call"    no optimizer stepped: marks are the call starts of the compiled
  #                                callable called most often, name e.g. "Model.forward calls"
  #   "clock":  "cuda_event" (device time between marks) | "host" (perf_counter)
  "dynamo_counters": {"stats": {...}, "graph_break": {...}, ...},   # the CUDA-graph ones are read:
                                      # inductor.cudagraph_skips, inductor.cudagraph_partitions
  "cudagraphs": {"recordings": 3, "replays": 594} | null,   # the CUDA-graph tree manager's calls
                                      # (mode="reduce-overhead"); null where no compile used it
  "compile_phases_s": {"entire_frame_compile": 1.2, "backend_compile": 0.9, ...},
  "compile_time_s": 3.1,              # wall time of the compiled callables' compiling calls (first + recompiles)
  "time_to_first_step_s": 41.2 | null, # from the process's start to the end of its first completed step:
                                      # the first optimizer.step() (the device synchronised), else the first
                                      # call of the compiled callable called most often; null when neither came
  "first_step_source": "optimizer_step" | "compiled_call" | null,
  "process_start_source": "proc_stat" | "psutil" | null,   # the process's start: the kernel's start time
                                      # (/proc/self/stat, to 10 ms) else psutil's create_time
  "peak_mem_bytes": 123 | null,       # CUDA max_memory_allocated; null on the CPU
  "peak_rss_bytes": 123 | null,       # the process's peak resident memory
  "peak_heap_bytes": 123 | null,      # CPU jobs: the most C-heap bytes in use (glibc mallinfo2) read right
                                      # after a steady call of a compiled callable, when the forward's
                                      # saved activations are held; null on a GPU or without glibc
  "heap_samples": 64 | null,          # how many readings that peak is the highest of
  "device": "cuda:0" | "cpu",
  "rank": 0, "world_size": 2, "local_rank": 0,   # present when the launcher set RANK/WORLD_SIZE/LOCAL_RANK
  "env": {"torch_version", "cuda_version", "triton_version", "gpu_name", "cpu_model"},
  # The settings this process ran under that change speed without changing a graph, read when it
  # ended (collectors/job_settings.py): {name: {"value": text, "source": SOURCE}}, SOURCE one of
  #   "torch"             torch's runtime switches, always listed: torch.get_num_threads(),
  #                       torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark, ...
  #   "dynamo_config" | "inductor_config" | "functorch_config"
  #                       only the entries of torch._dynamo.config / torch._inductor.config /
  #                       torch._functorch.config that differ from their defaults (a missing name is
  #                       at its default), named by module, e.g. "torch._inductor.config.max_autotune"
  #   "env"               only allow-listed environment variables that are set (OMP_NUM_THREADS,
  #                       NCCL_*, TORCHINDUCTOR_*, ...; a missing name is unset); a location
  #                       (*_DIR, *_PATH, ...) only as "(set)", CUDA_VISIBLE_DEVICES as
  #                       "CUDA_VISIBLE_DEVICES (count)"
  "settings": {"torch.get_num_threads()": {"value": "8", "source": "torch"}, ...},
  # also written, kept raw, read by nothing in ingest yet: "pid", "compilation_metrics": [...]
}
Older files lack "compile_time_s", "time_to_first_step_s" and its sources, "peak_rss_bytes", "peak_heap_bytes", rank
keys, the iteration callable, "settings" and "cudagraphs" / "replayed_calls"; readers treat each as
absent.
"""

SETTING_SOURCES = ("torch", "dynamo_config", "inductor_config", "functorch_config", "env")

HOST_PROBE_DOC = """
manifest.json "host_probe", written by `compilewatch collect` unless --no-probe
(collectors/host_probe.py): one fixed eager workload timed in a process of its own right before
the command started and right after it ended, on the same device both times:
{
  "device": "cpu" | "cuda:0" | null,     # null when neither probe ran
  "python": "/usr/bin/python3",          # the interpreter that ran it (the job's)
  "before": PROBE, "after": PROBE
}
PROBE: {"device", "device_name", "threads", "torch_version",
        "workload": "2 x matmul 512x512 float32 + copy of 16 MiB",
        "median_ms": 21.3, "iqr_ms": 0.4, "min_ms": 20.9, "samples_ms": [...],
        "run_ms", "import_ms",            # inside the probe's process: the workload, torch's import
        "process_s": 1.9,                 # the probe's whole process, as the collector waited for it
        "load_avg": 0.8, "at": "2026-11-28T06:00:00Z"}
   or {"error": "why it gave no time", "at", "load_avg", ...}
Older manifests have no "host_probe"; readers treat it as absent.
"""


@dataclass
class Manifest:
    run_id: str
    format_version: int = FORMAT_VERSION
    model: str | None = None
    label: str | None = None
    command: list[str] = field(default_factory=list)
    started_at: str | None = None        # ISO 8601 UTC, e.g. 2026-11-22T01:02:03.456Z
    ended_at: str | None = None
    wall_time_s: float | None = None
    exit_status: int | None = None
    end_reason: str | None = None        # exited | crashed | interrupted | terminated | timeout
    host: str | None = None
    cwd: str | None = None
    git_commit: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    cuda_version: str | None = None
    python_version: str | None = None
    gpu_name: str | None = None
    collector: str | None = None         # what wrote it: "compilewatch collect 0.1.0", "bench", ...
    files: dict = field(default_factory=dict)  # role -> relative path (or list of paths for trace)
    # Unknown keys, kept verbatim. `compilewatch collect` also writes: device ("cuda:0" | "cpu", from
    # the hooks), cpu_model, world_size (from the hooks' WORLD_SIZE, else 1 + rank files), cpu_count,
    # platform, git_dirty, hooks, timeout_s, torch_logs_setting, host_probe (HOST_PROBE_DOC), and
    # signals_passed_on (names of the signals passed on to the command, in order) when any reached it.
    extra: dict = field(default_factory=dict)

    def to_json(self) -> str:
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        return json.dumps(d, indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Manifest":
        if not isinstance(d, dict):
            raise BundleError("manifest.json is not a JSON object", "regenerate the bundle with `compilewatch collect`")
        if not d.get("run_id"):
            raise BundleError("manifest.json has no run_id", "add a unique run_id, or ingest the logs as loose files")
        version = d.get("format_version", 1)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise BundleError(
                f"bundle format_version {version!r} is newer than this compilewatch understands ({FORMAT_VERSION})",
                "upgrade compilewatch on the ingesting side",
            )
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in d.items() if k in known}
        kwargs["extra"] = {k: v for k, v in d.items() if k not in known}
        if isinstance(kwargs.get("command"), str):
            kwargs["command"] = [kwargs["command"]]
        return cls(**kwargs)


def write_manifest(bundle_dir: Path, manifest: Manifest) -> Path:
    """Write atomically: a reader (the inbox watcher) never sees half a manifest."""
    bundle_dir = Path(bundle_dir)
    tmp = bundle_dir / (MANIFEST + ".tmp")
    tmp.write_text(manifest.to_json(), encoding="utf-8")
    tmp.replace(bundle_dir / MANIFEST)
    return bundle_dir / MANIFEST


def read_manifest(bundle_dir: Path) -> Manifest:
    path = Path(bundle_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{bundle_dir} has no manifest.json", "point at a bundle directory or at the log files themselves")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{path} is not valid JSON: {e}", "the bundle was cut short; re-run the collector or ingest its logs as loose files")
    return Manifest.from_dict(data)


def is_bundle_dir(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / MANIFEST).is_file()


def is_archive(path: Path) -> bool:
    return archives.is_archive(path)


def extract_archive(path: Path, dest: Path, budget: "archives.Budget | None" = None, display: str | None = None) -> Path:
    """Unpack an archive under the rules of ingest/archives.py and return the folder to read."""
    return archives.extract(path, dest, budget, display)


def bundle_files(bundle_dir: Path, manifest: Manifest) -> dict[str, list[Path]]:
    """Role -> existing files. Falls back to the standard names when the manifest lists none."""
    bundle_dir = Path(bundle_dir)
    out: dict[str, list[Path]] = {}
    listed = manifest.files or {}
    def _add(role, rel):
        rels = rel if isinstance(rel, list) else [rel]
        for r in rels:
            p = bundle_dir / r
            if p.is_file():
                out.setdefault(role, []).append(p)
    for role, rel in listed.items():
        _add(role, rel)
    if "torch_logs" not in out:
        _add("torch_logs", TORCH_LOGS)
    if "torch_trace" not in out and (bundle_dir / TRACE_DIR).is_dir():
        out["torch_trace"] = sorted(p for p in (bundle_dir / TRACE_DIR).rglob("*") if p.is_file())
    if "timings" not in out:
        _add("timings", TIMINGS)
    if "bench" not in out:
        _add("bench", BENCH_CSV)
    return {k: v for k, v in out.items() if v}
