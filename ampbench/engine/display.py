"""What a run shows while its trials run locally: one progress task per running trial with its time left
(a pipe: a status line every few seconds instead), and each ended trial's line.

Rich markup is ours; every text that comes from a file or a program is escaped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Self

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ampbench.core.files import last_line
from ampbench.core.records import Trial
from ampbench.core.text import printable
from ampbench.engine.progress import RunPace, StatusTicker
from ampbench.report.console import CRASH_LINE_CHARS
from ampbench.report.fmt import seconds


class Display:
    """A round of local trials on screen: the run's task (trials done of the plan, the run's time left) and
    one task per running trial (its step, loss and time left); a pipe gets a status line every
    `status_every` s and no bar.  A mode's unknown op names are said once per run (`warned`)."""

    def __init__(self, console: Console, total: int, todo: int, slots: int, status_every: float):
        self.console = console
        self.pace = RunPace(total, total - todo, slots=slots)
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
        def on_event(ev: dict[str, Any]) -> None:
            if ev.get("event") == "step":
                loss = ev.get("loss")
                step = ev.get("step", 0)
                self.pace.step(mode, seed, step if isinstance(step, int) else 0)
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
