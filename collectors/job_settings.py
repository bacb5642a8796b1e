"""The settings a job ran under that change its speed without changing a compiled graph: torch's
runtime switches, the torch._dynamo / torch._inductor / torch._functorch config entries that differ
from their defaults, and an allow-list of environment variables. Read by the timing hooks at the end
of the job (a script may change any of them while it runs), once per process (so per rank), and
written into timings.json under "settings" (ingest.bundle.TIMINGS_DOC).

Like hooks.py this module runs inside the job's process, imports only the standard library, and
never imports torch or a torch submodule itself: config modules the job never loaded are at their
defaults by definition.

Grad mode is not recorded: it is per thread and scoped by context managers, so its value when the
job ends says nothing about how the steps ran.
"""
from __future__ import annotations

import os
import re
import sys
import warnings

# source of a setting: where it was read, so a reader can say how to change it back
TORCH, DYNAMO, INDUCTOR, FUNCTORCH, ENV = "torch", "dynamo_config", "inductor_config", "functorch_config", "env"

CONFIG_MODULES = (
    ("torch._dynamo.config", DYNAMO),
    ("torch._inductor.config", INDUCTOR),
    ("torch._functorch.config", FUNCTORCH),
)

# Environment variables known to change a job's speed, by exact name or prefix. Nothing else of the
# environment is ever read: it holds tokens and passwords.
ENV_NAMES = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE", "ATEN_CPU_CAPABILITY",
})
ENV_PREFIXES = ("KMP_", "GOMP_", "TORCH_CUDNN_V8_API_", "NCCL_", "TORCHINDUCTOR_", "TORCHDYNAMO_",
                "TORCH_COMPILE_", "PYTORCH_TUNABLEOP_")
# Set by `compilewatch collect` itself, so the same in every collected run.
ENV_EXCLUDED = frozenset({"TORCH_LOGS", "TORCH_TRACE"})
# A name on the allow-list that still reads like a credential is left out, whatever its value.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|(^|_)KEY($|_)", re.I)
# Where a value is a location, the location is no speed setting and differs from host to host.
_LOCATION_NAME = re.compile(r"_(DIR|PATH|FILE|ROOT)$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
MAX_VALUE_CHARS = 300


def _text(value) -> str:
    """A setting's value as text that is the same for the same setting in every process: sets and
    dicts sorted, object addresses dropped, long values cut."""
    if isinstance(value, (set, frozenset)):
        text = "{" + ", ".join(sorted(_text(v) for v in value)) + "}"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{_text(k)}: {_text(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))) + "}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_text(v) for v in value) + "]"
    elif callable(value) and hasattr(value, "__qualname__"):
        text = f"{getattr(value, '__module__', '') or ''}.{value.__qualname__}".lstrip(".")
    else:
        text = str(value)
    text = _ADDRESS.sub("", text)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _torch_getters(torch) -> list[tuple[str, object]]:
    b = torch.backends
    getters = [
        ("torch.get_num_threads()", lambda: torch.get_num_threads()),
        ("torch.get_num_interop_threads()", lambda: torch.get_num_interop_threads()),
        ("torch.get_float32_matmul_precision()", lambda: torch.get_float32_matmul_precision()),
        ("torch.get_default_dtype()", lambda: torch.get_default_dtype()),
        ("torch.are_deterministic_algorithms_enabled()", lambda: torch.are_deterministic_algorithms_enabled()),
        ("torch.is_deterministic_algorithms_warn_only_enabled()",
         lambda: torch.is_deterministic_algorithms_warn_only_enabled()),
        ("torch.is_anomaly_enabled()", lambda: torch.is_anomaly_enabled()),
        ("torch.autograd._profiler_enabled()", lambda: torch.autograd._profiler_enabled()),
        ("torch.backends.cuda.matmul.allow_tf32", lambda: b.cuda.matmul.allow_tf32),
        ("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
         lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction),
        ("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
         lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction),
        ("torch.backends.cuda.preferred_blas_library()", lambda: b.cuda.preferred_blas_library()),
        ("torch.backends.cuda.preferred_linalg_library()", lambda: b.cuda.preferred_linalg_library()),
        ("torch.backends.cuda.flash_sdp_enabled()", lambda: b.cuda.flash_sdp_enabled()),
        ("torch.backends.cuda.mem_efficient_sdp_enabled()", lambda: b.cuda.mem_efficient_sdp_enabled()),
        ("torch.backends.cuda.math_sdp_enabled()", lambda: b.cuda.math_sdp_enabled()),
        ("torch.backends.cuda.cudnn_sdp_enabled()", lambda: b.cuda.cudnn_sdp_enabled()),
        ("torch.backends.cudnn.enabled", lambda: b.cudnn.enabled),
        ("torch.backends.cudnn.benchmark", lambda: b.cudnn.benchmark),
        ("torch.backends.cudnn.deterministic", lambda: b.cudnn.deterministic),
        ("torch.backends.cudnn.allow_tf32", lambda: b.cudnn.allow_tf32),
        ("torch.backends.mkldnn.enabled", lambda: b.mkldnn.enabled),
        ("torch.backends.cpu.get_cpu_capability()", lambda: b.cpu.get_cpu_capability()),
        # the precision API that replaces allow_tf32 (torch 2.9 on); absent before
        ("torch.backends.fp32_precision", lambda: b.fp32_precision),
        ("torch.backends.cuda.matmul.fp32_precision", lambda: b.cuda.matmul.fp32_precision),
        ("torch.backends.cudnn.fp32_precision", lambda: b.cudnn.fp32_precision),
    ]
    try:
        cuda_up = torch.cuda.is_initialized()
    except Exception:
        cuda_up = False
    if cuda_up:   # never initialise CUDA here: only a job that used it has allocator settings
        getters += [
            ("torch.cuda.memory.get_allocator_backend()", lambda: torch.cuda.memory.get_allocator_backend()),
            ("torch.cuda.get_per_process_memory_fraction()",
             lambda: torch.cuda.get_per_process_memory_fraction(torch.cuda.current_device())),
        ]
    return getters


