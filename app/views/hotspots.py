"""Graph-break hotspots: the same break across runs, most frequent first; pick one for its detail."""
import pandas as pd
import streamlit as st

from compilewatch.app import charts, ui
from compilewatch.app.filters import from_params
from compilewatch.app.queries import hotspots
from compilewatch.deepdive import gb_registry
from compilewatch.review.hints import wrapper_hint

f = ui.page("Graph-break hotspots")
url = from_params(ui.url_params())

c1, c2, c3 = st.columns([3, 1, 1], vertical_alignment="bottom")
ui.page_state("hs_search", url.search, "")
search = c1.text_input("Search break type, reason, file or function", key="hs_search",
                       placeholder="e.g. item(), print, attention.py")
ui.page_state("hs_new", url.only_new or None, False)
only_new = c2.toggle("Only new this week", key="hs_new", help="First seen (in any run) during the last 7 days of the window")
ui.page_state("hs_limit", None, 50)
limit = c3.selectbox("Show", [20, 50, 100, 200], key="hs_limit", format_func=lambda n: f"top {n}")
f = f.replace(search=search.strip() or None, only_new=bool(only_new), limit=int(limit))

table = ui.load(hotspots.hotspots, f)
if table is not None and table.empty:
    st.info("No graph breaks match these filters. Widen the time window or clear the search.", icon=":material/check_circle:")
elif table is not None:
    bars_tab, trend_tab = st.tabs(["Most frequent", "Over time"])
    bars_tab.altair_chart(charts.hotspot_bars(table), width="stretch")
    trend = ui.load(hotspots.hotspot_trend, f)
    if trend is not None:
        trend_tab.altair_chart(charts.hotspot_trend(trend), width="stretch")

    view = table.assign(location=table["user_file"].fillna("?") + ":" + table["user_line"].astype("string").fillna("?"),
                        what=table["gb_type"].fillna(table["reason"]).fillna(table["break_key"]))
    ui.page_state("hs_break", url.break_key, None)

    def _picked():
        rows = st.session_state["hs_table"].selection.rows
        st.session_state["hs_break"] = str(table.iloc[rows[0]]["break_key"]) if rows else None

    st.caption("Select a row for the explanation, hint, an example stack and the runs it occurred in.")
    st.dataframe(
        view[["new_this_week", "what", "reason", "location", "occurrences", "runs", "models", "first_seen",
              "last_seen", "torch_versions", "model_list"]],
        key="hs_table", on_select=_picked, selection_mode="single-row", hide_index=True, width="stretch",
        column_config={
            "new_this_week": st.column_config.CheckboxColumn("New", width="small", help="First seen in the last 7 days of the window"),
            "what": ui.text_col("Break type", "medium"), "reason": ui.text_col("Reason (normalised)", "large"),
            "location": ui.text_col("User code", "medium"), "occurrences": ui.count_col("Occurrences"),
            "runs": ui.count_col("Runs"), "models": ui.count_col("Models"), "first_seen": ui.time_col("First seen"),
            "last_seen": ui.time_col("Last seen"), "torch_versions": ui.text_col("Torch versions"),
            "model_list": ui.text_col("Models affected"),
        })
    f = f.replace(break_key=st.session_state["hs_break"])

    if f.break_key:
        match = table[table["break_key"] == f.break_key]
        st.divider()
        if match.empty:
            st.subheader(f"Break {ui.md(ui.short(f.break_key, 100))}")
            st.caption("Not among the breaks listed above with these filters.")
        else:
            b = match.iloc[0]
            st.subheader(ui.md(ui.short(ui.first_text(b["gb_type"], b["reason"], b["break_key"]), 120)))
            code = ui.first_text(b["gb_code"])
            url = gb_registry.registry_url(code)
            # its page on PyTorch's graph-break site (the id escaped like all log content; the URL is ours)
            code_md = f"[{ui.md(code)}]({url})" if url else ui.md(code)
            first = b["first_seen_ever"]
            st.markdown(ui.md(f"{ui.first_text(b['user_file'], '?')}:{b['user_line']} in "
                              f"{ui.first_text(b['user_function'], '?')}") + (f" · {code_md}" if code else "")
                        + (f" · first seen {first:%Y-%m-%d}" if pd.notna(first) else "")
                        + (" · **new this week**" if pd.notna(b["new_this_week"]) and bool(b["new_this_week"]) else ""))
            left, right = st.columns(2)
            with left:
                st.markdown("**Reason**")
                st.text(ui.first_text(b["reason"], "–"))
                if ui.first_text(b["explanation"]):
                    st.markdown("**Explanation**")
                    st.markdown(ui.md(b["explanation"], one_line=False))
                fix = wrapper_hint(b["user_file"], b["reason"], b["explanation"])
                if fix:
                    st.markdown("**Fix** (a distributed wrapper's code)")
                    st.markdown(ui.md(fix, one_line=False))
                hints = gb_registry.hint_list(b["hints"])
                if hints:
                    st.markdown("**Hints**")
                    st.markdown("\n".join(f"- {ui.md(h)}" for h in hints))
            with right:
                st.markdown("**Example user stack** (latest occurrence)")
                st.code(ui.first_text(b["example_stack"], "no stack in the log"), language="python")
        runs = ui.load(hotspots.hotspot_runs, f)
        if runs is not None:
            st.markdown("**Runs it occurred in** (newest first)")
            ui.table(runs.assign(open=[ui.link("run", f, run_id=r) for r in runs["run_id"]]), key="hs_runs",
                     run_id=ui.text_col("Run"), model=ui.text_col("Model"), torch_version=ui.text_col("Torch"),
                     label=ui.text_col("Label"), run_time=ui.time_col("Started"),
                     occurrences=ui.count_col("Occurrences"), compile_ids=ui.text_col("Compile ids"),
                     open=ui.link_col("Run detail"))

st.subheader("CUDA-graph skips")
ui.table(ui.load(hotspots.cudagraph_skips, f), key="hs_cudagraphs",
         empty="No CUDA-graph skips in these runs (only reduce-overhead jobs on a GPU log them).",
         category=ui.text_col("Category", "small"), reason=ui.text_col("Reason (torch)"),
         location=ui.text_col("User code"), user_code=ui.text_col("Line", "large"), skips=ui.count_col("Skips"),
         runs=ui.count_col("Runs"), models=ui.count_col("Models"), hint=ui.text_col("Fix", "large"))

ui.set_url(f)
