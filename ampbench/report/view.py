"""One run folder as the report sees it: validated through `open_run`, plus its optional side files.

Loading goes through each file's own loader (trials and suite: `open_run`, which refuses a trial copied in
from another suite; check.json, probe.json, diagnosis.json: their loaders), so the report never reads
a file the checker would refuse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ampbench.config import Suite
from ampbench.core.names import slug
from ampbench.judge.recorded import recorded_verdict
from ampbench.judge.summary import summarize_run
from ampbench.record.models import RunInfo, Trial
from ampbench.report import fmt
from ampbench.results.diagnosis_file import DiagnosisFile, load_diagnosis
from ampbench.results.history import RunSummary
from ampbench.results.probe_file import ProbeFile, run_probe
from ampbench.results.run_dir import OpenRun, RunDir, open_run
from ampbench.results.verdicts import CheckReport


@dataclass
class RunView:
    """One loaded run folder and what the report derives from it."""

    run: RunDir
    info: RunInfo
    suite: Suite
    trials: list[Trial]
    check: CheckReport | None
    summary: RunSummary
    probe: tuple[ProbeFile, Path] | None = None  # probe.json (results.probe_file) and its path
    diagnosis: DiagnosisFile | None = None  # diagnosis.json, None when never diagnosed

    @property
    def fraction(self) -> bool:
        vals = [t.metrics[self.summary.metric] for t in self.trials if self.summary.metric in t.metrics]
        return fmt.is_fraction_metric(vals)

    @property
    def amp_inactive(self) -> bool:
        """Every AMP mode that finished ran in FP32 (CPU), none emulated: plots say so on the image."""
        amp = [m for m in self.summary.modes.values() if m.amp_requested and m.ok]
        return bool(amp) and not any(m.amp_active or m.amp_emulated for m in amp)

    def stepless(self, mode: str) -> bool:
        """The mode errored before any step (a refused inject mode, a program that never started): no trial
        of it ended ok or recorded a step, so nothing of it was measured and no tuning advice applies."""
        ts = [t for t in self.trials if t.mode == mode]
        return bool(ts) and not any(t.status == "ok" or t.steps for t in ts)

    def plot_stamp(self, all_inactive: str) -> str | None:
        """The text stamped on every plot: all AMP modes inactive, which ones ran in FP32, which were emulated
        (their step times and memory are the emulation's)."""
        if self.amp_inactive:
            return all_inactive
        modes = [m for m in self.summary.modes.values() if m.amp_requested and m.ok]
        off = [m.mode for m in modes if not m.amp_active and not m.amp_emulated]
        emulated = [m.mode for m in modes if m.amp_emulated]
        parts = ([f"AMP inactive for {', '.join(off)}: those modes ran in FP32"] if off else []) + \
            ([f"AMP emulated for {', '.join(emulated)}: numerics only, time and memory not AMP's"] if emulated else [])
        return "; ".join(parts) or None


def load_view(path: Path, side_files: bool = True) -> RunView:
    opened = open_run(path)
    return view_of(opened, recorded_verdict(opened), side_files)   # an edited check.json is refused


def view_of(opened: OpenRun, check: CheckReport | None, side_files: bool = True) -> RunView:
    """An opened run with the check the caller holds (`ampbench check --baseline`: the comparison just made)."""
    summary = summarize_run(opened.info, opened.suite, opened.trials, check, str(opened.path))
    probe = run_probe(opened.path, opened.info.suite, opened.info.profile) if side_files else None
    diagnosis = load_diagnosis(opened.path) if side_files else None
    return RunView(opened.dir, opened.info, opened.suite, opened.trials, check, summary, probe, diagnosis)


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
        safe = slug(f"{view.summary.suite}-{view.summary.run_id}")
        prefix = f"{safe}-" if self.multi else ""
        return self.plots_dir / f"{prefix}{name}.png"


def h(level: int, text: str) -> str:
    return "#" * level + " " + text
