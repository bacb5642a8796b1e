"""Timing hooks: per-callable compile and step times, dynamo counters, compile phases, peak memory.

Loaded into a wrapped command's Python process by ``collectors/_inject/sitecustomize.py`` (which
patches ``torch.compile`` and ``nn.Module.compile`` once torch is imported), or used directly::

    from compilewatch.collectors.hooks import step
    for batch in loader:
        with step():
            train_step(batch)

The output is ``timings.json`` in the shape of ``ingest.bundle.TIMINGS_DOC``, written at exit
(atexit, and on SIGTERM, SIGUSR1 or SIGUSR2 when the program has no handler of its own) to ``$COMPILEWATCH_TIMINGS``.

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
- Peak memory on a GPU is CUDA's max_memory_allocated. On the CPU the process's peak resident set
  is kept too, but torch's compile and the allocator's cached pages fill it, so what a change to the
  model's activations does is lost in it. The hooks also read the C heap's bytes in use (glibc's
  mallinfo2, ~40 us) right after timed steady calls of a compiled callable: the forward's saved
  activations are then still held, so the highest reading is the steps' own peak, and it is exact
  run to run (activation checkpointing's saving shows; a resident-set figure hides it).

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
MAX_GAPS_KEPT = 200000          # call-start gaps per callable (1.6 MB): the iteration period's sample
_TARGET_OVERHEAD = 0.005        # fraction of a step the timing itself may cost
_ITERATION_OVERHEAD = 0.002     # fraction of an iteration its mark may cost


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


# CUDA graphs under mode="reduce-overhead": torch counts skips and partitions but neither the
# graphs it records nor their replays, so the hooks count the calls of the CUDA-graph tree
# manager's record_function and execute_node (named so since torch 2.0). Watched from the first
# compile that imported the module (its first call only warms up, the recording comes later).
_CUDAGRAPH = [0, 0]            # [recordings, replays]
_cudagraphs_watched = False


def _watch_cudagraphs() -> None:
    global _cudagraphs_watched
    mod = sys.modules.get("torch._inductor.cudagraph_trees")
    manager = getattr(mod, "CUDAGraphTreeManager", None)
    names = ("record_function", "execute_node")
    # a torch that renamed either is not watched: a count of nothing would read as "no replays"
    if _cudagraphs_watched or manager is None or not all(callable(getattr(manager, n, None)) for n in names):
        return
    _cudagraphs_watched = True
    for slot, name in enumerate(names):
        original = getattr(manager, name)

        def counted(self, *args, _original=original, _slot=slot, **kwargs):
            _CUDAGRAPH[_slot] += 1
            return _original(self, *args, **kwargs)
        setattr(manager, name, counted)


def _cudagraph_doc() -> dict | None:
    """What timings.json says of CUDA graphs: None where no compile brought the tree manager in."""
    if not _cudagraphs_watched:
        return None
    return {"recordings": _CUDAGRAPH[0], "replays": _CUDAGRAPH[1]}


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
        self.first_call_done_s = None      # the process's age when the first call returned
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
        # Call-start gaps (s) and, per gap, calls since the last compile: the iteration period when
        # the job steps no optimizer (Recorder.iteration picks the outermost callable's).
        self._last_start = None
        self._gaps: list[float] = []
        self._gap_since: list[int] = []
        self.replayed_calls = 0            # calls during which a CUDA graph was replayed

    # -- the call path -------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        replays = _CUDAGRAPH[1]
        out = self._call(fn, args, kwargs)
        if _CUDAGRAPH[1] != replays:
            self.replayed_calls += 1
        return out

    def _call(self, fn, args, kwargs):
        n = self.calls
        self.calls = n + 1
        now = time.perf_counter()
        if self._last_start is not None and len(self._gaps) < MAX_GAPS_KEPT:
            self._gaps.append(now - self._last_start)
            self._gap_since.append(self._since_compile)
        self._last_start = now
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
        if phase == "steady" and not cuda and self.mode == "compiled":
            HEAP.after_call()      # after the clock stopped: the reading is never in a step's time
        return out

    def _on_compiled_during(self, n, t0, cuda):
        torch = self.torch
        _watch_cudagraphs()
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
            self.first_call_done_s = process_age()
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
            done = _take_done(self, block)
            if not done:
                return
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
    def iteration_dict(self) -> dict:
        """This callable's call-start gaps as an iteration series (host clock). A gap holds the
        previous call and whatever ran between the two calls; it is "compile" when that call
        compiled, "warmup" for the next ``warmup`` gaps."""
        periods, steady = [], []
        for i, (gap, since) in enumerate(zip(self._gaps, self._gap_since)):
            phase = "compile" if since == 0 else "warmup" if since <= self.warmup else "steady"
            ms = gap * 1e3
            if phase == "steady":
                steady.append(ms)
            if len(periods) < MAX_STEPS_KEPT:
                periods.append({"step": i + 1, "phase": phase, "duration_ms": round(ms, 4), "peak_mem_bytes": None})
        return _iteration_doc(f"{self.name} calls", "compiled_call", "host", periods, steady, self.calls)

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
            "replayed_calls": self.replayed_calls if _cudagraphs_watched else None,
            "sample_every": self.sample_every,
            "steady_median_ms": _round(_percentile(steady, 0.5)),
            "steady_iqr_ms": _round(None if not steady else _percentile(steady, 0.75) - _percentile(steady, 0.25)),
            "steady_samples": len(steady),
        }


def _take_done(timer, block: bool) -> list:
    """Pop the oldest of timer._pending [(step, phase, (start_event, end_event))] whose end event
    the device has reached; with block, wait for all of them. Events that fail are dropped."""
    pending = timer._pending
    if not pending:
        return []
    # One stream, recorded in order: once an end event is done, all before it are. The CPU
    # usually runs a step or two ahead of the GPU, so look at an older event, not the newest.
    k = len(pending) if block else max(1, len(pending) - timer._EVENT_BATCH // 2)
    try:
        if block:
            pending[-1][2][1].synchronize()
        elif not pending[k - 1][2][1].query():
            return []
    except Exception:
        timer._pending = []
        return []
    done, timer._pending = pending[:k], pending[k:]
    return done


def _round(x, nd=4):
    return None if x is None else round(x, nd)


def _iteration_doc(name, source, clock, periods, steady, calls) -> dict:
    steady = sorted(steady)
    return {
        "name": name,
        "mode": "iteration",
        "source": source,
        "clock": clock,
        "first_call_ms": None,
        "steps": periods,
        "calls": calls,
        "steady_median_ms": _round(_percentile(steady, 0.5)),
        "steady_iqr_ms": _round(None if not steady else _percentile(steady, 0.75) - _percentile(steady, 0.25)),
        "steady_samples": len(steady),
    }


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


# -- the iteration period ----------------------------------------------------------------------
def mark_trainer_step(trainer_name: str) -> None:
    """One optimizer step of a trainer (Lightning, Hugging Face): the iteration period then follows
    the trainer's own steps, whatever optimizers it holds and however it accumulates gradients."""
    clock = RECORDER.trainer_clock
    if clock is None:
        clock = RECORDER.trainer_clock = IterationClock(f"{trainer_name} steps", "trainer_step")
    clock.mark()


