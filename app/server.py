"""How the dashboard's Streamlit server is started: the entry script and the server options.

`compilewatch dashboard` passes these options as flags, so they hold wherever it is started from;
`.streamlit/config.toml` carries the same values for `streamlit run app/main.py` from the
repository root (a test keeps the two equal).
"""
from __future__ import annotations

from pathlib import Path

MAIN = Path(__file__).resolve().parent / "main.py"
# What `compilewatch dashboard` runs: MAIN's pages and the push API on one port (asgi.py).
ASGI = Path(__file__).resolve().parent / "asgi.py"

OPTIONS: dict[str, object] = {
    # Only this machine can connect unless told otherwise (`compilewatch dashboard --address`, the
    # listen_address setting): a team server is exposed on purpose, behind login or a proxy.
    "server.address": "127.0.0.1",
    # A day of TORCH_TRACE from a multi-rank job is easily past Streamlit's 200 MB default.
    "server.maxUploadSize": 2048,
    "browser.gatherUsageStats": False,
    # A team server shows its users the dashboard, not Streamlit's Deploy button and developer menu.
    "client.toolbarMode": "viewer",
    # The pages write every element with an st call and never rely on "magic" (a bare expression
    # rendered): without it a page's code is not rewritten before it runs (~75 ms of a rerun
    # wherever the compiled script is not cached, such as a test's AppTest).
    "runner.magicEnabled": False,
}


def streamlit_flags(overrides: dict[str, object] | None = None) -> list[str]:
    options = {**OPTIONS, **(overrides or {})}
    return [f"--{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in options.items()]
