-- compilation_metrics fields of torch 2.6+ that a reader acts on: how long the compiled frame's
-- guards take to check on every call, and how many graph breaks the frame's compile took.
ALTER TABLE compiles ADD COLUMN guard_latency_us DOUBLE;
ALTER TABLE compiles ADD COLUMN num_graph_breaks INTEGER;
