"""Upload: many logs, bundles and archives at once; a result row per file."""
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from compilewatch.app import auth, review_refresh, ui
from compilewatch.app import dashboard_settings as settings
from compilewatch.app.filters import Filters
from compilewatch.app.queries import upload
from compilewatch.core import settings as table


def _total_cap_mb() -> int:
    try:
        return max(1, int(float(settings.get("upload_max_total_mb"))))
    except ValueError:
        return int(table.BY_NAME["upload_max_total_mb"].default)


def _per_file_mb() -> int:
    return int(st.get_option("server.maxUploadSize"))


def _forget(uploaded) -> None:
    """Drop the uploaded bytes Streamlit keeps in the server's memory for this session (until the tab
    closes, otherwise). The same call Streamlit's own chat_input makes once it has used a file; if
    a later Streamlit moves it, the bytes are freed when the session ends instead."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        for up in uploaded:
            ctx.uploaded_file_mgr.remove_file(session_id=ctx.session_id, file_id=up.file_id)
    except Exception:  # noqa: BLE001 - freeing early is an optimisation, never a failure
        pass


ui.page("Upload logs", require_data=False)
st.markdown("TORCH_TRACE files (`TORCH_TRACE=dir`), TORCH_LOGS text captured from stderr, "
            "`compilewatch collect` bundles as `.zip` / `.tar.gz`, `bench.csv`, and `.gz` logs. "
            "Files already in the store are recognised by their SHA-256 and not stored twice.")

# The uploader's key changes after each ingest: Streamlit then drops the uploaded bytes it holds in
# memory, instead of keeping them for as long as the browser tab stays open.
gen = st.session_state.setdefault("up_gen", 0)
files = st.file_uploader("Log files, bundles or archives", accept_multiple_files=True, key="up_files" if gen == 0 else f"up_files_{gen}",
                         type=None, help="Drag many files at once; a bundle archive carries its own manifest.")
total_cap_mb = _total_cap_mb()
st.caption(f"Up to {_per_file_mb():,} MiB per file (a larger file is marked in the list above and not sent) "
           f"and {total_cap_mb:,} MiB per ingest in all.")
st.caption("Used only where a file does not say (bundles carry a manifest; loose logs usually do not):")
c1, c2, c3 = st.columns(3)
model = c1.text_input("Model", key="up_model", placeholder="e.g. hf_Bert")
label = c2.text_input("Label", key="up_label", placeholder="e.g. main, pr-417, nightly")
torch_version = c3.text_input("Torch version", key="up_torch", placeholder="e.g. 2.6.0")
go = st.button("Ingest", key="up_go", type="primary", disabled=not files, icon=":material/upload:")

if go and files:
    from compilewatch.ingest.loader import FileResult, ingest_paths

    store = ui.get_store()
    # Under the store's scratch folder, not /tmp: the store's disk is sized for logs, and what a
    # killed server leaves is swept by the next process that opens the store.
    tmp = Path(tempfile.mkdtemp(prefix="upload-", dir=store.tmp_dir))
    bar = st.progress(0.0, text="Starting…")

    last = [0.0]

    def progress(done: int, total: int, name: str) -> None:
        # At most ~5 updates a second: each one is a message to the browser.
        now = time.monotonic()
        if now - last[0] < 0.2 and done < total:
            return
        last[0] = now
        frac = min(1.0, done / total) if total else 1.0
        bar.progress(frac, text=f"{name or 'done'} · {done / 2**20:,.1f} of {total / 2**20:,.1f} MiB")

    refused = []
    try:
        paths, taken = [], 0
        for i, up in enumerate(files):
            if taken + up.size > total_cap_mb * 2**20:
                refused.append(FileResult(Path(up.name).name, "unknown", "failed", size_bytes=up.size, message=(
                    f"over the {total_cap_mb:,} MiB cap for one upload ({(taken + up.size) / 2**20:,.0f} MiB with "
                    "the files before it); upload it on its own or use `compilewatch ingest`")))
                continue
            taken += up.size
            # One folder per upload keeps the original name (the loader reports it) even when two collide.
            dest = tmp / str(i) / Path(up.name).name
            dest.parent.mkdir(parents=True)
            with dest.open("wb") as out:
                shutil.copyfileobj(up, out, 1 << 20)
            paths.append(dest)
        report = ingest_paths(store, paths, model=model.strip() or None, label=label.strip() or None,
                              torch_version=torch_version.strip() or None, progress=progress, source="upload",
                              uploaded_by=auth.current_user())
        if report.count("stored") + report.count("partial"):
            # the Overview's next visitor reads the review kept for these runs instead of computing it
            review_refresh.refresh_in_background(store)
        st.session_state["up_result"] = pd.DataFrame([{
            "file": r.name, "kind": r.kind, "status": r.status, "run_id": r.run_id,
            "events": r.total_records, "errors": r.errors, "duplicate": r.status == "duplicate",
            "message": r.message} for r in [*report.files, *refused]])
        bar.progress(1.0, text="Done")
    except Exception as e:  # a failure shows its cause; nothing half-stored (the loader commits per file)
        st.error(f"**Ingest failed:** {ui.md(e)}", icon=":material/error:")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _forget(files)
    st.session_state["up_gen"] = gen + 1
    st.rerun()

result = st.session_state.get("up_result")
if result is not None and not result.empty:
    n = result["status"].value_counts()
    summary = (f"{n.get('stored', 0)} stored · {n.get('partial', 0)} partial (some lines unreadable) · "
               f"{n.get('duplicate', 0)} duplicates · {n.get('failed', 0)} failed")
    if n.get("failed", 0) == len(result):
        st.error(summary + " — nothing was stored; the Message column says why", icon=":material/error:")
    elif n.get("failed", 0) or n.get("partial", 0):
        # the failures' causes in text, not only in the table's Message column: one glance, and
        # copyable into a bug report
        failed = result[result["status"] == "failed"]
        why = "".join(f"\n- **{ui.md(f)}**: {ui.md(ui.short(m, 300))}" for f, m in
                      zip(failed["file"].head(10), failed["message"].head(10)))
        more = f"\n- … and {len(failed) - 10} more in the table" if len(failed) > 10 else ""
        see = " — see the Message column" if n.get("partial", 0) else ""   # partial files' line counts
        st.warning(summary + see + why + more, icon=":material/warning:")
    else:
        st.success(summary, icon=":material/done_all:")
    ui.table(result, key="up_table", file=ui.text_col("File", "medium"), kind=ui.text_col("Kind"),
             status=ui.text_col("Status"), run_id=ui.text_col("Run"), events=ui.count_col("Events stored"),
             errors=ui.count_col("Errors", help="Lines that could not be parsed; listed on the run's page"),
             duplicate=st.column_config.CheckboxColumn("Duplicate"), message=ui.text_col("Message", "large"))
    runs = [r for r in result["run_id"].dropna().unique()]
    for r in runs[:10]:
        st.page_link("views/run_detail.py", label=f"Open run {ui.md(r)}", icon=":material/description:", query_params={"run": r})

st.subheader("Recently ingested")
recent = ui.load(upload.recent_files, Filters(limit=50))
if recent is not None and recent.empty:
    ui.empty_state()
ui.table(recent, key="up_recent", ingested_at=ui.time_col("Ingested (UTC)"), original_name=ui.text_col("File", "medium"),
         kind=ui.text_col("Kind"), status=ui.text_col("Status"), records=ui.count_col("Events"),
         errors=ui.count_col("Errors"), size_bytes=ui.count_col("Size (bytes)"), run_id=ui.text_col("Run"),
         model=ui.text_col("Model"), label=ui.text_col("Label"), torch_version=ui.text_col("Torch"))

with st.expander("Settings"):
    st.dataframe(pd.DataFrame(settings.as_rows()), hide_index=True, width="stretch", key="up_settings")
    st.caption("Set with the environment variable, or in `.streamlit/secrets.toml` under `[compilewatch]`.")
