"""`ampbench compare RUN [OTHER]`: two runs (or a run and its predecessor) side by side per mode, the
columns and sort of pytest-benchmark's comparison table.

One row per run and mode over the trials' figures (each trial's median samples/s, judge.measure):
Min, Max, Mean, StdDev, Median, IQR, Trials, the mode's figure (geometric mean: the number every other
view shows) and one change against the other run: the figure `check --baseline`'s significance test
decided on, with its interval, beside the mark (`compare_doc` holds the same as data for `--format json`
and the pull-request comment).  pytest-benchmark sorts by `min` of times
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
from ampbench.core.files import shown_path
from ampbench.judge import measure
from ampbench.judge.run_change import Change, changes
from ampbench.report import fmt
from ampbench.report.console import cell_text, table_box
from ampbench.results.compare_file import ComparedRun, CompareFile, CompareRow, Significance
from ampbench.results.previous import previous_run
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
    change: float | None  # vs the same mode in the other run (this / other - 1); None: the other run's row,
    # or a mode the other run has no ok trial of
    suite: str = ""
    config_hash: str = ""
    current: bool = True  # a row of the run compared (False: of the other run, the reference)
    emulated: bool = False   # the mode's AMP was emulated: its samples/s is the emulation's, not an AMP timing


def _rows(run: OpenRun, ref: dict[str, float] | None) -> list[Row]:
    """One row per mode with ok trials; `ref` (the other run's figures) None: these are the other run's rows."""
    out = []
    for m in run.suite.modes:
        ok = [t for t in run.trials if t.mode == m.name and t.status == "ok"]
        st = measure.mode_stats([t.step_rates() for t in ok])
        v = np.array(st.per_trial, float)
        if not len(v) or st.samples_per_s is None:
            continue
        q1, q3 = np.percentile(v, [25, 75])
        base = (ref or {}).get(m.name)
        emulated = any(t.amp.emulated for t in ok)
        mark = " (emulated: not an AMP timing)" if emulated else ""
        out.append(Row(f"{m.name}{mark} ({run.info.run_id})", run.info.run_id, m.name, float(v.min()), float(v.max()),
                       float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else float("nan"), float(np.median(v)),
                       float(q3 - q1), len(v), st.samples_per_s,
                       None if base is None else st.samples_per_s / base - 1, run.info.suite, run.info.config_hash,
                       current=ref is not None, emulated=emulated))
    return out


def compare_rows(current: Path | OpenRun, other: Path | OpenRun, sort: str = "name") -> list[Row]:
    if sort not in COLUMNS:
        raise ConfigError("--sort", sort, f"expected one of {', '.join(COLUMNS)}")
    cur, oth = (r if isinstance(r, OpenRun) else open_run(r) for r in (current, other))
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


def compare_doc(rows: list[Row], marks: dict[str, Change] | None, current: OpenRun, other: OpenRun) -> CompareFile:
    """The two-run comparison as data (`--format json`, the pull-request comment): the table's rows, each
    current-run row with its mode's significance."""
    out = []
    for r in rows:
        sig = None
        if r.current and marks is not None:
            c = marks.get(r.mode)
            sig = Significance(mark="not compared") if c is None else Significance(
                mark=c.mark, change=c.change, ci_low=None if c.ci_low is None else c.ci_low - 1,
                ci_high=None if c.ci_high is None else c.ci_high - 1, min_change=c.min_change, why=c.why)
        out.append(CompareRow(mode=r.mode, run_id=r.run_id, role="current" if r.current else "other",
                              min=r.min, max=r.max, mean=r.mean, stddev=None if np.isnan(r.stddev) else r.stddev,
                              median=r.median, iqr=r.iqr, trials=r.trials, samples_per_s=r.samples_per_s,
                              change=r.change, significance=sig, emulated=r.emulated))
    return CompareFile(current=_ref(current), other=_ref(other), warning=differences(rows) or "",
                       modes=[m.name for m in current.suite.modes], rows=out)



def two_run_doc(run_dirs: list[Path], sort: str = "name") -> CompareFile:
    """RUN [OTHER] (OTHER: the previous run beside RUN) compared, each change judged (judge.run_change): what
    `compare --format table|json` shows and pr-check comments."""
    cur = open_run(run_dirs[0])
    oth = open_run(run_dirs[1] if len(run_dirs) == 2 else previous_run(run_dirs[0]))
    return compare_doc(compare_rows(cur, oth, sort), changes(cur, oth), cur, oth)


def _ref(run: OpenRun) -> ComparedRun:
    return ComparedRun(run_id=run.info.run_id, run_dir=shown_path(run.path), suite=run.info.suite,
                       config_hash=run.info.config_hash)


MARK_TEXT = {"slower": "yes, slower", "faster": "yes, faster", "disturbed": "no (disturbed)",
             "not significant": "no", "not compared": "not compared"}


def change_text(row: CompareRow) -> str:
    """The row's one change: the figure the significance test decided on with its 95% interval; the
    geometric means' change where the test decided on none (too few trials); blank on the other run."""
    s = row.significance
    if row.change is None:   # the other run's row, or a mode the other run has no ok trial of
        return "" if row.role == "other" else "no ok trial in the other run"
    if s is None or s.change is None:
        return fmt.pct(row.change)
    ci = f" [{fmt.pct(s.ci_low)}, {fmt.pct(s.ci_high)}]" if s.ci_low is not None and s.ci_high is not None else ""
    return f"{fmt.pct(s.change)}{ci}"


def significance_text(row: CompareRow) -> str:
    """The Significant cell: the mark alone (its number is the Change cell's)."""
    if row.role == "other":
        return "(other)"
    return MARK_TEXT[row.significance.mark] if row.significance is not None else ""


CHANGE_NOTE = ("Change: the current run against the other, in the figure the significance test decides on (each "
               "trial's fast floor where every trial has one, else its median step rate), with its 95% interval; "
               "Samples/s is each mode's geometric mean of the trials' medians.")


def significance_note(doc: CompareFile) -> str | None:
    """The one line under the table saying what "significant" means (None when nothing was judged)."""
    marks = doc.marks()
    if not marks:
        return None
    m = max(s.min_change for s in marks.values())
    return (f"Significant: `check --baseline`'s history-throughput test both ways (trial-level, spread pooled over "
            f"modes, run drift allowed): a change beyond {m:.0%} shown at its FAIL level.")


def print_compare(doc: CompareFile, console: Console) -> None:
    """The table (ASCII in a pipe): one change per row, and its significance when judged; below it what the
    change and "significant" mean, and one line per mode not significant for a reason worth knowing."""
    if doc.warning:
        console.print(f"[yellow]warning:[/] {escape(doc.warning)}", soft_wrap=True)
    t = Table(title="samples/s per trial (each trial's median step rate)", title_justify="left", box=table_box(console))
    judged = bool(doc.marks())
    cols = ["Name", "Min", "Max", "Mean", "StdDev", "Median", "IQR", "Trials", "Samples/s (geo. mean)",
            "Change [95% CI]" if judged else "Change"]
    for col in cols + (["Significant"] if judged else []):
        t.add_column(col, justify="left" if col in ("Name", "Significant") else "right")
    for r in doc.rows:
        cells = [escape(f"{r.mode} ({r.run_id})"), *(fmt.num(x) for x in (r.min, r.max, r.mean)),
                 "-" if r.stddev is None else fmt.num(r.stddev), fmt.num(r.median), fmt.num(r.iqr),
                 str(r.trials), fmt.num(r.samples_per_s), change_text(r) if r.role == "current" else "(other)"]
        if judged:
            cells.append("" if r.role == "other" else escape(significance_text(r)))
        t.add_row(*(cell_text(c, console) for c in cells))
    console.print(t)
    if (note := significance_note(doc)) is not None:
        console.print(f"{CHANGE_NOTE} {note}", soft_wrap=True, highlight=False, markup=False)
        for mode, s in doc.marks().items():
            if s.why:
                console.print(f"  {escape(mode)}: {s.mark}: {escape(s.why)}", soft_wrap=True, highlight=False)
