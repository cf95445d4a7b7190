"""`ampbench compare RUN [OTHER]`: two runs (or a run and its predecessor) side by side per mode, the
columns and sort of pytest-benchmark's comparison table.

One row per run and mode over the trials' figures (each trial's median samples/s, judge.measure):
Min, Max, Mean, StdDev, Median, IQR, Trials, the mode's figure (geometric mean: the number every other
view shows) and its change against the other run.  pytest-benchmark sorts by `min` of times
(fastest first); throughput is higher-is-better, so a numeric column sorts best first (highest
samples/s, lowest spread).  Every name from a file is escaped before rich renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ampbench.core.errors import ConfigError
from ampbench.judge import measure
from ampbench.judge.run_change import Change
from ampbench.report import fmt
from ampbench.results.run_dir import OpenRun, open_run

COLUMNS = ("name", "min", "max", "mean", "stddev", "median", "iqr", "trials", "samples_per_s", "change")
LOWER_IS_BETTER = {"stddev", "iqr"}


@dataclass(frozen=True)
class Row:
    name: str
    run_id: str
    mode: str
    min: float
    max: float
    mean: float
    stddev: float
    median: float
    iqr: float
    trials: int
    samples_per_s: float
    change: float | None  # vs the same mode in the other run (this / other - 1); None for the other run
    suite: str = ""
    config_hash: str = ""


def _rows(run: OpenRun, ref: dict[str, float] | None) -> list[Row]:
    out = []
    for m in run.suite.modes:
        ok = [t for t in run.trials if t.mode == m.name and t.status == "ok"]
        st = measure.mode_stats([t.step_rates() for t in ok])
        v = np.array(st.per_trial, float)
        if not len(v) or st.samples_per_s is None:
            continue
        q1, q3 = np.percentile(v, [25, 75])
        base = (ref or {}).get(m.name)
        mark = " (emulated: not an AMP timing)" if any(t.amp.emulated for t in ok) else ""
        out.append(Row(f"{m.name}{mark} ({run.info.run_id})", run.info.run_id, m.name, float(v.min()), float(v.max()),
                       float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else float("nan"), float(np.median(v)),
                       float(q3 - q1), len(v), st.samples_per_s,
                       None if base is None else st.samples_per_s / base - 1, run.info.suite, run.info.config_hash))
    return out


def compare_rows(current: Path, other: Path, sort: str = "name") -> list[Row]:
    if sort not in COLUMNS:
        raise ConfigError("--sort", sort, f"expected one of {', '.join(COLUMNS)}")
    cur, oth = open_run(current), open_run(other)
    ref_rows = _rows(oth, None)
    ref = {r.mode: r.samples_per_s for r in ref_rows}
    rows = _rows(cur, ref) + ref_rows
    if sort == "name":
        return sorted(rows, key=lambda r: (r.mode, r.run_id != cur.info.run_id))
    sign = 1 if sort in LOWER_IS_BETTER else -1

    def key(r: Row) -> tuple[bool, float]:
        v = getattr(r, sort)
        missing = v is None or (isinstance(v, float) and np.isnan(v))
        return (missing, 0.0 if missing else sign * float(v))
    return sorted(rows, key=key)


def differences(rows: list[Row]) -> str | None:
    """What makes the two runs' numbers incomparable as a change: another suite, or another config."""
    runs = {r.run_id: (r.suite, r.config_hash) for r in rows}
    if len(runs) < 2:
        return None
    (a, (sa, ha)), (b, (sb, hb)) = list(runs.items())[:2]
    if sa != sb:
        return f"the runs are of different suites ({a}: {sa!r}, {b}: {sb!r}): a change is not AMP's or the code's"
    if ha and hb and ha != hb:
        return (f"the runs' configs differ (config hash {ha} vs {hb}): batch, steps or modes changed, so a change "
                "is not only the code's")
    return None


def significance_text(c: Change | None) -> str:
    """The Significant cell: the mark, and the decided ratio's change with its interval."""
    if c is None:
        return "not compared"
    if c.ratio is None:
        return c.mark
    ci = f" [{fmt.pct(c.ci_low - 1)}, {fmt.pct(c.ci_high - 1)}]" if c.ci_low is not None and c.ci_high is not None \
        else ""
    head = {"slower": "yes, slower", "faster": "yes, faster"}.get(c.mark, "no" if c.mark != "disturbed" else
                                                                   "no (disturbed)")
    return f"{head}: {fmt.pct(c.change)}{ci}"


def print_compare(rows: list[Row], console: Console, marks: dict[str, Change] | None = None) -> None:
    """The table; with `marks` (judge.run_change) a Significant column on the current run's rows and
    one line per mode that is not significant for a reason worth knowing (disturbed, too few trials)."""
    note = differences(rows)
    if note:
        console.print(f"[yellow]warning:[/] {escape(note)}", soft_wrap=True)
    t = Table(title="samples/s per trial (each trial's median step rate)", title_justify="left")
    cols = ["Name", "Min", "Max", "Mean", "StdDev", "Median", "IQR", "Trials", "Samples/s (geo. mean)", "Change"]
    for col in cols + (["Significant"] if marks is not None else []):
        t.add_column(col, justify="left" if col in ("Name", "Significant") else "right")
    for r in rows:
        change = "(other)" if r.change is None else fmt.pct(r.change)
        cells = [escape(r.name), *(fmt.num(x) for x in (r.min, r.max, r.mean)),
                 "-" if np.isnan(r.stddev) else fmt.num(r.stddev), fmt.num(r.median), fmt.num(r.iqr),
                 str(r.trials), fmt.num(r.samples_per_s), change]
        if marks is not None:
            cells.append("" if r.change is None else escape(significance_text(marks.get(r.mode))))
        t.add_row(*cells)
    console.print(t)
    if marks:
        m = max(c.min_change for c in marks.values())
        console.print(f"Significant: `check --baseline`'s history-throughput test both ways (trial-level, spread "
                      f"pooled over modes, run drift allowed): a change beyond {m:.0%} shown at its FAIL level; "
                      "the change beside it is the figure that test decided on, with its 95% interval.",
                      soft_wrap=True, highlight=False)
        for c in marks.values():
            if c.why:
                console.print(f"  {escape(c.mode)}: {c.mark}: {escape(c.why)}", soft_wrap=True, highlight=False)
