"""Weekly review: this window against the one before; what got worse and better; top hotspots and storms."""
from pathlib import PurePath

import pandas as pd
import streamlit as st

from app import charts, ui
from app.filters import to_params
from app.queries import hotspots, overview, recompiles

f = ui.page("Weekly review")
prev = f.previous_window()
st.caption(f"**{f.start} – {f.end}** against the {f.window_days()} days before "
           f"({prev.start} – {prev.end}). Changes within ±{overview.NOISE_PCT:.0f}% count as noise.")

kpis = ui.load(overview.kpis, f)
if kpis is not None:
    for col, row in zip(st.columns(len(kpis)), kpis.itertuples()):
        col.metric(row.label, ui.fmt_value(row.current, row.unit), delta=ui.fmt_change(row.change_pct),
                   delta_color=ui.delta_color(row.better), border=True,
                   help=(overview.METRIC_HELP.get(row.metric, "")
                         + f" Previous window: {ui.fmt_value(row.previous, row.unit)}."))

movers = ui.load(overview.movers, f)
if movers is not None:
    for col, verdict, title in zip(st.columns(2), ("worse", "better"), (":red[Got worse]", ":green[Got better]")):
        with col:
            st.subheader(title)
            if verdict == "worse":
                st.page_link("views/hotspots.py", label="Graph breaks first seen this week",
                             icon=":material/fiber_new:", query_params={**to_params(f), "new": "1"})
            ui.table(movers[movers["verdict"] == verdict], key=f"ov_{verdict}",
                     empty=f"Nothing {verdict} beyond ±{overview.NOISE_PCT:.0f}% per model.",
                     model=ui.text_col("Model", "small"), metric=ui.text_col("Metric", "medium"),
                     previous=ui.num_col("Previous", "%.3f"), current=ui.num_col("Current", "%.3f"),
                     change_pct=ui.num_col("Change", "%+.1f%%"), verdict=None)

daily = ui.load(overview.daily, f)
if daily is not None:
    st.altair_chart(charts.daily_activity(daily), width="stretch")

# Stacked, not side by side: both tables need their width for the link column to stay in view.
with st.container():
    st.subheader("Top graph-break hotspots")
    top = ui.load(hotspots.hotspots, f.replace(limit=10))
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
    storms = ui.load(recompiles.storms, f.replace(limit=10))
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
