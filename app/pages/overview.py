"""Weekly review: this window against the one before; what got worse and better; top hotspots and storms."""
import streamlit as st

from app import charts, ui
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
                   help=f"Previous window: {ui.fmt_value(row.previous, row.unit)}")

movers = ui.load(overview.movers, f)
if movers is not None:
    worse, better = st.columns(2)
    cfg = {
        "model": st.column_config.TextColumn("Model", width="small"),
        "metric": st.column_config.TextColumn("Metric", width="medium"),
        "previous": st.column_config.NumberColumn("Previous", format="%.3f"),
        "current": st.column_config.NumberColumn("Current", format="%.3f"),
        "change_pct": st.column_config.NumberColumn("Change", format="%+.1f%%"),
        "verdict": None,
    }
    for col, verdict, title in ((worse, "worse", ":red[Got worse]"), (better, "better", ":green[Got better]")):
        with col:
            st.subheader(title)
            part = movers[movers["verdict"] == verdict]
            if part.empty:
                st.caption(f"Nothing {verdict} beyond ±{overview.NOISE_PCT:.0f}% per model.")
            else:
                st.dataframe(part, column_config=cfg, hide_index=True, width="stretch", key=f"ov_{verdict}")

daily = ui.load(overview.daily, f)
if daily is not None:
    st.altair_chart(charts.daily_activity(daily), width="stretch")

left, right = st.columns(2)
with left:
    st.subheader("Top graph-break hotspots")
    top = ui.load(hotspots.hotspots, f.replace(limit=10))
    if top is not None and not top.empty:
        top = top.assign(detail=[ui.link("hotspots", f, break_key=k) for k in top["break_key"]],
                         what=[ui.short(t or r, 70) for t, r in zip(top["gb_type"], top["reason"])])
        st.dataframe(top[["what", "occurrences", "runs", "models", "new_this_week", "detail"]], hide_index=True,
                     width="stretch", key="ov_hotspots", column_config={
                         "what": st.column_config.TextColumn("Break", width="large"),
                         "occurrences": st.column_config.NumberColumn("Occurrences", format="localized"),
                         "runs": st.column_config.NumberColumn("Runs"),
                         "models": st.column_config.NumberColumn("Models"),
                         "new_this_week": st.column_config.CheckboxColumn("New"),
                         "detail": st.column_config.LinkColumn("Detail", display_text="open"),
                     })
    elif top is not None:
        st.caption("No graph breaks in this window.")
with right:
    st.subheader("Top recompile storms")
    storms = ui.load(recompiles.storms, f.replace(limit=10))
    if storms is not None and not storms.empty:
        storms = storms.assign(detail=[ui.link("recompiles", f, run_id=r, function=fn)
                                       for r, fn in zip(storms["run_id"], storms["function"])])
        st.dataframe(storms[["function", "model", "recompiles", "limit_hits", "top_category", "storm", "detail"]],
                     hide_index=True, width="stretch", key="ov_storms", column_config={
                         "function": st.column_config.TextColumn("Function"),
                         "model": st.column_config.TextColumn("Model"),
                         "recompiles": st.column_config.NumberColumn("Recompiles"),
                         "limit_hits": st.column_config.NumberColumn("Limit hits"),
                         "top_category": st.column_config.TextColumn("Top guard failure"),
                         "storm": st.column_config.CheckboxColumn("Storm"),
                         "detail": st.column_config.LinkColumn("Detail", display_text="open"),
                     })
    elif storms is not None:
        st.caption("No recompiles in this window.")

ui.set_url(f)
