"""Eager-vs-compiled benchmark CSVs: ours (collectors/bench) and PyTorch's benchmarks/dynamo output.

PyTorch's harness writes dev,name,batch_size,speedup,abs_latency,compilation_latency,
compression_ratio,eager_peak_mem,dynamo_peak_mem,calls_captured,unique_graphs,graph_breaks,...
(latency in ms, memory in GB). Ours adds mode, task, eager_latency, compiled_spread, eager_spread,
recompiles, steps. Columns we don't know are ignored; a row that doesn't parse is an error row.
"""
from __future__ import annotations

import csv

# csv column -> (bench_results column, converter)
_COLUMNS = {
    "dev": ("device", str), "device": ("device", str),
    "name": ("model", str), "model": ("model", str),
    "batch_size": ("batch_size", int),
    "speedup": ("speedup", float),
    "abs_latency": ("abs_latency_ms", float),
    "eager_latency": ("eager_latency_ms", float),
    "compiled_spread": ("compiled_spread_ms", float),
    "eager_spread": ("eager_spread_ms", float),
    "compilation_latency": ("compilation_latency_s", float),
    "compression_ratio": ("compression_ratio", float),
    "eager_peak_mem": ("eager_peak_mem_gb", float),
    "dynamo_peak_mem": ("dynamo_peak_mem_gb", float),
    "graph_breaks": ("graph_breaks", int),
    "unique_graphs": ("unique_graphs", int),
    "recompiles": ("recompiles", int),
    "mode": ("mode", str),
    "task": ("task", str),
    "steps": ("steps", int),
    "accuracy": ("accuracy", str),
}


def _num(conv, value: str):
    value = value.strip()
    if value == "" or value.lower() in ("nan", "none", "null"):
        return None
    if conv is int:
        # int(float(...)) raises OverflowError on inf and 1e309: counted as a bad number below
        return int(float(value))
    return conv(value)


def _lines(stream):
    # A bare CR inside a line (a Windows tool's stray \r, a mangled copy) is not a row break for us,
    # and the csv module refuses it in an unquoted field: make it a space so the row still parses.
    for line in stream:
        text = line.decode("utf-8", errors="replace")
        body = text.rstrip("\r\n")
        if "\r" in body:
            text = body.replace("\r", " ") + "\n"
        yield text


def parse_bench_csv(stream, sink) -> None:
    reader = csv.reader(_lines(stream))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as e:
        sink.error(1, "unknown_format", f"CSV header does not parse: {e}", "")
        return
    cols = [c.strip().lower() for c in header]
    if "speedup" not in cols:
        sink.error(1, "unknown_format", "CSV header has no 'speedup' column", ",".join(header)[:200])
        return
    while True:
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as e:  # one malformed row (e.g. a NUL byte) must not drop the rest of the file
            sink.error(reader.line_num, "payload", f"row does not parse as CSV: {e}", "")
            continue
        line_no = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(cols):
            sink.error(line_no, "payload", f"expected {len(cols)} fields, found {len(values)}", ",".join(values)[:200])
            continue
        row = {}
        try:
            for col, value in zip(cols, values):
                target = _COLUMNS.get(col)
                if target:
                    row[target[0]] = _num(target[1], value) if target[1] is not str else (value.strip() or None)
        except (ValueError, OverflowError) as e:
            sink.error(line_no, "payload", f"bad number: {e}", ",".join(values)[:200])
            continue
        sink.row("bench_results", row)
