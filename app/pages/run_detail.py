"""One run: manifest, compiles with metrics, compile-phase timeline, its breaks and recompiles,
step times (warm-up against steady state), ingest errors and its raw files."""
import json

import streamlit as st

from app import charts, ui
from app.filters import from_params
from app.queries import run_detail

f = ui.page("Run detail", default_days=90)
url = from_params(ui.url_params())

runs = ui.load(run_detail.runs_list, f)
if runs is None:
    st.stop()
ids = list(runs["run_id"])
if url.run_id and url.run_id not in ids:
    ids.insert(0, url.run_id)  # a linked run outside the filters still opens
if not ids:
    st.info("No runs in these filters. Widen the time window.", icon=":material/info:")
    ui.set_url(f)
    st.stop()
labels = {r.run_id: f"{r.run_id} · {r.model or '?'} · torch {r.torch_version or '?'} · {r.run_time:%Y-%m-%d %H:%M}"
          for r in runs.itertuples() if r.run_time is not None}
ui.page_state("rd_run", url.run_id, ids[0])
if st.session_state["rd_run"] not in ids:
    st.session_state["rd_run"] = ids[0]
run_id = st.selectbox("Run", ids, key="rd_run", format_func=lambda r: labels.get(r, r))
f = f.replace(run_id=run_id)

m = ui.load(run_detail.manifest, f)
if m is None or m.empty:
    st.warning(f"Run `{run_id}` is not in the database.", icon=":material/search_off:")
    ui.set_url(f)
    st.stop()
run = m.iloc[0]
cols = st.columns(6)
for col, (label, value) in zip(cols, [("Model", run["model"]), ("Torch", run["torch_version"]),
                                      ("Label", run["label"]), ("Git commit", run["git_commit"]),
                                      ("GPU", run["gpu_name"]), ("End", run["end_reason"])]):
    col.metric(label, value if value is not None and value == value else "–", border=True)
cols = st.columns(5)
for col, key, label in zip(cols, ["compiles", "graph_breaks", "recompiles", "limit_hits", "ingest_errors"],
                           ["Compiles", "Graph breaks", "Recompiles", "Limit hits", "Ingest errors"]):
    col.metric(label, f"{int(run[key]):,}", border=True)
with st.expander("Manifest"):
    st.caption(f"Command: `{run['command'] or '?'}` · host {run['host'] or '?'} · started {run['started_at']} · "
               f"source {run['source'] or '?'}")
    try:
        st.json(json.loads(run["manifest_json"]) if run["manifest_json"] else {}, expanded=False)
    except (TypeError, ValueError):
        st.text(run["manifest_json"])

tabs = st.tabs(["Compiles", "Compile phases", "Graph breaks", "Recompiles", "Step times", "Benchmark",
                "Ingest errors", "Raw files"])
with tabs[0]:
    d = ui.load(run_detail.compiles, f)
    if d is not None:
        st.dataframe(d, hide_index=True, width="stretch", key="rd_compiles", column_config={
            "compile_id": st.column_config.TextColumn("Compile id", width="small"),
            "entire_frame_compile_time_s": st.column_config.NumberColumn("Frame compile", format="%.2f s"),
            "backend_compile_time_s": st.column_config.NumberColumn("Backend", format="%.2f s"),
            "inductor_compile_time_s": st.column_config.NumberColumn("Inductor", format="%.2f s"),
            "code_gen_time_s": st.column_config.NumberColumn("Codegen", format="%.2f s"),
            "started": st.column_config.DatetimeColumn("Started (UTC)", format="HH:mm:ss"),
        })
with tabs[1]:
    d = ui.load(run_detail.phases, f)
    if d is not None:
        st.altair_chart(charts.phase_timeline(d), width="stretch")
    d = ui.load(run_detail.phase_totals, f)
    if d is not None and not d.empty:
        st.dataframe(d, hide_index=True, key="rd_phase_totals", column_config={
            "total_s": st.column_config.NumberColumn("Total", format="%.2f s"),
            "max_s": st.column_config.NumberColumn("Longest", format="%.2f s")})
