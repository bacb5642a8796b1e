"""One run: manifest, compiles with metrics, compile-phase timeline, its breaks and recompiles,
step times (warm-up against steady state), ingest errors and its raw files."""
import json

import pandas as pd
import streamlit as st

from compilewatch.app import charts, ui
from compilewatch.app.filters import from_params
from compilewatch.app.queries import ranks, run_detail
from compilewatch.app.views import cache_misses, deep_dive

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
labels = {r.run_id: ui.plain(f"{r.run_id} · {ui.dash(r.model)} · torch {ui.dash(r.torch_version)}"
                            + ("" if ui.missing(r.run_time) else f" · {r.run_time:%Y-%m-%d %H:%M}"))
          for r in runs.itertuples()}
ui.page_state("rd_run", url.run_id, ids[0])
if st.session_state["rd_run"] not in ids:
    st.session_state["rd_run"] = ids[0]
run_id = st.selectbox("Run", ids, key="rd_run", format_func=lambda r: labels.get(r, r))
f = f.replace(run_id=run_id)

m = ui.load(run_detail.manifest, f)
if m is None or m.empty:
    st.warning(f"Run {ui.md(run_id)} is not in the database.", icon=":material/search_off:")
    ui.set_url(f)
    st.stop()
run = m.iloc[0]


def _v(value) -> str:
    return "–" if value is None or pd.isna(value) else str(value)


# Facts as text (metric tiles would cut a GPU name or a commit hash).
facts = [("Model", run["model"]), ("Torch", run["torch_version"]), ("Label", run["label"]),
         ("Git commit", run["git_commit"]), ("GPU", run["gpu_name"]), ("Started (UTC)", pd.Timestamp(run["run_time"]).strftime("%Y-%m-%d %H:%M:%S") if pd.notna(run["run_time"]) else None),
         ("End", f"{_v(run['end_reason'])} (exit {_v(run['exit_status'])})")]
for col, (label, value) in zip(st.columns(len(facts)), facts):
    col.caption(label)
    col.markdown(f"**{ui.md(_v(value))}**")
cols = st.columns(5)
for col, key, label in zip(cols, ["compiles", "graph_breaks", "recompiles", "limit_hits", "ingest_errors"],
                           ["Compiles", "Graph breaks", "Recompiles", "Limit hits", "Ingest errors"]):
    col.metric(label, f"{int(run[key]):,}", border=True)
with st.expander("Manifest"):
    st.caption(ui.md(f"Command: {_v(run['command'])} · host {_v(run['host'])} · source {_v(run['source'])} · "
                     f"uploaded by {_v(run.get('uploaded_by'))} · "
                     f"triton {_v(run['triton_version'])} · CUDA {_v(run['cuda_version'])} · Python {_v(run['python_version'])}"))
    try:
        manifest = run["manifest_json"]
        st.json(json.loads(manifest) if isinstance(manifest, str) and manifest else {}, expanded=False)
    except (TypeError, ValueError):
        st.text(run["manifest_json"])

rank_view = ui.load(ranks.per_rank, f)
diverging = None if rank_view is None else ranks.divergence_from(rank_view)  # no second query
if diverging is not None and not diverging.empty:
    st.warning("**Ranks diverge** on " + ", ".join(dict.fromkeys(diverging["aspect"])) + ": see the Ranks tab.",
               icon=":material/call_split:")
tabs = st.tabs(["Compiles", "Compile phases", "Graph breaks", "Recompiles", "Step times", "Benchmark",
                "Ingest errors", "Raw files", "Ranks", "Stack trie", "CUDA graphs & caches", "Subgraphs"])
