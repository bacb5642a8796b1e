"""The compile deep dive: what tlparse shows for one run, read back from the store.

Per-compile-id artifacts (``artifacts``), the stack trie of where compiles, graph breaks and
recompiles come from (``stack_trie``), a Chrome/Perfetto trace of compile phases and steps
(``perfetto``), and links into PyTorch's graph-break registry (``gb_registry``). Plain functions
over a DuckDB connection: no streamlit, no torch; the dashboard and the CLI both read them.
"""
