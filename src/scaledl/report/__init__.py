"""Aggregation of finished runs into tables and figures (reads run.json/metrics.csv only).

The subcommands live in `aggregate_command`, `plot_command` and `comm_model`.
"""
