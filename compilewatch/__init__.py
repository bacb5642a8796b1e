"""compilewatch: the command line and the settings, above the ingest, collectors and app packages."""
