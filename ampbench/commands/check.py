"""`ampbench check RUN_DIR`: open the run, judge it (against a baseline when given), write check.json
(check-vs-<baseline>.json against a baseline): judge.check_run with the engine's op lists of older records
(`ampbench.commands.check.check_run`, the stable name); the verdict of record, and what the verb prints."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ampbench.core.errors import ResultsError
from ampbench.engine.op_lists import complete_lists
from ampbench.judge import check_run as judged
from ampbench.judge.recorded import recorded_verdict
from ampbench.report.console import print_outcome, print_rules
from ampbench.report.view import view_of
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import CheckReport, claims_exit

__all__ = ["check_exit", "check_run", "print_outcome_of", "recorded_check"]


def check_run(run_dir: Path, baseline: Path | str | None = None, strict: bool = False,
              allow_mismatch: bool = False, history: Path | None = None) -> CheckReport:
    """judge.check_run.check_run, with the op lists of a trial recorded before its effective lists were
    computed first (engine.op_lists: where Paddle is installed, never rewriting the trial file)."""
    return judged.check_run(run_dir, baseline, strict, allow_mismatch, history, complete=complete_lists)


def check_exit(report: CheckReport, claims: bool = False) -> int:
    """The verb's exit code: the verdicts' (check.json `exit_code`); with --claims, 1 when a published claim of
    the suite is refuted (results.verdicts.claims_exit)."""
    return claims_exit(report) if claims else report.exit_code


def recorded_check(run_dir: Path) -> CheckReport:
    """The verdict of record (the newest check file): what a script needs to know how a run that was checked
    elsewhere ended (nightly.sh combining collected runs).  Nothing is written; the file is read back only
    when its trials give it (judge.recorded: an edited check.json is refused, exit 2)."""
    run = open_run(Path(run_dir))   # a folder that is not a run is named as such; its trials as recorded
    found = recorded_verdict(run)
    if found is None:
        raise ResultsError(f"{run.dir.check_path}: not found; judge the run first: ampbench check {run.path}")
    return found


def print_outcome_of(run_dir: Path, report: CheckReport, console: Console, explain: bool = False) -> None:
    """What `ampbench check` prints: the outcome table and one next step per rule that did not pass;
    with `explain` (--explain, -v) every rule's full text before it."""
    if explain:
        print_rules(report, console)
    print_outcome(view_of(open_run(Path(run_dir)), report), console)
