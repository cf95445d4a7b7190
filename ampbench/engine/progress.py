"""How far a run is and how long it has left, from the step rates its trials measure.

A person watching `ampbench run` wants to know when it ends, and a CI log that says nothing for
minutes looks hung. `RunPace` keeps, per running trial, the recent (time, step) points of its step
events; a trial's time left is its remaining steps over its recent step rate, and the run's is that
plus the trials not started yet at the typical wall time of the trials already finished (process
start, steps and evaluation included), or before any has finished, the running trial's projection.
Nothing is guessed: until a rate is measured the time left is "estimating".

On a terminal the rich progress bars show it; in a pipe `StatusTicker` prints one plain status line
at a fixed interval (which trial, step, rate, time left), so a log never goes silent for long.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from rich.console import Console
from rich.text import Text

from ampbench.core.units import num
from ampbench.engine.request import STATUS_EVERY_S
from ampbench.report.fmt import seconds

RATE_WINDOW_S = 20.0    # a step rate over the last 20 s: recent enough to follow a slowdown, long enough to be stable


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

    def __init__(self, total: int, done_before: int, slots: int = 1, clock: Callable[[], float] = time.monotonic):
        self.total = total
        self.done = done_before
        self.slots = max(1, slots)
        self.clock = clock
        self.started = clock()
        self.walls: list[float] = []
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
        if self.walls:
            return statistics.median(self.walls)
        projected = [now - p.started + left for p in self.running.values() if (left := p.left_s(now)) is not None]
        return max(projected) if projected else None

    def run_left_s(self) -> float | None:
        """Seconds until the last planned trial ends (None: no rate measured yet)."""
        with self.lock:
            now = self.clock()
            typical = self._typical_wall(now)
            if typical is None:
                return None
            lefts = []
            for p in self.running.values():
                left = p.left_s(now)
                lefts.append(left if left is not None else max(0.0, typical - (now - p.started)))
            waiting = max(0, self.total - self.done - len(self.running))
            return (sum(lefts) + waiting * typical) / self.slots

    def status_line(self) -> str:
        """One plain line: elapsed, trials done, each running trial's step and rate, time left."""
        left = self.run_left_s()
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
        parts.append(f"run ~{seconds(left)} left" if left is not None else "run time left: estimating")
        return "; ".join(parts)


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
