"""One run folder as the report sees it: validated through `open_run`, plus its optional side files.

Loading goes through each file's own loader (trials and suite: `open_run`, which refuses a trial copied in
from another suite; check.json, probe.json, diagnosis.json: their loaders), so the report never reads
a file the checker would refuse.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.config import Suite
from ampbench.judge.history import RunSummary, load_check_optional, summarize_run
from ampbench.judge.verdict import CheckReport
from ampbench.report import fmt
from ampbench.results import RunDir, RunInfo, Trial, open_run


@dataclass
class RunView:
    """One loaded run folder and what the report derives from it."""

    run: RunDir
    info: RunInfo
    suite: Suite
    trials: list[Trial]
    check: CheckReport | None
    summary: RunSummary
    probe: tuple[Any, Path] | None = None  # (probe.json as loaded by launch.probe.load_probe, its path)
    diagnosis: Any = None   # diagnosis.json (diagnose.models.load_diagnosis), None when never diagnosed

    @property
    def fraction(self) -> bool:
        vals = [t.metrics[self.summary.metric] for t in self.trials if self.summary.metric in t.metrics]
        return fmt.is_fraction_metric(vals)

    @property
    def amp_inactive(self) -> bool:
        """Every AMP mode that finished ran in FP32 (CPU): plots say so on the image."""
        amp = [m for m in self.summary.modes.values() if m.amp_requested and m.ok]
        return bool(amp) and not any(m.amp_active for m in amp)

    def plot_stamp(self, all_inactive: str) -> str | None:
        """The text stamped on every plot: all AMP modes inactive, or which ones ran in FP32."""
        if self.amp_inactive:
            return all_inactive
        off = [m.mode for m in self.summary.modes.values() if m.amp_requested and m.ok and not m.amp_active]
        return f"AMP inactive for {', '.join(off)}: those modes ran in FP32" if off else None


def load_view(path: Path, side_files: bool = True) -> RunView:
    from ampbench.diagnose.models import load_diagnosis

    opened = open_run(path)
    check = load_check_optional(opened.dir)
    summary = summarize_run(opened.dir, opened.trials, check)
    probe = find_probe(opened.path) if side_files else None
    diagnosis = load_diagnosis(opened.path) if side_files else None
    return RunView(opened.dir, opened.info, opened.suite, opened.trials, check, summary, probe, diagnosis)


def find_probe(run_path: Path) -> tuple[Any, Path] | None:
    """probe.json in the run folder, else the newest probe folder of the same suite beside it
    (`ampbench probe --out` writes <out>/<suite>/<run-id>-probe/, next to the runs)."""
    from ampbench.launch.max_batch import load_probe

    candidates = [run_path, *sorted((p.parent for p in run_path.parent.glob("*-probe/probe.json")), reverse=True)]
    for folder in candidates:
        doc = load_probe(folder)
        if doc is not None:
            return doc, folder / "probe.json"
    return None


@dataclass
class Ctx:
    """Where the report goes and how it links: relative links from the output folder."""

    out_dir: Path
    plots_dir: Path
    multi: bool
    history: bool = False

    def rel(self, path: Path) -> str:
        return Path(os.path.relpath(Path(path).resolve(), self.out_dir.resolve())).as_posix()

    def plot_path(self, view: RunView, name: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{view.summary.suite}-{view.summary.run_id}")
        prefix = f"{safe}-" if self.multi else ""
        return self.plots_dir / f"{prefix}{name}.png"


def h(level: int, text: str) -> str:
    return "#" * level + " " + text
