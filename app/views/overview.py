"""Weekly review: this window against the one before; what got worse and better; top hotspots and storms."""
from pathlib import PurePath

import pandas as pd
import streamlit as st

from compilewatch.app import charts, review_blocks, ui
from compilewatch.app.overview_review import view_key
from compilewatch.app.queries import overview
from compilewatch.app.queries import review as review_q


@st.cache_data(show_spinner=False, max_entries=32)
def blocks_for(computed_at: str, view: str, base_f, _verdicts: pd.DataFrame) -> review_blocks.Blocks:
    """The verdict blocks of one kept review (its time and view say which) for these filters."""
    return review_blocks.build(_verdicts, base_f)


f = ui.page("Weekly review")
prev = f.previous_window()
st.caption(f"**{f.start} – {f.end}** against the {f.window_days()} days before ({prev.start} – {prev.end}).")

kpis = ui.load(overview.kpis, f)
if kpis is not None:
    for col, row in zip(st.columns(len(kpis)), kpis.itertuples()):
        mixed = row.metric in overview.PER_HARDWARE and len(row.hardware) > 1
        col.metric(row.label, "—" if mixed else ui.fmt_value(row.current, row.unit),
                   delta=None if mixed else ui.fmt_change(row.change_pct),
                   delta_color=ui.delta_color(row.better), border=True,
                   help=(overview.METRIC_HELP.get(row.metric, "")
                         + (f" These runs ran on {len(row.hardware)} kinds of hardware ({', '.join(row.hardware)}); "
                            f"a figure over them all would describe none: pick one in the sidebar's Hardware filter."
                            if mixed else f" Previous window: {ui.fmt_value(row.previous, row.unit)}.")))
    kinds = kpis["hardware"].iloc[0] if len(kpis) else []
    if len(kinds) > 1:
        st.caption(f"Speedup and compile time are figures of one kind of hardware; these runs ran on {len(kinds)} "
                   f"({ui.md(', '.join(kinds))}). Pick one in the sidebar's Hardware filter to see them.")

# The verdict leads: every metric the runs carry, judged per model and hardware (review/). It is
# computed once per store version and kept in the store: a page load reads its rows.
kept = ui.load_overview_review(f)
verdicts = kept.parts["verdicts"] if kept is not None else None
if kept is not None:
    st.caption(f"Review as of {kept.computed_at:%Y-%m-%d %H:%M} UTC: the data it read had not changed since "
               f"(computed in {kept.seconds or 0:.1f} s, kept for every later visit until the next ingest).")
if verdicts is not None:
    base_f = f.replace(start=prev.start, end=f.end)   # links span both windows
    drawn = blocks_for(str(kept.computed_at), view_key(f), base_f, verdicts)
    st.subheader(":red[Got worse]" if drawn.worse else "Verdict")
    if not drawn.judged:
        st.caption("Nothing got worse or better beyond the rules and the runs' own noise.")
    if drawn.more:
        st.caption(drawn.more)
    # One block per model x hardware: the headline sentence a person would say in the review, then
    # its verdicts with links, then the evidence in full (never cut at a column's width).
    for n, block in enumerate(drawn.blocks):
        with st.container(border=True):
            st.markdown(block.headline)
            if block.cost:
                st.caption(block.cost)
            ui.table(block.table, key=f"ov_group_{n}", status=ui.text_col("Verdict", "small"),
                     metric=ui.text_col("What", "medium"), change=ui.text_col("Change", "small"),
                     evidence=ui.text_col("Cause / evidence", "large"), compare=ui.link_col("Compare", width="small"),
                     run=ui.link_col("Run", width="small"), detail=ui.link_col("Hotspot / storm", width="small"))
            with st.expander("Evidence in full, and the command that reproduces a run"):
                for kind, text in block.evidence:
                    if kind == "markdown":
                        st.markdown(text)
                    elif kind == "caption":
                        st.caption(text)
                    else:
                        st.code(text, language="bash", wrap_lines=kind == "shell")
    st.caption(f"Candidate: this window; baseline: the window before (or the pinned baseline; a model with no "
               f"runs in the window before: its newest version against the one before it). A run is flagged "
               f"past PyTorch HUD's ratio rules and beyond the runs' own run-to-run noise; two in a row make a "
               f"regression, one is suspicious. Models are judged per hardware, never across. "
               f"`compilewatch check` gives the same verdicts.")
    for status, title in (("own_history", "model(s) judged against their own previous version"),
                          ("not_compared", "model(s) not compared: different hardware on the two sides")):
        texts = verdicts.loc[verdicts["status"] == status, "summary"]
        if len(texts):
            with st.expander(f"{len(texts)} {title}"):
                for text in texts:
                    st.markdown(f"- {ui.md(text)}")
    # The report renders charts for every verdict: built on request, not on every page view.
    if st.button("Prepare the report (HTML)", key="ov_prepare_report", icon=":material/description:"):
        st.session_state["_ov_report"] = True
    if st.session_state.get("_ov_report"):
        html = ui.load(review_q.report_html, f)
        if html is not None:
            st.download_button("Download the report", html.iloc[0, 0], file_name=f"compilewatch-review-{f.end}.html",
                               mime="text/html", icon=":material/download:", key="ov_report")

daily = ui.load(overview.daily, f)
if daily is not None:
    st.altair_chart(charts.daily_activity(daily), width="stretch")

# Stacked, not side by side: both tables need their width for the link column to stay in view.
with st.container():
    st.subheader("Top graph-break hotspots")
    top = kept.parts["hotspots"] if kept is not None else None
    if top is not None:
        top = top.assign(detail=[ui.link("hotspots", f, break_key=k) for k in top["break_key"]],
                         what=[ui.short(ui.first_text(t, r, k), 90)
                               for t, r, k in zip(top["gb_type"], top["reason"], top["break_key"])],
                         # the same break type at two places in user code is two hotspots: say where
                         where=[f"{PurePath(str(p)).name}:{int(ln)}" if isinstance(p, str) and pd.notna(ln) else ""
                                for p, ln in zip(top["user_file"], top["user_line"])])
        ui.table(top[["what", "where", "occurrences", "runs", "models", "new_this_week", "detail"]], key="ov_hotspots",
                 empty="No graph breaks in this window.",
                 what=ui.text_col("Break", "large"), where=ui.text_col("Where", "medium"),
                 occurrences=ui.count_col("Count", width="small"),
                 runs=ui.count_col("Runs", width="small"), models=ui.count_col("Models", width="small"),
                 new_this_week=st.column_config.CheckboxColumn("New", width="small"),
                 detail=ui.link_col("Detail", width="small"))
with st.container():
    st.subheader("Top recompile storms")
    storms = kept.parts["storms"] if kept is not None else None
    if storms is not None:
        storms = storms.assign(detail=[ui.link("recompiles", f, run_id=r, function=fn)
                                       for r, fn in zip(storms["run_id"], storms["function"])])
        ui.table(storms[["storm", "function", "model", "recompiles", "limit_hits", "top_category", "detail"]],
                 key="ov_storms", empty="No recompiles in this window.",
                 storm=st.column_config.CheckboxColumn("Storm", width="small"), function=ui.text_col("Function"),
                 model=ui.text_col("Model", "small"), recompiles=ui.count_col("Recompiles", width="small"),
                 limit_hits=ui.count_col("Limit hits", width="small"), top_category=ui.text_col("Top guard failure"),
                 detail=ui.link_col("Detail", width="small"))

ui.set_url(f)
