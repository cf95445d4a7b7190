"""`ampbench report`, `ampbench publish`, `ampbench plan`: the use-cases that read finished runs and
write what people read (report.md/html, the dashboard, the seed plan)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.core.errors import ResultsError
from ampbench.judge.planner import plan_lines, plan_run
from ampbench.judge.recorded import recorded_verdict
from ampbench.judge.until import recommend
from ampbench.report.markdown import write_report
from ampbench.report.publish import publish as publish_site
from ampbench.results.run_dir import open_run


def report(run_dirs: list[Path], output: Path | None, history: Path | None, fmt: str, console: Console,
           also_html: bool = False) -> None:
    """`also_html`: the markdown and its HTML page from one rendering (the nightly writes both)."""
    if also_html and fmt != "md":
        raise ResultsError(f"--html: writes an HTML page beside the markdown report; not with --format {fmt}")
    path = write_report(run_dirs, output=output, history=history, fmt=fmt, also_html=also_html)
    console.print(f"report: {escape(str(path))}", soft_wrap=True)
    if also_html:
        console.print(f"report: {escape(str(path.with_suffix('.html')))}", soft_wrap=True)


def publish(history: Path, output: Path, repo_url: str | None, console: Console, view: str = "auto") -> None:
    """`view`: auto (interactive when plotly is installed, else static PNGs and a one-line note),
    interactive (exit 2 naming the extra without plotly) or static."""
    from ampbench.report.dashboard_interactive import resolve_view

    interactive, note = resolve_view(view)
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    index = publish_site(history, output, repo_url=repo_url, interactive=interactive)
    console.print(f"dashboard: {index}", markup=False, soft_wrap=True)


def plan(run_dir: Path, console: Console) -> None:
    """The planner's rows, then the run's one recommendation over the rules its check left undecided (the
    figure the outcome table's note gives)."""
    rows = plan_run(run_dir)
    run = open_run(Path(run_dir))
    check = recorded_verdict(run)   # an edited check.json is refused (judge.recorded), before anything is printed
    for line in plan_lines(rows):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if check is None:
        text = "no check.json yet: `ampbench check RUN` first, the recommendation covers the rules it leaves undecided"
    else:
        advice = recommend(check.verdicts, rows, run.suite.thresholds)
        text = advice.text() if advice is not None else "no undecided rule that more seeds can decide"
    console.print(f"recommendation: {text}", markup=False, highlight=False, soft_wrap=True)
