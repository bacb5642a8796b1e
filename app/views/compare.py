"""Compare two runs or two versions: new and fixed breaks, recompile deltas, speedup delta."""
import streamlit as st

from compilewatch.app import ui
from compilewatch.app.filters import DIMENSIONS, from_params
from compilewatch.app.queries import compare, run_detail, speedups
from compilewatch.app.views import cache_misses

f = ui.page("Compare", default_days=90)
url = from_params(ui.url_params())
pair_hardware = None   # the hardware of the version pair the page opens on
names = {"torch_version": "Torch version", "label": "Label", "git_commit": "Git commit"}

ui.page_state("cmp_mode", "Two runs" if (url.run_id and url.run_b) else None, "Two versions")
mode = st.segmented_control("Compare", ["Two versions", "Two runs"], key="cmp_mode") or "Two versions"

if mode == "Two runs":
    runs = ui.load(run_detail.runs_list, f)
    ids = list(runs["run_id"]) if runs is not None else []
    for r in (url.run_b, url.run_id):
        if r and r not in ids:
            ids.insert(0, r)
    if len(ids) < 2:
        st.info("Needs two runs in the selection. Widen the time window.", icon=":material/info:")
        ui.set_url(f)
        st.stop()
    labels = {} if runs is None else {r.run_id: f"{r.run_id} · {ui.dash(r.model)} · torch {ui.dash(r.torch_version)}"
                                      for r in runs.itertuples()}
    # the newest two runs of one model on one hardware; two runs on different hardware compare nothing
    pair = ui.load(compare.default_runs, f)
    run_a, run_b = ((pair.iloc[0]["run_a"], pair.iloc[0]["run_b"]) if pair is not None and len(pair)
                    and {pair.iloc[0]["run_a"], pair.iloc[0]["run_b"]} <= set(ids) else (ids[1], ids[0]))
    ui.page_state("cmp_run_a", url.run_id, run_a)
    ui.page_state("cmp_run_b", url.run_b, run_b)
    ca, cb = st.columns(2)
    a = ca.selectbox("Baseline run (A)", ids, key="cmp_run_a", format_func=lambda r: labels.get(r, r))
    b = cb.selectbox("Candidate run (B)", ids, key="cmp_run_b", format_func=lambda r: labels.get(r, r))
    f = f.replace(run_id=a, run_b=b)
else:
    ui.page_state("cmp_dim", url.dimension if url.dimension != "torch_version" else None, "torch_version")
    dim = st.segmented_control("Versions of", list(DIMENSIONS), key="cmp_dim", format_func=names.get) or "torch_version"
    f = f.replace(dimension=dim)
    versions = ui.load(speedups.versions, f.replace(torch_versions=()) if dim == "torch_version" else f)
    values = list(versions["version"]) if versions is not None else []
    if len(values) < 2:
        st.info(f"Needs two {names[dim].lower()}s in the selection; found {len(values)}. Widen the time window.",
                icon=":material/info:")
        ui.set_url(f)
        st.stop()
    # the newest two that ran one model on one hardware (two versions on different hardware compare
    # nothing); the newest two values when no model ran two
    pair = ui.load(compare.default_versions, f)
    version_a, version_b = values[1], values[0]
    if pair is not None and len(pair) and {pair.iloc[0]["version_a"], pair.iloc[0]["version_b"]} <= set(values):
        version_a, version_b = pair.iloc[0]["version_a"], pair.iloc[0]["version_b"]
        pair_hardware = pair.iloc[0]["hardware"]
    ui.page_state("cmp_a", url.version_a, version_a)
    ui.page_state("cmp_b", url.version_b, version_b)
    for key, default in (("cmp_a", version_a), ("cmp_b", version_b)):
        if st.session_state[key] not in values:
            st.session_state[key] = default
    ca, cb = st.columns(2)
    a = ca.selectbox(f"Baseline {names[dim].lower()} (A)", values, key="cmp_a")
    b = cb.selectbox(f"Candidate {names[dim].lower()} (B)", values, key="cmp_b")
    f = f.replace(version_a=a, version_b=b)

if a == b:
    st.warning("A and B are the same; pick two different ones.", icon=":material/warning:")

page_filters = f   # what the address bar keeps: the hardware picked below is this page's own


def _kinds(frame) -> dict[str, set]:
    return {side: set(frame.loc[frame["side"] == side, "hardware"]) for side in ("A", "B")}


