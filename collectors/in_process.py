"""Collect from inside the running process: ``compilewatch.collect(...)``, a context manager and a
decorator, for notebooks, trainer callbacks and scripts that `compilewatch collect -- CMD` cannot wrap::

    import compilewatch

    with compilewatch.collect(model="gpt2-small", label="v2"):
        train()

    @compilewatch.collect(model="gpt2-small", label="v2")   # one bundle per call
    def train(): ...

It turns on in this process what the wrapper turns on in its command's: the TORCH_LOGS components
(`logs`, plus any in the environment), the structured trace into <bundle>/trace, and the timing
hooks; and when the block ends, however it ends, it writes the same bundle (ingest/bundle.py). Then
it puts back everything it changed (torch's log settings, its handlers, torch.compile, the
optimizer hook, signal handlers, the TORCH_LOGS variable), so a notebook can collect one cell after
another.

torch reads TORCH_TRACE once, when it is imported. Here the trace is a handler of torch's own kind
(``LazyTraceHandler`` with torch's trace formatter) added to torch's trace logger for the block's
time, so the file is the one TORCH_TRACE would have written; strings torch interned earlier in the
process are written to it first, as the trace's later records refer to them by number. TORCH_LOGS
text goes to stderr as the variable sends it, and to torch_logs.txt through a handler on every
logger torch registers, formatted by torch's glog formatter: the prefix the text reader expects
(ingest/formats/glog.py). The file holds torch's log records only, not the program's prints.

Under `compilewatch collect` (COMPILEWATCH_BUNDLE is set) the wrapper collects already: a collection
here writes nothing of its own, and a trainer's steps are marked into the wrapper's hooks.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

from compilewatch.collectors import hooks as hooks_mod
from compilewatch.collectors.collect import (
    DEFAULT_OUT,
    CollectResult,
    archive_bundle,
    build_manifest,
    default_name,
    prepare_bundle_dir,
    torch_logs_setting,
)
from compilewatch.collectors.env import environment, utc_now
from compilewatch.collectors.torch_logs import DEFAULT_LOGS
from compilewatch.collectors.version import __version__
from compilewatch.core.errors import CollectError, TorchMissingError
from compilewatch.ingest.bundle import TIMINGS, TORCH_LOGS, TRACE_DIR, write_manifest

WRAPPED_ENV = "COMPILEWATCH_BUNDLE"     # set by `compilewatch collect` for its command
# What a scheduler sends a job: the stop, and SLURM's --signal warnings before the time limit
_SCHEDULER_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


class Collection(contextlib.ContextDecorator):
    """One in-process run: `start()` ... `finish()`, or `with`, or a decorator (each call its own
    run). `bundle` is the folder once started; `result` (a CollectResult) once finished."""

    def __init__(self, model: str | None = None, label: str | None = None, out=DEFAULT_OUT, *,
                 logs=DEFAULT_LOGS, trace: bool = True, hooks: bool = True, archive: bool = False,
                 inbox: str | os.PathLike | None = None, collector: str | None = None,
                 manifest_extra: dict | None = None, rank: int = 0, world_size: int = 1,
                 join: str | os.PathLike | None = None):
        self._args = dict(model=model, label=label, out=out, logs=logs, trace=trace, hooks=hooks,
                          archive=archive, inbox=inbox, collector=collector, manifest_extra=manifest_extra,
                          rank=rank, world_size=world_size, join=join)
        # A multi-rank job: rank 0 makes the bundle and writes its manifest once every rank has
        # written its own files; the other ranks `join` rank 0's folder (a trainer broadcasts it).
        self.rank, self.world_size, self.join = rank, world_size, join
        self.model, self.label, self.out = model, label, out
        self.logs, self.trace, self.hooks = logs, trace, hooks
        self.archive, self.inbox = archive, inbox
        self.collector = collector or f"compilewatch.collect {__version__}"
        self.manifest_extra = dict(manifest_extra or {})
        self.bundle: Path | None = None
        self.result: CollectResult | None = None
        self.deferred = False            # under `compilewatch collect`: the wrapper writes the bundle
        self._active = False
        self._undo: contextlib.ExitStack | None = None

    def _recreate_cm(self):
        return Collection(**self._args)

    def __enter__(self) -> "Collection":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.finish(exc)
        return False

    @property
    def active(self) -> bool:
        return self._active

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> "Collection":
        if self._active:
            raise CollectError("this collection is already running", "finish it before starting it again")
        if os.environ.get(WRAPPED_ENV):
            self.deferred, self._active = True, True
            self.bundle = Path(os.environ[WRAPPED_ENV])
            return self
        try:
            import torch
        except ImportError:
            raise TorchMissingError("torch is not installed in this Python") from None
        self.command = list(sys.argv) or [sys.executable]
        self.run_id = uuid.uuid4().hex
        self.setting = torch_logs_setting(self.logs)
        self.env_info = environment(os.getcwd())
        self.env_info["torch_version"] = getattr(torch, "__version__", None)
        name = self.model or self.label or default_name(self.command, None)
        if self.join is not None:
            self.bundle = Path(self.join)
        else:
            self.bundle = prepare_bundle_dir(self.out, name, self.run_id)
        self.started_at, self._t0 = utc_now(), time.monotonic()
        undo = contextlib.ExitStack()
        try:
            # Each part reaches into torch's logging internals: one that a torch lacks degrades that
            # part of the bundle only.
            _optional(undo, "TORCH_LOGS", _torch_logs(self.setting, self.bundle / TORCH_LOGS))
            if self.trace:
                _optional(undo, "the structured trace", _structured_trace(self.bundle / TRACE_DIR))
            if self.hooks:
                _optional(undo, "the timing hooks",
                          _timing_hooks(torch, self.bundle / TIMINGS, self.rank, self.world_size))
            undo.enter_context(_finish_on_signals(self))
            atexit.register(self._at_exit)
            undo.callback(atexit.unregister, self._at_exit)
        except BaseException:
            undo.close()
            if self.join is None:
                shutil.rmtree(self.bundle, ignore_errors=True)
            raise
        self._undo, self._active = undo, True
        return self

    # -- during --------------------------------------------------------------------------------
    def mark_step(self, trainer_name: str) -> None:
        """One optimizer step of a trainer: the iteration period follows the trainer's steps."""
        if self._active and (self.hooks or self.deferred):
            hooks_mod.mark_trainer_step(trainer_name)

    def time_modules(self, root) -> None:
        """Time the already compiled submodules of `root` (compiled before the collection began)."""
        if self._active and self.hooks and not self.deferred:
            timed = hooks_mod.time_compiled_modules(root)
            if timed:
                self._undo.callback(hooks_mod.untime, timed)

    # -- finish --------------------------------------------------------------------------------
    def finish(self, exc: BaseException | None = None, *, exit_status: int | None = None,
               end_reason: str | None = None, before_manifest=None) -> CollectResult | None:
        """Write the bundle and put everything back. The end reason comes from `exc` (None: exited;
        KeyboardInterrupt: interrupted; SystemExit: its code; anything else: crashed) unless given.
        `before_manifest` is called once this rank's files are written (a trainer's barrier, so
        that rank 0 lists every rank's files). Returns the result (its manifest None on a rank
        that joined); None under the wrapper, which writes the bundle itself."""
        if not self._active:
            return self.result
        self._active = False
        if self.deferred:
            return None
        status, reason = _outcome(exc)
        status = status if exit_status is None else exit_status
        reason = end_reason or reason
        ended_at, wall = utc_now(), round(time.monotonic() - self._t0, 3)
        self._undo.close()          # timings.json is written here, before the hooks go
        if before_manifest is not None:
            before_manifest()
        if self.join is not None:
            self.result = CollectResult(self.bundle, status, reason, None)
            return self.result
        manifest = build_manifest(self.run_id, self.bundle, self.command, self.model, self.label,
                                  self.started_at, ended_at, wall, status, reason, self.env_info,
                                  {"TORCH_LOGS": self.setting}, self.collector, None, self.hooks,
                                  {"in_process": True, **self.manifest_extra})
        write_manifest(self.bundle, manifest)
        path = archive_bundle(self.bundle) if self.archive else self.bundle
        if self.inbox is not None:
            send_to_inbox(path, self.inbox)
        self.result = CollectResult(path, status, reason, manifest)
        return self.result

    def _at_exit(self):
        # The interpreter is ending inside the collection (a trainer that never called back)
        self.finish(end_reason="crashed", exit_status=1)


