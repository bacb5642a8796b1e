"""Property tests at every parser boundary: random mutations of real inputs (tests/fixtures and the
sample bundles) never raise past the boundary — a bad line is counted, a bad archive or manifest is
a typed error, never a traceback. A fixed budget keeps this file under a minute; the long run is
benchmarks/fuzz_parsers.py. Seeds, mutations and targets: fuzz_targets.py."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_targets import TARGETS, mutate, seeds

_SEEDS = seeds()
# Examples per target: the slow targets (whole trace logs, archives on disk) get fewer.
BUDGET = {"text": 300, "trace": 150, "bench_csv": 1500, "timings": 1500, "manifest": 1000, "sniff": 300,
          "gzip": 300, "archive": 150}


@pytest.mark.parametrize("target", list(TARGETS))
def test_mutated_real_inputs_never_raise_past_the_parser(target):
    pool = _SEEDS[target]
    assert pool, f"no real seed inputs for {target}"

    @settings(max_examples=BUDGET[target], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(0, len(pool) - 1), st.integers(0, 2**32 - 1))
    def run(i, seed):
        TARGETS[target](mutate(pool[i], random.Random(seed)))

    run()


@settings(max_examples=200, deadline=None, database=None)
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_never_raise_in_csv_timings_sniff_and_gzip(data):
    for name in ("bench_csv", "timings", "manifest", "sniff", "gzip"):
        TARGETS[name](data)


def test_timings_with_overflowing_numbers_and_wrong_shapes_count_errors():
    """Found by benchmarks/fuzz_parsers.py: a step number of 1e309 (JSON infinity) raised
    OverflowError out of parse_timings. Made from a real timings.json."""
    import io
    import json

    from compilewatch.ingest.records import CollectingSink
    from compilewatch.ingest.timings import parse_timings

    real = json.loads(_SEEDS["timings"][0])
    steps = real["callables"][0]["steps"]
    assert len(steps) > 2
    text = json.dumps(real).replace(json.dumps(steps[0])[:-1], json.dumps(steps[0])[:-1].replace(
        f'"step": {steps[0]["step"]}', '"step": 1e309'), 1)
    assert "1e309" in text
    sink = CollectingSink()
    parse_timings(io.BytesIO(text.encode()), sink)
    assert len(sink.rows["step_timings"]) == sum(len(c.get("steps") or []) for c in real["callables"]) - 1
    assert any("infinity" in e["message"] for e in sink.errors)
    for bad in ({"callables": 7}, {"callables": [{"steps": 3}]}, {"callables": [{"steps": [{"step": 1, "duration_ms": 10**400}]}]}):
        parse_timings(io.BytesIO(json.dumps(bad).encode()), CollectingSink())
