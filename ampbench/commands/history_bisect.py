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
from ampbench.core.terminal import TerminalConsole
from ampbench.engine.execute import load_for_run
from ampbench.engine.request import RunRequest
from ampbench.judge import series
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.results.accepts import load_accepts
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


@dataclass(frozen=True)
class Found:
    """The newest regression of a series: its modes, the night before it and its first night."""

    modes: list[str]
    run_before: str
    run_after: str
    sha_before: str
    sha_after: str
    nights: int
    open: bool

    def describe(self) -> str:
        state = "open" if self.open else "closed"
        return (f"{', '.join(self.modes)}: regression ({state}, {self.nights} night(s) FAILed or held out) between "
                f"run {self.run_before} and {self.run_after}, commits {self.sha_before[:10]}..{self.sha_after[:10]}")


def last_regression(path: Path, suite: str) -> Found:
    """The newest regression of `suite`'s series of its newest night in history file `path` (judge.series.of_rows
    with the accepted levels beside the file), its commits recorded; ResultsError otherwise."""
    rows = [r for r in iter_history_rows(path, trials=False) if r.get("suite") == suite]
    rows.sort(key=lambda r: (str(r.get("started") or ""), str(r.get("run_id") or "")))
    if not rows:
        raise ResultsError(f"{path}: no line of suite {suite!r}; nothing to bisect")
    newest = series.row_key(rows[-1])
    cut = next(c for c in series.of_rows(rows, load_accepts(path, suite)) if c.key == newest)
    if not cut.seg.regressions:
        raise ResultsError(f"{path}: no regression in suite {suite!r}'s series over {len(cut.rows)} night(s): "
                           "check --history FAILed no night (judge.series); give the range to `ampbench bisect --good "
                           "--bad`")
    first = max(r.first for r in cut.seg.regressions)
    regs = [r for r in cut.seg.regressions if r.first == first]
    good = max(r.good for r in regs)
    if good < 0:
        raise ResultsError(f"{path}: the regression since run {cut.seg.nights[first].run_id} has no night before it "
                           "that passed; give the range to `ampbench bisect --good --bad`")
    a, b = cut.seg.nights[good], cut.seg.nights[first]
    found = Found([r.mode for r in regs], a.run_id, b.run_id, a.git_sha, b.git_sha, max(r.nights for r in regs),
                  any(r.open for r in regs))
    if not (a.git_sha and b.git_sha):
        raise ResultsError(f"{path}: git_sha: the last regression ({', '.join(found.modes)}, runs {a.run_id}.."
                           f"{b.run_id}) has no recorded commit on both sides; give the range to "
                           "`ampbench bisect --good --bad`")
    if a.git_sha == b.git_sha:
        raise ResultsError(f"{path}: git_sha: the last regression ({', '.join(found.modes)}, runs {a.run_id}.."
                           f"{b.run_id}) is between two nights of one commit ({a.git_sha[:10]}): not a change of the "
                           "code, nothing to bisect (the machine or the environment moved)")
    return found


def run_history_bisect(opts: HistoryBisectOptions, console: Console | None = None) -> int:
    """The range of the history's newest regression, bisected by `ampbench bisect` on history-throughput for the
    modes it FAILed; returns bisect's exit code."""
    console = console or TerminalConsole()
    loaded = load_for_run(RunRequest(suite_file=opts.suite_file, profile=opts.profile,
                                     overrides=tuple(opts.overrides), out_dir=opts.out_dir))
    name = loaded.suite.suite.name
    path = Path(opts.history)
    path = history_file(path, name) if path.is_dir() else path
    step = last_regression(path, name)
    console.print(f"history: {escape(step.describe())}", soft_wrap=True)
    return run_bisect(BisectOptions(suite_file=opts.suite_file, good=step.sha_before, bad=step.sha_after,
                                    repo=opts.repo, rule=HISTORY_THROUGHPUT, modes=step.modes,
                                    max_seeds=opts.max_seeds, profile=opts.profile, overrides=list(opts.overrides),
                                    out_dir=opts.out_dir, parallel=opts.parallel, devices=opts.devices),
                      console=console)