class IterationClock:
    """The training-step period a team feels: the time from one iteration mark to the next, so it
    includes forward, backward, the optimizer, data loading and any host work in between, with no
    change to the script.

    Marks come from a global optimizer step post-hook when the job steps an optimizer (the first
    optimizer that steps is the one followed, so a GAN's two optimizers still give one period per
    iteration); otherwise the call starts of the outermost compiled callable serve (chosen at the
    end: the one called most often, see ``Recorder.iteration``).

    On CUDA each mark records one CUDA event and never waits: the period is device time between
    consecutive marks, which includes the device idling while the host prepares the next batch.
    Events are resolved in batches, like ``CallTimer``; when steps are so short that an event
    record would cost more than 0.2% of one, only every k-th mark records one and each period is
    the mean of the k steps (``sample_every``). On the CPU a mark is one clock read.
    An interval during which dynamo compiled is "compile", the next ``warmup`` are "warmup"."""

    _EVENT_BATCH = 64

    def __init__(self, name: str, source: str, warmup: int | None = None):
        self.name = name
        self.source = source                 # optimizer_step | compiled_call
        self.warmup = int(os.environ.get(WARMUP_ENV, "3")) if warmup is None else warmup
        self.marks = 0
        self.periods: list[dict] = []
        self.steady: list[float] = []
        self.clock = "host"
        self._last = None                    # host time or CUDA event of the previous mark
        self._last_c = 0                     # compile counter at the previous mark
        self._since_compile = 0
        self._last_n = 0                     # the previous sampled mark
        self.stride = 1                      # every stride-th mark is timed (see _adapt)
        self._pending = []                   # (n, phase, (start_event, end_event), steps between)
        self._free = []
        self._lock = threading.Lock()
        self.owner = None                    # the optimizer followed (compared by identity)

    def mark(self) -> None:
        n = self.marks
        self.marks = n + 1
        if n % self.stride and n:
            return                           # not sampled (short steps on CUDA, see _adapt)
        c = _compile_events()
        torch = _torch()
        if self.clock == "host" and n == 0 and _cuda_active(torch):
            self.clock = "cuda_event"
        if self.clock == "cuda_event":
            ev = self._free.pop() if self._free else torch.cuda.Event(enable_timing=True)
            ev.record()
            prev, self._last = self._last, ev
        else:
            now = time.perf_counter()
            prev, self._last = self._last, now
        last_c, self._last_c = self._last_c, c
        steps, self._last_n = n - self._last_n, n
        if n == 0:
            return
        if c != last_c:
            phase = "compile"
            self._since_compile = 0
        else:
            phase = "warmup" if self._since_compile < self.warmup else "steady"
            self._since_compile += steps
        if self.clock == "cuda_event":
            self._pending.append((n, phase, (prev, self._last), steps))
            if len(self._pending) >= self._EVENT_BATCH:
                self._resolve(block=False)
        else:
            self._add(n, phase, (self._last - prev) * 1e3 / steps)

    def _add(self, n, phase, ms):
        if phase == "steady":
            self.steady.append(ms)
            if self.clock == "cuda_event" and len(self.steady) % 64 == 16:
                self._adapt()
        if len(self.periods) < MAX_STEPS_KEPT:
            self.periods.append({"step": n, "phase": phase, "duration_ms": round(ms, 4), "peak_mem_bytes": None})

    def _adapt(self):
        # An event record costs microseconds: on steps of a millisecond or two, mark every k-th step
        # (the period is then the mean of k steps) so marking costs <= _ITERATION_OVERHEAD of a step.
        cost = _event_overhead_ms(_torch())
        recent = sorted(self.steady[-64:])
        med = recent[len(recent) // 2]
        if med > 0 and cost:
            self.stride = max(1, math.ceil(cost / (_ITERATION_OVERHEAD * med)))

    def _resolve(self, block: bool):
        with self._lock:
            for n, phase, (e0, e1), steps in _take_done(self, block):
                try:
                    self._add(n, phase, e0.elapsed_time(e1) / steps)
                except Exception:
                    continue
                # e0 is no longer needed by anyone (e1 is the next pair's start)
                self._free.append(e0)

    def to_dict(self) -> dict:
        if self._pending:
            self._resolve(block=True)
        d = _iteration_doc(self.name, self.source, self.clock, sorted(self.periods, key=lambda s: s["step"]),
                           self.steady, self.marks)
        d["sample_every"] = self.stride
        return d


def _on_optimizer_step(optimizer, args, kwargs) -> None:
    if RECORDER.first_step is None:
        RECORDER.first_step = (_first_step_age(), "optimizer_step")
    clock = RECORDER.optimizer_clock
    try:
        if clock is None:
            clock = RECORDER.optimizer_clock = IterationClock(f"{type(optimizer).__name__}.step", "optimizer_step")
            clock.owner = optimizer
        elif clock.owner is not optimizer:
            return
        clock.mark()
    except Exception as e:  # timing must never break the job
        RECORDER.optimizer_clock = _BROKEN
        _warn(f"iteration period not recorded: {e}")


_BROKEN = IterationClock("broken", "optimizer_step")
_BROKEN.owner = object()       # matches no optimizer: once broken, marks stop


def install_iteration_hook(torch):
    """Follow optimizer.step() of every optimizer; returns the removable handle (None when this
    torch has no global optimizer hooks)."""
    # torch.optim deletes its `optimizer` attribute; the module itself is loaded with torch.
    mod = sys.modules.get("torch.optim.optimizer")
    register = getattr(mod, "register_optimizer_step_post_hook", None)
    if register is None:
        return None
    return register(_on_optimizer_step)


class Recorder:
    """Process-wide registry of timers; writes timings.json."""

    def __init__(self):
        self.timers: list[CallTimer] = []
        self.extra_callables: list[dict] = []
        self._names: dict[str, int] = {}
        self._written = False
        self.path = os.environ.get(TIMINGS_ENV)
        self.rank = os.environ.get("RANK")   # rank N > 0 writes timings.rankN.json beside the path
        self.ranks: dict = {}                # rank / world_size a trainer told, over the launcher's
        self.optimizer_clock = None
        self.trainer_clock = None            # marked by a trainer callback (compilewatch.integrations)
        self.first_step = None          # (process age in s, "optimizer_step") at the first optimizer step

    def iteration(self) -> dict | None:
        """The iteration period: between a trainer's optimizer steps when a trainer callback marked
        them (its own count, gradient accumulation included), else between optimizer steps when the
        job stepped an optimizer twice or more, else between calls of the outermost compiled
        callable (the one called most often; the first compiled wins a tie, as a script's model is
        compiled before its helpers)."""
        for clock in (self.trainer_clock, self.optimizer_clock):
            if clock is not None and clock is not _BROKEN and clock.marks >= 2:
                return clock.to_dict()
        timers = [t for t in self.timers if t.mode == "compiled" and t._gaps]
        if not timers:
            return None
        best = max(timers, key=lambda t: (t.calls, -self.timers.index(t)))
        return best.iteration_dict()

    def time_to_first_step(self) -> tuple[float | None, str | None]:
        """Seconds from the process's start to the end of its first completed step, and which step:
        the first optimizer step ("optimizer_step"), else the first call of the outermost compiled
        callable, chosen as for the iteration period ("compiled_call")."""
        if self.first_step is not None and self.first_step[0] is not None:
            return self.first_step
        timers = [t for t in self.timers if t.mode == "compiled" and t.first_call_done_s is not None]
        if not timers:
            return None, None
        best = max(timers, key=lambda t: (t.calls, -self.timers.index(t)))
        return best.first_call_done_s, "compiled_call"

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
        callables = [t.to_dict() for t in self.timers] + list(self.extra_callables)
        iteration = self.iteration()
        if iteration is not None:
            callables.append(iteration)
        first_step_s, first_step_source = self.time_to_first_step()
        out = {
            "format_version": FORMAT_VERSION,
            "callables": callables,
            "dynamo_counters": {},
            "compile_phases_s": {},
            # Wall time of the calls that compiled (first calls and recompiles), as the job felt it.
            "compile_time_s": _round(sum(s["duration_ms"] for c in callables if c.get("mode") == "compiled"
                                         for s in c.get("steps") or () if s.get("phase") == "compile") / 1e3, 4),
            "time_to_first_step_s": _round(first_step_s, 3),
            "first_step_source": first_step_source,
            "process_start_source": _PROCESS_START[1] if first_step_s is not None else None,
            "peak_mem_bytes": None,
            "peak_rss_bytes": _peak_rss_bytes(),
            "peak_heap_bytes": None if cuda else HEAP.peak,
            "heap_samples": None if cuda else HEAP.samples,
            "cudagraphs": _cudagraph_doc(),
            "device": "cpu",
            "pid": os.getpid(),
            "env": {"cpu_model": cpu_model()},
        }
        out.update(_rank_env())
        out.update(self.ranks)
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
        try:
            # at the end of the job: a script may change them while it runs
            out["settings"] = _job_settings().job_settings(torch)
        except Exception as e:  # timing must never break the job
            _warn(f"settings not recorded: {e}")
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
        rank = self.rank
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


def _proc_start():
    """(seconds since boot at this process's start, CLOCK_BOOTTIME) from /proc/self/stat: the
    kernel's start time of the process (field 22, clock ticks since boot), which is before the
    interpreter ran anything; None where there is no /proc."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])   # fields after "(comm)" start at field 3
        return ticks / os.sysconf("SC_CLK_TCK")
    except Exception:
        return None


def _psutil_start():
    try:
        import psutil
        return psutil.Process().create_time()
    except Exception:
        return None


_boot_start = _proc_start()
_PROCESS_START = ((_boot_start, "proc_stat") if _boot_start is not None and hasattr(time, "CLOCK_BOOTTIME")
                  else (_psutil_start(), "psutil"))


def process_age() -> float | None:
    """Seconds since this process started (to 10 ms: the kernel counts its start in clock ticks);
    None where neither /proc nor psutil says when that was."""
    start, source = _PROCESS_START
    if start is None:
        return None
    try:
        now = time.clock_gettime(time.CLOCK_BOOTTIME) if source == "proc_stat" else time.time()
    except Exception:
        return None
    return max(now - start, 0.0)


def _first_step_age() -> float | None:
    # The step ends when the device has done its work: one synchronisation, at the first step only,
    # which compilation dominates anyway.
    torch = _torch()
    if _cuda_active(torch):
        try:
            torch.cuda.synchronize()
        except Exception:
            pass
    return process_age()


def _job_settings():
    """collectors/job_settings.py, also where the job's interpreter lacks compilewatch and
    sitecustomize loaded this file from our tree."""
    try:
        from compilewatch.collectors import job_settings
        return job_settings
    except ImportError:
        import importlib.util
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "job_settings.py")
        spec = importlib.util.spec_from_file_location("compilewatch.collectors.job_settings", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[spec.name] = mod
        return mod


class _Mallinfo2:
    """glibc's heap counters (mallinfo2, glibc 2.33+), read through ctypes; None elsewhere."""

    def __init__(self):
        self.fn = None
        try:
            import ctypes
            import ctypes.util

            class Info(ctypes.Structure):
                _fields_ = [(name, ctypes.c_size_t) for name in (
                    "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                    "uordblks", "fordblks", "keepcost")]
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            fn = libc.mallinfo2
            fn.restype = Info
            fn.argtypes = []
            self.fn = fn
        except Exception:    # musl, macOS, Windows, an older glibc: no heap figure
            self.fn = None

    def in_use(self) -> int | None:
        """Bytes the program holds from malloc: in use in the arenas plus mmapped blocks (large
        tensors). Freed memory the allocator keeps cached is not counted, unlike the resident set."""
        if self.fn is None:
            return None
        info = self.fn()
        return int(info.uordblks + info.hblkhd)


HEAP_SAMPLES_DENSE = 64         # steady calls read one by one, then every HEAP_SAMPLE_EVERY-th
HEAP_SAMPLE_EVERY = 16


class _HeapPeak:
    """The highest heap-in-use reading after a steady compiled call (CPU jobs)."""

    def __init__(self):
        self._reader = None
        self.peak: int | None = None
        self.samples = 0
        self._seen = 0

    def after_call(self) -> None:
        self._seen += 1
        if self._seen > HEAP_SAMPLES_DENSE and self._seen % HEAP_SAMPLE_EVERY:
            return
        if self._reader is None:
            self._reader = _Mallinfo2()
        try:
            b = self._reader.in_use()
        except Exception:
            b = None
        if b is not None:
            self.samples += 1
            if self.peak is None or b > self.peak:
                self.peak = b


HEAP = _HeapPeak()


def _peak_rss_bytes() -> int | None:
    """This process's peak resident memory: the CPU-side peak memory (ru_maxrss is KiB on Linux)."""
    try:
        import resource
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(kib) * (1 if sys.platform == "darwin" else 1024)
    except Exception:
        return None


def cpu_model() -> str | None:
    """The CPU's marketing name (a hardware fact the manifest needs for CPU runs)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    import platform
    return platform.processor() or None


def _rank_env() -> dict:
    """rank / world_size / local_rank as torchrun (and most launchers) set them; absent otherwise."""
    out = {}
    for key, env in (("rank", "RANK"), ("world_size", "WORLD_SIZE"), ("local_rank", "LOCAL_RANK")):
        try:
            out[key] = int(os.environ[env])
        except (KeyError, ValueError):
            pass
    return out


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
_ITERATION_HANDLE = None


def install(torch, exit_hooks: bool = True) -> bool:
    """Patch torch.compile (nn.Module.compile goes through it) so every compiled callable is timed.
    With exit_hooks, timings.json is written at exit and on SIGTERM/SIGUSR1/SIGUSR2 (the wrapped
    command's case; an in-process collection writes its own). False when already installed."""
    global ORIGINAL_COMPILE, _ITERATION_HANDLE
    if getattr(torch.compile, "_compilewatch", False):
        return False
    if _ITERATION_HANDLE is None:
        try:
            _ITERATION_HANDLE = install_iteration_hook(torch)
        except Exception as e:  # timing must never break the job
            _warn(f"iteration period not followed: {e}")
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
    if exit_hooks:
        _register_exit()
    return True


def uninstall(torch) -> None:
    """Undo install: torch.compile as it was, the optimizer step hook removed. Callables compiled
    meanwhile stay timed (into the recorder that was current when they were compiled)."""
    global ORIGINAL_COMPILE, _ITERATION_HANDLE
    if ORIGINAL_COMPILE is not None and getattr(torch.compile, "_compilewatch", False):
        torch.compile = ORIGINAL_COMPILE
    ORIGINAL_COMPILE = None
    if _ITERATION_HANDLE is not None:
        _ITERATION_HANDLE.remove()
        _ITERATION_HANDLE = None


def time_compiled_modules(root) -> list:
    """Time the compiled submodules of `root` (torch.compile'd before any hook was installed:
    a trainer's model compiled by the script). Returns the modules now timed, for untime."""
    torch = _torch()
    optimized = getattr(getattr(getattr(torch, "_dynamo", None), "eval_frame", None), "OptimizedModule", None)
    if optimized is None or not isinstance(root, torch.nn.Module):
        return []
    timed = []
    for module in root.modules():
        if isinstance(module, optimized) and not hasattr(module, "_compilewatch_timer"):
            wrap_compiled(module, _callable_name(module._orig_mod))
            if hasattr(module, "_compilewatch_timer"):
                timed.append(module)
    return timed


def untime(modules) -> None:
    """Give modules timed by wrap_compiled their own class back."""
    for module in modules:
        sub = type(module)
        if sub in _SUBCLASSES.values():
            object.__setattr__(module, "__class__", sub.__mro__[1])
            object.__delattr__(module, "_compilewatch_timer")


_exit_registered = False


def _register_exit():
    global _exit_registered
    if _exit_registered:
        return
    _exit_registered = True
    atexit.register(_write_at_exit)
    if threading.current_thread() is threading.main_thread():
        # What a scheduler sends: SIGTERM, and SLURM's --signal warnings (USR1/USR2), which end a
        # program that has no handler of its own without running atexit.
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            try:
                if signal.getsignal(sig) in (signal.SIG_DFL, None):
                    signal.signal(sig, _on_fatal_signal)
            except (ValueError, OSError):
                pass


def _write_at_exit():
    if RECORDER._written:
        return
    try:
        RECORDER.write()
    except Exception as e:
        _warn(f"could not write timings: {e}")


def _on_fatal_signal(signum, frame):
    _write_at_exit()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


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
