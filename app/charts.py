"""Altair chart builders: DataFrame in, chart out; no streamlit, no queries.

Every chart has a title, axis titles with units and tooltips. Frames arrive aggregated and
LIMITed by app.queries, so nothing here ever ships more than a few thousand points.
"""
from __future__ import annotations

import altair as alt
import pandas as pd

HEIGHT = 300


def _empty(title: str, text: str = "no data in this selection") -> alt.Chart:
    return alt.Chart(pd.DataFrame({"text": [text]}), title=title).mark_text(
        color="gray").encode(text="text:N").properties(height=80)


def daily_activity(frame: pd.DataFrame) -> alt.Chart:
    """Graph breaks and recompiles per day, current window in color, previous in grey."""
    title = "Graph breaks and recompiles per day"
    if frame.empty:
        return _empty(title)
    if not (frame["graph_breaks"].sum() or frame["recompiles"].sum()):
        # bars of height 0 draw nothing but an axis with one tick, "0.000000"
        return _empty(title, "no graph breaks or recompiles on these days")
    long = frame.melt(id_vars=["day", "win", "runs"], value_vars=["graph_breaks", "recompiles"],
                      var_name="event", value_name="count")
    long["event"] = long["event"].map({"graph_breaks": "graph breaks", "recompiles": "recompiles"})
    return alt.Chart(long, title=title).mark_bar().encode(
        x=alt.X("yearmonthdate(day):O", title="Day (UTC)", axis=alt.Axis(format="%b %d", labelAngle=0)),
        y=alt.Y("count:Q", title="Events (count)", axis=alt.Axis(tickMinStep=1, format=",d")),
        color=alt.Color("event:N", title="Event"),
        opacity=alt.Opacity("win:N", title="Window", scale=alt.Scale(domain=["previous", "current"], range=[0.35, 1.0])),
        xOffset="event:N",
        tooltip=[alt.Tooltip("yearmonthdate(day):T", title="Day"), alt.Tooltip("win:N", title="Window"),
                 alt.Tooltip("event:N", title="Event"), alt.Tooltip("count:Q", title="Count", format=","),
                 alt.Tooltip("runs:Q", title="Runs")],
    ).properties(height=HEIGHT)


def hotspot_bars(frame: pd.DataFrame, top: int = 15) -> alt.Chart:
    """Occurrences of the most frequent breaks, horizontal bars, new-this-week highlighted."""
    title = "Most frequent graph breaks"
    if frame.empty:
        return _empty(title)
    d = frame.head(top).copy()
    described = (d["gb_type"].fillna(d["reason"]).str.slice(0, 48) + " @ "
                 + d["user_file"].fillna("?").str.split("/").str[-1] + ":" + d["user_line"].astype("string").fillna("?"))
    # A break the log did not describe is labelled by its key, which already names the place.
    d["break"] = described.fillna(d["break_key"].str.slice(0, 70)).fillna("?")
    d["status"] = d["new_this_week"].map({True: "new this week"}).fillna("seen before")
    return alt.Chart(d, title=title).mark_bar().encode(
        x=alt.X("occurrences:Q", title="Occurrences (count)"),
        y=alt.Y("break:N", sort="-x", title=None, axis=alt.Axis(labelLimit=360)),
        color=alt.Color("status:N", title="", scale=alt.Scale(domain=["seen before", "new this week"],
                                                               range=["#4c78a8", "#f58518"])),
        tooltip=[alt.Tooltip("break:N", title="Break"), alt.Tooltip("occurrences:Q", title="Occurrences", format=","),
                 alt.Tooltip("runs:Q", title="Runs"), alt.Tooltip("models:Q", title="Models"),
                 alt.Tooltip("torch_versions:N", title="Torch versions"),
                 alt.Tooltip("first_seen:T", title="First seen"), alt.Tooltip("last_seen:T", title="Last seen")],
    ).properties(height=alt.Step(26))


