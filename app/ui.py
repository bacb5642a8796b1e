"""The streamlit side shared by every page: the store, cached query loading, the sidebar's global
filters synced with the URL, the empty-database message and error display.

Pages stay thin: ``f = ui.page("Title")`` then ``frame = ui.load(queries.x.fn, f)`` and render.
"""
from __future__ import annotations

import importlib
from contextlib import nullcontext
from datetime import date, timedelta
from pathlib import Path
from typing import Callable

import duckdb
import pandas as pd
import streamlit as st

from compilewatch.app import bootstrap
from compilewatch.app import dashboard_settings as settings
from compilewatch.app.filters import Filters, from_params, to_params
from compilewatch.app.queries import common
from compilewatch.core import safetext
from compilewatch.core.errors import CompileWatchError

UPLOAD_PAGE = "views/upload.py"
_REMEMBERED = "_cw_global_filters"   # global filters carried across pages (the URL is per page)
READ_TIMEOUT_S = 30.0
_LAST_URL = "_cw_last_url"           # what this session last wrote into the URL
_DEFAULT_WINDOW = "_cw_default_window"  # this page's default (start, end)


# -- store -----------------------------------------------------------------------------------------
@st.cache_resource(show_spinner="Opening the compilewatch store (first start ingests sample_logs/)…")
def _open_store(db_path: str, data_path: str | None, sample_dir: str, bootstrap_enabled: bool):
    from compilewatch.app.stores import shared

    store = shared(db_path, data_path)
    message = None
    if bootstrap_enabled:
        try:
            message = bootstrap.ensure_sample_data(store, Path(sample_dir))
        except Exception as e:  # the samples are a convenience: never block the dashboard on them
            message = f"Could not ingest the sample logs: {e}"
    return store, message


def _configured_store():
    """(store, bootstrap message) for the dashboard's settings, opened once per process."""
    return _open_store(str(settings.db_path()), settings.data_path(), str(settings.sample_logs_dir()),
                       settings.bootstrap_enabled())


def get_store():
    """The Store for the configured path; shows st.error and stops the page when it cannot be opened."""
    try:
        store, message = _configured_store()
    except CompileWatchError as e:
        st.error(f"**{md(e.title)}**  \n{md(e.hint)}" if e.hint else md(e.title), icon=":material/error:")
        st.stop()
    except duckdb.Error as e:
        st.error(f"**Cannot open the database {md(settings.db_path())}:** {md(e)}", icon=":material/error:")
        st.stop()
    if message and not st.session_state.get("_cw_bootstrap_shown"):
        st.session_state["_cw_bootstrap_shown"] = True
        st.toast(md(message))
    return store


def one_connection_per_render():
    """A context for one script run in which the page's queries share one store connection
    (Store.reads_held): opening the embedded database costs ~20 ms at 100,000 runs, and a page runs
    up to ~20 queries on a cold cache. When the store cannot be opened, nothing is held: the page's
    own get_store() shows why."""
    try:
        store, _ = _configured_store()
    except Exception:
        return nullcontext()
    return store.reads_held()


# -- cached loading --------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=1024, ttl=24 * 3600)
def _cached(db_path: str, data_version: str, query: str, filters: Filters) -> pd.DataFrame:
    module, name = query.split(":")
    fn = getattr(importlib.import_module(module), name)
    store = get_store()
    # A writer holds the store for one file at a time; past this, say so instead of hanging the page.
    with store.read(timeout=READ_TIMEOUT_S) as con:
        return fn(con, filters)


def load(fn: Callable, f: Filters) -> pd.DataFrame | None:
    """fn(con, f) through the cache (keyed on the store's data_version, so an ingest invalidates it).
    On failure shows st.error with the cause and returns None; the rest of the page still renders."""
    store = get_store()
    try:
        return _cached(str(store.db_path), store.data_version(), f"{fn.__module__}:{fn.__name__}", f)
    except CompileWatchError as e:
        st.error(f"**{md(e.title)}**" + (f"  \n{md(e.hint)}" if e.hint else ""), icon=":material/error:")
    except duckdb.Error as e:
        st.error(f"**Query `{fn.__name__}` failed:** {md(e)}", icon=":material/error:")
    return None


