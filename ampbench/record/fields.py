"""The field catalog: every column a trial shows, declared once, that each trial table renders from.

report.md's trials table (report/tables.py), the console's trial table (report/console.py), summary.csv
(results/summary.py, and `ampbench summary`'s frame built on it), the pytest-benchmark export's per-mode
lists (report/benchmark_export.py) and the history line's per-trial points (judge/summary.py) each loop
over `columns(output)`: before, each built its own parallel header, row and alignment lists, and the same
samples/s was printed `:.1f` on the console and to three significant digits in report.md.  The tables a
mode a row (report.md's summary, the trend, the outcome report.md and the console open with, `ampbench
compare --format md`, the dashboard's runs, the sweep report) loop over `columns(output, ModeSummary, MODE_COMPUTED)` with
columns of their own that are no field (a verdict, a run's link), and report.md's overview of several runs
over `columns("overview", RunSummary, ...)`.

A column is a `Col` marker on a model field (core/columns.py: `Annotated[float, Col(...)]`, found by
walking the `Trial` model and the sub-models it holds) or, for a figure computed from several fields
(the trial key, the final loss, the primary metric), an entry of `COMPUTED` below.  Each kind has one
formatter (`FORMATS`): every text output shows the same string for the same value.  The text a
formatter returns is plain: each renderer escapes it for its medium (md_text, rich `Text`, csv_safe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel

from ampbench.core.columns import Col, Output
from ampbench.core.files import last_line
from ampbench.core.units import (
    DASH,
    bytes_h,
    metric,
    metric_delta,
    metric_pm,
    num,
    pct,
    ratio,
    ratio_ci,
    seconds,
)
from ampbench.record.models import Trial


@dataclass(frozen=True)
class View:
    """What a formatter needs beyond the value: the run's primary metric, whether it is a fraction
    (shown in percent), and the level of the intervals shown."""

    metric: str = ""
    fraction: bool = False
    confidence: float = 0.95


PLAIN = View()  # no primary metric: what summary.csv, the export and the history line read with


def _rate(x: Any, v: View) -> str:
    return num(x) if x else DASH


def _ms(x: Any, v: View) -> str:
    return f"{num(x * 1000)} ms" if x else DASH


def _text(x: Any, v: View) -> str:
    return DASH if x is None or x == "" else str(x)


def _metric_pm(x: Any, v: View) -> str:
    """(mean, sd, n) over seeds: '80.12% ± 0.31 (n=3)'."""
    mean, std, n = x if x is not None else (None, None, 0)
    return metric_pm(mean, std, v.fraction) + (f" (n={n})" if n else "")


# One formatter per kind: (value, view) -> plain text; `DASH` for a value that does not exist.
FORMATS: dict[str, Callable[[Any, View], str]] = {
    "text": _text, "code": _text, "trial": _text, "status": _text,
    "count": lambda x, v: _text(x, v),
    "size": lambda x, v: str(x) if x else DASH,  # a batch of 0: not recorded
    "rate": _rate,
    "ms": _ms,  # the value is in seconds
    "bytes": lambda x, v: bytes_h(x),
    "seconds": lambda x, v: seconds(x) if x else DASH,
    "loss": lambda x, v: num(x, 4),
    "metric": lambda x, v: metric(x, v.fraction),
    "flag": lambda x, v: DASH if x is None else ("yes" if x else "no"),
    "markdown": _text,  # a renderer's own cell, already markdown (its parts escaped where it was made)
    "ratio": lambda x, v: ratio(x),
    "reduction": lambda x, v: DASH if x is None else pct(-x),  # a memory reduction shown as the change
    "metric_pm": _metric_pm,
    "metric_delta": lambda x, v: metric_delta(x, v.fraction),
}
# A (lo, hi) interval after the value (a `Col`'s `ci`), per kind
CI_FORMATS: dict[str, Callable[[float, float], str]] = {
    "rate": lambda lo, hi: f"[{num(lo)}, {num(hi)}]", "ratio": ratio_ci}
TEXT_KINDS = frozenset({"text", "code", "trial", "status"})  # user text: each renderer escapes it


@dataclass(frozen=True)
class Column:
    """A `Col` with how to read its value from a trial: `read(trial, view)` and, for a `note`, the
    note's value."""

    key: str  # the field's dotted path in the row's model (`throughput.samples_per_s`), or the computed name
    col: Col
    read: Callable[[Any, View], Any]   # a row (a `Trial`, a `ModeSummary`) -> its raw value
    read_note: Callable[[Any, View], Any] | None = None
    read_ci: Callable[[Any, View], Any] | None = None

    @property
    def csv_name(self) -> str:
        return self.col.csv or self.key.rsplit(".", 1)[-1]

    @property
    def align(self) -> str:
        return self.col.align or ("l" if self.col.kind in TEXT_KINDS or self.col.kind == "markdown" else "r")

    @property
    def escaped(self) -> bool:
        """The value is text from a trial (a mode, an error line): the renderer escapes it."""
        return self.col.kind in TEXT_KINDS

    def header(self, view: View, esc: Callable[[str], str] = str, lines: bool = False) -> str:
        """The header; the metric's name in it is user text (`esc` escapes it).  A line break in the
        template is where a narrow rendering (the console, `lines`) breaks a long header; elsewhere a space."""
        template = self.col.header if self.col.header is not None else "{metric}"
        text = template.format(metric=esc(view.metric or "metric"), ci=f"[{view.confidence:.0%} CI]")
        return text if lines else text.replace("\n", " ")

    def value(self, row: Any, view: View = PLAIN) -> Any:
        """The raw value (summary.csv, the export, the history line)."""
        return self.read(row, view)

    def text(self, row: Any, view: View = PLAIN, esc: Callable[[str], str] = str) -> str:
        """The shown value; `esc` escapes the parts that are user text (the value of a text kind, a
        note) for the renderer's medium."""
        shown = FORMATS[self.col.kind](self.read(row, view), view)
        if shown == DASH:
            return shown
        if self.escaped:
            shown = esc(shown)
        if self.read_ci is not None and (ci := self.read_ci(row, view)):
            shown += " " + CI_FORMATS[self.col.kind](*ci)
        if self.read_note is not None and (note := self.read_note(row, view)) not in (None, ""):
            shown += f" ({esc(str(note))})"
        return shown