hw = ui.load(compare.hardware, f)
same_hardware = True
if hw is not None and not hw.empty:
    kinds = _kinds(hw)
    shared = sorted(kinds["A"] & kinds["B"])
    one_kind = kinds["A"] == kinds["B"] and len(kinds["A"]) == 1
    if compare.mode(f) == "versions" and not f.hardware and shared and not one_kind:
        # two versions whose runs span several kinds of hardware compare on one both ran on, unless the
        # reader asks for every kind (each figure then per hardware, no delta across two)
        every = "every kind (no delta across two)"
        preferred = pair_hardware if pair_hardware in shared else shared[0]
        ui.page_state("cmp_hw", None, preferred)
        if st.session_state["cmp_hw"] not in shared + [every]:
            st.session_state["cmp_hw"] = preferred
        on = st.selectbox("On hardware", shared + [every], key="cmp_hw",
                          help="Both sides ran on these. Figures that depend on the hardware compare on one kind.")
        if on != every:
            f = f.replace(hardware=(on,))
            hw = ui.load(compare.hardware, f)
            kinds = _kinds(hw)
    same_hardware = kinds["A"] == kinds["B"] and len(kinds["A"]) == 1
    if not same_hardware:
        st.warning(f"A ran on {', '.join(sorted(kinds['A'])) or '–'}, B on {', '.join(sorted(kinds['B'])) or '–'}. "
                   "Speedup, compile time and step times are only comparable on the same hardware: they are "
                   "shown per hardware below and get no delta across two kinds.", icon=":material/memory:")

summary = ui.load(compare.summary, f)
if summary is not None and len(summary) == 2:
    sa, sb = summary.iloc[0], summary.iloc[1]
    per_run = lambda s, k: s[k] / s["runs"] if s["runs"] else None  # noqa: E731
    items = [("Runs", "runs", None, "{:,.0f}", False), ("Graph breaks / run", "graph_breaks", "lower", "{:,.1f}", True),
             ("Distinct breaks", "distinct_breaks", "lower", "{:,.0f}", False),
             ("Recompiles / run", "recompiles", "lower", "{:,.1f}", True),
             ("Limit hits / run", "limit_hits", "lower", "{:,.2f}", True),
             ("Geomean speedup", "geomean_speedup", "higher", "{:.3g}×", False),
             ("Compile time / run", "compile_s_per_run", "lower", "{:,.1f} s", False)]
    cols = st.columns(4) + st.columns(4)  # two rows: labels stay readable
    for col, (label, key, better, fmt, divide) in zip(cols, items):
        va = per_run(sa, key) if divide else sa[key]
        vb = per_run(sb, key) if divide else sb[key]
        ok = va is not None and vb is not None and va == va and vb == vb
        delta = (f"{100 * (vb / va - 1):+.1f}%" if va else None) if ok else None
        if not same_hardware and key in ("geomean_speedup", "compile_s_per_run"):
            delta = None   # two kinds of hardware: no delta
        col.metric(label, fmt.format(vb) if vb is not None and vb == vb else "–", delta=delta,
                   delta_color=ui.delta_color(better), border=True,
                   help=f"A: {fmt.format(va) if va is not None and va == va else '–'}")
    st.caption("Values are B; the delta is B against A.")
elif summary is not None:
    st.caption("One of the sides has no runs in the selection.")

st.subheader("Graph breaks: new and fixed")
d = ui.load(compare.break_diff, f)
if d is not None and not d.empty:
    counts = d["status"].value_counts()
    st.markdown(f":red[**{counts.get('new', 0)} new**] · :green[**{counts.get('fixed', 0)} fixed**] · "
                f"{counts.get('more', 0)} more often · {counts.get('fewer', 0)} less often")
if d is not None:
    d = d.assign(detail=[ui.link("hotspots", f.replace(run_id=None, run_b=None, version_a=None, version_b=None),
                                 break_key=k) for k in d["break_key"]])
ui.table(d, key="cmp_breaks", empty="No graph breaks on either side.", hide=("break_key",),
         detail=ui.link_col("Hotspot", width="small"),
         status=ui.text_col("Status", "small"), gb_type=ui.text_col("Break type", "medium"),
         reason=ui.text_col("Reason", "large"), location=ui.text_col("User code", "medium"),
         per_run_a=ui.num_col("Per run A", "%.2f"), per_run_b=ui.num_col("Per run B", "%.2f"),
         runs_a=ui.count_col("Runs A"), runs_b=ui.count_col("Runs B"))

st.subheader("Step and iteration time (timing hooks)")
ui.table(ui.load(compare.runtime, f), key="cmp_runtime",
         empty="No step timings on either side (runs collected without the timing hooks).",
         model=ui.text_col("Model", "small"), hardware=ui.text_col("Hardware", "small"),
         metric=ui.text_col("Metric", "small"), subject=ui.text_col("Callable", "medium"),
         median_a=ui.num_col("Median A", "%.2f ms"), low_a=ui.num_col("Min A", "%.2f ms"),
         high_a=ui.num_col("Max A", "%.2f ms"), step_iqr_a=ui.num_col("Steps IQR A", "%.2f ms"),
         runs_a=ui.count_col("Runs A"), median_b=ui.num_col("Median B", "%.2f ms"),
         low_b=ui.num_col("Min B", "%.2f ms"), high_b=ui.num_col("Max B", "%.2f ms"),
         step_iqr_b=ui.num_col("Steps IQR B", "%.2f ms"), runs_b=ui.count_col("Runs B"),
         change_pct=ui.num_col("Δ", "%+.1f%%"))