def hotspot_trend(frame: pd.DataFrame) -> alt.Chart:
    title = "Graph breaks over time, top breaks"
    if frame.empty:
        return _empty(title)
    return alt.Chart(frame, title=title).mark_bar().encode(
        x=alt.X("yearmonthdate(period):O", title="Period start (UTC day)", axis=alt.Axis(format="%b %d", labelAngle=0)),
        y=alt.Y("sum(occurrences):Q", title="Occurrences (count)"),
        color=alt.Color("label:N", title="Break", legend=alt.Legend(labelLimit=280)),
        tooltip=[alt.Tooltip("yearmonthdate(period):T", title="Period"), alt.Tooltip("label:N", title="Break"),
                 alt.Tooltip("sum(occurrences):Q", title="Occurrences", format=",")],
    ).properties(height=HEIGHT)


def recompile_timeline(frame: pd.DataFrame, highlight: str | None = None) -> alt.Chart:
    """Cumulative recompiles per function over time in one run; points coloured by guard category.
    With `highlight` (a function name present in the run), the other functions are faded."""
    run = frame["run_id"].iloc[0] if not frame.empty else ""
    title = f"Recompiles over time in run {run}"
    if frame.empty:
        return _empty("Recompiles over time")
    has_time = frame["t_s"].notna().any()
    x = (alt.X("t_s:Q", title="Time since first recompile (s)") if has_time
         else alt.X("seq:Q", title="Recompile number in the log (no timestamps)"))
    base = alt.Chart(frame).encode(
        x=x, y=alt.Y("cumulative:Q", title="Recompiles (cumulative count)"),
        tooltip=[alt.Tooltip("function:N", title="Function"), alt.Tooltip("compile_id:N", title="Compile id"),
                 alt.Tooltip("t_s:Q", title="Time (s)", format=".1f"), alt.Tooltip("cumulative:Q", title="Recompile #"),
                 alt.Tooltip("category:N", title="Guard category"), alt.Tooltip("reason:N", title="First failed guard")])
    lines = base.mark_line(interpolate="step-after", opacity=0.5).encode(detail="function:N",
                                                                         strokeDash=alt.StrokeDash("function:N", title="Function"))
    points = base.mark_point(filled=True, size=70).encode(color=alt.Color("category:N", title="Guard category"),
                                                           shape=alt.Shape("function:N", title="Function"))
    if highlight and (frame["function"] == highlight).any():
        faded = alt.condition(alt.datum.function == highlight, alt.value(1.0), alt.value(0.2))
        lines, points = lines.encode(opacity=faded), points.encode(opacity=faded)
        title += f", function {highlight}"
    return (lines + points).properties(title=title, height=HEIGHT)


def recompiles_per_day(frame: pd.DataFrame) -> alt.Chart:
    """Guard failures per day stacked by category, with the day's recompile count as a line."""
    title = "Recompiles per day, and their guard failures by category"
    if frame.empty:
        return _empty(title)
    x = alt.X("yearmonthdate(day):O", title="Day (UTC)", axis=alt.Axis(format="%b %d", labelAngle=0))
    bars = alt.Chart(frame[frame["category"] != "all recompiles"]).mark_bar().encode(
        x=x, y=alt.Y("sum(recompiles):Q", title="Guard failures / recompiles (count)"),
        color=alt.Color("category:N", title="Guard category"),
        tooltip=[alt.Tooltip("yearmonthdate(day):T", title="Day"), alt.Tooltip("category:N", title="Category"),
                 alt.Tooltip("sum(recompiles):Q", title="Guard failures", format=",")])
    total = alt.Chart(frame[frame["category"] == "all recompiles"]).mark_line(point=True, color="black").encode(
        x=x, y="sum(recompiles):Q",
        tooltip=[alt.Tooltip("yearmonthdate(day):T", title="Day"),
                 alt.Tooltip("sum(recompiles):Q", title="Recompiles", format=",")])
    return (bars + total).properties(title=title, height=HEIGHT)


def guard_category_bars(frame: pd.DataFrame) -> alt.Chart:
    title = "Guard failures by category"
    if frame.empty:
        return _empty(title)
    return alt.Chart(frame, title=title).mark_bar().encode(
        x=alt.X("failures:Q", title="Guard failures (count)"),
        y=alt.Y("category:N", sort="-x", title=None),
        tooltip=[alt.Tooltip("category:N", title="Category"), alt.Tooltip("failures:Q", title="Failures", format=","),
                 alt.Tooltip("runs:Q", title="Runs"), alt.Tooltip("functions:Q", title="Functions"),
                 alt.Tooltip("top_guard:N", title="Most common guard")],
    ).properties(height=alt.Step(28))