with tabs[0]:
    compiles = ui.load(run_detail.compiles, f)
    ui.table(compiles, key="rd_compiles", empty="No compiles recorded for this run.",
             compile_id=ui.text_col("Compile id", "small"), rank=ui.count_col("Rank"), co_name=ui.text_col("Function"),
             code=ui.text_col("Code", "medium"),
             total_s=ui.num_col("Compile time", "%.2f s"),
             entire_frame_compile_time_s=ui.num_col("Forward (frame compile)", "%.2f s"),
             backend_compile_time_s=ui.num_col("Backend", "%.2f s"), inductor_compile_time_s=ui.num_col("Inductor", "%.2f s"),
             code_gen_time_s=ui.num_col("Codegen", "%.2f s"), backward_s=ui.num_col("Backward", "%.2f s"),
             runtime_autotune_s=ui.num_col("Runtime autotuning", "%.2f s"), guard_count=ui.count_col("Guards"),
             shape_env_guard_count=ui.count_col("Shape guards"), graph_op_count=ui.count_col("Ops"),
             graph_node_count=ui.count_col("Nodes"), graph_input_count=ui.count_col("Inputs"),
             cache_size=ui.count_col("Cache size"), is_recompile=st.column_config.CheckboxColumn("Recompile"),
             recompile_reason=ui.text_col("Recompile reason", "medium"), fail_type=ui.text_col("Failure"),
             fail_reason=ui.text_col("Failure reason", "medium"), started=ui.time_col("Started (UTC)", "HH:mm:ss"))
    if compiles is not None and not compiles.empty:
        ids = list(compiles["compile_id"].dropna().unique())
        ui.page_state("rd_cid", url.compile_id, None)
        if st.session_state["rd_cid"] not in ids:
            st.session_state["rd_cid"] = None
        cid = st.selectbox("Compile id: every metric, failures, restarts, artifacts", ids, key="rd_cid", index=None,
                           placeholder="pick a compile id")
        if cid:
            f = f.replace(compile_id=cid)
            metrics = ui.load(run_detail.compile_metrics, f)
            if metrics is not None and not metrics.empty and isinstance(metrics.iloc[0]["metrics_json"], str):
                with st.expander(f"Every compilation metric of {cid}"):
                    try:
                        st.json(json.loads(metrics.iloc[0]["metrics_json"]), expanded=1)
                    except ValueError:
                        st.text(metrics.iloc[0]["metrics_json"])
            else:
                st.caption("This log carries no compilation_metrics for that compile id.")
            deep_dive.compile_deep_dive(f)
with tabs[1]:
    d = ui.load(run_detail.phases, f)
    if d is not None:
        st.altair_chart(charts.phase_timeline(d), width="stretch")
    ui.table(ui.load(run_detail.phase_totals, f), key="rd_phase_totals", name=ui.text_col("Phase"),
             count=ui.count_col("Count"), total_s=ui.num_col("Total", "%.2f s"), max_s=ui.num_col("Longest", "%.2f s"))
    deep_dive.perfetto_download(f)
with tabs[2]:
    d = ui.load(run_detail.breaks, f)
    if d is not None:
        d = d.assign(across_runs=[ui.link("hotspots", f.replace(run_id=None), break_key=k) for k in d["break_key"]])
        d.insert(d.columns.get_loc("gb_type") + 1, "registry", deep_dive.registry_links(d["gb_code"]))
    ui.table(d, key="rd_breaks", empty="No graph breaks in this run.",
             hide=("break_key", "user_stack", "explanation", "hints", "gb_code"), registry=ui.link_col("Registry", "gb page"),
             occurrences=ui.count_col("Occurrences"), gb_type=ui.text_col("Break type", "medium"),
             reason=ui.text_col("Reason", "large"), location=ui.text_col("User code", "medium"),
             compile_ids=ui.text_col("Compile ids"), first_line=ui.num_col("Log line", "%d"),
             across_runs=ui.link_col("Across runs", "hotspot"))
    deep_dive.break_explainer(d)
with tabs[3]:
    ui.table(ui.load(run_detail.recompiles, f), key="rd_recompiles", empty="No recompiles in this run.",
             recompile_no=ui.count_col("#"), compile_id=ui.text_col("Compile id", "small"),
             function=ui.text_col("Function"), location=ui.text_col("Code"), at=ui.time_col("At (UTC)", "HH:mm:ss"),
             category=ui.text_col("Guard category"), guard=ui.text_col("First failed guard", "large"),
             line_no=ui.num_col("Log line", "%d"))
    lh = ui.load(run_detail.limit_hits, f)
    if lh is not None and not lh.empty:
        st.warning(f"Recompile limit hit {len(lh)} time(s): these functions ran eagerly afterwards.",
                   icon=":material/warning:")
        ui.table(lh, key="rd_limits", limit_name=ui.text_col("Limit"), limit_value=ui.count_col("Value"),
                 reason=ui.text_col("Last guard failure", "large"))
