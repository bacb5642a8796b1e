"""Timing hooks: per-callable compile and step times, dynamo counters, compile phases, peak memory.

Loaded into a wrapped command's Python process by ``collectors/_inject/sitecustomize.py`` (which
patches ``torch.compile`` and ``nn.Module.compile`` once torch is imported), or used directly::

    from collectors.hooks import step
    for batch in loader:
        with step():
            train_step(batch)

The output is ``timings.json`` in the shape of ``ingest.bundle.TIMINGS_DOC``, written at exit
(atexit, and on SIGTERM when the program has no handler of its own) to ``$COMPILEWATCH_TIMINGS``.

How a call is timed, and why it is honest and cheap:
- The first call of a compiled callable (and any later call during which dynamo compiled something,
  i.e. a recompile) is timed on the host with the device synchronised before and after: it is
  dominated by compilation, so the synchronisation costs nothing that matters.
- Every other call on CUDA records a pair of CUDA events on the current stream and never waits:
  the pairs are resolved later (when a batch of them is complete, and at exit). Event time is the
  device time between the two points in the stream, so an asynchronous job is not made synchronous.
- When steps are so short that even two event records would exceed ~0.5% of a step, only every
  n-th call is timed (``sample_every`` in the output says how many); the others are only counted.
- The first ``COMPILEWATCH_WARMUP`` (default 3) calls after the compiling one are "warmup" and are
  excluded from steady-state figures (cudagraph recording, autotuning, allocator growth).

This module imports torch only when it is already imported by the program.
"""
from __future__ import annotations

import atexit
import json
import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

FORMAT_VERSION = 1
TIMINGS_ENV = "COMPILEWATCH_TIMINGS"
WARMUP_ENV = "COMPILEWATCH_WARMUP"
MAX_STEPS_KEPT = 20000          # per callable; later steps only count towards the summary
_TARGET_OVERHEAD = 0.005        # fraction of a step the timing itself may cost


def _torch():
    return sys.modules.get("torch")


def _cuda_active(torch) -> bool:
    # Never initialise CUDA ourselves: only time on the GPU when the program already uses it.
    try:
        return torch is not None and torch.cuda.is_initialized()
    except Exception:
        return False


