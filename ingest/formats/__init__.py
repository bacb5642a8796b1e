"""One place for each fact about torch's log formats, shared by the TORCH_LOGS text reader, the
TORCH_TRACE reader and sniffing: the glog prefix and its year (glog.py), the graph-break reason
block (graph_break.py), the recompile-limit names (recompile_limit.py), the compile caches' key
components and the part of the key each is (cache_key.py)."""