with tabs[4]:
    d = ui.load(run_detail.step_summary, f)
    ui.table(d, key="rd_steps", empty="No step timings (the collector's timing hooks write them to timings.json).",
             callable=ui.text_col("Callable"), mode=ui.text_col("Mode"), phase=ui.text_col("Phase"),
             steps=ui.count_col("Steps"), median_ms=ui.num_col("Median", "%.2f ms"), p90_ms=ui.num_col("p90", "%.2f ms"),
             min_ms=ui.num_col("Min", "%.2f ms"), max_ms=ui.num_col("Max", "%.2f ms"),
             peak_mem_gib=ui.num_col("Peak memory", "%.2f GiB"))
    if d is not None and not d.empty:
        s = ui.load(run_detail.step_series, f)
        if s is not None:
            st.altair_chart(charts.step_times(s), width="stretch")
with tabs[5]:
    ui.table(ui.load(run_detail.bench, f), key="rd_bench", empty="No benchmark results for this run.",
             speedup=ui.num_col("Speedup", ui.RATIO), abs_latency_ms=ui.num_col("Compiled", "%.2f ms"),
             eager_latency_ms=ui.num_col("Eager", "%.2f ms"), compilation_latency_s=ui.num_col("Compile", "%.1f s"),
             compression_ratio=ui.num_col("Memory ratio", ui.RATIO), eager_peak_mem_gb=ui.num_col("Eager peak", "%.2f GB"),
             dynamo_peak_mem_gb=ui.num_col("Compiled peak", "%.2f GB"))
with tabs[6]:
    d = ui.load(run_detail.errors_summary, f)
    if d is not None and d.empty:
        st.success("Every line of this run's files parsed.", icon=":material/check:")
    elif d is not None:
        ui.table(d, key="rd_errors_summary", original_name=ui.text_col("File"), kind=ui.text_col("Kind"),
                 errors=ui.count_col("Errors"), first_line=ui.num_col("First line", "%d"),
                 example=ui.text_col("Example", "large"))
        ui.table(ui.load(run_detail.errors, f), key="rd_errors", original_name=ui.text_col("File"),
                 line_no=ui.num_col("Line", "%d"), kind=ui.text_col("Kind"), message=ui.text_col("Message", "medium"),
                 excerpt=ui.text_col("Excerpt", "large"))
with tabs[7]:
    d = ui.load(run_detail.files, f)
    ui.table(d, key="rd_files", empty="No files recorded for this run.", hide=("stored_path", "sha256"),
             original_name=ui.text_col("File", "medium"), size_bytes=ui.count_col("Size (bytes)"),
             records=ui.count_col("Events"), errors=ui.count_col("Errors"), ingested_at=ui.time_col("Ingested (UTC)"))
    if d is not None:
        raw = ui.get_store().location   # a folder or an S3 prefix (store/objects.py)
        for row in d.itertuples():
            if row.stored_path and raw.exists(row.stored_path):
                # Deferred: the bytes are read only when someone clicks.
                st.download_button(f"Download {ui.md(row.original_name)} ({row.size_bytes:,} bytes)",
                                   data=lambda rel=row.stored_path: raw.read_bytes(rel), file_name=row.original_name,
                                   key=f"rd_dl_{row.file_id}", icon=":material/download:", on_click="ignore")
            else:
                st.caption(ui.md(f"{row.original_name}: raw copy not in {raw.uri('raw')}"))
