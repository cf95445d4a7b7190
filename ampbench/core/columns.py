"""A record field's column, declared on the field itself: `Annotated[float, Col("Samples/s", "rate", ...)]`.

The field catalog (record/fields.py) collects these markers from the trial model and every table a trial
reaches (report.md, the console, summary.csv, the pytest-benchmark export, the history line) renders its
columns from that one list, so a new field shown everywhere is one edit of the model (the field and its
`Col`) plus the assembler line that sets it.  The marker lives in core because the models do; the kinds'
formatters and the catalog live one layer up, in record.  Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a value is shown (record/fields.py FORMATS holds one formatter per kind).
Kind = Literal["text", "code", "trial", "status", "markdown", "count", "size", "rate", "ms", "bytes", "seconds",
               "loss", "metric", "flag", "ratio", "reduction", "metric_pm", "metric_delta"]
# Where a column is shown: report.md's trials table, the console's trial table, summary.csv, the
# pytest-benchmark export's per-mode extra_info, the history line's per-trial points (a trial's columns);
# report.md's per-mode summary table, the history's trend table, the outcome table (report.md's and the
# console's), `ampbench compare --format md`'s runs-by-mode table, the dashboard's runs table and the sweep
# report (a mode's: `ModeSummary`'s); the several-runs overview of report.md (a run's: `RunSummary`'s).
Output = Literal["md", "console", "csv", "export", "history", "modes", "trend", "outcome", "compare", "dashboard",
                 "sweep", "overview"]


@dataclass(frozen=True)
class Col:
    """One column: its header (`{metric}` in it: the run's primary metric's name, `{ci}`: the interval's
    level), how its value is shown (`kind`), where it sits (`rank`: columns are ordered by it, ties in
    declaration order), where it is shown, its CSV name (default: the field's name), a sibling field whose
    value follows in parentheses in the text outputs (`note`: memory's source), a sibling (lo, hi) field
    shown after it as an interval (`ci`), an alignment overriding the kind's, and its place in summary.csv
    when not `rank` (`csv_rank`: the file only ever gains columns at the end, docs/results-format.md)."""

    header: str | None
    kind: Kind
    rank: int = 500
    shows: tuple[Output, ...] = ("md", "console", "csv")
    csv: str | None = None
    note: str | None = None
    ci: str | None = None
    align: Literal["l", "r"] | None = None
    csv_rank: int | None = None
