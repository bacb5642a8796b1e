"""Run detail's deep dive, rendered: a compile id's artifacts fetched one at a time when picked, its
failures, restarts and shape specialisations, the stack trie, the Perfetto download, and graph
breaks explained with their registry page. Listings come from app.queries.deep_dive; a payload or
the trace JSON is read only when asked for, so a page never carries what it does not show."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from compilewatch.app import ui
from compilewatch.app.filters import Filters
from compilewatch.app.queries import deep_dive as q
from compilewatch.deepdive import artifacts, gb_registry, perfetto

SHOW_MAX_CHARS = 200_000  # beyond this the page shows the head and offers the whole as a download


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def _payload(db_path: str, data_version: str, run_id: str, file_id: int, line_no: int) -> artifacts.Artifact:
    with ui.get_store().read(timeout=ui.READ_TIMEOUT_S) as con:
        return artifacts.fetch(con, run_id, file_id, line_no)


def _trace_bytes(run_id: str) -> bytes:
    with ui.get_store().read(timeout=ui.READ_TIMEOUT_S) as con:
        return perfetto.to_json(perfetto.chrome_trace(con, run_id))


def _size(n) -> str:
    n = int(n or 0)
    return f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n} B"


def compile_deep_dive(f: Filters) -> None:
    """Under the chosen compile id (f.compile_id): failures and restarts, specialisations, artifacts."""
    fails = ui.load(q.failures, f)
    if fails is not None and not fails.empty:
        for r in fails.itertuples():
            if r.fail_type:
                # a warning, not st.error: the compile failed, the page did not
                st.warning(f"**{ui.md(f'[{r.compile_id}] failed: {r.fail_type}')}**"
                           + (f" at {ui.md(r.fail_at)}" if r.fail_at else ""), icon=":material/error:")
                if r.fail_reason:
                    st.code(r.fail_reason, language=None)
            restarts = gb_registry.hint_list(r.restart_reasons)
            if restarts:
                st.warning(f"**{ui.md(f'[{r.compile_id}] restarted')}** because:\n"
                           + "\n".join(f"- {ui.md(x)}" for x in restarts), icon=":material/replay:")
    specs = ui.load(q.specialisations, f)
    if specs is not None and not specs.empty:
        st.markdown("**Symbolic shape specialisations**")
        ui.table(specs, key="rd_specs", symbol=ui.text_col("Symbol", "small"), sources=ui.text_col("Sources"),
                 value=ui.text_col("Value", "small"), reason=ui.text_col("Reason"),
                 user_code=ui.text_col("User code", "medium"))
    arts = ui.load(q.artifact_list, f)
    if arts is None:
        return
    if arts.empty:
        st.caption("This compile id has no artifacts in the log (a TORCH_TRACE carries them; TORCH_LOGS text does not).")
        return
    keys = [f"{r.file_id}:{r.line_no}" for r in arts.itertuples()]
    labels = {k: f"{r.title} · {_size(r.size_bytes)} · log line {r.line_no}" + (f" · rank {int(r.rank)}" if pd.notna(r.rank) else "")
              for k, r in zip(keys, arts.itertuples())}
    key = st.selectbox(f"Artifacts of {f.compile_id} ({len(keys)}): graphs, guards, code as the log carries them",
                       keys, index=None, format_func=labels.get, key="rd_artifact", placeholder="pick one to open it")
    if not key:
        return
    file_id, line_no = (int(x) for x in key.split(":"))
    store = ui.get_store()
    try:
        art = _payload(str(store.db_path), store.data_version(), f.run_id, file_id, line_no)
    except Exception as e:  # a store error must not take the rest of the page down
        st.error(f"**Could not read that artifact:** {e}", icon=":material/error:")
        return
    text = art.pretty()
    if len(text) > SHOW_MAX_CHARS:
        st.caption(f"Showing the first {SHOW_MAX_CHARS:,} of {len(text):,} characters; the download has all of it.")
    st.code(text[:SHOW_MAX_CHARS], language=art.language if art.language != "text" else None, line_numbers=True)
    ext = "json" if art.encoding == "json" else "py" if art.language == "python" else "txt"
    st.download_button(f"Download {art.title}", data=text.encode("utf-8"),
                       file_name=f"{(art.name or art.kind).rsplit('/', 1)[-1].removesuffix('.py')}.{ext}",
                       key="rd_artifact_dl", icon=":material/download:", on_click="ignore")


def stack_trie(f: Filters) -> None:
    t = ui.load(q.trie, f)
    if t is None:
        return
    if t.empty or not t.iloc[0]["compiles"]:
        st.caption("No dynamo_start records in this run's trace, so no stack trie (TORCH_LOGS text has none).")
        return
    st.caption("The user frames that lead to each compile (outermost first), as tlparse's stack trie; each "
               "compile id is marked where its frame ends, with its recompile reason, graph breaks and failure.")
    st.code(t.iloc[0]["text"], language=None)


def perfetto_download(f: Filters) -> None:
    # Deferred: the trace JSON is built only when the button is clicked.
    st.download_button("Download as Chrome trace (open in Perfetto)", data=lambda r=f.run_id: _trace_bytes(r),
                       file_name=f"{f.run_id}.trace.json", mime="application/json", key="rd_perfetto",
                       icon=":material/timeline:", on_click="ignore",
                       help="Compile phases (chromium_event) and the timing hooks' steps, for ui.perfetto.dev. "
                            "Steps are laid back to back: the hooks record durations, not start times.")


def break_explainer(breaks: pd.DataFrame | None) -> None:
    """Pick a break: its registry page (when it has an id), explanation and hints as a list."""
    if breaks is None or breaks.empty:
        return
    keys = list(breaks["break_key"])
    labels = {k: ui.short(ui.first_text(r.gb_type, r.reason), 90) + (f" · {r.gb_code}" if isinstance(r.gb_code, str) else "")
              for k, r in zip(keys, breaks.itertuples())}
    key = st.selectbox("Explain a break", keys, index=None, format_func=labels.get, key="rd_break_explain",
                       placeholder="pick a graph break")
    if not key:
        return
    b = breaks[breaks["break_key"] == key].iloc[0]
    url = gb_registry.registry_url(b["gb_code"])
    if url:
        # log content escaped; the URL is built here from the id's digits
        st.markdown(f"**[{ui.md(b['gb_code'] + ': ' + ui.first_text(b['gb_type']))}]({url})** on PyTorch's graph-break site")
    else:
        st.caption("This break has no graph-break registry id (torch before 2.8, or an unstructured reason).")
    if ui.first_text(b["explanation"]):
        st.markdown("**Explanation**")
        st.text(b["explanation"])
    hints = gb_registry.hint_list(b["hints"])
    if hints:
        st.markdown("**Hints**")
        st.markdown("\n".join(f"- {ui.md(h)}" for h in hints))
    if ui.first_text(b["user_stack"]):
        st.markdown("**User stack**")
        st.code(b["user_stack"], language="python")


def registry_links(codes) -> list[str | None]:
    """The registry page of each gb_code (None where a break has no id), for a LinkColumn."""
    return [gb_registry.registry_url(c) for c in codes]
