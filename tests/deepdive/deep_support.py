"""What the deep-dive tests read (a module of its own: every test folder has a conftest, so
`from conftest import` would find another folder's): our CPU fixtures (tests/fixtures/trace), two
sample_logs bundles (a GPU training run with Triton output code, a CPU run), and, when they are
beside the checkout, a selection of the public tlparse logs (``CW_PUBLIC_LOGS`` points elsewhere)."""
from __future__ import annotations

import os
from pathlib import Path

from compilewatch.store import Store, open_store

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "trace"
SAMPLES = [REPO / "sample_logs" / "gpu-h200-torch2.11" / "mlp_default_train_run1.tar.gz",
           REPO / "sample_logs" / "cpu-torch2.13" / "item_branch_default_infer.tar.gz"]
PUBLIC = Path(os.environ.get("CW_PUBLIC_LOGS") or REPO.parent / "shared" / "public_logs" / "tlparse")
# one of each artifact shape the public logs hold: python guards (dynamo_guards), a failure with
# dynamo_error, 2.4-style graph-break envelopes, export records (no compile id), cache artifacts,
# a link, graph dumps (AOT Inductor), Inductor pre-grad graphs (autotune), a recompile storm
PUBLIC_NAMES = ["tlparse__inputs__simple.log", "tlparse__inputs__chromium_events.log",
                "tlparse__inputs__comp_metrics@5dc9d1a.log", "tlparse__inputs__export@d2b9629.log",
                "tlparse__inputs__cache_hit_miss@26fd753.log", "tlparse__inputs__links.log",
                "tlparse__inputs__multi_rank_logs__dedicated_log_torch_trace_rank_3.log",
                "tlparse__inputs__inductor_provenance_aot_log.log", "tlparse__inputs__artifacts.log",
                "tlparse__inputs__autotune_with_compile_id.log"]


def public_paths() -> list[Path]:
    return [PUBLIC / n for n in PUBLIC_NAMES if (PUBLIC / n).is_file()]


def trace_paths() -> list[Path]:
    return sorted(FIXTURES.glob("*.log.gz")) + public_paths()




def run_of(store: Store, file_name: str) -> str:
    """The run id a file was stored under (loose files: one run each)."""
    with store.read() as con:
        rows = con.execute("SELECT run_id FROM files WHERE original_name LIKE ? LIMIT 1", [f"%{file_name}"]).fetchall()
    assert rows, file_name
    return rows[0][0]