def _getter(path: tuple[str, ...]) -> Callable[[Any, View], Any]:
    def read(row: Any, view: View) -> Any:
        obj: Any = row
        for name in path:
            obj = getattr(obj, name, None)
            if obj is None:
                return None
        return obj
    return read


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The sub-model a field holds (`Memory`, `Interference | None`), else None."""
    for a in (annotation, *get_args(annotation)):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
    return None


def _field_columns(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[Column]:
    """The `Col`-marked fields of `model` and of the sub-models its fields hold."""
    out: list[Column] = []
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        for mark in info.metadata:
            if isinstance(mark, Col):
                note = _getter((*prefix, mark.note)) if mark.note else None
                ci = _getter((*prefix, mark.ci)) if mark.ci else None
                out.append(Column(".".join(path), mark, _getter(path), note, ci))
        sub = _model_of(info.annotation)
        if sub is not None:
            out += _field_columns(sub, path)
    return out


def _final_loss(t: Trial, v: View) -> float | None:
    return next((s.loss for s in reversed(t.steps) if s.loss is not None), None)


def _other_memory(t: Trial, v: View) -> str:
    m = t.memory
    parts = [f"{name} {bytes_h(b)}" for name, b in (("reserved", m.peak_reserved_bytes),
                                                   ("device", m.device_used_bytes), ("RSS", m.rss_peak_bytes)) if b]
    return "; ".join(parts)


def _amp_active(t: Trial, v: View) -> str:
    if t.amp.emulated:
        return f"emulated ({t.amp.dtype}): not measured"
    return "yes" if t.amp.active else ("no (inactive on this device)" if t.amp.requested else "")


def _peak(t: Trial, v: View) -> int | None:
    return t.peak_memory()[0] or None


# Columns computed from several fields (a model field's own column is a `Col` on the field).
COMPUTED: tuple[Column, ...] = (
    Column("key", Col("Trial", "trial", rank=8, shows=("md",)), lambda t, v: t.key),
    Column("peak_memory", Col("Peak memory", "bytes", rank=63, shows=("console",)), _peak,
           lambda t, v: t.peak_memory()[1]),
    Column("other_memory", Col("Other memory", "text", rank=64, shows=("md",)), _other_memory),
    Column("metric", Col(None, "metric", rank=68, shows=("md", "console")),
           lambda t, v: t.metrics.get(v.metric)),
    Column("amp_active_shown", Col("AMP active", "text", rank=73, shows=("console",)), _amp_active),
    Column("final_loss", Col("Final loss", "loss", rank=84, shows=("md", "csv")), _final_loss),
    Column("error", Col("Error", "text", rank=90, shows=("csv",)), lambda t, v: last_line(t.error, 200)),
)
METRIC_PREFIX = "metric_"  # summary.csv: one column per metric the trial recorded, after the catalog's


def columns(output: Output, model: type[BaseModel] = Trial, computed: Iterable[Column] = COMPUTED) -> list[Column]:
    """The columns `output` shows of rows of `model` (a trial's, or a mode's: `ModeSummary` with its
    `MODE_COMPUTED`, results/history.py), in rank order (ties in declaration order, fields before computed).
    Built on each call from the model's current markers: nothing is cached, so a test may mark a field."""
    every = [*_field_columns(model), *computed]
    def place(c: Column) -> int:
        return c.col.csv_rank if output == "csv" and c.col.csv_rank is not None else c.col.rank
    return sorted((c for c in every if output in c.col.shows), key=place)


def csv_row(t: Trial) -> dict[str, Any]:
    """One trial as summary.csv's row: every csv column's raw value, then `metric_<name>` per metric."""
    row = {c.csv_name: c.value(t) for c in columns("csv")}
    row.update({f"{METRIC_PREFIX}{k}": v for k, v in t.metrics.items()})
    return row
