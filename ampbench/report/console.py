"""Terminal output: the outcome table a run and a check end with, and behind -v / --explain the
trial table and every rule's full text."""

from __future__ import annotations

import math
import textwrap
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampbench.core.files import last_line
from ampbench.judge import measure
from ampbench.record import fields
from ampbench.record.models import Trial
from ampbench.report import fmt
from ampbench.report.claims import HEADERS, claim_rows
from ampbench.report.fmt import EMULATED_LEGEND, EMULATED_MARK
from ampbench.report.outcome import cell, interval_note, mode_rows, next_steps, outcome_columns, outcome_view
from ampbench.report.view import RunView
from ampbench.results.verdicts import CheckReport, ClaimResult


def table_box(console: Console) -> Any:
    """Box-drawing characters on a terminal; plain ASCII in a pipe or CI log (they garble there)."""
    return box.HEAVY_HEAD if console.is_terminal else box.ASCII


# A table's own typography, spelled in ASCII in a pipe (a CI log or a file may not be UTF-8): the dash of a value
# that does not exist, the spread of a metric, an ellipsis, a multiplication sign, a probe's fit and out-of-memory,
# the metric delta's header ("d accuracy": as narrow as "Δ accuracy").
_ASCII = str.maketrans({fmt.DASH: "-", "±": "+/-", "…": "...", "×": "x", "✓": ":ok", "✗": ":oom", "Δ": "d"})


def cell_text(text: str, console: Console) -> str:
    """A table cell as the console shows it: as it is on a terminal, its typography in ASCII in a pipe."""
    return text if console.is_terminal else text.translate(_ASCII)


def print_trials(trials: list[Trial], console: Console, primary: str) -> None:
    """The trial table (each trial's own figures: the catalog's console columns, record/fields.py) and one
    line per mode with the mode's samples/s."""
    view = fields.View(primary, fmt.is_fraction_metric([x for t in trials if (x := t.metrics.get(primary)) is not None]))
    cols = fields.columns("console")
    table = Table(title="trials", title_justify="left", box=table_box(console))
    for c in cols:
        table.add_column(Text(c.header(view)), justify="right" if c.align == "r" else "left")
    for t in trials:   # every cell a `Text`: a mode or status is never rich markup
        table.add_row(*(Text(cell_text(c.text(t, view), console), style="red" if c.col.kind == "status" and t.status != "ok" else "")
                        for c in cols))
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


CRASH_LINE_CHARS = 400   # a Criteo file's path, line and value fit; a page of traceback does not


def print_crashes(trials: list[Trial], console: Console) -> None:
    """One line per trial that did not finish, saying why (its error's last line) on the first screen,
    not only behind --explain. The text is the program's: shown literally (a `Text`, so `[red]` or `[/]`
    is not markup) with its control characters escaped (last_line, core/text.py)."""
    for t in trials:
        if t.status != "ok":
            why = last_line(t.error, CRASH_LINE_CHARS) or "no error recorded"
            console.print(Text(f"{t.key} {t.status}: {why}"), highlight=False, soft_wrap=True)


def _summary_line(report: CheckReport, console: Console) -> None:
    if any(getattr(r, "informational", False) for v in report.verdicts for r in v.rules):
        console.print("* informational: computed and shown, but not judged (AMP inactive)", markup=False,
                      highlight=False)
    if any(v.emulated for v in report.verdicts):
        console.print(f"{EMULATED_MARK} {EMULATED_LEGEND}", markup=False, highlight=False)
    for n in report.notes:   # wrapped at the console's width (a terminal's, or COLUMNS / 200 in a pipe)
        console.print(Text(f"note: {n}"), highlight=False)
    line = Text(f"{report.suite}: ")
    for i, v in enumerate(report.verdicts):
        line.append(("" if i == 0 else ", ") + f"{v.mode} ")
        line.append(v.verdict_text, style=_STYLE[v.verdict])
    line.append(f" -> exit {report.exit_code}" + (" (--strict)" if report.strict else ""))
    console.print(line, highlight=False, soft_wrap=not console.is_terminal)


