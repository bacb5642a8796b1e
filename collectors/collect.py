"""`compilewatch collect`: run a command under TORCH_LOGS + TORCH_TRACE + timing hooks and write a bundle.

The bundle (layout and manifest: ingest/bundle.py) is written however the command ends: normal
exit, crash, Ctrl-C, SIGTERM to the collector, or --timeout. ``manifest.end_reason`` says which:

    exited       the command exited with status 0
    crashed      it exited non-zero, or was killed by a signal nobody here sent
    interrupted  Ctrl-C (SIGINT) reached the collector; it was passed on to the command
    terminated   SIGTERM reached the collector (or the command); it was passed on; or the command
                 died of a SIGUSR1/SIGUSR2 that the collector passed on
    timeout      --timeout passed; the command got SIGTERM, then SIGKILL after a grace period

The collector's own exit status is the command's (128+N when it died of signal N).

Signals: the collector's handlers are installed before the command starts, so the command starts
with SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 at their defaults (exec resets a handled signal, where an
ignored one stays ignored: a batch script's `cmd &` ignores SIGINT). SIGINT and SIGTERM are passed
on and stop the run (SIGKILL after the grace time); SIGUSR1 and SIGUSR2, which SLURM's `--signal`
sends before the time limit, are passed on and the run goes on. ``manifest.signals_passed_on``
names each signal passed on, in order.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from compilewatch.collectors import host_probe
from compilewatch.collectors.env import environment, looks_like_python, utc_now
from compilewatch.collectors.torch_logs import DEFAULT_LOGS
from compilewatch.collectors.version import __version__
from compilewatch.core import settings
from compilewatch.core.errors import CommandNotFoundError, OutputNotWritableError, TorchMissingError
from compilewatch.ingest.bundle import TIMINGS, TORCH_LOGS, TRACE_DIR, Manifest, write_manifest

DEFAULT_OUT = ".compilewatch/bundles"
INJECT_DIR = Path(__file__).resolve().parent / "_inject"
GRACE_S = 10.0


@dataclass
class CollectResult:
    bundle: Path            # the bundle folder, or the .tar.gz when archived
    exit_status: int
    end_reason: str
    manifest: Manifest
    signal_received: int | None = None   # SIGINT/SIGTERM that reached the collector, if any


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "run"


def default_name(command: list[str], model: str | None) -> str:
    """The bundle folder's name: the model, else the script's name, else the program's."""
    if model:
        return model
    for arg in command:
        if arg.endswith(".py"):
            return Path(arg).stem
    return Path(command[0]).name


def prepare_bundle_dir(out_dir: str | os.PathLike, name: str, run_id: str) -> Path:
    """Create <out>/<name>-<utc>-<id>; a folder we cannot write to is a one-line error, not a traceback."""
    out = Path(out_dir).expanduser()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    bundle = out / f"{_slug(name)}-{stamp}-{run_id[:6]}"
    try:
        (bundle / TRACE_DIR).mkdir(parents=True, exist_ok=False)
        probe = bundle / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise OutputNotWritableError(f"cannot write the bundle under {out}: {e.strerror or e}")
    return bundle


def torch_logs_setting(logs) -> str:
    if isinstance(logs, str):
        logs = [x for x in logs.split(",") if x.strip()]
    names = [x.strip() for x in logs]
    existing = os.environ.get("TORCH_LOGS", "")
    for x in existing.split(","):
        x = x.strip()
        if x and x not in names:
            names.append(x)
    return ",".join(names)


def child_env(bundle: Path, logs, hooks: bool, extra_env: dict | None = None, pythonpath=()) -> dict:
    env = dict(os.environ)
    env["TORCH_LOGS"] = torch_logs_setting(logs)
    env["TORCH_TRACE"] = str(bundle / TRACE_DIR)
    env["COMPILEWATCH_BUNDLE"] = str(bundle)
    env.setdefault("PYTHONUNBUFFERED", "1")   # keeps the command's prints and torch's logs in order
    paths = list(pythonpath) + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if hooks:
        env["COMPILEWATCH_TIMINGS"] = str(bundle / TIMINGS)
        paths.insert(0, str(INJECT_DIR))
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    if not hooks:
        env.pop("COMPILEWATCH_TIMINGS", None)
    if extra_env:
        env.update(extra_env)
    return env


