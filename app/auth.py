"""Who may get in: optional login with Streamlit's built-in OpenID Connect (st.login).

Off unless `.streamlit/secrets.toml` has an [auth] section (Streamlit's own keys: redirect_uri,
cookie_secret, client_id, client_secret, server_metadata_url; needs Authlib). When on, every page
asks for login first, and uploads record who uploaded them (runs.uploaded_by). Without it, keep the
dashboard on 127.0.0.1 or put it behind a reverse proxy that authenticates (docs/RELIABILITY.md).
"""
from __future__ import annotations

import streamlit as st


def configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets.toml at all: login is off
        return False


def gate() -> None:
    """Stop the page with a login button unless login is off or the user is signed in."""
    if not configured():
        return
    if not st.user.is_logged_in:
        st.title("compilewatch")
        st.info("Sign in to see and upload the team's torch.compile runs.", icon=":material/lock:")
        st.button("Log in", key="auth_login", type="primary", on_click=st.login, icon=":material/login:")
        st.stop()
    with st.sidebar:
        st.caption(f"Signed in as {_md(current_user())}")
        st.button("Log out", key="auth_logout", on_click=st.logout, icon=":material/logout:")


def current_user() -> str | None:
    """The signed-in user's e-mail (else name, else subject); None when login is off."""
    if not configured() or not st.user.is_logged_in:
        return None
    for claim in ("email", "name", "sub"):
        value = st.user.get(claim)
        if value:
            return str(value)
    return None


def _md(value) -> str:
    from compilewatch.core import safetext

    return safetext.markdown(value)
