"""Terminal output: the trial table printed at the end of a run, and the check table."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampbench.core.records import Trial
from ampbench.judge import measure
from ampbench.report import fmt
from ampbench.report.fmt import bytes_h
from ampbench.results.verdicts import CheckReport


def print_trials(trials: list[Trial], console: Console, primary: str) -> None:
    """The trial table (each trial's own figures) and one line per mode with the mode's samples/s."""
    table = Table(title="trials", title_justify="left")
    for col in ("mode", "seed", "status", "samples/s", "peak memory", "metric", "AMP active"):
        table.add_column(col, justify="right" if col in ("seed", "samples/s", "peak memory") else "left")
    for t in trials:
        metric = t.metrics.get(primary)
        mem = t.memory.peak_allocated_bytes or t.memory.rss_peak_bytes
        active = "yes" if t.amp.active else ("no (inactive on this device)" if t.amp.requested else "-")
        table.add_row(
            Text(t.mode), str(t.seed), Text(t.status, style="" if t.status == "ok" else "red"),
            f"{t.throughput.samples_per_s:.1f}" if t.status == "ok" else "-",
            f"{bytes_h(mem)} ({t.memory.source})" if mem else "-",
            Text(f"{primary} {metric:.4f}") if metric is not None else "-", active,
        )
    console.print(table)
    by_mode: dict[str, list[Trial]] = {}
    for t in trials:
        by_mode.setdefault(t.mode, []).append(t)
    for mode, ts in by_mode.items():
        ms = measure.mode_stats([t.step_rates() for t in ts if t.status == "ok"])
        if ms.samples_per_s:
            console.print(Text(f"  {mode}: {fmt.num(ms.samples_per_s)} samples/s "
                               f"(geometric mean of {len(ms.per_trial)} trial median(s))"))


_STYLE = {"PASS": "green", "FAIL": "bold red", "INCONCLUSIVE": "yellow", "ERROR": "bold magenta"}
_ABBREV = {"nonfinite_losses": "nonfinite", "max_skipped_fraction": "skipped", "collapse_began_step": "collapse@",
           "loss_scale_floor": "floor", "collapse_halvings": "halvings", "min_baseline_metric": "min",
           "fp32_mean": "fp32", "loss_fell": "loss fell", "min_change": "change", "confidence": "conf",
           "low_precision_share": "low-prec share"}


def _short(x: Any) -> str:
    """One cell for check.json's `observed`/`threshold`: a number, or a documented object."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return "n/a" if not math.isfinite(x) else f"{x:.4g}"
    if isinstance(x, dict):
        return ", ".join(f"{_ABBREV.get(k, k)} {_short(v)}" for k, v in x.items() if v not in (None, [], ""))
    if isinstance(x, list):
        return ", ".join(map(str, x)) or "-"
    return str(x)


def _summary_line(report: CheckReport, console: Console) -> None:
    if any(getattr(r, "informational", False) for v in report.verdicts for r in v.rules):
        console.print("* informational: computed and shown, but not judged (AMP inactive)", markup=False,
                      highlight=False)
    for n in report.notes:
        console.print(f"note: {n}", markup=False, highlight=False, soft_wrap=True)
    line = Text(f"{report.suite}: ")
    for i, v in enumerate(report.verdicts):
        line.append(("" if i == 0 else ", ") + f"{v.mode} ")
        line.append(v.verdict, style=_STYLE[v.verdict])
    line.append(f" -> exit {report.exit_code}" + (" (--strict)" if report.strict else ""))
    console.print(line, highlight=False, soft_wrap=not console.is_terminal)


def _plain_check(report: CheckReport, console: Console) -> None:
    """Not a terminal (CI logs, pipes): one whole line per rule, nothing truncated or wrapped."""
    console.print(f"ampbench check: {report.suite} ({report.profile})", markup=False, highlight=False)
    for v in report.verdicts:
        for r in v.rules:
            star = "*" if getattr(r, "informational", False) else ""
            console.print(f"{v.mode}  {r.rule}  {r.status}{star}  observed {_short(r.observed)}  "
                          f"threshold {_short(r.threshold)}  {r.message}", markup=False, highlight=False,
                          soft_wrap=True)


def print_check(report: CheckReport, console: Console) -> None:
    """A rich table (mode, rule, status, observed, threshold, message) and the overall line.

    Every cell is rich Text (rule messages quote user paths and names: no markup is interpreted).
    On narrow terminals (< 120 columns) observed/threshold are left out: the message carries them.
    When not writing to a terminal, one plain line per rule with whole mode names is printed.
    """
    if not console.is_terminal:
        _plain_check(report, console)
        _summary_line(report, console)
        return
    wide = console.width >= 120
    table = Table(title=Text(f"ampbench check: {report.suite} ({report.profile})"), expand=True)
    table.add_column("mode", no_wrap=wide, overflow="fold")
    table.add_column("rule", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("observed", ratio=1, overflow="fold")
        table.add_column("threshold", ratio=1, overflow="fold")
    table.add_column("message", ratio=4, min_width=30)
    for v in report.verdicts:
        for i, r in enumerate(v.rules):
            star = "*" if getattr(r, "informational", False) else ""
            cells = [Text(v.mode if i == 0 else ""), Text(r.rule), Text(r.status + star, style=_STYLE[r.status])]
            if wide:
                cells += [Text(_short(r.observed)), Text(_short(r.threshold))]
            table.add_row(*cells, Text(r.message))
        table.add_section()
    console.print(table)
    _summary_line(report, console)
