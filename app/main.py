"""compilewatch dashboard entry point: `streamlit run app/main.py`. Only declares the pages."""
import streamlit as st

from compilewatch.app import auth, ui

st.set_page_config(page_title="compilewatch", page_icon=":material/speed:", layout="wide")

pages = {
    "Weekly review": [
        st.Page("views/overview.py", title="Overview", icon=":material/dashboard:", url_path="overview", default=True),
        st.Page("views/hotspots.py", title="Graph-break hotspots", icon=":material/call_split:", url_path="hotspots"),
        st.Page("views/recompiles.py", title="Recompile storms", icon=":material/cyclone:", url_path="recompiles"),
        st.Page("views/trends.py", title="Speedup trends", icon=":material/trending_up:", url_path="trends"),
        st.Page("views/compile_time.py", title="Compile time", icon=":material/timer:", url_path="compile-time"),
    ],
    "Drill down": [
        st.Page("views/run_detail.py", title="Run detail", icon=":material/description:", url_path="run"),
        st.Page("views/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    ],
    "Data": [
        st.Page("views/upload.py", title="Upload logs", icon=":material/upload:", url_path="upload"),
    ],
}
# Streamlit runs this file as __main__. A worker process that multiprocessing spawns from the
# dashboard's process runs it again as __mp_main__ (spawn re-runs the parent's main script): there
# it must not open the store (which may ingest the sample logs first) or render a page.
if __name__ == "__main__":
    auth.gate()  # login first, when .streamlit/secrets.toml configures it
    with ui.one_connection_per_render():
        st.navigation(pages).run()