st.caption("Per run: the median of its steady steps; per side: the median over runs, their range, and the "
           "steps' typical IQR. A row is one hardware: the two sides are compared only on the same kind.")

left, right = st.columns(2)
with left:
    st.subheader("Recompiles per function")
    ui.table(ui.load(compare.recompile_diff, f), key="cmp_recompiles", empty="No recompiles on either side.",
             function=ui.text_col("Function"), recompiles_a=ui.num_col("Per run A", "%.2f"),
             recompiles_b=ui.num_col("Per run B", "%.2f"), delta=ui.num_col("Δ per run", "%+.2f"),
             limit_hits_a=ui.num_col("Limit hits A", "%.2f"), limit_hits_b=ui.num_col("Limit hits B", "%.2f"),
             top_category_b=ui.text_col("Top guard failure in B"))
with right:
    st.subheader("Speedup per model")
    ui.table(ui.load(compare.speedup_diff, f), key="cmp_speedups", empty="No benchmark results on either side.",
             model=ui.text_col("Model"), hardware=ui.text_col("Hardware", "small"),
             speedup_a=ui.num_col("Speedup A", ui.RATIO),
             speedup_b=ui.num_col("Speedup B", ui.RATIO), speedup_change_pct=ui.num_col("Δ", "%+.1f%%"),
             compile_s_a=ui.num_col("Compile A", "%.1f s"), compile_s_b=ui.num_col("Compile B", "%.1f s"),
             memory_ratio_a=ui.num_col("Memory A", ui.RATIO), memory_ratio_b=ui.num_col("Memory B", ui.RATIO))


if compare.mode(f) == "runs":
    st.subheader("Why the compile cache missed")
    st.caption("B's FX graph and AOTAutograd cache lookups that missed or were bypassed where A's hit (or "
               "missed under another key), and the parts of the cache key that differed: the graph, a setting, "
               "the torch build, the input metadata, a process-group name. `compilewatch diff RUN_A RUN_B` "
               "prints the same.")
    cache_misses.table(ui.load(compare.cache_misses, f), "cmp_cache_misses",
                       "No cache lookup of B missed where A's hit.", "A", "B")
    st.subheader("What the compiler did differently")
    st.caption("Subgraphs (vLLM's pieces, regional subgraphs) matched by name, then compile ids matched by frame "
               "and compile order: the ops, guards and Inductor kernels that appear or disappear, and the compile "
               "time. `compilewatch diff RUN_A RUN_B` prints the same.")
    # The graphs, guards and output code are read only when asked for: they can be megabytes.
    # a verdict's Compare link names the frame its cause points at: open on that frame's diff
    if st.toggle("Compare the compiled graphs, guards and kernels", key="cmp_diff_open", value=bool(f.frame)):
        d = ui.load(compare.compile_diff, f)
        if d is not None:
            ui.table(d.drop(columns=["graphs_changed"]), key="cmp_compile_diff", empty="Neither run has compile ids.",
                     artifacts=ui.text_col("Subgraph's artifacts ±", "medium"),
                     compile_id_a=ui.text_col("Id A", "small"), compile_id_b=ui.text_col("Id B", "small"),
                     compiled_frame=ui.text_col("Frame", "medium"), what=ui.text_col("", "small"),
                     ops=ui.text_col("Ops ±", "medium"), guards=ui.text_col("Guards ±", "large"),
                     kernels=ui.text_col("Kernels ±", "medium"), kernel_count=ui.text_col("Kernels", "small"),
                     compile_s_a=ui.num_col("Compile A", "%.2f s"), compile_s_b=ui.num_col("Compile B", "%.2f s"))
            changed = d[d["what"] == "changed"]
            if len(changed):
                named = [i for i in changed.index if f.frame and changed.at[i, "compiled_frame"].startswith(f"{f.frame} (")]
                pick = st.selectbox("Show the unified diff of", list(changed.index), key="cmp_diff_pair",
                                    index=list(changed.index).index(named[0]) if named else 0,
                                    format_func=lambda i: f"{changed.at[i, 'compile_id_a']} → {changed.at[i, 'compile_id_b']} "
                                                          f"{changed.at[i, 'compiled_frame']}")
                kinds = [k for k in changed.at[pick, "graphs_changed"].split(", ") if k]
                kind = st.radio("Artifact", kinds, horizontal=True, key="cmp_diff_kind")
                text = ui.artifact_diff(f.run_id, f.run_b, changed.at[pick, "compile_id_a"],
                                        changed.at[pick, "compile_id_b"], kind)
                st.code(text or "(the same after normalising ids and generated names)", language="diff")

ui.set_url(page_filters)
