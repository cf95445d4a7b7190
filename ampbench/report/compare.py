"""`ampbench summary RUN...`: several runs side by side as one pandas DataFrame (md, csv or parquet).

One row per (run, mode): trials, ok trials, samples/s (judge/measure.py's definition: the geometric
mean of the ok trials' median per-step rates, as every other surface shows it), peak memory, metric mean and sd over seeds, and the change in samples/s against the same mode in the first
run given.  The frame is the data (csv/parquet carry it to a notebook); the markdown table shows the
same per-mode figures (judge/summary.py's `ModeSummary`, the one computation behind the frame's too)
through the field catalog's columns (record/fields.py), headed and formatted as report.md's summary
table shows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ampbench.core.columns import Col
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_bytes, atomic_write_text, check_output, shown_path
from ampbench.core.install import install_hint
from ampbench.core.store import RunPaths
from ampbench.judge.summary import summarize_modes
from ampbench.record import fields
from ampbench.report import fmt
from ampbench.results.history import MODE_COMPUTED, ModeSummary
from ampbench.results.run_dir import OpenRun, open_run
from ampbench.results.summary import csv_safe_frame, summary_rows

FORMATS = ("md", "csv", "parquet")


@dataclass(frozen=True)
class _Run:
    path: Path
    opened: OpenRun
    modes: dict[str, ModeSummary]  # judge/summary.py's, in the order the run's trials name the modes


def _open(run_dirs: list[Path]) -> list[_Run]:
    """The runs with their per-mode figures, every interval at the first run's level (one table header)."""
    opened = [open_run(p) for p in run_dirs]
    conf = opened[0].suite.thresholds.confidence if opened else 0.95
    return [_Run(Path(p), o, summarize_modes(o.trials, o.suite.suite.metric, confidence=conf))
            for p, o in zip(run_dirs, opened)]


def trial_frame(run_dirs: list[Path]) -> Any:  # -> pandas.DataFrame
    """One row per trial of every run (the summary.csv columns plus run_id and the primary metric)."""
    return _trial_frame(_open(run_dirs))


