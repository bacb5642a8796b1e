"""A dashboard reader without a browser: one session on a running Streamlit server's websocket
(/_stcore/stream), speaking the protocol its frontend speaks (a BackMsg asking for a script run, the
ForwardMsgs of the page back), so a test can keep several real pages rendering on a real server at
the cost of a socket, not of a Chromium each."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlencode

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

# Streamlit's frontend selects this subprotocol; the server answers only a client that offers it.
SUBPROTOCOL = "streamlit"


@dataclass
class Rendered:
    """What one run of a page sent: its exceptions and st.error texts, and its metrics by label."""
    page: str
    seconds: float
    exceptions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)


async def _render(ws, page: str, query: dict, timeout: float) -> Rendered:
    back = BackMsg()
    back.rerun_script.query_string = urlencode(query)
    back.rerun_script.page_name = page
    t0 = time.monotonic()
    await ws.send(back.SerializeToString())
    out = Rendered(page or "overview", 0.0)
    while True:
        msg = ForwardMsg()
        msg.ParseFromString(await asyncio.wait_for(ws.recv(), timeout))
        kind = msg.WhichOneof("type")
        if kind == "page_not_found":
            out.errors.append(f"no page {page!r}")
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            what = el.WhichOneof("type")
            if what == "exception":
                out.exceptions.append(f"{el.exception.type}: {el.exception.message}")
            elif what == "alert" and el.alert.format == el.alert.ERROR:
                out.errors.append(el.alert.body)
            elif what == "metric":
                out.metrics[el.metric.label] = el.metric.body
        elif kind == "script_finished":
            out.seconds = time.monotonic() - t0
            return out


async def render_pages(url: str, pages: list[str], query: dict, done: Callable[[], bool], timeout: float = 180,
                       pause: float = 0.0) -> list[Rendered]:
    """Render `pages` (their url paths; "" is the default page, the Overview) in turn, over and over,
    `pause` seconds apart, in one session of the server at `url`, until a pass that began with
    `done()` true has ended: the last pass sees everything written before then. Each render is a
    full script run of that page, as a visitor clicking through the pages causes."""
    stream = url.replace("http://", "ws://") + "/_stcore/stream"
    rendered: list[Rendered] = []
    async with websockets.connect(stream, subprotocols=[SUBPROTOCOL], max_size=None,
                                  open_timeout=timeout) as ws:
        while True:
            last = done()
            for page in pages:
                rendered.append(await _render(ws, page, query, timeout))
                await asyncio.sleep(pause)
            if last:
                return rendered
