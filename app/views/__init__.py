"""The dashboard's pages: each a Streamlit script that app/main.py declares, rendering what app/queries loads."""
