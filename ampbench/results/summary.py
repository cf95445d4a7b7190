"""summary.csv: one flat row per trial, for spreadsheets and pandas."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ampbench.core.files import atomic_write_text, last_line
from ampbench.core.records import Trial
from ampbench.core.store import RunPaths
from ampbench.results.run_dir import RunDir

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: Any) -> Any:
    """A cell a spreadsheet will not run: text starting like a formula (= + - @ tab CR) gets a leading
    apostrophe (OWASP's advice); numbers are left alone."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


def csv_safe_frame(df: Any) -> Any:
    """`csv_safe` on every text column of a DataFrame (a copy)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = out[col].map(csv_safe)
    out.columns = [csv_safe(str(c)) for c in out.columns]
    return out


def summary_rows(trials: list[Trial]) -> list[dict[str, Any]]:
    """One flat row per trial (the summary.csv columns)."""
    rows = []
    for t in trials:
        row: dict[str, Any] = {
            "suite": t.suite, "mode": t.mode, "seed": t.seed, "profile": t.profile, "status": t.status,
            "batch_size": t.batch_size, "samples_per_s": t.throughput.samples_per_s,
            "step_time_median_s": t.throughput.step_time_median_s,
            "step_time_p90_s": t.throughput.step_time_p90_s,
            "measured_steps": t.throughput.measured_steps,
            "memory_source": t.memory.source, "peak_allocated_bytes": t.memory.peak_allocated_bytes,
            "peak_reserved_bytes": t.memory.peak_reserved_bytes, "rss_peak_bytes": t.memory.rss_peak_bytes,
            "amp_requested": t.amp.requested, "amp_active": t.amp.active, "amp_level": t.amp.level,
            "amp_dtype": t.amp.dtype, "skipped_steps": t.skipped_steps, "nonfinite_losses": t.nonfinite_losses,
            "final_loss": next((s.loss for s in reversed(t.steps) if s.loss is not None), None),
            "wall_s": t.wall_s, "error": last_line(t.error, 200),
        }
        for k, v in t.metrics.items():
            row[f"metric_{k}"] = v
        rows.append(row)
    return rows


def write_summary_csv(run: RunDir, trials: list[Trial]) -> Path:
    rows = summary_rows(trials)
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    buf = io.StringIO()
    cols = [csv_safe(c) for c in cols]
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows({csv_safe(k): csv_safe(v) for k, v in r.items()} for r in rows)
    p = run.summary_csv
    atomic_write_text(p, buf.getvalue(), root=run.path)
    return p


def load_summary(run_path: str | Path):  # -> pandas.DataFrame
    """summary.csv as a DataFrame (pandas imported lazily: the CLI must start fast)."""
    import pandas as pd

    return pd.read_csv(RunPaths(run_path).summary_csv)
