"""sweep-<stamp>.md: the grid of `ampbench run --sweep` laid out, one row per point and mode, the mode's
figures the field catalog's columns (record/fields.py: ModeSummary's that show in "sweep"), headed and
formatted as report.md's summary, with each point's verdict and exit code."""

from __future__ import annotations

from pathlib import Path

from ampbench.judge.recorded import recorded_verdict
from ampbench.judge.summary import summarize_run
from ampbench.record import fields
from ampbench.report.fmt import DASH, md_code, md_table, md_text
from ampbench.results.history import MODE_COMPUTED, ModeSummary, RunSummary
from ampbench.results.run_dir import open_run


def sweep_report(grid: list[tuple[str, list[str]]], done: list[tuple[list[str], Path | None, int]]) -> str:
    """The grid laid out: one row per point and mode, the mode's figures the field catalog's columns
    (record/fields.py: ModeSummary's that show in "sweep"), headed and formatted as report.md's summary."""
    summaries: list[tuple[list[str], RunSummary | None, int]] = []
    for point, path, code in done:
        if path is None:
            summaries.append((point, None, code))
            continue
        run = open_run(path)
        check = recorded_verdict(run)
        summaries.append((point, summarize_run(run.info, run.suite, run.trials, check), code))
    first = next((s for _, s, _ in summaries if s is not None), None)
    view = fields.View(first.metric, confidence=first.confidence) if first is not None else fields.PLAIN
    cols = fields.columns("sweep", ModeSummary, MODE_COMPUTED)
    rows = []
    for point, summary, code in summaries:
        cells = [md_code(", ".join(point))]
        if summary is None:
            rows.append([*cells, *(DASH for _ in cols), "no run folder", str(code)])
            continue
        for m in summary.modes.values():
            figures = [md_code(m.mode) if c.col.kind == "code" else c.text(m, view, md_text) for c in cols]
            rows.append([*cells, *figures, md_text(m.verdict), str(code)])
            cells = [""]
    keys = ", ".join(md_code(k) for k, _ in grid)
    return (f"# ampbench sweep over {keys}\n\n"
            + md_table(["Point", *(c.header(view, md_text) for c in cols), "Verdict", "Exit"], rows,
                       ["l", *(c.align for c in cols), "l", "r"]) + "\n")
