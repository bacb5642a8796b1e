"""The compile deep dive: what tlparse shows for one run, read back from the store.

A run's compile ids and one compile id's attempts, failures and restarts (``compiles``),
per-compile-id artifacts and the shape specialisations among them (``artifacts``), the stack trie
of where compiles, graph breaks and recompiles come from (``stack_trie``), a Chrome/Perfetto trace
of compile phases and steps (``perfetto``), links into PyTorch's graph-break registry
(``gb_registry``), and all of it as text for ``compilewatch show`` (``show``). Plain functions over
a DuckDB connection: no streamlit, no torch; the dashboard's deep dive (app/views/deep_dive.py,
through the page queries in app/queries/deep_dive.py) and the CLI both read them.
"""
