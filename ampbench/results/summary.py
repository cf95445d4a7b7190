"""summary.csv: one flat row per trial, for spreadsheets and pandas."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ampbench.core.files import atomic_write_text
from ampbench.core.store import RunPaths
from ampbench.record import fields
from ampbench.record.models import Trial
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
    """One flat row per trial: the catalog's csv columns (record/fields.py), then one per metric."""
    return [fields.csv_row(t) for t in trials]


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