def collect(model: str | None = None, label: str | None = None, out=DEFAULT_OUT, **kwargs) -> Collection:
    """Collect this process's torch.compile logs, trace and timings into a bundle under `out`:
    ``with collect(model=..., label=...):`` or ``@collect(...)``. Keyword arguments: logs (TORCH_LOGS
    components), trace, hooks (False turns each off), archive (write <bundle>.tar.gz), inbox (a
    store's inbox folder to drop the finished bundle into)."""
    return Collection(model, label, out, **kwargs)


def _outcome(exc: BaseException | None) -> tuple[int, str]:
    if exc is None:
        return 0, "exited"
    if isinstance(exc, KeyboardInterrupt):
        return 128 + signal.SIGINT, "interrupted"
    if isinstance(exc, SystemExit):
        code = exc.code
        status = 0 if code is None else code if isinstance(code, int) else 1
        return status, "exited" if status == 0 else "crashed"
    return 1, "crashed"


def send_to_inbox(path: Path, inbox: str | os.PathLike) -> Path:
    """Copy a bundle (folder or archive) into a store's inbox the way the inbox expects: under a
    dot-name first, renamed into place once whole, so a watcher never takes half of it."""
    inbox = Path(inbox).expanduser()
    inbox.mkdir(parents=True, exist_ok=True)
    target, tmp = inbox / path.name, inbox / f".{path.name}.part"
    if path.is_dir():
        shutil.copytree(path, tmp)
    else:
        shutil.copy2(path, tmp)
    os.replace(tmp, target)
    return target