def _trial_frame(runs: list[_Run]) -> Any:
    import pandas as pd

    frames = []
    for r in runs:
        run = r.opened
        rows = summary_rows(run.trials)
        for row, t in zip(rows, run.trials):
            row["run_id"] = run.info.run_id
            row["run_dir"] = shown_path(r.path)
            row["metric"] = t.metrics.get(run.suite.suite.metric)
            row["mode_samples_per_s"] = r.modes[t.mode].samples_per_s
            row["peak_bytes"] = t.peak_memory()[0] or None
        frames.append(pd.DataFrame(rows, columns=list(rows[0]) if rows else ["run_id", "mode"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_frame(run_dirs: list[Path]) -> Any:  # -> pandas.DataFrame
    """Per (run, mode) aggregates, in the order the runs and modes were given."""
    if not run_dirs:
        raise ResultsError("summary: give at least one run folder")
    return _compare_frame(_open(run_dirs))


def _compare_frame(runs: list[_Run]) -> Any:
    df = _trial_frame(runs)
    if df.empty:
        raise ResultsError("summary: the run folders hold no trials")
    df["ok"] = df["status"] == "ok"
    ok = df[df["ok"]]
    keys = ["run_dir", "run_id", "suite", "mode"]
    agg = df.groupby(keys, sort=False).agg(trials=("seed", "size"), ok=("ok", "sum"))
    stats = ok.groupby(keys, sort=False).agg(
        samples_per_s=("mode_samples_per_s", "first"), peak_bytes=("peak_bytes", "max"),
        metric_mean=("metric", "mean"), metric_sd=("metric", "std"), skipped_steps=("skipped_steps", "sum"))
    out = agg.join(stats).reset_index()
    first = out[out["run_dir"] == shown_path(runs[0].path)].set_index(["suite", "mode"])["samples_per_s"]
    ref = out.set_index(["suite", "mode"]).index.map(lambda k: first.get(k, np.nan))
    out["samples_per_s_vs_first"] = out["samples_per_s"].to_numpy() / np.asarray(ref, dtype=float) - 1
    return out


@dataclass(frozen=True)
class RunMode:
    """One row of the markdown table: a mode of a run, its figures and its samples/s against the first run."""

    run_id: str
    suite: str
    figures: ModeSummary
    vs_first: float | None


# The table's columns that are no figure of the mode (which run, its trials, the change against the first
# run); the mode's figures are the catalog's (ModeSummary's `Col` markers that show in "compare").
_OWN = (
    fields.Column("run_id", Col("Run", "code", rank=1, shows=("compare",)), lambda r, v: r.run_id),
    fields.Column("suite", Col("Suite", "code", rank=2, shows=("compare",)), lambda r, v: r.suite),
    fields.Column("trials_ok", Col("Trials ok", "markdown", rank=15, shows=("compare",), align="r"),
                  lambda r, v: f"{r.figures.ok}/{r.figures.trials}"),
    fields.Column("vs_first", Col("vs first run", "markdown", rank=35, shows=("compare",), align="r"),
                  lambda r, v: fmt.pct(r.vs_first)),
)


def run_modes(runs: list[_Run]) -> list[RunMode]:
    """Every (run, mode), in the order the runs and modes were given."""
    first = {(runs[0].opened.info.suite, name): m.samples_per_s for name, m in runs[0].modes.items()} if runs else {}
    out = []
    for r in runs:
        suite = r.opened.info.suite
        for name, m in r.modes.items():
            base = first.get((suite, name))
            out.append(RunMode(r.opened.info.run_id, suite, m,
                               m.samples_per_s / base - 1 if m.samples_per_s and base else None))
    return out


def to_markdown(runs: list[_Run]) -> str:
    rows = run_modes(runs)
    metrics = {r.opened.suite.suite.metric for r in runs}
    frac = fmt.is_fraction_metric([x.figures.metric_mean for x in rows if x.figures.metric_mean is not None])
    conf = runs[0].opened.suite.thresholds.confidence if runs else 0.95
    view = fields.View(metrics.pop() if len(metrics) == 1 else "", frac, conf)
    cols = fields.columns("compare", ModeSummary, (*MODE_COMPUTED, *_OWN))
    cells = [[_md_cell(c, x if c in _OWN else x.figures, view) for c in cols] for x in rows]
    return fmt.md_table([c.header(view, fmt.md_text) for c in cols], cells, [c.align for c in cols]) + "\n"


def _md_cell(c: fields.Column, row: Any, view: fields.View) -> str:
    return fmt.md_code(c.value(row, view)) if c.col.kind == "code" else c.text(row, view, fmt.md_text)


def write_summary(run_dirs: list[Path], fmt_name: str = "md", output: Path | None = None) -> str | Path:
    """The comparison as text (md/csv to stdout when no output) or a file; parquet needs an output file."""
    if fmt_name not in FORMATS:
        raise ResultsError(f"--format {fmt_name}: unknown; use one of {', '.join(FORMATS)}")
    if fmt_name == "parquet" and output is None:
        raise ResultsError("--format parquet: give an output file with -o")
    if output is not None:
        check_output(Path(output), [RunPaths(p).run_json for p in run_dirs], kinds=(".md", ".csv", ".parquet", ".txt"))
        if not Path(output).parent.is_dir():
            raise ResultsError(f"{output}: cannot write: the folder {Path(output).parent} does not exist")
    if not run_dirs:
        raise ResultsError("summary: give at least one run folder")
    runs = _open([Path(p) for p in run_dirs])
    df = _compare_frame(runs)
    if fmt_name == "parquet":
        import io

        buf = io.BytesIO()
        try:
            df.to_parquet(buf, index=False)
        except ImportError:   # pandas' own message is five lines of engines: one line names what installs it
            raise ResultsError(f"--format parquet needs pyarrow: {install_hint('bench')}") from None
        assert output is not None  # refused above
        atomic_write_bytes(Path(output), buf.getvalue())
        return Path(output)
    text = to_markdown(runs) if fmt_name == "md" else csv_safe_frame(df).to_csv(index=False)
    if output is None:
        return text
    atomic_write_text(Path(output), text)
    return Path(output)