class _Tee:
    """Copies a child's pipe to our terminal as it arrives and, whole lines at a time, to the log
    (so stdout and stderr lines interleave in the log without being cut in half)."""

    def __init__(self, pipe, terminal, log, lock):
        self.pipe, self.terminal, self.log, self.lock = pipe, terminal, log, lock
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        partial = b""
        read = getattr(self.pipe, "read1", self.pipe.read)
        while True:
            try:
                chunk = read(65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            if self.terminal is not None:
                try:
                    self.terminal.write(chunk)
                    self.terminal.flush()
                except (OSError, ValueError):
                    self.terminal = None
            partial += chunk
            cut = partial.rfind(b"\n")
            if cut >= 0:
                with self.lock:
                    self.log.write(partial[: cut + 1])
                partial = partial[cut + 1:]
        if partial:
            with self.lock:
                self.log.write(partial)

    def join(self, timeout=None):
        self.thread.join(timeout)


def _kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.send_signal(sig)
        except (ProcessLookupError, OSError):
            pass


def _child_stdin():
    # The child has its own session, so it cannot read a terminal; pipes and files pass through.
    try:
        return subprocess.DEVNULL if sys.stdin is None or sys.stdin.isatty() else None
    except (ValueError, AttributeError):
        return subprocess.DEVNULL


def _check_command(command: list[str], env: dict) -> str | None:
    if not command:
        raise CommandNotFoundError("no command given after --")
    exe = command[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            raise CommandNotFoundError(f"command not found: {exe}")
        return looks_like_python(exe)
    if shutil.which(exe, path=env.get("PATH")) is None:
        raise CommandNotFoundError(f"command not found: {exe}")
    return looks_like_python(shutil.which(exe, path=env.get("PATH")))


def collect(
    command: list[str],
    out_dir: str | os.PathLike = DEFAULT_OUT,
    *,
    model: str | None = None,
    label: str | None = None,
    logs=DEFAULT_LOGS,
    timeout: float | None = None,
    archive: bool = False,
    hooks: bool = True,
    extra_env: dict | None = None,
    collector: str | None = None,
    tee: bool = True,
    grace_s: float = GRACE_S,
    manifest_extra: dict | None = None,
    require_torch: bool = True,
    pythonpath=(),
    probe: bool | None = None,
) -> CollectResult:
    """Run `command` and write a bundle under `out_dir`. Raises CollectError subclasses for what
    stops a run from starting; once the command has started, a bundle is always written.
    `probe`: time the host probe (collectors/host_probe.py) before and after the command; None
    follows the host_probe setting."""
    command = [str(c) for c in command]
    run_id = uuid.uuid4().hex
    python = _check_command(command, os.environ)
    env_info = environment(os.getcwd(), python)
    if require_torch and python and env_info.get("torch_installed") is False:
        raise TorchMissingError(f"torch is not installed for {python}")
    bundle = prepare_bundle_dir(out_dir, default_name(command, model), run_id)
    env = child_env(bundle, logs, hooks, extra_env, pythonpath)
    probing = _Probing(command, python, env, bundle) if (settings.is_on("host_probe") if probe is None else probe) else None
    if probing is not None:
        try:
            probing.before()
        except BaseException:   # Ctrl-C before the command started: no bundle, as if never begun
            shutil.rmtree(bundle, ignore_errors=True)
            raise

    started_at = utc_now()
    t0 = time.monotonic()
    log = open(bundle / TORCH_LOGS, "wb")
    stop = _Stop(grace_s)
    signals = _Signals(stop)
    try:
        proc = _start(command, env, bundle, log)
        signals.attach(proc)
        _supervise(proc, log, stop, None if not timeout else t0 + float(timeout), tee)
    finally:
        signals.restore()
    exit_status, reason = _outcome(proc.returncode, stop.reason, stop.passed_on)
    ended_at = utc_now()
    wall = round(time.monotonic() - t0, 3)
    if probing is not None:
        # Ctrl-C or SIGTERM asked the collector to stop: write the bundle now, not after a probe
        probing.after(skip="the collector was asked to stop" if stop.signal is not None else None)
        manifest_extra = {**(manifest_extra or {}), "host_probe": probing.record()}

    extra = dict(manifest_extra or {})
    if stop.passed_on:
        extra["signals_passed_on"] = [signal.Signals(s).name for s in stop.passed_on]
    manifest = build_manifest(run_id, bundle, command, model, label, started_at, ended_at, wall,
                               exit_status, reason, env_info, env, collector, timeout, hooks, extra)
    write_manifest(bundle, manifest)
    result_path = bundle
    if archive:
        result_path = archive_bundle(bundle)
    return CollectResult(result_path, exit_status, reason, manifest, stop.signal)


class _Probing:
    """The host probe around one job: before it, after it, on the same device both times."""

    def __init__(self, command: list[str], python: str | None, env: dict, bundle: Path):
        self.python = python or _script_python(command, env) or sys.executable
        self.env = host_probe.probe_env(env, str(INJECT_DIR))
        self.cwd = str(bundle)
        self.probes: dict = {}

    def before(self) -> None:
        self.probes["before"] = host_probe.run_probe(self.python, self.env, self.cwd)

    def after(self, skip: str | None = None) -> None:
        if skip:
            self.probes["after"] = {"error": f"not run: {skip}"}
            return
        device = self.probes.get("before", {}).get("device")
        self.probes["after"] = host_probe.run_probe(self.python, self.env, self.cwd, device=device)

    def record(self) -> dict:
        """The manifest's "host_probe" (ingest/bundle.py)."""
        timed = [p for p in self.probes.values() if "median_ms" in p]
        return {"device": timed[0]["device"] if timed else None, "python": self.python, **self.probes}


def _script_python(command: list[str], env: dict) -> str | None:
    """The interpreter of a Python console script (torchrun, accelerate, ...) from its #! line."""
    exe = command[0] if os.sep in command[0] else shutil.which(command[0], path=env.get("PATH"))
    try:
        with open(exe, "rb") as f:
            first = f.readline(512)
    except (OSError, TypeError):
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
    if words and looks_like_python(words[0]):
        return looks_like_python(words[0])
    return None


def _start(command: list[str], env: dict, bundle: Path, log) -> subprocess.Popen:
    """The command, started in a process group of its own with its output piped to us; when it
    cannot start, the bundle is removed and CommandNotFoundError says why."""
    try:
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=_child_stdin(), start_new_session=True)
    except OSError as e:
        log.close()
        shutil.rmtree(bundle, ignore_errors=True)
        raise CommandNotFoundError(f"cannot start {command[0]}: {e.strerror or e}")


class _Stop:
    """Why the run is being stopped (a signal we passed on, or the timeout), and when to stop
    waiting for it to end by itself."""

    def __init__(self, grace_s: float):
        self.grace_s = grace_s
        self.reason: str | None = None
        self.signal: int | None = None
        self.deadline: float | None = None
        self.passed_on: list[int] = []       # every signal passed on to the command, in order

    def begin(self, reason: str, proc, sig: int, now: float) -> None:
        self.reason, self.deadline = reason, now + self.grace_s
        _kill_group(proc, sig)

    def on_signal(self, proc, signum: int) -> None:
        self.passed_on.append(signum)
        if signum in PASSED_ON:
            # A warning before the time limit: the job decides (checkpoint, requeue); we go on.
            _kill_group(proc, signum)
        elif self.reason is None:
            self.signal = signum
            self.begin(STOPPED_BY[signum], proc, signum, time.monotonic())
        else:  # a second Ctrl-C or SIGTERM: stop waiting
            _kill_group(proc, signal.SIGKILL)


STOPPED_BY = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
# SLURM's `--signal=USR1@60` (or USR2) warns a job before its time limit
PASSED_ON = (signal.SIGUSR1, signal.SIGUSR2)


class _Signals:
    """The collector's handlers for STOPPED_BY and PASSED_ON, installed before the command starts:
    exec resets a handled signal to its default in the command, where a signal ignored here (a
    batch script's `cmd &` starts us with SIGINT ignored) would stay ignored there and a Ctrl-C
    passed on would do nothing. A signal that arrives before the command exists is passed on
    once it does. Only the main thread may set handlers; elsewhere nothing is installed."""

    def __init__(self, stop: _Stop):
        self.stop = stop
        self.proc = None
        self.early: list[int] = []
        self.old: dict = {}
        if threading.current_thread() is threading.main_thread():
            for s in (*STOPPED_BY, *PASSED_ON):
                self.old[s] = signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        if self.proc is None:
            self.early.append(signum)
        else:
            self.stop.on_signal(self.proc, signum)

    def attach(self, proc) -> None:
        self.proc = proc
        for s in self.early:
            self.stop.on_signal(proc, s)

    def restore(self) -> None:
        for s, h in self.old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _supervise(proc, log, stop: _Stop, deadline: float | None, tee: bool) -> None:
    """Copy the command's output to the terminal and the log until it ends, passing Ctrl-C and
    SIGTERM on to it and stopping it at `deadline`: SIGTERM, then SIGKILL after the grace time."""
    lock = threading.Lock()
    out_term = getattr(sys.stdout, "buffer", None) if tee else None
    err_term = getattr(sys.stderr, "buffer", None) if tee else None
    tees = [_Tee(proc.stdout, out_term, log, lock), _Tee(proc.stderr, err_term, log, lock)]
    # The child runs in its own process group (so that it, and anything it spawns, can be signalled
    # as one); a terminal's Ctrl-C and a kill of our pid reach us only, and _Signals passes them on.
    try:
        _wait(proc, stop, deadline)
        # Grandchildren may still hold the pipes open: don't wait on them for ever.
        for t in tees:
            t.join(timeout=5)
    finally:
        with lock:
            log.close()


def _wait(proc, stop: _Stop, deadline: float | None) -> None:
    killed = False
    while True:
        try:
            proc.wait(timeout=0.2)
            return
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if deadline is not None and now >= deadline and stop.reason is None:
            stop.begin("timeout", proc, signal.SIGTERM, now)
        if stop.deadline and now >= stop.deadline and not killed:
            killed = True
            _kill_group(proc, signal.SIGKILL)


def _outcome(rc: int, stop_reason: str | None, passed_on=()) -> tuple[int, str]:
    """(exit status as a shell reports it, end reason) of a command that returned `rc`."""
    exit_status = rc if rc >= 0 else 128 + (-rc)
    if stop_reason is not None:
        return exit_status, stop_reason
    if rc < 0 and -rc in passed_on:
        return exit_status, "terminated"     # the scheduler's warning, passed on, ended it
    if rc == 0:
        return exit_status, "exited"
    if rc == -signal.SIGINT:
        return exit_status, "interrupted"
    if rc == -signal.SIGTERM:
        return exit_status, "terminated"
    return exit_status, "crashed"


def build_manifest(run_id, bundle, command, model, label, started_at, ended_at, wall, exit_status,
                   reason, env_info, env, collector, timeout, hooks, manifest_extra) -> Manifest:
    """The manifest of a finished run: what the bundle holds, the run's facts, and the versions and
    hardware that the hooks' timings.json reported (else those of `env_info`)."""
    timings = _read_timings_env(bundle)
    files: dict = {}
    if (bundle / TORCH_LOGS).is_file():
        files["torch_logs"] = TORCH_LOGS
    traces = sorted(str(p.relative_to(bundle)) for p in (bundle / TRACE_DIR).rglob("*") if p.is_file())
    if traces:
        files["torch_trace"] = traces
    if (bundle / TIMINGS).is_file():
        files["timings"] = TIMINGS
    ranked = sorted(p.name for p in bundle.glob("timings.rank*.json"))
    if ranked:
        files["timings_ranks"] = ranked
    if (bundle / "bench.csv").is_file():
        files["bench"] = "bench.csv"
    extra = {
        "git_dirty": env_info.get("git_dirty"),
        "platform": env_info.get("platform"),
        "cpu_count": env_info.get("cpu_count"),
        "torch_logs_setting": env.get("TORCH_LOGS"),
        "timeout_s": timeout,
        "hooks": hooks,
        "device": timings.get("device"),
        # Hardware is a dimension of every comparison: what ran the job, and on how many processes.
        "cpu_model": timings.get("cpu_model") or env_info.get("cpu_model"),
        "world_size": timings.get("world_size") or (1 + len(ranked) if ranked else 1 if timings else None),
    }
    if manifest_extra:
        extra.update(manifest_extra)
    return Manifest(
        run_id=run_id,
        model=model,
        label=label,
        command=command,
        started_at=started_at,
        ended_at=ended_at,
        wall_time_s=wall,
        exit_status=exit_status,
        end_reason=reason,
        host=env_info.get("host"),
        cwd=env_info.get("cwd"),
        git_commit=env_info.get("git_commit"),
        # What the child actually imported wins over what the interpreter has installed.
        torch_version=timings.get("torch_version") or env_info.get("torch_version"),
        triton_version=timings.get("triton_version") or env_info.get("triton_version"),
        cuda_version=timings.get("cuda_version"),
        python_version=env_info.get("python_version"),
        gpu_name=timings.get("gpu_name") or env_info.get("gpu_name"),
        collector=collector or f"compilewatch collect {__version__}",
        files=files,
        extra=extra,
    )


def _read_timings_env(bundle: Path) -> dict:
    import json
    path = bundle / TIMINGS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    env = dict(data.get("env") or {})
    env["device"] = data.get("device")
    env["world_size"] = data.get("world_size")
    return env


def archive_bundle(bundle: Path) -> Path:
    """<bundle>.tar.gz holding the bundle folder; the folder is removed once the archive is whole."""
    bundle = Path(bundle)
    target = bundle.with_name(bundle.name + ".tar.gz")
    tmp = target.with_name(target.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tf:
        tf.add(bundle, arcname=bundle.name)
    tmp.replace(target)
    shutil.rmtree(bundle, ignore_errors=True)
    return target
