-- Runs whose derived facts (store/derived.py) lag their stored rows. A writer that keeps its
-- connection across files (EmbeddedStore.writes_held) marks a run here in each file's transaction
-- and refreshes the marked runs once, in one transaction, before it lets the writer lock go: a
-- bundle of five files is refreshed once, not five times. A marker left by a writer killed in
-- between is what the next writer, or the next open of the store, refreshes first.
-- No key: a run is marked once per file, and an index check per insert cost more than the
-- duplicates do (refresh_stale refreshes each run once).
CREATE TABLE stale_runs (
    run_id          VARCHAR NOT NULL
);
