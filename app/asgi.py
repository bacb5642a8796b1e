"""What `compilewatch dashboard` serves: the dashboard (main.py) and, on the same port, the push
API (push_api.py), through Streamlit's own ASGI server (st.App with routes). One port, one process
and one address for a team server, behind the same proxy and TLS as the pages."""
import streamlit as st

from compilewatch.app import push_api
from compilewatch.app.server import MAIN

app = st.App(MAIN, routes=push_api.ROUTES)