# -- what a collection turns on, each with its undo ---------------------------------------------
def _optional(undo: contextlib.ExitStack, what: str, cm) -> None:
    try:
        undo.enter_context(cm)
    except Exception as e:
        hooks_mod._warn(f"{what} not collected in this process: {type(e).__name__}: {e}")


@contextlib.contextmanager
def _torch_logs(setting: str, path: Path):
    """TORCH_LOGS as if set at import, and its records also into `path` in torch's glog format."""
    from torch._logging import _internal

    old_env = os.environ.get(_internal.LOG_ENV_VAR)
    old_state = _internal.log_state
    # _init_logs reads the variable: the one way that every torch since 2.1 takes the full syntax
    # (components, artifacts, +/- levels, module names) without our parsing it.
    os.environ[_internal.LOG_ENV_VAR] = setting
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(_internal.TorchLogsFormatter())
    handler.setLevel(logging.DEBUG)
    loggers = []
    try:
        _internal._init_logs()
        # Not one of torch's tracked handlers, so a set_logs() inside the block keeps it.
        for qname in _internal.log_registry.get_log_qnames():
            log = logging.getLogger(qname)
            log.addHandler(handler)
            loggers.append(log)
        yield
    finally:
        for log in loggers:
            log.removeHandler(handler)
        handler.close()
        if old_env is None:
            os.environ.pop(_internal.LOG_ENV_VAR, None)
        else:
            os.environ[_internal.LOG_ENV_VAR] = old_env
        _internal.log_state = old_state
        _internal._init_logs()


@contextlib.contextmanager
def _structured_trace(folder: Path):
    """torch's structured trace (what TORCH_TRACE writes) into `folder` while the block runs."""
    from torch._logging import _internal, structured

    handler = _internal.LazyTraceHandler(str(folder))
    handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
    trace_log = _internal.trace_log
    old_level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        # Records refer to file names interned earlier in this process by number: define them in
        # this file too, with the numbers they already have (another trace keeps its own).
        for text, number in list(structured.INTERN_TABLE.items()):
            record = trace_log.makeRecord(trace_log.name, logging.DEBUG, __file__, 0, "", (), None,
                                          extra={"metadata": {"str": (text, number)}, "payload": None})
            handler.handle(record)
        yield
    finally:
        trace_log.removeHandler(handler)
        handler.close()
        trace_log.setLevel(old_level)


@contextlib.contextmanager
def _timing_hooks(torch, path: Path, rank: int, world_size: int):
    """The wrapper's timing hooks for this process: a recorder of its own writing `path` at the
    end (timings.rankN.json for rank N > 0); torch.compile patched and the optimizer hook
    registered unless something else did."""
    old_recorder, old_steps = hooks_mod.RECORDER, dict(hooks_mod._step_timers)
    recorder = hooks_mod.RECORDER = hooks_mod.Recorder()
    recorder.path, recorder.rank = str(path), str(rank)
    if world_size > 1:
        recorder.ranks = {"rank": rank, "world_size": world_size}
    hooks_mod._step_timers.clear()
    installed = False
    try:
        installed = hooks_mod.install(torch, exit_hooks=False)
        yield recorder
    finally:
        try:
            recorder.write()
        except Exception as e:  # a bundle without timings is still a bundle
            hooks_mod._warn(f"could not write timings: {e}")
        if installed:
            hooks_mod.uninstall(torch)
        hooks_mod.RECORDER = old_recorder
        hooks_mod._step_timers.clear()
        hooks_mod._step_timers.update(old_steps)


@contextlib.contextmanager
def _finish_on_signals(collection: Collection):
    """A scheduler's SIGTERM (or SLURM's USR1/USR2 warning) to a program with no handler of its own
    would end the process with no bundle: write it first, then let the signal do what it would."""
    def on_signal(signum, frame):
        collection.finish(exit_status=128 + signum, end_reason="terminated")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _SCHEDULER_SIGNALS:
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                old[sig] = signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in old.items():
            if signal.getsignal(sig) is on_signal:   # a handler the program set meanwhile stays
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)
