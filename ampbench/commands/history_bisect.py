"""`ampbench history bisect SUITE --history H --repo PATH`: bisect the nightly's last detected slowdown.

The dashboard and the trend report name a step of a mode's throughput by the commit range between the last
night before it and the first night after it (judge.changepoint); this verb takes that range from the history
file itself, for the newest regression step of the suite's series on the newest night's device, and hands it
to `ampbench bisect` (commands.bisect.run_bisect: the same search, records and exit codes) on that mode's
history-throughput rule.  Nothing is searched when the history shows no step or its lines record no commit:
the verb says so in one line (exit 2) naming the history file, since bisecting a guessed range would name an
innocent commit as surely as a real one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.commands.bisect import BisectOptions, run_bisect
from ampbench.core.errors import ResultsError
from ampbench.core.store import RUNS_DIR
from ampbench.engine.execute import load_for_run
from ampbench.engine.request import RunRequest
from ampbench.judge import changepoint
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.report.dashboard_series import segment_key
from ampbench.results.history import history_file, iter_history_rows


@dataclass
class HistoryBisectOptions:
    suite_file: Path
    history: Path
    repo: Path | None = None
    max_seeds: int = 6
    profile: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = RUNS_DIR
    parallel: int = 1
    devices: str | None = None


def last_regression(path: Path, suite: str) -> changepoint.Step:
    """The newest throughput slowdown step of `suite`'s lines in history file `path` (the device of its
    newest line: another device is another series), its commits recorded; ResultsError otherwise."""
    rows = [r for r in iter_history_rows(path, trials=False) if r.get("suite") == suite]
    rows.sort(key=lambda r: (str(r.get("started") or ""), str(r.get("run_id") or "")))
    if not rows:
        raise ResultsError(f"{path}: no line of suite {suite!r}; nothing to bisect")
    device = segment_key(rows[-1])[1]
    series = [r for r in rows if segment_key(r)[1] == device]
    slow = [s for s in changepoint.all_steps(series) if s.regression]
    if not slow:
        raise ResultsError(f"{path}: no slowdown detected in suite {suite!r}'s throughput over {len(series)} "
                           "night(s) (judge.changepoint); give the range to `ampbench bisect --good --bad`")
    step = max(slow, key=lambda s: (s.after, s.before))
    if not (step.sha_before and step.sha_after):
        raise ResultsError(f"{path}: git_sha: the last slowdown ({step.mode}, runs {step.run_before}.."
                           f"{step.run_after}) has no recorded commit on both sides; give the range to "
                           "`ampbench bisect --good --bad`")
    if step.sha_before == step.sha_after:
        raise ResultsError(f"{path}: git_sha: the last slowdown ({step.mode}, runs {step.run_before}.."
                           f"{step.run_after}) is between two nights of one commit ({step.sha_before[:10]}): not a "
                           "change of the code, nothing to bisect (the machine or the environment moved)")
    return step


def run_history_bisect(opts: HistoryBisectOptions, console: Console | None = None) -> int:
    """The range of the history's last slowdown, bisected by `ampbench bisect` on history-throughput for the
    mode that stepped; returns bisect's exit code."""
    console = console or Console()
    loaded = load_for_run(RunRequest(suite_file=opts.suite_file, profile=opts.profile,
                                     overrides=tuple(opts.overrides), out_dir=opts.out_dir))
    name = loaded.suite.suite.name
    path = Path(opts.history)
    path = history_file(path, name) if path.is_dir() else path
    step = last_regression(path, name)
    console.print(f"history: {escape(step.describe())}", soft_wrap=True)
    return run_bisect(BisectOptions(suite_file=opts.suite_file, good=step.sha_before, bad=step.sha_after,
                                    repo=opts.repo, rule=HISTORY_THROUGHPUT, modes=[step.mode],
                                    max_seeds=opts.max_seeds, profile=opts.profile, overrides=list(opts.overrides),
                                    out_dir=opts.out_dir, parallel=opts.parallel, devices=opts.devices),
                      console=console)