with tabs[8]:
    if rank_view is not None and len(rank_view) < 2:
        st.caption("One rank (or none) in this run: nothing to compare.")
    elif diverging is not None and diverging.empty:
        st.success(f"All {len(rank_view)} ranks agree on {ranks.compared()}.", icon=":material/check:")
    else:
        ui.table(diverging, key="rd_divergence", aspect=ui.text_col("Aspect"), ranks=ui.text_col("Ranks"),
                 value=ui.text_col("Their value", "medium"), reference_ranks=ui.text_col("Reference ranks"),
                 reference_value=ui.text_col("Reference value", "medium"),
                 difference=ui.text_col("Difference", "large"))
    if rank_view is not None and not rank_view.empty:
        shown = rank_view.assign(compile_ids=[", ".join(x) for x in rank_view["compile_ids"]],
                                 execution_order=[", ".join(x) for x in rank_view["execution_order"]],
                                 collective_schedule=[len(x) for x in rank_view["collective_schedule"]]).drop(
            columns=["cache_pattern"])
        ui.table(shown, key="rd_ranks", rank=ui.count_col("Rank"), compiles=ui.count_col("Compiles"),
                 compile_ids=ui.text_col("Compile ids", "medium"), graphs=ui.count_col("Graphs"),
                 failures=ui.count_col("Failures"), compile_time_s=ui.num_col("Compile time", "%.2f s"),
                 files=ui.count_col("Files"), recompiles=ui.count_col("Recompiles"),
                 recompiled=ui.text_col("Recompiled"), graph_breaks=ui.count_col("Graph breaks"),
                 break_types=ui.text_col("Break types", "medium"), cache_hits=ui.count_col("Cache hits"),
                 cache_misses=ui.count_col("Cache misses"),
                 execution_order=ui.text_col("Graph calls in order", "medium"),
                 collective_schedule=ui.count_col("Collectives scheduled"))
        ui.table(ui.load(ranks.rank_steps, f), key="rd_rank_steps", rank=ui.count_col("Rank"),
                 callable=ui.text_col("Callable"), mode=ui.text_col("Mode"), steps=ui.count_col("Steps"),
                 compile_ms=ui.num_col("Compiling steps", "%.0f ms"), steady_ms=ui.num_col("Steady median", "%.3f ms"),
                 steady_p90_ms=ui.num_col("Steady p90", "%.3f ms"))
with tabs[9]:
    deep_dive.stack_trie(f)