@st.cache_data(show_spinner=False, max_entries=256, ttl=24 * 3600)
def _overview_review(db_path: str, data_version: str, filters: Filters):
    from compilewatch.app import overview_review
    return overview_review.overview(get_store(), filters)


def load_overview_review(f: Filters):
    """The Overview's review (app/overview_review.py: verdicts, hotspots, storms, and when it was
    computed), kept in the store per store version and cached here like ``load``; None on failure
    (shown as ``load`` shows it)."""
    store = get_store()
    try:
        return _overview_review(str(store.db_path), store.data_version(), f)
    except CompileWatchError as e:
        st.error(f"**{md(e.title)}**" + (f"  \n{md(e.hint)}" if e.hint else ""), icon=":material/error:")
    except duckdb.Error as e:
        st.error(f"**The review failed:** {md(e)}", icon=":material/error:")
    return None


@st.cache_data(show_spinner=False, max_entries=64)
def _artifact_diff(db: str, version: str, run_a: str, run_b: str, id_a: str, id_b: str, kind: str) -> str:
    from compilewatch.deepdive.diff import text_diff
    with get_store().read() as con:
        return text_diff(con, run_a, run_b, id_a, id_b, kind)


def artifact_diff(run_a: str, run_b: str, id_a: str, id_b: str, kind: str) -> str:
    """The unified diff of one artifact of two compile ids (deepdive/diff.py), cached like ``load``."""
    store = get_store()
    return _artifact_diff(str(store.db_path), store.data_version(), run_a, run_b, id_a, id_b, kind)


# -- empty database ----------------------------------------------------------------------------------
def empty_state() -> None:
    st.info("**No runs in the database yet.** Add data from the command line or upload logs here.",
            icon=":material/database:")
    st.markdown("From a shell, ingest bundles, TORCH_TRACE folders or TORCH_LOGS text files:")
    st.code(f"compilewatch ingest path/to/bundle_or_logs --db {settings.db_path()}", language="bash")
    st.markdown("Or record a run with the collector, which writes a bundle to ingest:")
    st.code("compilewatch collect -- python train.py", language="bash")
    st.page_link(UPLOAD_PAGE, label="Upload log files, bundles or archives", icon=":material/upload:")


def bounds() -> pd.Series | None:
    b = load(common.data_bounds, Filters())
    return None if b is None or b.empty else b.iloc[0]


# -- URL <-> widgets -------------------------------------------------------------------------------
def url_params() -> dict[str, str | list[str]]:
    qp = st.query_params
    out: dict[str, str | list[str]] = {}
    for key in qp.keys():
        values = qp.get_all(key)
        out[key] = values if key in ("model", "torch", "label", "hw") else (values[-1] if values else "")
    return out


def url_changed() -> bool:
    """True when the URL holds something this session did not write: a pasted link or a page link."""
    return url_params() != st.session_state.get(_LAST_URL)


def set_url(f: Filters) -> None:
    """Write f into the query string (only when it changed), so the address bar is a shareable link."""
    params = to_params(f)
    if url_params() != params:
        st.query_params.from_dict(params)
    st.session_state[_LAST_URL] = params
    keep = Filters(models=f.models, torch_versions=f.torch_versions, labels=f.labels, start=f.start, end=f.end)
    # The window is carried to other pages only when chosen: each page has its own default span.
    if (f.start, f.end) == st.session_state.get(_DEFAULT_WINDOW):
        keep = keep.replace(start=None, end=None)
    st.session_state[_REMEMBERED] = keep