_TREND_FIELDS = {
    "speedup": ("Speedup over eager (×, geomean)", ".3f"),
    "compile_s": ("Compile time (s, mean)", ".1f"),
    "memory_ratio": ("Peak-memory ratio eager/compiled (×)", ".3f"),
}


def trend(frame: pd.DataFrame, field: str = "speedup") -> alt.Chart:
    """One line per model over days for speedup, compile_s or memory_ratio."""
    label, fmt = _TREND_FIELDS[field]
    title = f"{label.split(' (')[0]} per model over time"
    if frame.empty or frame[field].isna().all():
        return _empty(title)
    # only the columns drawn: the frame is sent to the browser with the chart
    frame = frame[["model", "period", field, "runs", "torch_versions", "labels"]]
    chart = alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("period:T", title="Run time (UTC)"),
        y=alt.Y(f"{field}:Q", title=label, scale=alt.Scale(zero=False)),
        # two legend columns: a dozen models no longer get cut off at the chart's height
        color=alt.Color("model:N", title="Model", legend=alt.Legend(columns=2, symbolLimit=0)),
        tooltip=[alt.Tooltip("model:N", title="Model"), alt.Tooltip("period:T", title="Period (UTC)", format="%Y-%m-%d %H:%M"),
                 alt.Tooltip(f"{field}:Q", title=label, format=fmt), alt.Tooltip("runs:Q", title="Runs"),
                 alt.Tooltip("torch_versions:N", title="Torch"), alt.Tooltip("labels:N", title="Labels")],
    )
    if field in ("speedup", "memory_ratio"):
        chart = chart + alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="y:Q")
    return chart.properties(title=title, height=HEIGHT)


def cudagraph_coverage(frame: pd.DataFrame) -> alt.Chart:
    """Per run over time, one panel per figure: CUDA graphs recorded, partitions and skips; a
    line per model. The coverage in words is the tooltip."""
    title = "CUDA-graph coverage per run"
    if frame.empty:
        return _empty(title)
    figures = {"cudagraph_graphs": "Graphs recorded", "cudagraph_partitions": "Partitions", "cudagraph_skips": "Skips"}
    # only the columns drawn: the frame is sent to the browser with the chart
    long = frame[["model", "run_time", "coverage", *figures]].melt(
        id_vars=["model", "run_time", "coverage"], var_name="figure", value_name="value")
    long["figure"] = long["figure"].map(figures)
    return alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("run_time:T", title="Run time (UTC)"),
        y=alt.Y("value:Q", title=None),
        color=alt.Color("model:N", title="Model", legend=alt.Legend(columns=2, symbolLimit=0)),
        tooltip=[alt.Tooltip("model:N", title="Model"), alt.Tooltip("run_time:T", title="Run (UTC)", format="%Y-%m-%d %H:%M"),
                 alt.Tooltip("figure:N", title="Figure"), alt.Tooltip("value:Q", title="Value"),
                 alt.Tooltip("coverage:N", title="Coverage")],
    ).properties(height=HEIGHT // 2, width=220).facet(column=alt.Column("figure:N", title=None, sort=list(figures.values())),
                                                       title=title).resolve_scale(y="independent")


def by_version(frame: pd.DataFrame, dimension: str = "torch_version") -> alt.Chart:
    # Horizontal bars: version names (nightlies, git commits) are long, and rotated under vertical
    # bars they ate the whole plot height at team scale.
    title = f"Geomean speedup over models by {dimension.replace('_', ' ')}"
    if frame.empty:
        return _empty(title)
    bars = alt.Chart(frame).mark_bar().encode(
        y=alt.Y("version:N", sort=list(frame["version"]), title=dimension.replace("_", " ") + " (oldest first)"),
        x=alt.X("geomean_speedup:Q", title="Speedup over eager (×, geomean over models)"),
        tooltip=[alt.Tooltip("version:N", title="Version"), alt.Tooltip("geomean_speedup:Q", title="Geomean speedup", format=".3f"),
                 alt.Tooltip("compile_s:Q", title="Compile time (s)", format=".1f"),
                 alt.Tooltip("memory_ratio:Q", title="Memory ratio", format=".3f"),
                 alt.Tooltip("models:Q", title="Models"), alt.Tooltip("runs:Q", title="Runs")],
    )
    parity = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(x="x:Q")
    return (bars + parity).properties(title=title, height=alt.Step(18))