with tabs[2]:
    d = ui.load(run_detail.breaks, f)
    if d is not None and d.empty:
        st.caption("No graph breaks in this run.")
    elif d is not None:
        d = d.assign(across_runs=[ui.link("hotspots", f.replace(run_id=None), break_key=k) for k in d["break_key"]])
        st.dataframe(d.drop(columns=["break_key", "user_stack", "explanation", "hints"]), hide_index=True,
                     width="stretch", key="rd_breaks", column_config={
                         "occurrences": st.column_config.NumberColumn("Occurrences"),
                         "reason": st.column_config.TextColumn("Reason", width="large"),
                         "first_line": st.column_config.NumberColumn("Log line", format="%d"),
                         "across_runs": st.column_config.LinkColumn("Across runs", display_text="hotspot"),
                     })
with tabs[3]:
    d = ui.load(run_detail.recompiles, f)
    if d is not None and d.empty:
        st.caption("No recompiles in this run.")
    elif d is not None:
        st.dataframe(d, hide_index=True, width="stretch", key="rd_recompiles", column_config={
            "guard": st.column_config.TextColumn("First failed guard", width="large"),
            "at": st.column_config.DatetimeColumn("At (UTC)", format="HH:mm:ss"),
            "line_no": st.column_config.NumberColumn("Log line", format="%d"),
        })
        lh = ui.load(run_detail.limit_hits, f)
        if lh is not None and not lh.empty:
            st.warning(f"Recompile limit hit {len(lh)} time(s): these functions ran eagerly afterwards.",
                       icon=":material/warning:")
            st.dataframe(lh, hide_index=True, width="stretch", key="rd_limits")
with tabs[4]:
    d = ui.load(run_detail.step_summary, f)
    if d is not None and d.empty:
        st.caption("No step timings (the collector's timing hooks write them to timings.json).")
    elif d is not None:
        st.dataframe(d, hide_index=True, width="stretch", key="rd_steps", column_config={
            "median_ms": st.column_config.NumberColumn("Median", format="%.2f ms"),
            "p90_ms": st.column_config.NumberColumn("p90", format="%.2f ms"),
            "min_ms": st.column_config.NumberColumn("Min", format="%.2f ms"),
            "max_ms": st.column_config.NumberColumn("Max", format="%.2f ms"),
            "peak_mem_gib": st.column_config.NumberColumn("Peak memory", format="%.2f GiB"),
        })
        s = ui.load(run_detail.step_series, f)
        if s is not None:
            st.altair_chart(charts.step_times(s), width="stretch")
with tabs[5]:
    d = ui.load(run_detail.bench, f)
    if d is not None and d.empty:
        st.caption("No benchmark results for this run.")
    elif d is not None:
        st.dataframe(d, hide_index=True, width="stretch", key="rd_bench", column_config={
            "speedup": st.column_config.NumberColumn("Speedup", format="%.3f×"),
            "abs_latency_ms": st.column_config.NumberColumn("Compiled", format="%.2f ms"),
            "eager_latency_ms": st.column_config.NumberColumn("Eager", format="%.2f ms"),
            "compilation_latency_s": st.column_config.NumberColumn("Compile", format="%.1f s"),
            "compression_ratio": st.column_config.NumberColumn("Memory ratio", format="%.3f×"),
        })
with tabs[6]:
    d = ui.load(run_detail.errors_summary, f)
    if d is not None and d.empty:
        st.success("Every line of this run's files parsed.", icon=":material/check:")
    elif d is not None:
        st.dataframe(d, hide_index=True, width="stretch", key="rd_errors_summary")
        e = ui.load(run_detail.errors, f)
        if e is not None:
            st.dataframe(e, hide_index=True, width="stretch", key="rd_errors", column_config={
                "line_no": st.column_config.NumberColumn("Line", format="%d"),
                "excerpt": st.column_config.TextColumn("Excerpt", width="large")})
with tabs[7]:
    d = ui.load(run_detail.files, f)
    if d is not None:
        st.dataframe(d.drop(columns=["stored_path", "sha256"]), hide_index=True, width="stretch", key="rd_files",
                     column_config={"size_bytes": st.column_config.NumberColumn("Size (bytes)", format="localized")})
        folder = ui.get_store().folder
        for row in d.itertuples():
            path = folder / row.stored_path if row.stored_path else None
            if path is not None and path.is_file():
                # Deferred: the bytes are read only when someone clicks.
                st.download_button(f"Download {row.original_name} ({row.size_bytes:,} bytes)",
                                   data=lambda p=path: p.read_bytes(), file_name=row.original_name,
                                   key=f"rd_dl_{row.file_id}", icon=":material/download:", on_click="ignore")
            else:
                st.caption(f"{row.original_name}: raw copy not in {folder / 'raw'}")

ui.set_url(f)
