"""What a run shows while its trials run locally: one progress task per running trial with its time left
(a pipe: a status line every few seconds instead), and each ended trial's line.

How far a run is and how long it has left, from the step rates its trials measure.

A person watching `ampbench run` wants to know when it ends, and a CI log that says nothing for
minutes looks hung. `RunPace` keeps, per running trial, the recent (time, step) points of its step
events; a trial's time left is its remaining steps over its recent step rate, and the run's is that
plus the trials not started yet at the typical wall time of the trials already finished (process
start, steps and evaluation included).  Before two have finished, the suite's own earlier runs on this machine
(same suite and config, beside this run: `prior_costs`) give each trial's cost, and the time left is said as a
range (their quartiles); without them the running trial's step projection is a lower bound, said as one (it
leaves out start-up and evaluation: early estimates ran 2x short).  Nothing is guessed: until a rate is
measured the time left is "estimating".

On a terminal the rich progress bars show it; in a pipe `StatusTicker` prints one plain status line
at a fixed interval (which trial, step, rate, time left), so a log never goes silent for long.

Rich markup is ours; every text that comes from a file or a program is escaped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ampbench.core.errors import ResultsError
from ampbench.core.files import last_line
from ampbench.core.text import printable
from ampbench.core.units import num
from ampbench.engine.request import STATUS_EVERY_S
from ampbench.record.models import RunInfo, Trial
from ampbench.report.console import CRASH_LINE_CHARS
from ampbench.report.fmt import seconds
from ampbench.results.run_dir import RunDir

RATE_WINDOW_S = 20.0    # a step rate over the last 20 s: recent enough to follow a slowdown, long enough to be stable
OWN_TRIALS = 2          # this run's own finished trials that make its time left a point, not the earlier runs' range
PRIOR_RUNS = 3          # the newest earlier runs whose trials' costs are read
SHOW_EVERY_S = 0.1      # a running trial's progress line is redrawn at most this often


@dataclass
class TrialPace:
    """One running trial's step events, as (monotonic time, step) points."""

    mode: str
    seed: int
    total: int
    started: float
    points: deque[tuple[float, int]] = field(default_factory=deque)

    @property
    def step(self) -> int:
        return self.points[-1][1] if self.points else 0

    def add(self, now: float, step: int) -> None:
        self.points.append((now, step))
        while len(self.points) > 2 and now - self.points[0][0] > RATE_WINDOW_S:
            self.points.popleft()

    def rate(self) -> float | None:
        """Steps per second over the window (None: fewer than two step events yet)."""
        if len(self.points) < 2:
            return None
        (t0, s0), (t1, s1) = self.points[0], self.points[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 and s1 > s0 else None

    def left_s(self, now: float) -> float | None:
        r = self.rate()
        if r is None:
            return None
        since_last = now - self.points[-1][0]
        return max(0.0, (self.total - self.step) / r - since_last)


class RunPace:
    """The run's trials: those finished (their wall times), those running (their paces), those waiting.
    Step events arrive from the launch threads, the ticker reads from its own: one lock guards both."""

    def __init__(self, total: int, done_before: int, slots: int = 1, clock: Callable[[], float] = time.monotonic,
                 prior: list[float] | None = None, startup: float = 0.0):
        self.total = total
        self.done = done_before
        self.slots = max(1, slots)
        self.clock = clock
        self.started = clock()
        self.walls: list[float] = []
        self.prior = sorted(prior or [])   # each trial's full cost in the suite's earlier runs (prior_costs)
        self.startup = startup             # their runs' start-up before a first trial could end
        self.running: dict[tuple[str, int], TrialPace] = {}
        self.lock = threading.Lock()

    def start(self, mode: str, seed: int, steps: int) -> None:
        with self.lock:
            self.running[(mode, seed)] = TrialPace(mode, seed, steps, self.clock())

    def step(self, mode: str, seed: int, step: int) -> None:
        with self.lock:
            pace = self.running.get((mode, seed))
            if pace is not None:
                pace.add(self.clock(), step)

    def finish(self, mode: str, seed: int) -> None:
        with self.lock:
            pace = self.running.pop((mode, seed), None)
            if pace is not None:
                self.walls.append(self.clock() - pace.started)
                self.done += 1

    def trial_left_s(self, mode: str, seed: int) -> float | None:
        with self.lock:
            pace = self.running.get((mode, seed))
            return pace.left_s(self.clock()) if pace is not None else None

    def _typical_wall(self, now: float) -> float | None:
        if len(self.walls) >= OWN_TRIALS or (self.walls and not self.prior):
            return statistics.median(self.walls)
        if self.prior:
            return statistics.median(self.prior)
        projected = [now - p.started + left for p in self.running.values() if (left := p.left_s(now)) is not None]
        return max(projected) if projected else None

    def _left_with(self, typical: float, now: float, floor_running: bool) -> float:
        """Seconds left with each trial costing `typical`: a running one its projection (with `floor_running`, at
        least the typical cost less what it has run), the waiting ones `typical` each, shared over the slots."""
        lefts = []
        for p in self.running.values():
            left = p.left_s(now)
            rest = max(0.0, typical - (now - p.started))
            lefts.append(rest if left is None else max(left, rest) if floor_running else left)
        waiting = max(0, self.total - self.done - len(self.running))
        startup = max(0.0, self.startup - (now - self.started)) if not self.walls else 0.0
        return (sum(lefts) + waiting * typical) / self.slots + startup

    def run_left_s(self) -> float | None:
        """Seconds until the last planned trial ends (None: no rate measured yet)."""
        with self.lock:
            now = self.clock()
            typical = self._typical_wall(now)
            if typical is None:
                return None
            return self._left_with(typical, now, floor_running=bool(self.prior) or bool(self.walls))

    def run_left_text(self) -> str:
        """The run's time left as the status line says it: a point once this run's own trials tell it; before
        that the earlier runs' range, or the steps-only projection as the lower bound it is."""
        left = self.run_left_s()
        if left is None:
            return "run time left: estimating"
        with self.lock:
            now, own = self.clock(), len(self.walls)
            early = own < OWN_TRIALS and self.total - self.done > 1
            if early and self.prior:
                q1, _, q3 = statistics.quantiles(self.prior, n=4, method="inclusive") if len(self.prior) > 1 \
                    else (self.prior[0],) * 3
                lo, hi = self._left_with(q1, now, True), self._left_with(q3, now, True)
                return f"run ~{seconds(min(lo, left))} to {seconds(max(hi, left))} left (as this suite's earlier runs here)"
            if early and not own:
                return f"run ~{seconds(left)} or more left (start-up and evaluation not measured yet)"
        return f"run ~{seconds(left)} left"

    def status_line(self) -> str:
        """One plain line: elapsed, trials done, each running trial's step and rate, time left."""
        left_text = self.run_left_text()
        with self.lock:
            now = self.clock()
            parts = [f"status {seconds(now - self.started)} elapsed, trial {self.done}/{self.total} done"]
            for p in self.running.values():
                r = p.rate()
                pace = f", {num(r)} steps/s" if r is not None else ""   # 1,780 not 1.78e+03
                trial_left = p.left_s(now)
                tl = f", trial ~{seconds(trial_left)} left" if trial_left is not None else ""
                parts.append(f"{p.mode} seed {p.seed}: step {p.step}/{p.total}{pace}{tl}"
                             if p.points else f"{p.mode} seed {p.seed}: starting")
            if not self.running:   # between two trials, or the last one ended and the run is judged
                parts.append("no trial running")
        parts.append(left_text)
        return "; ".join(parts)


@dataclass
class PriorCosts:
    """What the suite's earlier runs here cost: each trial (`trials`) and, apart, a run's start-up before its
    first trial could end (`startup`: the median over the runs of their first gap less their other gaps'
    median; the fork server's Paddle import is paid there once, launch/forkserver.py)."""

    trials: list[float] = field(default_factory=list)
    startup: float = 0.0


def prior_costs(run: Path, suite: str, config_hash: str, limit: int = PRIOR_RUNS) -> PriorCosts:
    """Each trial's full cost (its launch to its record written, start-up and evaluation included) in the newest
    `limit` earlier finished runs of this suite and config beside `run`: in one run, the gaps between
    consecutive trial ends from the run's start, times its slots, the first gap less the run's start-up.
    Unreadable runs are skipped, links never followed; none when there are none (a first run)."""
    found: list[tuple[str, Path, RunInfo]] = []
    for n, cand in enumerate(sorted(Path(run).resolve().parent.iterdir(), reverse=True)):
        if n >= 200 or len(found) >= limit:
            break
        if cand == Path(run).resolve() or cand.is_symlink() or not cand.is_dir():
            continue
        try:
            info = RunDir(cand).load_run()
        except ResultsError:
            continue
        if (info.suite, info.config_hash) == (suite, config_hash) and info.finished and info.started:
            found.append((info.started, cand, info))
    costs, startups = [], []
    for started, folder, info in found:
        gaps = _run_costs(RunDir(folder), started, max(1, len(info.devices or [])))
        if len(gaps) > 1:
            startup = max(0.0, gaps[0] - statistics.median(gaps[1:]))
            gaps[0] -= startup
            startups.append(startup)
        costs += gaps
    return PriorCosts(costs, statistics.median(startups) if startups else 0.0)


def _run_costs(rd: RunDir, started: str, slots: int) -> list[float]:
    ends = []
    for p in rd.trial_files():
        try:
            t = rd.load_trial(p)
        except ResultsError:
            return []
        if t.ended_unix is not None:
            ends.append(t.ended_unix)
    start = dt.datetime.fromisoformat(started).timestamp()
    times = [start, *sorted(ends)]
    gaps = [(b - a) * slots for a, b in itertools.pairwise(times)]
    return [g for g in gaps if 0 < g < 86400.0]


class StatusTicker:
    """A thread printing `pace.status_line()` every `every_s` seconds until stopped (a piped run)."""

    def __init__(self, pace: RunPace, console: Console, every_s: float = STATUS_EVERY_S):
        self.pace, self.console, self.every_s = pace, console, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ampbench-status", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.console.print(Text(self.pace.status_line()), soft_wrap=True)

    def __enter__(self) -> Self:
        if self.every_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class Display:
    """A round of local trials on screen: the run's task (trials done of the plan, the run's time left) and
    one task per running trial (its step, loss and time left); a pipe gets a status line every
    `status_every` s and no bar.  A mode's unknown op names are said once per run (`warned`)."""

    def __init__(self, console: Console, total: int, todo: int, slots: int, status_every: float,
                 prior: PriorCosts | None = None):
        self.console = console
        prior = prior or PriorCosts()
        self.pace = RunPace(total, total - todo, slots=slots, prior=prior.trials, startup=prior.startup)
        self.warned: set[str] = set()
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[left]}", markup=False),
                                 TextColumn("{task.fields[info]}", markup=False), console=console, transient=False,
                                 disable=not console.is_terminal)
        self.ticker = StatusTicker(self.pace, console, 0 if console.is_terminal else status_every)
        self.overall = self.progress.add_task("trials", total=total, completed=total - todo, info="", left="")

    def __enter__(self) -> Self:
        self.progress.__enter__()
        self.ticker.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.ticker.__exit__(kind, exc, tb)
        self.progress.__exit__(kind, exc, tb)

    @contextlib.contextmanager
    def trial(self, mode: str, seed: int, steps: int, where: str) -> Iterator[Callable[[dict[str, Any]], None]]:
        """A running trial's task while the block runs; yields the handler of its events."""
        task = self.progress.add_task(f"  {escape(mode)} seed {seed}{where}", total=steps, info="starting", left="")
        self.pace.start(mode, seed, steps)
        try:
            yield self._on_event(task, mode, seed)
        finally:
            self.progress.remove_task(task)
            self.pace.finish(mode, seed)

    def ended(self) -> None:
        self.progress.advance(self.overall)

    def _on_event(self, task: Any, mode: str, seed: int) -> Callable[[dict[str, Any]], None]:
        """A trial's events (from its launch thread) onto its progress task, its pace and the run's time left."""
        shown = [-SHOW_EVERY_S]

        def on_event(ev: dict[str, Any]) -> None:
            if ev.get("event") == "step":
                loss = ev.get("loss")
                step = ev.get("step", 0)
                self.pace.step(mode, seed, step if isinstance(step, int) else 0)
                if time.monotonic() - shown[0] < SHOW_EVERY_S:   # a fast trial's steps come by the hundred a second:
                    return                                        # its line is redrawn at most this often
                shown[0] = time.monotonic()
                self.progress.update(task, completed=step, left=_left_text(self.pace.trial_left_s(mode, seed)),
                                     info=f"loss {loss:.4g}" if isinstance(loss, float) else "loss non-finite")
                self.progress.update(self.overall, left=_left_text(self.pace.run_left_s()))
            elif ev.get("event") == "phase":
                self.progress.update(task, info=str(ev.get("phase", "")))
            elif ev.get("event") == "unknown_ops" and mode not in self.warned:
                text = unknown_ops_warning(mode, ev.get("names"))
                if text:
                    self.warned.add(mode)
                    self.progress.console.print(text, soft_wrap=True)
        return on_event