def init_widget(key: str, from_url, fallback, changed: bool) -> None:
    """Seed st.session_state[key] before its widget is created: from the URL when it changed
    (a pasted link wins over stale widget state), else keep the widget's state, else fallback."""
    if changed and from_url not in (None, (), []):
        st.session_state[key] = from_url
    elif key not in st.session_state:
        st.session_state[key] = fallback


def page(title: str, *, default_days: int = 7, require_data: bool = True) -> Filters:
    """Title, the sidebar's global filters (model, torch version, label, time window) and the
    empty-database check. Returns the global Filters; page-specific fields are added by the page."""
    st.title(title)
    if not require_data:
        return Filters()
    b = bounds()
    if b is None:
        st.stop()
    if not b["runs"]:
        empty_state()
        st.stop()
    changed = url_changed()
    url = from_params(url_params()) if changed else Filters()
    remembered: Filters = st.session_state.get(_REMEMBERED) or Filters()
    options = load(common.filter_options, Filters())
    opts = {k: list(options.loc[options["kind"] == k, "value"]) for k in ("model", "torch_version", "label", "hardware")} \
        if options is not None else {"model": [], "torch_version": [], "label": [], "hardware": []}

    last_day = pd.Timestamp(b["last_day"]).date() if pd.notna(b["last_day"]) else date.today()
    first_day = pd.Timestamp(b["first_day"]).date() if pd.notna(b["first_day"]) else last_day
    default_window = (last_day - timedelta(days=default_days - 1), last_day)
    st.session_state[_DEFAULT_WINDOW] = default_window

    with st.sidebar:
        st.subheader("Filters")
        for key, field, kind, label in (("g_models", "models", "model", "Models"),
                                        ("g_torch", "torch_versions", "torch_version", "Torch versions"),
                                        ("g_labels", "labels", "label", "Labels"),
                                        ("g_hardware", "hardware", "hardware", "Hardware")):
            init_widget(key, list(getattr(url, field)), list(getattr(remembered, field)), changed)
            st.session_state[key] = [v for v in st.session_state[key] if v in opts[kind]]
            st.multiselect(label, opts[kind], key=key, placeholder="all")
        url_window = (url.start, url.end) if (url.start and url.end) else None
        rem_window = (remembered.start, remembered.end) if (remembered.start and remembered.end) else default_window
        # Pages with the same default span share the window (weekly pages, history pages).
        window_key = f"g_window_{default_days}"
        init_widget(window_key, url_window, rem_window, changed)
        # A linked window far outside the data is still a valid window: widen the picker's range to it.
        chosen = [d for d in (st.session_state.get(window_key) or ()) if isinstance(d, date)]
        window = st.date_input("Time window (UTC days of run start)", key=window_key,
                               min_value=min([first_day, default_window[0]] + chosen) - timedelta(days=365),
                               max_value=max([last_day, date.today()] + chosen) + timedelta(days=1))

        def _reset():
            for key in ("g_models", "g_torch", "g_labels", "g_hardware"):
                st.session_state[key] = []
            st.session_state[window_key] = default_window
            st.session_state.pop(_REMEMBERED, None)

        st.button("Reset filters", key="g_reset", type="tertiary", icon=":material/restart_alt:", on_click=_reset)
        st.caption(f"Data: {int(b['runs']):,} runs from {first_day} to {last_day}. "
                   f"Store: `{settings.db_path()}`")
    start, end = (window if isinstance(window, (tuple, list)) and len(window) == 2 else default_window)
    return Filters(models=tuple(st.session_state["g_models"]), torch_versions=tuple(st.session_state["g_torch"]),
                   labels=tuple(st.session_state["g_labels"]), hardware=tuple(st.session_state["g_hardware"]),
                   start=start, end=end)


def page_state(key: str, from_url, fallback=None):
    """A page-specific value (selected run, break, version) seeded from the URL like the filters."""
    init_widget(key, from_url, fallback, url_changed())
    return st.session_state[key]


