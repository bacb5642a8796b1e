"""compilewatch dashboard: `streamlit run app/main.py`."""