def torch_settings(torch) -> dict[str, str]:
    """torch's runtime switches as they are now; one that this torch lacks is left out."""
    out = {}
    with warnings.catch_warnings():   # the legacy TF32 getters warn on newer torch: not the job's output
        warnings.simplefilter("ignore")
        for name, get in _torch_getters(torch):
            try:
                out[name] = _text(get())
            except Exception:
                continue
    return out


def _same(value, default) -> bool:
    try:
        return bool(value == default) and type(value) is type(default)
    except Exception:
        return False


def config_non_defaults(module) -> dict[str, str]:
    """The entries of one torch config module (torch.utils._config_module) that are not at their
    default now: set by the script, by a config.patch still open, or by the environment."""
    get_dict = getattr(module, "_get_dict", None)
    try:
        values = get_dict(skip_default=True)
        # a config.patch that ended sets its entries back to what they were, defaults included,
        # and torch counts an entry once set as off its default whatever its value
        entries = module._config
        values = {k: v for k, v in values.items() if k not in entries or not _same(v, entries[k].default)}
    except Exception:
        # older torch: compare against the defaults the module kept
        try:
            default = module._default
            values = {k: v for k, v in module.get_config_copy().items() if default.get(k, v) != v}
        except Exception:
            return {}
    return {f"{module.__name__}.{k}": _text(v) for k, v in sorted(values.items())}


def env_settings(environ=None) -> dict[str, str]:
    """The allow-listed environment variables that are set, their values as they are (a location
    only as "(set)", CUDA_VISIBLE_DEVICES as its count of devices)."""
    environ = os.environ if environ is None else environ
    out = {}
    for name, value in environ.items():
        if name in ENV_EXCLUDED or not (name in ENV_NAMES or name.startswith(ENV_PREFIXES)):
            continue
        if _SECRET_NAME.search(name):
            continue
        out[name] = "(set)" if _LOCATION_NAME.search(name) else _text(value)
    devices = environ.get("CUDA_VISIBLE_DEVICES")
    if devices is not None:
        out["CUDA_VISIBLE_DEVICES (count)"] = str(len([d for d in devices.split(",") if d.strip()]))
    return dict(sorted(out.items()))


def job_settings(torch=None, environ=None) -> dict[str, dict]:
    """{name: {"value": text, "source": torch | dynamo_config | inductor_config | functorch_config |
    env}} for this process now. `torch`: the imported module, else the one in sys.modules (none: no
    torch settings)."""
    torch = torch if torch is not None else sys.modules.get("torch")
    out: dict[str, dict] = {}
    if torch is not None:
        for name, value in torch_settings(torch).items():
            out[name] = {"value": value, "source": TORCH}
        for module_name, source in CONFIG_MODULES:
            module = sys.modules.get(module_name)
            if module is not None:
                for name, value in config_non_defaults(module).items():
                    out[name] = {"value": value, "source": source}
    for name, value in env_settings(environ).items():
        out[name] = {"value": value, "source": ENV}
    return out