def link(page_path: str, f: Filters, **fields) -> str:
    """A relative URL to a page (its url_path) with f plus fields in the query string, for LinkColumn."""
    from urllib.parse import urlencode

    return page_path + "?" + urlencode(to_params(f.replace(**fields)), doseq=True)


# -- log content is data ----------------------------------------------------------------------------
# Reasons, file and function names, labels, model names and run ids come from files anyone can
# upload: wherever Streamlit renders Markdown (st.markdown, captions, headers, widget and link
# labels, alerts) they go through md(). Tables, st.text, st.code and chart tooltips show text already.
plain = safetext.plain


def md(value, *, one_line: bool = True) -> str:
    """Log content escaped for any place that renders Markdown (core/safetext.py)."""
    return safetext.markdown(value, one_line=one_line)


def short(text, n: int = 80) -> str:
    if text is None or (not isinstance(text, str) and pd.isna(text)) or not text:
        return ""
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def first_text(*values) -> str:
    """The first value that is a non-empty string (null-safe: NaN and pd.NA are skipped)."""
    for v in values:
        if isinstance(v, str) and v:
            return v
    return ""


MISSING = "–"   # what a missing value shows as, everywhere (never "None" or "nan")


def missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):   # lists, arrays: present
        return False


def dash(value) -> str:
    """A value as text for a label or a cell: MISSING when it is None, NaN or empty."""
    return MISSING if missing(value) or value == "" else str(value)


def fmt_ratio(value) -> str:
    """A ratio (speedup, memory) with three significant digits: 1.23×, 0.000412× (never 0.000×)."""
    return MISSING if missing(value) else f"{value:.3g}×"


def fmt_value(value, unit: str = "") -> str:
    if missing(value):
        return MISSING
    if unit == "×":
        return fmt_ratio(value)
    if unit == "s":
        return f"{value:,.1f} s"
    return f"{value:,.0f}"


def fmt_change(pct) -> str | None:
    return None if pct is None or pd.isna(pct) else f"{pct:+.1f}%"


def delta_color(better: str | None) -> str:
    """st.metric's delta_color for a metric where higher (or lower) is better."""
    return {"higher": "normal", "lower": "inverse"}.get(better or "", "off")


# -- tables ----------------------------------------------------------------------------------------
def table(frame: pd.DataFrame | None, *, key: str | None = None, empty: str | None = None,
          hide: tuple[str, ...] = (), **columns) -> None:
    """A full-width table with column_config given as keyword arguments (column=config, or None to
    hide). Nothing for a failed load (the error is already shown); `empty` as a caption for no rows."""
    if frame is None:
        return
    if frame.empty:
        if empty:
            st.caption(empty)
        return
    shown = frame.drop(columns=[c for c in hide if c in frame.columns])
    # Missing text shows as a dash; number columns keep their type (and format) and show empty.
    text = [c for c in shown.columns if shown[c].dtype == object or pd.api.types.is_string_dtype(shown[c])]
    if text:
        shown = shown.assign(**{c: shown[c].map(lambda v: MISSING if missing(v) else v) for c in text})
    st.dataframe(shown, hide_index=True, width="stretch", key=key, column_config=columns or None)


def text_col(label: str, width: str | None = None, **kw):
    return st.column_config.TextColumn(label, width=width, **kw)


def count_col(label: str, **kw):
    return st.column_config.NumberColumn(label, format="localized", **kw)


RATIO = "%.3g×"   # three significant digits: 1.23×, 0.000412×


def num_col(label: str, fmt: str, **kw):
    """fmt in printf style with the unit: "%.2f s", RATIO, "%+.1f%%", "%.2f ms"."""
    return st.column_config.NumberColumn(label, format=fmt, **kw)


def time_col(label: str, fmt: str = "YYYY-MM-DD HH:mm", **kw):
    return st.column_config.DatetimeColumn(label, format=fmt, **kw)


def link_col(label: str, text: str = "open", **kw):
    return st.column_config.LinkColumn(label, display_text=text, **kw)
