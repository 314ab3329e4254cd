"""The report: finished runs (run.json and metrics.csv only, never logs) into tables, claims and figures.

- `runs`: the report's reader of a run's results (`Run`, `read_run`, the run key, the field table), through
  run.json's one parser (scaledl.run_record).
- `stats`: spreads over seeds, ratios paired by seed, "median [min–max] n" formatting.
- `tables`: the one table writer (CSV and markdown) and the tables `aggregate` builds (`TABLES`).
- `summary`, `scaling`, `averaging`: those tables (one row per run, per sweep point, per averaging variant).
- `communication`: what a run exchanged, in bytes.
- `comm_model`: the α-β cost model beside the measured times, and its weak-scaling extrapolation.
- `claims` (with `claims.yaml`) and `sides`: the paper's claims with verdicts, and how a side is written.
- `figures` (named in `catalogue`) and `plots`: the report's figures, and one figure of metrics.csv columns.
- `commands`: the subcommands aggregate, plot, comm-model, claims and figures.
"""