def _plain_check(report: CheckReport, console: Console) -> None:
    """Not a terminal (CI logs, pipes): one whole line per rule, nothing truncated or wrapped."""
    console.print(f"ampbench check: {report.suite} ({report.profile})", markup=False, highlight=False)
    for v in report.verdicts:
        for r in v.rules:
            star = ("*" if getattr(r, "informational", False) else "") + ("" if r.counted else " (not counted)")
            line = (f"{v.mode}  {r.rule}  {r.status}{star}  observed {_short(r.observed)}  "
                    f"threshold {_short(r.threshold)}  {r.message}")
            # at most the console's width (200 in a pipe, or COLUMNS), continuation lines indented;
            # words (a mode name, a path) are never cut
            for part in textwrap.wrap(line, width=max(40, console.width), subsequent_indent="    ",
                                      break_long_words=False, break_on_hyphens=False) or [line]:
                console.print(part, markup=False, highlight=False, soft_wrap=True)


def print_rules(report: CheckReport, console: Console) -> None:
    """A rich table (mode, rule, status, observed, threshold, message).

    Every cell is rich Text (rule messages quote user paths and names: no markup is interpreted).
    On narrow terminals (< 120 columns) observed/threshold are left out: the message carries them.
    When not writing to a terminal, one plain line per rule with whole mode names is printed.
    """
    if not console.is_terminal:
        _plain_check(report, console)
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
            star = ("*" if getattr(r, "informational", False) else "") + ("" if r.counted else " (not counted)")
            cells = [Text(v.mode if i == 0 else ""), Text(r.rule), Text(r.status + star, style=_STYLE[r.status])]
            if wide:
                cells += [Text(_short(r.observed)), Text(_short(r.threshold))]
            table.add_row(*cells, Text(r.message))
        table.add_section()
    console.print(table)


def print_outcome(v: RunView, console: Console) -> None:
    """The outcome (report/outcome.py): one row per mode, one line per next step with the rules it
    answers, then the legend, the checker's notes and the verdict line with the exit code."""
    title = Text(f"ampbench check: {v.summary.suite} ({v.summary.profile}), each mode vs fp32")
    table = Table(title=title, title_justify="left", box=table_box(console))
    cols, view = outcome_columns(), outcome_view(v)   # the catalog's (record/fields.py), as report.md's
    for c in cols:   # a name, a rule list fold; a figure, a verdict stay on one line
        table.add_column(Text(cell_text(c.header(view, lines=True), console)), justify="right" if c.align == "r" else "left",
                         no_wrap=c.col.kind not in ("code", "text"), overflow="fold")
    for row in mode_rows(v):
        table.add_row(*(Text(cell_text(cell(c, row, view), console), style=_STYLE.get(row.verdict, "") if c.col.kind == "status" else "")
                        for c in cols))
    console.print(table)
    print_crashes(v.trials, console)
    if (note := interval_note(v)) is not None:
        console.print(Text(f"note: {note}"), highlight=False)
    for s in next_steps(v):
        console.print(Text(f"{s.cause_text()} -> {s.step}"), highlight=False)
    if v.check is not None and v.check.claims:
        print_claims(v.check.claims, console)
    if v.check is not None:
        _summary_line(v.check, console)


_CLAIM_STYLE = {"confirmed": "green", "refuted": "bold red", "not decidable": "yellow"}


def print_claims(claims: list[ClaimResult], console: Console) -> None:
    """The suite's published claims, judged (report/claims.py): after the outcome, never part of it."""
    table = Table(title=Text("claims (published; judged on this run, never its verdict)"), title_justify="left",
                  box=table_box(console))
    for head in HEADERS:
        table.add_column(Text(head), overflow="fold", justify="right" if head.startswith("Measured") else "left")
    for c, row in zip(claims, claim_rows(claims), strict=True):
        table.add_row(Text(row.source), Text(row.mode), Text(row.claim), Text(row.measured),
                      Text(row.outcome, style=_CLAIM_STYLE.get(c.outcome, "")))
    console.print(table)
