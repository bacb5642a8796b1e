"""Weekly review: this window against the one before; what got worse and better; top hotspots and storms."""
from pathlib import PurePath

import pandas as pd
import streamlit as st

from compilewatch.app import charts, ui
from compilewatch.app.queries import overview
from compilewatch.app.queries import review as review_q
from compilewatch.review import wording

MAX_GROUPS = 10   # model x hardware blocks of verdicts drawn in full

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
    def links(row) -> dict:
        frame = getattr(row, "frame", None)
        out = {"compare": ui.link("compare", base_f, run_id=row.baseline_run, run_b=row.candidate_run,
                                  frame=frame if isinstance(frame, str) and frame else None)
               if row.baseline_run and row.candidate_run else None,
               "run": ui.link("run", base_f, run_id=row.candidate_run) if row.candidate_run else None,
               "detail": None}
        if isinstance(row.break_key, str) and row.break_key:
            out["detail"] = ui.link("hotspots", base_f, break_key=row.break_key)
        elif isinstance(row.function, str) and row.function:
            out["detail"] = ui.link("recompiles", base_f, run_id=row.candidate_run, function=row.function)
        return out
    # One block per model x hardware: the headline sentence a person would say in the review, then
    # its verdicts with links, then the evidence in full (never cut at a column's width).
    judged = verdicts[verdicts["status"].isin(["regression", "suspicious", "improvement"])]
    st.subheader(":red[Got worse]" if judged["status"].isin(["regression", "suspicious"]).any() else "Verdict")
    if judged.empty:
        st.caption("Nothing got worse or better beyond the rules and the runs' own noise.")
    order = {"regression": 0, "suspicious": 1, "improvement": 2}
    # worst status first, then what the group's regressions cost a week (review/cost.py): the fix that
    # pays most first; a review kept by an older version has no cost column
    cost = judged["cost_s"] if "cost_s" in judged else pd.Series(0.0, index=judged.index)
    ranked = judged.assign(_rank=judged["status"].map(order), _cost=pd.to_numeric(cost, errors="coerce").fillna(0.0))
    keys = ranked.groupby(["model", "hardware"], sort=False).agg(_rank=("_rank", "min"), _cost=("_cost", "sum"))
    keys = keys.sort_values(["_rank", "_cost"], ascending=[True, False], kind="stable")
    groups = keys["_rank"]
    # The worst groups in full; past MAX_GROUPS (an organisation's week can judge hundreds of models)
    # the rest are counted and left to the filters and the report: every group drawn is sent along.
    if len(groups) > MAX_GROUPS:
        rest = groups.iloc[MAX_GROUPS:]
        st.caption(f"The {MAX_GROUPS} worst of {len(groups)} model × hardware groups are shown; "
                   f"{int((rest == 0).sum())} more with regressions, {int((rest == 1).sum())} with suspicious changes "
                   f"and {int((rest == 2).sum())} with improvements are in the report below, or pick models in the sidebar.")
        groups = groups.iloc[:MAX_GROUPS]
    by_group = dict(iter(ranked.groupby(["model", "hardware"], sort=False)))   # one pass, not a mask per group
    for n, (model, hw) in enumerate(groups.index):
        part = by_group[(model, hw)].sort_values(["_rank", "_cost"], ascending=[True, False], kind="stable")
        # links for the rows drawn only: a week of an organisation judges hundreds of rows
        part = pd.concat([part.reset_index(drop=True),
                          pd.DataFrame([links(r) for r in part.itertuples()], columns=["compare", "run", "detail"])],
                         axis=1)
        with st.container(border=True):
            st.markdown(f"**{ui.md(part['headline'].iloc[0])}**")
            if part["_cost"].sum() > 0:
                st.caption(f"What these regressions cost: {ui.md(wording.per_week(part['_cost'].sum()))} "
                           f"(extra compile seconds times the runs, extra step time times the steps).")
            why = part["cause"] if "cause" in part else pd.Series(None, index=part.index)
            shown = part.assign(evidence=[c if isinstance(c, str) and c else " · ".join(t for _, t, _ in ev)
                                          for c, ev in zip(why, part["evidence"])])
            ui.table(shown[["status", "metric", "change", "evidence", "compare", "run", "detail"]],
                     key=f"ov_group_{n}", status=ui.text_col("Verdict", "small"), metric=ui.text_col("What", "medium"),
                     change=ui.text_col("Change", "small"), evidence=ui.text_col("Cause / evidence", "large"),
                     compare=ui.link_col("Compare", width="small"), run=ui.link_col("Run", width="small"),
                     detail=ui.link_col("Hotspot / storm", width="small"))
            with st.expander("Evidence in full, and the command that reproduces a run"):
                for row in part.itertuples():
                    st.markdown(f"**{ui.md(row.status.capitalize())}: {ui.md(row.metric)}** ({ui.md(row.change)}) — "
                                f"{ui.md(row.summary)}")
                    if isinstance(getattr(row, "cause", None), str) and row.cause:
                        st.markdown(f"- **cause**: {ui.md(row.cause)}"
                                    + (f" — costs {ui.md(row.cost)}" if isinstance(getattr(row, "cost", None), str) else ""))
                    for kind, text, hint in row.evidence:
                        st.markdown(f"- {ui.md(kind.replace('_', ' '))}: {ui.md(text)}"
                                    + (f" — *fix:* {ui.md(hint)}" if isinstance(hint, str) and hint else ""))
                    if isinstance(row.command, str) and row.command:
                        st.code(row.command, language="bash", wrap_lines=True)
                    if isinstance(row.diff_command, str) and row.diff_command:
                        st.caption("See what changed in the compiler (or open Compare and its compile diff):")
                        st.code(row.diff_command, language="bash")
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
