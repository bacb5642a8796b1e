"""What machine and software a run used. Nothing here imports torch: versions come from package
metadata (or from the child's hooks, which see the torch actually imported), the GPU from
nvidia-smi, so that `compilewatch collect` starts fast and works where torch is absent."""
from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from datetime import datetime, timezone

from compilewatch.collectors.hooks import cpu_model


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _run(cmd, cwd=None, timeout=5) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit(cwd: str) -> tuple[str | None, bool | None]:
    if not shutil.which("git"):
        return None, None
    commit = _run(["git", "rev-parse", "HEAD"], cwd=cwd)
    if not commit:
        return None, None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd)
    return commit, (bool(status) if status is not None else None)


def gpu_name() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    out = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if not out:
        return None
    names = [n.strip() for n in out.splitlines() if n.strip()]
    if not names:
        return None
    return names[0] if len(set(names)) == 1 and len(names) == 1 else f"{len(names)}x {names[0]}"


_PROBE = (
    "import importlib.util, json, sys\n"
    "from importlib import metadata\n"
    "def v(n):\n"
    "    try: return metadata.version(n)\n"
    "    except Exception: return None\n"
    "print(json.dumps({'torch': importlib.util.find_spec('torch') is not None, 'torch_version': v('torch'),"
    " 'triton_version': v('triton') or v('pytorch-triton'),"
    " 'python_version': '.'.join(map(str, sys.version_info[:3]))}))\n"
)


def python_probe(python: str) -> dict | None:
    """Ask an interpreter (the one the wrapped command runs) what it has, without importing torch."""
    import json
    out = _run([python, "-c", _PROBE], timeout=30)
    if not out:
        return None
    try:
        return json.loads(out.splitlines()[-1])
    except ValueError:
        return None


def environment(cwd: str, python: str | None = None) -> dict:
    probe = python_probe(python) if python else None
    commit, dirty = git_commit(cwd)
    env = {
        "host": socket.gethostname(),
        "cwd": cwd,
        "git_commit": commit,
        "git_dirty": dirty,
        "python_version": (probe or {}).get("python_version") or platform.python_version(),
        "torch_version": (probe or {}).get("torch_version"),
        "triton_version": (probe or {}).get("triton_version"),
        "gpu_name": gpu_name(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "torch_installed": None if probe is None else bool(probe.get("torch")),
    }
    return env


def looks_like_python(argv0: str) -> str | None:
    """The interpreter's path when the command is `python ...`, `python3.12 ...` or a path to one."""
    base = os.path.basename(argv0)
    if base.startswith("python") and not base.endswith((".py", ".sh")):
        return shutil.which(argv0) or (argv0 if os.path.exists(argv0) else None)
    return None


def this_python() -> str:
    return sys.executable
