"""Compare what compilewatch stored for each bundle with the job's own clock (train_clock.py's
JSON line in the bundle's stdout): prints one line per run and exits 1 when a check fails.

Checks: compile_time (forward + backward + runtime autotuning) <= the script's wait for its first
step; the backward is counted (compile_time > forward alone, bwd_compilation_metrics rows present on
a cold run); time_to_first_step within max(2 s, 10%) of the script's clock; on max-autotune runs,
runtime autotuning seconds > 0 where the trace logged runtime_triton_autotune_time_us.

Usage: python check.py DB BUNDLE_DIR..."""
import json
import sys
from pathlib import Path

from compilewatch.store import open_store


def script_clock(bundle: Path) -> float | None:
    for name in ("stdout.txt", "torch_logs.txt"):
        f = bundle / name
        if f.exists():
            for line in f.read_text(errors="replace").splitlines():
                if line.startswith('{"first_step_s"'):
                    return json.loads(line)["first_step_s"]
    return None


def main(db: str, bundles: list[str]) -> int:
    bad = 0
    with open_store(db).read() as con:
        for b in map(Path, bundles):
            manifest = json.loads((b / "manifest.json").read_text())
            run_id = manifest["run_id"]
            m = dict(con.execute("SELECT metric, value FROM run_metrics WHERE run_id = ? AND subject = ''",
                                 [run_id]).fetchall())
            fwd, bwd, auto, cg = con.execute(
                "SELECT sum(forward_s), sum(backward_s), sum(runtime_autotune_s), "
                "(SELECT sum(runtime_cudagraphify_time_s) FROM later_compile_metrics WHERE run_id = ?) "
                "FROM rollup_compile_time WHERE run_id = ?", [run_id, run_id]).fetchone()
            waited = script_clock(b)
            ct, ttfs = m.get("compile_time"), m.get("time_to_first_step")
            ok = (waited is not None and ct is not None and ct <= waited and ct > (fwd or 0)
                  and ttfs is not None and abs(ttfs - waited) <= max(2.0, 0.1 * waited))
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {manifest.get('label')}: script waited {waited} s; time_to_first_step "
                  f"{ttfs} s; compile_time {ct} s = forward {fwd} + backward {bwd} + runtime autotuning {auto}"
                  f" (CUDA-graph recording {cg}, not counted)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