with tabs[10]:
    st.markdown("**CUDA graphs** (`mode=\"reduce-overhead\"`): how much of the run they held, why they were "
                "skipped, and re-recordings per input size")
    cover = ui.load(run_detail.cudagraph_coverage, f)
    if cover is not None and len(cover):
        st.caption(f"CUDA-graph coverage: **{cover['coverage'].iloc[0]}**")
    ui.table(cover, key="rd_cudagraph_coverage",
             empty="This run recorded, skipped and split no CUDA graph (not mode=\"reduce-overhead\", or on the CPU).",
             cudagraph_graphs=ui.count_col("Graphs recorded"), cudagraph_partitions=ui.count_col("Partitions"),
             cudagraph_skips=ui.count_col("Skips (log)"), skips_counted_by_torch=ui.count_col("Skips (torch's counter)"),
             cudagraph_rerecords=ui.count_col("Re-recordings"),
             replayed_pct=ui.num_col("Compiled calls replayed", "%.0f%%"),
             replays=ui.count_col("Replays"), compiled_calls=ui.count_col("Compiled calls"),
             coverage=ui.text_col("Coverage", "large"))
    ui.table(ui.load(run_detail.cudagraph_events, f), key="rd_cudagraphs",
             empty="No CUDA-graph skip or re-recording in this run's log.",
             event=ui.text_col("Event", "small"), category=ui.text_col("Category", "small"),
             reason=ui.text_col("Reason (torch)"), location=ui.text_col("User code"),
             user_function=ui.text_col("Function", "small"), user_code=ui.text_col("Line", "large"),
             times=ui.count_col("Times"), max_count=ui.count_col("Instances / sizes"),
             compile_id=ui.text_col("Compile id", "small"), hint=ui.text_col("Fix", "large"))
    st.markdown("**Compile caches per layer**")
    layers = ui.load(run_detail.cache_layers, f)
    if layers is not None and len(layers):
        hits, misses = int(layers["hits"].sum()), int(layers["misses"].sum())
        state = "cold: every lookup missed" if hits == 0 and misses else "warm: some compiles came from the cache"
        st.caption(f"This run compiled **{state}** ({hits:,} hits, {misses:,} misses, "
                   f"{int(layers['bypasses'].sum()):,} bypasses); the review compares compile time only "
                   f"between runs in the same state.")
    ui.table(layers, key="rd_cache_layers",
             empty="No compile-cache events in this run's trace.",
             compile_id=ui.text_col("Compile id", "small"), cache=ui.text_col("Cache layer"),
             hits=ui.count_col("Hits"), misses=ui.count_col("Misses"), bypasses=ui.count_col("Bypasses"),
             bypass_reason=ui.text_col("Bypass reason", "large"))
    st.markdown("**Why the cache missed**, against the run before (same model and hardware)")
    before_run = ui.load(run_detail.run_before, f)
    missed = ui.load(run_detail.cache_misses_before, f)
    if missed is not None and before_run is not None:
        before = str(before_run["run_id"].iloc[0]) if len(before_run) else None
        if before:
            st.caption(f"Against run {ui.md(before)}: the lookups that missed or were bypassed here where that "
                       f"run's hit, and the parts of the cache key that differed. "
                       f"`compilewatch diff {ui.md(before[:8])} {ui.md(run_id[:8])}` prints the same.")
        cache_misses.table(missed, "rd_cache_misses",
                           "No lookup missed here where the run before hit." if before
                           else "No earlier run of this model on this hardware to compare with.", "before", "here")
    with st.expander("Every cache lookup and its key"):
        ui.table(ui.load(run_detail.cache_keys, f), key="rd_cache_keys",
                 empty="No compile-cache events in this run's trace.",
                 compile_id=ui.text_col("Compile id", "small"), rank=ui.count_col("Rank"),
                 cache=ui.text_col("Cache layer", "small"), graph=ui.text_col("Graph", "small"),
                 outcome=ui.text_col("Outcome", "small"), cache_key=ui.text_col("Key", "medium"),
                 bypass_reason=ui.text_col("Bypass reason", "large"), components=ui.count_col("Key components"))
with tabs[11]:
    st.markdown("**vLLM piecewise compile**: the pieces of the split graph, by compile range")
    ui.table(ui.load(run_detail.pieces, f), key="rd_pieces",
             empty="No vLLM piecewise compile in this run's trace.",
             compile_range=ui.text_col("Compile range", "small"), piece=ui.text_col("Piece", "small"),
             index=ui.count_col("Index"), cudagraph_size=st.column_config.CheckboxColumn("CUDA-graph size"),
             artifacts=ui.count_col("Artifacts"), passes=ui.text_col("Post-grad passes", "medium"),
             names=ui.text_col("Artifacts logged", "large"), line_no=ui.num_col("Log line", "%d"))
    passes = ui.load(run_detail.post_grad_passes, f)
    if passes is not None and not passes.empty:
        st.markdown("**vLLM post-grad passes**, in the order they ran")
        ui.table(passes, key="rd_passes", hide=("file_id", "piece_line", "name"),
                 line_no=ui.num_col("Log line", "%d"), compile_id=ui.text_col("Compile id", "small"),
                 rank=ui.count_col("Rank"), pass_index=ui.count_col("#"), pass_name=ui.text_col("Pass", "medium"),
                 size_bytes=ui.count_col("Size (bytes)"), record=ui.text_col("Record", "medium"))
    st.markdown("**Regional compilation**: subgraphs named on their records")
    ui.table(ui.load(run_detail.regional_subgraphs, f), key="rd_regions",
             empty="No named subgraphs in this run's trace.",
             subgraph_name=ui.text_col("Subgraph", "medium"), rank=ui.count_col("Rank"),
             compile_ids=ui.text_col("Compile ids", "small"), artifacts=ui.count_col("Artifacts"),
             names=ui.text_col("Artifacts logged", "large"))

ui.set_url(f)
