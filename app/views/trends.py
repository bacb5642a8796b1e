"""Speedup trends: per model over time, across torch versions and the team's own versions
(label / git commit); a version-against-version table coloured at ±5%; CUDA-graph coverage per run."""
import pandas as pd
import streamlit as st

from compilewatch.app import charts, ui
from compilewatch.app.filters import DIMENSIONS, from_params
from compilewatch.app.queries import cudagraphs, overview, speedups

f = ui.page("Speedup trends", default_days=90)
url = from_params(ui.url_params())

names = {"torch_version": "Torch version", "label": "Label", "git_commit": "Git commit"}
ui.page_state("tr_dim", url.dimension if url.dimension != "torch_version" else None, "torch_version")
dim = st.segmented_control("Compare versions of", list(DIMENSIONS), key="tr_dim", format_func=names.get) or "torch_version"
f = f.replace(dimension=dim)

trend = ui.load(speedups.trend, f)
if trend is not None and trend.empty:
    st.info("No benchmark results (bench.csv or the collector's eager-vs-compiled bench) in these runs. "
            "Run `compilewatch collect --bench …` or widen the time window.", icon=":material/info:")
elif trend is not None:
    # One chart at a time, not three tabs: each chart carries its points to the browser, and a
    # quarter of a dozen models' days drawn three times came to more than a page should send.
    fields = {"speedup": "Speedup", "compile_s": "Compile time", "memory_ratio": "Peak-memory ratio"}
    field = st.segmented_control("Show", list(fields), format_func=fields.get, key="tr_field",
                                 default="speedup") or "speedup"
    st.altair_chart(charts.trend(trend, field), width="stretch")

    by_version = ui.load(speedups.by_version, f)
    if by_version is not None and not by_version.empty:
        left, right = st.columns([1, 1])
        left.altair_chart(charts.by_version(by_version, dim), width="stretch")
        with right:
            ui.table(by_version, key="tr_by_version", version=ui.text_col(names[dim]),
                     geomean_speedup=ui.num_col("Geomean speedup", ui.RATIO), compile_s=ui.num_col("Compile time", "%.1f s"),
                     memory_ratio=ui.num_col("Memory ratio", ui.RATIO), models=ui.count_col("Models"),
                     runs=ui.count_col("Runs"), first_run=ui.time_col("First run", "YYYY-MM-DD"),
                     last_run=ui.time_col("Last run", "YYYY-MM-DD"))

    st.subheader(f"{names[dim]} against {names[dim].lower()}")
    versions = ui.load(speedups.versions, f)
    values = list(versions["version"]) if versions is not None else []
    if len(values) < 2:
        st.caption(f"Needs two {names[dim].lower()}s in the selection; found {len(values)}.")
    else:
        # Default: the newest (B) against the one before it (A).
        ui.page_state("tr_a", url.version_a, values[1])
        ui.page_state("tr_b", url.version_b, values[0])
        for key in ("tr_a", "tr_b"):
            if st.session_state[key] not in values:
                st.session_state[key] = values[1] if key == "tr_a" else values[0]
        ca, cb = st.columns(2)
        a = ca.selectbox("Baseline (A)", values, key="tr_a")
        b = cb.selectbox("Candidate (B)", values, key="tr_b")
        f = f.replace(version_a=a, version_b=b)
        table = ui.load(speedups.version_table, f)
        if table is not None and not table.empty:
            noise = overview.NOISE_PCT

            def colour(col: pd.Series, higher_is_better: bool):
                def one(v):
                    if pd.isna(v) or abs(v) <= noise:
                        return ""
                    good = (v > 0) == higher_is_better
                    return "background-color: #d4f4dd; color: #14532d" if good else "background-color: #fde2e1; color: #7f1d1d"
                return [one(v) for v in col]

            styled = (table.style
                      .apply(colour, subset=["speedup_change_pct"], higher_is_better=True)
                      .apply(colour, subset=["compile_change_pct"], higher_is_better=False)
                      .apply(colour, subset=["memory_change_pct"], higher_is_better=True)
                      .format({"speedup_a": "{:.3g}×", "speedup_b": "{:.3g}×", "memory_ratio_a": "{:.3g}×",
                               "memory_ratio_b": "{:.3g}×", "compile_s_a": "{:.1f} s", "compile_s_b": "{:.1f} s",
                               "speedup_change_pct": "{:+.1f}%", "compile_change_pct": "{:+.1f}%",
                               "memory_change_pct": "{:+.1f}%"}, na_rep="–"))
            st.caption(f"Green: better by more than {noise:.0f}%; red: worse by more than {noise:.0f}% "
                       "(speedup and memory ratio: higher is better; compile time: lower is better).")
            st.dataframe(styled, hide_index=True, width="stretch", key="tr_table", column_config={
                "model": st.column_config.TextColumn("Model", width="medium"),
                "speedup_a": "Speedup A", "speedup_b": "Speedup B", "speedup_change_pct": "Speedup Δ",
                "compile_s_a": "Compile A", "compile_s_b": "Compile B", "compile_change_pct": "Compile Δ",
                "memory_ratio_a": "Memory ratio A", "memory_ratio_b": "Memory ratio B", "memory_change_pct": "Memory Δ",
            })

st.subheader("CUDA-graph coverage")
coverage = ui.load(cudagraphs.coverage_trend, f)
if coverage is not None and not coverage.empty:
    st.altair_chart(charts.cudagraph_coverage(coverage), width="stretch")
ui.table(coverage, key="tr_cudagraphs",
         empty='No run in the selection recorded, skipped or split a CUDA graph (mode="reduce-overhead" on a GPU).',
         run_id=None, model=ui.text_col("Model", "medium"), hardware=None, run_time=ui.time_col("Run"),
         torch_version=ui.text_col("Torch", "small"), label=ui.text_col("Label", "small"),
         git_commit=ui.text_col("Commit", "small"), cudagraph_graphs=ui.count_col("Graphs recorded"),
         cudagraph_partitions=ui.count_col("Partitions"), cudagraph_skips=ui.count_col("Skips"),
         cudagraph_rerecords=ui.count_col("Re-recordings"), replayed_pct=ui.num_col("Calls replayed", "%.0f%%"),
         coverage=ui.text_col("Coverage", "large"))

ui.set_url(f)
