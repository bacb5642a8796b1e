"""Recompile storms: per run and function, storms flagged; a run's recompile timeline; guard
failures ranked with a fix hint for each category."""
import streamlit as st

from compilewatch.app import charts, ui
from compilewatch.app.filters import from_params
from compilewatch.app.queries import recompiles
from compilewatch.ingest.formats.guard_text import split_guard
from compilewatch.review import hints

f = ui.page("Recompile storms")
url = from_params(ui.url_params())
st.caption(f"A **storm**: the recompile limit was hit, one function recompiled ≥ {recompiles.MANY_RECOMPILES} "
           f"times in a run, or ≥ {recompiles.BURST_PER_MINUTE} recompiles landed within one minute.")

c1, _, c2 = st.columns([2, 3, 1], vertical_alignment="bottom")
ui.page_state("rc_only_storms", None, False)
only_storms = c1.toggle("Only storms", key="rc_only_storms")
ui.page_state("rc_limit", None, 50)
limit = c2.selectbox("Show", [20, 50, 100, 200], key="rc_limit", format_func=lambda n: f"top {n}")
f = f.replace(limit=int(limit))

table = ui.load(recompiles.storms, f)
ui.page_state("rc_pick", (url.run_id, url.function) if url.run_id else None, None)
if table is not None and table.empty:
    st.info("No recompiles in these runs. Widen the time window or the filters.", icon=":material/check_circle:")
elif table is not None:
    shown = table[table["storm"]] if only_storms else table
    shown = shown.reset_index(drop=True)

    def _picked():
        rows = st.session_state["rc_table"].selection.rows
        st.session_state["rc_pick"] = (str(shown.iloc[rows[0]]["run_id"]), str(shown.iloc[rows[0]]["function"])) if rows else None

    st.caption("Select a row to see that run's recompile timeline.")
    st.dataframe(
        shown[["storm", "why", "function", "model", "run_id", "run_time", "recompiles", "limit_hits", "burst",
               "span_s", "top_category", "torch_version"]],
        key="rc_table", on_select=_picked, selection_mode="single-row", hide_index=True, width="stretch",
        column_config={
            "storm": st.column_config.CheckboxColumn("Storm", width="small"), "why": ui.text_col("Why", "large"),
            "function": ui.text_col("Function"), "model": ui.text_col("Model", "small"), "run_id": ui.text_col("Run"),
            "run_time": ui.time_col("Started"), "recompiles": ui.count_col("Recompiles"),
            "limit_hits": ui.count_col("Limit hits"),
            "burst": ui.count_col("Max / minute", help="Most recompiles within one minute"),
            "span_s": ui.num_col("Span", "%.0f s", help="First to last recompile"),
            "top_category": ui.text_col("Top guard failure"), "torch_version": ui.text_col("Torch"),
        })

pick = st.session_state.get("rc_pick")
if pick:
    f = f.replace(run_id=pick[0], function=pick[1])
timeline = ui.load(recompiles.timeline, f)
if timeline is not None and not timeline.empty:
    run_id = timeline["run_id"].iloc[0]
    st.altair_chart(charts.recompile_timeline(timeline, highlight=f.function), width="stretch")
    if not pick:   # else a reader takes it for the table's first row
        st.caption("No row selected: the run with the most recompiles among the filtered runs.")
    st.page_link("views/run_detail.py", label=f"Open run {ui.md(run_id)}", icon=":material/description:",
                 query_params={"run": run_id})

per_day = ui.load(recompiles.recompiles_per_day, f.replace(run_id=None, function=None))
if per_day is not None:
    st.altair_chart(charts.recompiles_per_day(per_day), width="stretch")

st.subheader("Guard failures by category, with the fix")
cats = ui.load(recompiles.guard_categories, f.replace(run_id=None, function=None))
if cats is not None and cats.empty:
    st.caption("No guard failures recorded for these runs.")
elif cats is not None:
    left, right = st.columns([1, 2])
    left.altair_chart(charts.guard_category_bars(cats), width="stretch")
    with right:
        for row in cats.itertuples():
            with st.expander(f"**{ui.md(row.category)}** · {row.failures:,} failures in {row.runs:,} runs"):
                st.markdown(row.hint)
                g = split_guard(ui.first_text(row.example, row.top_guard))
                st.caption("Most common guard (an example as it failed)")
                st.code(g.expression, language=None, wrap_lines=True)
                if g.location or g.source:
                    st.caption(f"Guarding {ui.md(g.location or '')}")
                    if g.source:
                        st.code(g.source, language="python", wrap_lines=True)
                if g.note:
                    st.caption(ui.md(g.note))
    st.markdown("**Guards that fail most**")
    ui.table(ui.load(recompiles.top_guards, f.replace(run_id=None, function=None, limit=20)), key="rc_guards",
             guard=ui.text_col("Guard (numbers stripped)", "large"), category=ui.text_col("Category"),
             source_name=ui.text_col("Source"), failures=ui.count_col("Failures"), runs=ui.count_col("Runs"),
             functions=ui.text_col("Functions"), expected=ui.text_col("Expected (example)"),
             actual=ui.text_col("Actual (example)"))
if table is not None and (table["limit_hits"] > 0).any():
    # which functions: a page-wide "this function" left the reader to find them in the table
    runs_per_fn = (table[table["limit_hits"] > 0].groupby("function")["run_id"].nunique()
                   .sort_values(ascending=False, kind="stable"))
    named = ", ".join(f"**{ui.md(fn)}** ({n:,} run{'' if n == 1 else 's'})" for fn, n in runs_per_fn.head(5).items())
    if len(runs_per_fn) > 5:
        named += f" and {len(runs_per_fn) - 5:,} more function(s)"
    st.warning(hints.limit_hint_for(named), icon=":material/warning:")

ui.set_url(f)
