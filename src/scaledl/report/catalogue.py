"""The report's figures and tables by name: what `scaledl figures` draws, what `scaledl aggregate` builds, and
what the workflow's figures and aggregate rules declare.

Kept free of plotting imports (no matplotlib, no pandas, no torch), so that
Snakemake can read it while it parses the workflow. Each table is built by its
entry of scaledl.report.tables.TABLES (a test holds the two lists equal) and
written to tables/NAME.{csv,md}. Each figure is drawn by the function of
its name in scaledl.report.figures, written to NAME.png, and captioned in
`snakemake --report` by workflow/report/NAME.rst. Adding a figure: a row here,
its drawing function, its caption file.
"""

from __future__ import annotations

from typing import NamedTuple


class FigureEntry(NamedTuple):
    name: str
    subcategory: str  # its group under "Figures" in `snakemake --report`

    @property
    def caption(self) -> str:
        """Its caption file, in workflow/report/."""
        return f"{self.name}.rst"


CATALOGUE = (
    FigureEntry("fig6_1", "Accuracy vs time"),
    FigureEntry("fig6_2", "Accuracy vs time"),
    FigureEntry("fig6_3", "Accuracy vs time"),
    FigureEntry("fig6_4", "Accuracy vs time"),
    FigureEntry("fig8", "Accuracy vs time"),
    FigureEntry("ladder_breakdown", "Time breakdown"),
    FigureEntry("pair_breakdown", "Time breakdown"),
    FigureEntry("scaling", "Scaling"),
    FigureEntry("chip_partition", "Chip partitioning"),
    FigureEntry("averaging", "Averaging family"),
)
FIGURE_NAMES = tuple(entry.name for entry in CATALOGUE)

# The tables of `scaledl aggregate --table NAME`, in the order `rule all` lists them.
TABLE_NAMES = ("summary", "scaling", "averaging")
