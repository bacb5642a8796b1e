"""Compile time across runs: the frames that cost the most compile time (recompiles included) and
in which phase, across models and torch versions; and per compiled callable, its steps against its
compile cost and, with an eager baseline, the steps before compiling paid for itself."""
import streamlit as st

from compilewatch.app import charts, ui
from compilewatch.app.filters import from_params
from compilewatch.app.queries import compile_time

f = ui.page("Compile time", default_days=30)
url = from_params(ui.url_params())

c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
ui.page_state("ct_search", url.search, "")
search = c1.text_input("Search function or file", key="ct_search", placeholder="e.g. forward, modeling_gpt2.py")
ui.page_state("ct_limit", None, 50)
limit = c2.selectbox("Show", [20, 50, 100, 200], key="ct_limit", format_func=lambda n: f"top {n}")
f = f.replace(search=search.strip() or None, limit=int(limit))

st.subheader("Hotspots: frames by compile time")
st.caption("A frame is a compiled function (name, file, first line), grouped across runs, hosts and torch "
           "versions. Compile time is what the job waited for: the forward compile, the backward compile "
           "(at the first backward call) and the runtime autotuning of the first calls. The forward's phases "
           "from each compile's metrics: tracing (Dynamo), AOT (AOTAutograd), Inductor (lowering, codegen, "
           "kernel compiles) and autotuning.")
split_tab, frames_tab = st.tabs(["By phase", "By frame and version"])
split = ui.load(compile_time.phase_split, f)
if split is not None:
    split_tab.altair_chart(charts.compile_phase_split(split), width="stretch")
versions = ui.load(compile_time.frame_versions, f)
if versions is not None:
    frames_tab.altair_chart(charts.frame_compile_bars(versions), width="stretch")

hot = ui.load(compile_time.frame_hotspots, f)
ui.page_state("ct_frame", url.frame, None)
if hot is not None and hot.empty:
    st.caption("No compiles in these filters (or none matches the search).")
elif hot is not None:
    hot = hot.assign(storm=[ui.link("recompiles", f.replace(search=None), function=name) if n else None
                            for name, n in zip(hot["co_name"], hot["recompiles"])])
    keys = [compile_time.frame_key(n, c) for n, c in zip(hot["co_name"], hot["code"])]

    def _picked():
        rows = st.session_state["ct_frames"].selection.rows
        st.session_state["ct_frame"] = keys[rows[0]] if rows else None

    st.caption("Select a row for the runs that compiled that frame.")
    st.dataframe(
        hot.drop(columns=["example_path"]), key="ct_frames", on_select=_picked, selection_mode="single-row",
        hide_index=True, width="stretch",
        column_config={
            "co_name": ui.text_col("Function"), "code": ui.text_col("Frame", "medium"),
            "total_s": ui.num_col("Compile time", "%.1f s"), "share_pct": ui.num_col("Share", "%.1f%%"),
            "dominant": ui.text_col("Dominant phase"), "compiles": ui.count_col("Compiles"),
            "recompiles": ui.count_col("Recompiles"), "recompile_s": ui.num_col("In recompiles", "%.1f s"),
            "forward_s": ui.num_col("Forward", "%.1f s"),
            "tracing_s": ui.num_col("Tracing", "%.1f s"), "aot_s": ui.num_col("AOT", "%.1f s"),
            "inductor_s": ui.num_col("Inductor", "%.1f s"), "autotune_s": ui.num_col("Autotuning", "%.1f s"),
            "backward_s": ui.num_col("Backward", "%.1f s"),
            "runtime_autotune_s": ui.num_col("Runtime autotuning", "%.1f s"),
            "cache_misses": ui.count_col("Cache misses"),
            "cache_miss_s": ui.num_col("In cache-missed compiles", "%.1f s"), "runs": ui.count_col("Runs"),
            "models": ui.text_col("Models"), "torch_versions": ui.text_col("Torch versions"),
            "storm": ui.link_col("Recompiles", "storm"),
        })
    f = f.replace(frame=st.session_state["ct_frame"])
    if f.frame:
        st.markdown(f"**Runs that compiled {ui.md(f.frame)}**")
        runs = ui.load(compile_time.frame_runs, f.replace(search=None))
        if runs is not None and not runs.empty:
            runs = runs.assign(open=[ui.link("run", f.replace(search=None, frame=None), run_id=r) for r in runs["run_id"]])
        ui.table(runs, key="ct_frame_runs", empty="No run in these filters compiled that frame.",
                 run_id=ui.text_col("Run"), model=ui.text_col("Model"), label=ui.text_col("Label"),
                 torch_version=ui.text_col("Torch"), run_time=ui.time_col("Started (UTC)"),
                 compiles=ui.count_col("Compiles"), recompiles=ui.count_col("Recompiles"),
                 total_s=ui.num_col("Compile time", "%.2f s"), forward_s=ui.num_col("Forward", "%.2f s"),
                 tracing_s=ui.num_col("Tracing", "%.2f s"),
                 aot_s=ui.num_col("AOT", "%.2f s"), inductor_s=ui.num_col("Inductor", "%.2f s"),
                 autotune_s=ui.num_col("Autotuning", "%.2f s"), backward_s=ui.num_col("Backward", "%.2f s"),
                 runtime_autotune_s=ui.num_col("Runtime autotuning", "%.2f s"), open=ui.link_col("Run detail", "open"))

st.subheader("Runtime linkage: what each compiled callable's steps cost against its compile")
st.caption("From the collector's timing hooks. Compile cost = the compiling calls' time minus what they would "
           "have taken at steady speed. Break-even = steady steps until the time saved against eager repays "
           "the compile (eager baseline: the benchmark's eager latency, else the run's eager callable). "
           f"Over windows holding a whole month, medians are within {compile_time.LINKAGE_MEDIAN_ERROR:.1%} "
           "of the exact ones.")
ui.table(ui.load(compile_time.runtime_linkage, f), key="ct_linkage",
         empty="No step timings in these filters (the collector's timing hooks write them).",
         model=ui.text_col("Model"), callable=ui.text_col("Callable", "medium"), mode=ui.text_col("Mode"),
         torch_version=ui.text_col("Torch"), runs=ui.count_col("Runs"), calls=ui.count_col("Timed calls"),
         compile_steps=ui.count_col("Compiling calls"), steady_ms=ui.num_col("Steady", "%.3f ms"),
         compile_ms=ui.num_col("Compiling calls' time", "%.0f ms"),
         compile_cost_ms=ui.num_col("Compile cost", "%.0f ms"), eager_ms=ui.num_col("Eager", "%.3f ms"),
         saved_ms=ui.num_col("Saved per step", "%.3f ms"), break_even_steps=ui.count_col("Break-even (steps)"))

ui.set_url(f)