def _compile_events() -> int:
    """A number that grows whenever dynamo compiles a frame (first compile or recompile)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0
    try:
        return utils.counters["frames"]["total"]
    except Exception:
        return 0


def _graph_stats() -> tuple[int, int]:
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0, 0
    c = utils.counters
    return c["stats"]["unique_graphs"], sum(c["graph_break"].values())


_stats_seen = (0, 0)


def _mark_stats():
    global _stats_seen
    _stats_seen = _graph_stats()


def _take_stats() -> tuple[int, int]:
    """Graphs and graph breaks added since the last compile any timer saw (compiles happen inside
    timed calls, so the difference belongs to the call that just compiled)."""
    global _stats_seen
    now = _graph_stats()
    g, b = now[0] - _stats_seen[0], now[1] - _stats_seen[1]
    _stats_seen = now
    return max(0, g), max(0, b)


def _percentile(sorted_vals, q):
    if not sorted_vals:
        return None
    k = (len(sorted_vals) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


class CallTimer:
    """Times the calls of one callable (a compiled function/module, or a marked step)."""

    _EVENT_BATCH = 64

    def __init__(self, name: str, mode: str, warmup: int | None = None, sample: bool = True):
        self.name = name
        self.mode = mode
        self.warmup = int(os.environ.get(WARMUP_ENV, "3")) if warmup is None else warmup
        self.sample = sample
        self.calls = 0
        self.first_call_ms = None
        self.steps: list[dict] = []
        self.steady: list[float] = []     # all resolved steady durations (ms), also past MAX_STEPS_KEPT
        self.compiles = 0                  # calls during which dynamo compiled something
        self.graphs = 0
        self.graph_breaks = 0
        self.sample_every = 1
        self._since_compile = 0
        self._pending = []                 # (step, start_event, end_event)
        self._free = []                    # reusable event pairs
        self._lock = threading.Lock()
        self._overhead_ms = None
        self._cuda = False
        self.torch = None

    # -- the call path -------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        n = self.calls
        self.calls = n + 1
        if n and self._since_compile >= self.warmup and n % self.sample_every:
            # Not sampled: only watch for a compile. This is the path most calls take when steps are short.
            c0 = _compile_events()
            out = fn(*args, **kwargs)
            if _compile_events() != c0:
                self._on_compiled_during(n, None, self._cuda)
            else:
                self._since_compile += 1
            return out
        torch = self.torch
        if torch is None:
            torch = self.torch = _torch()
        if not self._cuda:
            self._cuda = _cuda_active(torch)   # once CUDA is up it stays up: stop asking
        cuda = self._cuda
        c0 = _compile_events()
        if n == 0:
            _mark_stats()
        if n and cuda:
            ev = self._free.pop() if self._free else (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            t0 = time.perf_counter()
            ev[0].record()
            out = fn(*args, **kwargs)
            ev[1].record()
            if _compile_events() != c0:
                self._free.append(ev)
                self._on_compiled_during(n, t0, cuda)
                return out
            phase = "warmup" if self._since_compile < self.warmup else "steady"
            self._since_compile += 1
            self._pending.append((n, phase, ev))
            if len(self._pending) >= self._EVENT_BATCH:
                self._resolve(block=False)
            return out
        # Host timing: the first call (compiles; synchronising costs nothing that matters), or CPU.
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        if _compile_events() != c0 or n == 0:
            self._on_compiled_during(n, t0, cuda)
            return out
        ms = (time.perf_counter() - t0) * 1e3
        phase = "warmup" if self._since_compile < self.warmup else "steady"
        self._since_compile += 1
        self._add(n, phase, ms, None)
        return out

    def _on_compiled_during(self, n, t0, cuda):
        torch = self.torch
        g, b = _take_stats()
        self.graphs += g
        self.graph_breaks += b
        if cuda:
            torch.cuda.synchronize()
        ms = None if t0 is None else (time.perf_counter() - t0) * 1e3
        self.compiles += 1
        self._since_compile = 0
        peak = None
        if cuda:
            try:
                peak = torch.cuda.max_memory_allocated()
            except Exception:
                pass
        if n == 0:
            self.first_call_ms = ms
        if ms is not None:
            self._add(n, "compile", ms, peak)

    def _add(self, n, phase, ms, peak):
        if phase == "steady":
            self.steady.append(ms)
            if len(self.steady) % 64 == 16:
                self._adapt()
        if len(self.steps) < MAX_STEPS_KEPT:
            self.steps.append({"step": n, "phase": phase, "duration_ms": round(ms, 4), "peak_mem_bytes": peak})

    def _resolve(self, block: bool):
        with self._lock:
            pending = self._pending
            if not pending:
                return
            # One stream, recorded in order: once an end event is done, all before it are. The CPU
            # usually runs a step or two ahead of the GPU, so look at an older event, not the newest.
            k = len(pending) if block else max(1, len(pending) - self._EVENT_BATCH // 2)
            try:
                if block:
                    pending[-1][2][1].synchronize()
                elif not pending[k - 1][2][1].query():
                    return
            except Exception:
                self._pending = []
                return
            done, self._pending = pending[:k], pending[k:]
            for n, phase, (e0, e1) in done:
                try:
                    ms = e0.elapsed_time(e1)
                except Exception:
                    continue
                self._add(n, phase, ms, None)
                self._free.append((e0, e1))
            self._adapt()

    def _adapt(self):
        # Choose a sampling stride so that two event records cost <= _TARGET_OVERHEAD of a step.
        if not self.sample or len(self.steady) < 16:
            return
        if self._overhead_ms is None:
            self._overhead_ms = _event_overhead_ms(self.torch)
        recent = sorted(self.steady[-64:])
        med = recent[len(recent) // 2]
        if med > 0 and self._overhead_ms:
            self.sample_every = max(1, math.ceil(self._overhead_ms / (_TARGET_OVERHEAD * med)))

    # -- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        if self._pending:
            self._resolve(block=True)
        steady = sorted(self.steady)
        return {
            "name": self.name,
            "mode": self.mode,
            "first_call_ms": None if self.first_call_ms is None else round(self.first_call_ms, 3),
            "steps": sorted(self.steps, key=lambda s: s["step"]),
            "recompiles": max(0, self.compiles - 1),
            "graphs": self.graphs,
            "graph_breaks": self.graph_breaks,
            "calls": self.calls,
            "sample_every": self.sample_every,
            "steady_median_ms": _round(_percentile(steady, 0.5)),
            "steady_iqr_ms": _round(None if not steady else _percentile(steady, 0.75) - _percentile(steady, 0.25)),
            "steady_samples": len(steady),
        }


def _round(x, nd=4):
    return None if x is None else round(x, nd)


_EVENT_OVERHEAD = None


def _event_overhead_ms(torch) -> float:
    """Host cost of one timed call's bookkeeping (two event records or clock reads, counter reads,
    one step entry), measured once per process."""
    global _EVENT_OVERHEAD
    if _EVENT_OVERHEAD is not None:
        return _EVENT_OVERHEAD
    try:
        sink = []
        if _cuda_active(torch):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            mark = (e0.record, e1.record)
        else:
            mark = (time.perf_counter, time.perf_counter)
        t0 = time.perf_counter()
        for i in range(200):
            mark[0]()
            _compile_events()
            mark[1]()
            _compile_events()
            sink.append({"step": i, "phase": "steady", "duration_ms": 0.0, "peak_mem_bytes": None})
        _EVENT_OVERHEAD = (time.perf_counter() - t0) * 1e3 / 200
    except Exception:
        _EVENT_OVERHEAD = 0.0
    return _EVENT_OVERHEAD


class Recorder:
    """Process-wide registry of timers; writes timings.json."""

    def __init__(self):
        self.timers: list[CallTimer] = []
        self.extra_callables: list[dict] = []
        self._names: dict[str, int] = {}
        self._written = False
        self.path = os.environ.get(TIMINGS_ENV)

    def timer(self, name: str, mode: str, **kw) -> CallTimer:
        k = self._names.get(name, 0)
        self._names[name] = k + 1
        t = CallTimer(name if k == 0 else f"{name}#{k + 1}", mode, **kw)
        self.timers.append(t)
        return t

    def record_series(self, name, mode, durations_ms, first_call_ms=None, warmup=0, **fields):
        """Add an already-measured series (used by the bench worker, which times its own steps)."""
        steps = []
        if first_call_ms is not None:
            steps.append({"step": 0, "phase": "compile", "duration_ms": round(first_call_ms, 4), "peak_mem_bytes": fields.pop("compile_peak_mem_bytes", None)})
        base = len(steps)
        for i, ms in enumerate(durations_ms):
            steps.append({"step": base + i, "phase": "warmup" if i < warmup else "steady", "duration_ms": round(ms, 4), "peak_mem_bytes": None})
        d = {"name": name, "mode": mode, "first_call_ms": first_call_ms, "steps": steps,
             "recompiles": 0, "graphs": 0, "graph_breaks": 0}
        d.update(fields)
        self.extra_callables.append(d)

    def snapshot(self) -> dict:
        torch = _torch()
        cuda = _cuda_active(torch)
        out = {
            "format_version": FORMAT_VERSION,
            "callables": [t.to_dict() for t in self.timers] + list(self.extra_callables),
            "dynamo_counters": {},
            "compile_phases_s": {},
            "peak_mem_bytes": None,
            "device": "cpu",
            "pid": os.getpid(),
            "env": {},
        }
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is not None:
            try:
                out["dynamo_counters"] = {k: dict(v) for k, v in utils.counters.items() if v}
            except Exception:
                pass
            try:
                out["compile_phases_s"] = {k: round(sum(v), 6) for k, v in utils.compilation_time_metrics.items()}
            except Exception:
                pass
            try:
                out["compilation_metrics"] = _frame_metrics(utils)
            except Exception:
                pass
        if torch is not None:
            env = out["env"]
            env["torch_version"] = getattr(torch, "__version__", None)
            env["cuda_version"] = getattr(getattr(torch, "version", None), "cuda", None)
            try:
                from importlib.metadata import version
                env["triton_version"] = version("triton")
            except Exception:
                env["triton_version"] = None
            if cuda:
                try:
                    idx = torch.cuda.current_device()
                    out["device"] = f"cuda:{idx}"
                    env["gpu_name"] = torch.cuda.get_device_name(idx)
                    out["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())
                except Exception:
                    pass
        return out

    def write(self, path: str | None = None) -> str | None:
        path = path or self.path
        if not path:
            return None
        data = self.snapshot()
        rank = os.environ.get("RANK")
        if rank not in (None, "", "0"):
            root, ext = os.path.splitext(path)
            path = f"{root}.rank{rank}{ext}"
        elif not data["callables"] and os.path.exists(path):
            return None     # a helper process (dataloader worker) that timed nothing: don't clobber
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, path)
        self._written = True
        return path


def _metrics_row(m) -> dict:
    keep = ("compile_id", "co_name", "co_filename", "co_firstlineno", "entire_frame_compile_time_s",
            "backend_compile_time_s", "inductor_compile_time_s", "code_gen_time_s", "fail_type",
            "fail_reason", "graph_op_count", "guard_count", "cache_size", "recompile_reason")
    return {k: getattr(m, k, None) for k in keep if getattr(m, k, None) is not None}


def _frame_metrics(utils) -> list[dict]:
    # One record per compiled frame (records without co_name are the same compile's backward etc.)
    return [_metrics_row(m) for m in utils.get_compilation_metrics() if getattr(m, "co_name", None)]


RECORDER = Recorder()


# -- wrapping compiled callables ---------------------------------------------------------------
def _is_compiling() -> bool:
    fn = _IS_COMPILING[0]
    if fn is None:
        torch = _torch()
        fn = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
        _IS_COMPILING[0] = fn
    return fn()


_IS_COMPILING = [None]


def _timed(timer: CallTimer, fn, args, kwargs):
    if _is_compiling():
        # Called from inside another compiled region: dynamo traces through, nothing to time.
        return fn(*args, **kwargs)
    return timer.call(fn, args, kwargs)


def wrap_compiled(compiled, name: str):
    """Return `compiled` with its calls timed. Modules keep their type (a subclass is swapped in),
    so isinstance, state_dict, .train() and attribute access behave as before."""
    torch = _torch()
    timer = RECORDER.timer(name, "compiled")
    if torch is not None and isinstance(compiled, torch.nn.Module):
        cls = type(compiled)
        sub = _timed_subclass(cls)
        try:
            compiled.__class__ = sub
            object.__setattr__(compiled, "_compilewatch_timer", timer)
            return compiled
        except TypeError:
            pass
    import functools

    @functools.wraps(compiled)
    def timed(*args, **kwargs):
        return _timed(timer, compiled, args, kwargs)

    timed._compilewatch_timer = timer
    timed._compilewatch_inner = compiled
    return timed


_SUBCLASSES: dict = {}


def _timed_subclass(cls):
    sub = _SUBCLASSES.get(cls)
    if sub is None:
        def __call__(self, *args, **kwargs):
            return _timed(self._compilewatch_timer, super(sub, self).__call__, args, kwargs)

        def __reduce__(self):
            # Pickle (torch.save of the whole module, deepcopy) as the original class: this
            # subclass can't be found by name, and a copy needn't be timed.
            r = super(sub, self).__reduce__()
            if isinstance(r, tuple) and r and r[0] is sub:
                r = (cls,) + tuple(r[1:])
            return r
        sub = type(cls.__name__, (cls,), {"__call__": __call__, "__reduce__": __reduce__, "__module__": cls.__module__})
        _SUBCLASSES[cls] = sub
    return sub


def _callable_name(model) -> str:
    torch = _torch()
    if torch is not None and isinstance(model, torch.nn.Module):
        return f"{type(model).__name__}.forward"
    self_obj = getattr(model, "__self__", None)
    if torch is not None and isinstance(self_obj, torch.nn.Module):
        return f"{type(self_obj).__name__}.forward"
    return getattr(model, "__qualname__", None) or getattr(model, "__name__", None) or type(model).__name__


ORIGINAL_COMPILE = None


def install(torch) -> None:
    """Patch torch.compile (nn.Module.compile goes through it) so every compiled callable is timed."""
    global ORIGINAL_COMPILE
    if getattr(torch.compile, "_compilewatch", False):
        return
    orig = torch.compile
    ORIGINAL_COMPILE = orig

    def compile(model=None, **kwargs):
        if model is None:
            return lambda m: compile(m, **kwargs)
        compiled = orig(model, **kwargs)
        if kwargs.get("disable") or compiled is model:
            return compiled
        try:
            return wrap_compiled(compiled, _callable_name(model))
        except Exception as e:  # timing must never break the job
            _warn(f"not timing {model!r}: {e}")
            return compiled

    compile.__doc__ = orig.__doc__
    compile.__wrapped__ = orig
    compile._compilewatch = True
    torch.compile = compile
    _register_exit()


_exit_registered = False


def _register_exit():
    global _exit_registered
    if _exit_registered:
        return
    _exit_registered = True
    atexit.register(_write_at_exit)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):
            pass


def _write_at_exit():
    if RECORDER._written:
        return
    try:
        RECORDER.write()
    except Exception as e:
        _warn(f"could not write timings: {e}")


def _on_sigterm(signum, frame):
    _write_at_exit()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _warn(msg):
    try:
        sys.stderr.write(f"compilewatch hooks: {msg}\n")
    except Exception:
        pass


# -- explicit API ------------------------------------------------------------------------------
_step_timers: dict[str, CallTimer] = {}


@contextmanager
def step(name: str = "step"):
    """Time one step of a loop: ``with step(): train_step(batch)``. The first step, and any step
    during which dynamo compiled, is labelled "compile"; the next few "warmup"; the rest "steady".
    On CUDA, steps are timed with CUDA events: no synchronisation per step. A step whose body
    raises is not recorded."""
    timer = _step_timers.get(name)
    if timer is None:
        timer = _step_timers[name] = RECORDER.timer(name, "marked", sample=False)
        _register_exit()
    # Same rules as CallTimer.call, written out because a with-body can't be handed to it.
    torch = timer.torch = _torch()
    cuda = timer._cuda = timer._cuda or _cuda_active(torch)
    n = timer.calls
    timer.calls += 1
    c0 = _compile_events()
    if n == 0:
        _mark_stats()
    if cuda and n > 0:
        ev = timer._free.pop() if timer._free else (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        t0 = time.perf_counter()
        ev[0].record()
        yield
        ev[1].record()
        if _compile_events() != c0:
            timer._free.append(ev)
            timer._on_compiled_during(n, t0, cuda)
        else:
            phase = "warmup" if timer._since_compile < timer.warmup else "steady"
            timer._since_compile += 1
            timer._pending.append((n, phase, ev))
            if len(timer._pending) >= timer._EVENT_BATCH:
                timer._resolve(block=False)
        return
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    yield
    if _compile_events() != c0 or n == 0:
        timer._on_compiled_during(n, t0, cuda)
        if c0 == _compile_events() and timer.steps and timer.steps[-1]["step"] == n:
            timer.steps[-1]["phase"] = "warmup"   # first step, nothing compiled: not a compile
        return
    ms = (time.perf_counter() - t0) * 1e3
    phase = "warmup" if timer._since_compile < timer.warmup else "steady"
    timer._since_compile += 1
    timer._add(n, phase, ms, None)


def write_timings(path: str | None = None) -> str | None:
    """Write timings.json now (to `path`, else $COMPILEWATCH_TIMINGS); returns the path written."""
    return RECORDER.write(path)
