"""`ampbench summary RUN...`: several runs side by side as one pandas DataFrame (md, csv or parquet).

One row per (run, mode): trials, ok trials, samples/s (judge/measure.py's definition: the geometric
mean of the ok trials' median per-step rates, as every other surface shows it), peak memory, metric mean and sd over seeds, and the change in samples/s against the same mode in the first
run given.  The frame is the data, the markdown table only a view of it, so csv/parquet carry the
same numbers to a notebook.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_bytes, atomic_write_text, check_output, shown_path
from ampbench.core.store import RunPaths
from ampbench.judge.summary import summarize_modes
from ampbench.report import fmt
from ampbench.results.run_dir import open_run
from ampbench.results.summary import csv_safe_frame, summary_rows

FORMATS = ("md", "csv", "parquet")


def trial_frame(run_dirs: list[Path]) -> Any:  # -> pandas.DataFrame
    """One row per trial of every run (the summary.csv columns plus run_id and the primary metric)."""
    import pandas as pd

    frames = []
    for path in run_dirs:
        run = open_run(path)
        rows = summary_rows(run.trials)
        modes = summarize_modes(run.trials, run.suite.suite.metric, confidence=run.suite.thresholds.confidence)
        for row, t in zip(rows, run.trials):
            row["run_id"] = run.info.run_id
            row["run_dir"] = shown_path(path)
            row["metric"] = t.metrics.get(run.suite.suite.metric)
            row["mode_samples_per_s"] = modes[t.mode].samples_per_s
            row["peak_bytes"] = t.peak_memory()[0] or None
        frames.append(pd.DataFrame(rows, columns=list(rows[0]) if rows else ["run_id", "mode"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_frame(run_dirs: list[Path]) -> Any:  # -> pandas.DataFrame
    """Per (run, mode) aggregates, in the order the runs and modes were given."""
    if not run_dirs:
        raise ResultsError("summary: give at least one run folder")
    df = trial_frame(run_dirs)
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
    first = out[out["run_dir"] == shown_path(run_dirs[0])].set_index(["suite", "mode"])["samples_per_s"]
    ref = out.set_index(["suite", "mode"]).index.map(lambda k: first.get(k, np.nan))
    out["samples_per_s_vs_first"] = out["samples_per_s"].to_numpy() / np.asarray(ref, dtype=float) - 1
    return out


def to_markdown(df: Any) -> str:
    frac = fmt.is_fraction_metric([float(x) for x in df["metric_mean"].dropna()])
    rows = [[fmt.md_code(r.run_id), fmt.md_code(r.suite), fmt.md_code(r.mode), f"{r.ok}/{r.trials}",
             fmt.num(_f(r.samples_per_s)), fmt.pct(_f(r.samples_per_s_vs_first)), fmt.bytes_h(_f(r.peak_bytes)),
             fmt.metric_pm(_f(r.metric_mean), _f(r.metric_sd), frac), str(int(r.skipped_steps or 0))]
            for r in df.itertuples()]
    return fmt.md_table(["Run", "Suite", "Mode", "Trials ok", "Samples/s (median)", "vs first run", "Peak memory",
                         "Metric (mean ± sd)", "Skipped steps"], rows,
                        ["l", "l", "l", "r", "r", "r", "r", "r", "r"]) + "\n"


def _f(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else float(x)


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
    df = compare_frame([Path(p) for p in run_dirs])
    if fmt_name == "parquet":
        import io

        buf = io.BytesIO()
        try:
            df.to_parquet(buf, index=False)
        except ImportError as e:
            raise ResultsError(f"--format parquet needs pyarrow (in the ctr extra; scripts/setup.sh installs it): {e}") from None
        assert output is not None  # refused above
        atomic_write_bytes(Path(output), buf.getvalue())
        return Path(output)
    text = to_markdown(df) if fmt_name == "md" else csv_safe_frame(df).to_csv(index=False)
    if output is None:
        return text
    atomic_write_text(Path(output), text)
    return Path(output)