def _left_text(left: float | None) -> str:
    return f"~{seconds(left)} left" if left is not None else "estimating"


def status_text(t: Trial, primary: str = "") -> str:
    """Rich markup: status colours ours, every text from a file escaped; the suite's metric comes first
    (a program prints others before it: PaddleOCR's precision and recall before hmean)."""
    if t.status != "ok":   # the line that says why (a traceback's last), control characters escaped
        return f"[red]{escape(t.status)}[/]: {escape(last_line(t.error, CRASH_LINE_CHARS))}"
    names = [primary] if primary in t.metrics else []
    names += [k for k in t.metrics if k != primary][:2 - len(names)]
    metric = ", ".join(f"{k} {t.metrics[k]:.4g}" for k in names)
    info = t.workload_info if isinstance(getattr(t, "workload_info", None), dict) else {}
    warn = f" [yellow]warning:[/] {escape(printable(info['warning']))}" if info.get("warning") else ""
    rate = t.throughput.samples_per_s   # 3 significant digits below 100: a real detector on CPU does 0.035
    shown = f"{rate:.1f}" if rate >= 100 else f"{rate:.3g}"
    return f"[green]ok[/] {shown} samples/s, {escape(metric)}{warn}"


def unknown_ops_warning(mode: str, names: object) -> str | None:
    """The worker's list of custom white/black list names its Paddle does not know (the runner does not
    import paddle to find out: that cost every run ~2 CPU s before its first trial)."""
    if not isinstance(names, list) or not names:
        return None
    shown = ", ".join(printable(str(n))[:80] for n in names[:20])
    return (f"[yellow]warning:[/] mode {escape(mode)}: Paddle does not know op name(s) {escape(shown)}; Paddle "
            "ignores them silently (did you mean lookup_table_v2 for embedding, matmul_v2 for matmul?)")
