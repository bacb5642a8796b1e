"""Dashboard queries: plain functions ``(con, filters) -> pandas.DataFrame``, one module per page.

Rules that keep every page fast on team-year tables (10k runs, 1M+ event rows): restrict to the
filtered runs first (a small semi-join), aggregate in SQL, and LIMIT what a table or chart shows.
No streamlit import in here.
"""
