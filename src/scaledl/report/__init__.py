"""Aggregation of finished runs into tables and figures (reads run.json/metrics.csv only).

`scaledl.cli` wires these into the `aggregate` and `plot` subcommands.
"""

from scaledl.report.cli_args import add_aggregate_arguments, add_plot_arguments, run_aggregate, run_plot

__all__ = ["add_aggregate_arguments", "add_plot_arguments", "run_aggregate", "run_plot"]