def phase_timeline(frame: pd.DataFrame) -> alt.Chart:
    """Compile phases as a Gantt chart: one row per compile id, bars per phase."""
    title = "Compile phases"
    if frame.empty:
        return _empty(title)
    return alt.Chart(frame, title=title).mark_bar(opacity=0.75).encode(
        x=alt.X("start_ms:Q", title="Time since the first compile (ms)"),
        x2="end_ms:Q",
        y=alt.Y("compile_id:N", title="Compile id", sort=None),
        color=alt.Color("name:N", title="Phase"),
        tooltip=[alt.Tooltip("compile_id:N", title="Compile id"), alt.Tooltip("name:N", title="Phase"),
                 alt.Tooltip("start_ms:Q", title="Start (ms)", format=",.0f"),
                 alt.Tooltip("duration_ms:Q", title="Duration (ms)", format=",.1f")],
    ).properties(height=alt.Step(22))


def step_times(frame: pd.DataFrame) -> alt.Chart:
    """Step duration per step, compiled vs eager, warm-up vs steady state."""
    title = "Step times: warm-up against steady state"
    if frame.empty:
        return _empty(title)
    return alt.Chart(frame, title=title).mark_point(filled=True).encode(
        x=alt.X("step:Q", title="Step"),
        y=alt.Y("duration_ms:Q", title="Step time (ms, log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("phase:N", title="Phase", scale=alt.Scale(domain=["compile", "warmup", "steady"])),
        shape=alt.Shape("mode:N", title="Mode"),
        tooltip=[alt.Tooltip("callable:N", title="Callable"), alt.Tooltip("mode:N", title="Mode"),
                 alt.Tooltip("step:Q", title="Step"), alt.Tooltip("phase:N", title="Phase"),
                 alt.Tooltip("duration_ms:Q", title="Duration (ms)", format=",.2f")],
    ).properties(height=HEIGHT)


PHASE_COLORS = alt.Scale(domain=["tracing", "AOT", "Inductor", "autotuning", "backward", "runtime autotuning"],
                         range=["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#9d755d"])


def compile_phase_split(frame: pd.DataFrame) -> alt.Chart:
    """Compile seconds per torch version, stacked by phase: which phase dominates, per version."""
    title = "Where compile time goes, by torch version"
    if frame.empty or not frame["seconds"].fillna(0).any():
        return _empty(title)
    return alt.Chart(frame, title=title).mark_bar().encode(
        y=alt.Y("torch_version:N", title="torch version", axis=alt.Axis(labelLimit=260)),
        x=alt.X("seconds:Q", title="Compile time (s, summed over compiles)"),
        color=alt.Color("phase:N", title="Phase", scale=PHASE_COLORS),
        order=alt.Order("phase:N"),
        tooltip=[alt.Tooltip("torch_version:N", title="torch"), alt.Tooltip("phase:N", title="Phase"),
                 alt.Tooltip("seconds:Q", title="Seconds", format=",.1f"),
                 alt.Tooltip("compiles:Q", title="Compiles", format=",")],
    ).properties(height=alt.Step(26))


def frame_compile_bars(frame: pd.DataFrame) -> alt.Chart:
    """The costliest frames' compile seconds, one bar per frame, split by torch version."""
    title = "Costliest frames: compile time per torch version"
    if frame.empty:
        return _empty(title)
    return alt.Chart(frame, title=title).mark_bar().encode(
        y=alt.Y("frame:N", title=None, sort="-x", axis=alt.Axis(labelLimit=360)),
        x=alt.X("total_s:Q", title="Compile time (s, recompiles included)"),
        color=alt.Color("torch_version:N", title="torch version"),
        tooltip=[alt.Tooltip("frame:N", title="Frame"), alt.Tooltip("torch_version:N", title="torch"),
                 alt.Tooltip("total_s:Q", title="Seconds", format=",.1f"),
                 alt.Tooltip("compiles:Q", title="Compiles", format=","),
                 alt.Tooltip("recompiles:Q", title="Recompiles", format=",")],
    ).properties(height=alt.Step(24))
