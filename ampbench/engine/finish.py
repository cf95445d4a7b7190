"""A run's trials ended: summary.csv, check.json (+ report.md) and the outcome table; the exit code."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.engine.op_lists import complete_lists
from ampbench.engine.request import Output
from ampbench.judge.check_run import check_run
from ampbench.report.console import print_outcome, print_rules, print_trials
from ampbench.report.view import view_of
from ampbench.results.manifest import Manifest
from ampbench.results.run_dir import RunDir, open_run
from ampbench.results.summary import write_summary_csv


def _write_report(run_dir: Path) -> Path:
    """report.md + self-contained report.html of one finished run."""
    from ampbench.report.markdown import write_report  # matplotlib: imported only when a report is made

    return write_report([run_dir], also_html=True)


def finish_run(run: RunDir, console: Console, output: Output, baseline: Path | None = None,
               manifest: Manifest | None = None) -> int:
    """summary.csv, check.json (+ report.md) and the outcome table; returns the exit code.
    `output.verbose` (-v): the trial table and every rule's full text before the outcome.  With the runner's
    `manifest`, a trial file changed since its trial ended (by a later trial's program) is refused."""
    if manifest is not None:
        manifest.check(run.trial_files())
    opened = open_run(run.path)  # validated: nothing foreign reaches the summary
    write_summary_csv(run, opened.trials)
    if output.verbose:
        print_trials(opened.trials, console, opened.suite.suite.metric)
    result = check_run(run.path, strict=output.strict, complete=complete_lists)  # the run's own check.json
    if baseline is not None:  # and the comparison in its own file (check-vs-<baseline>.json), shown
        result = check_run(run.path, baseline=baseline, strict=output.strict, complete=complete_lists)
    if output.verbose:
        print_rules(result, console)
    print_outcome(view_of(opened, result), console)
    if output.report:
        try:
            path = _write_report(run.path)
            console.print(f"report: {escape(str(path))}", soft_wrap=True)
        except Exception as e:  # noqa: BLE001  a report bug must not hide the verdict
            console.print(f"[yellow]warning:[/] report failed: {escape(f'{type(e).__name__}: {e}')}")
    return result.exit_code
