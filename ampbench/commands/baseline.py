"""`ampbench baseline save|path`: the compact baseline nightly CI commits, and where it lives.

A baseline's place is keyed by device and suite (`<dir>/<device-slug>/<suite>.json`, core.store's
BASELINES_DIR by default): `path` says it for a finished run folder (the device its trials recorded)
or for a suite file before a run (this machine's device, as its trials will record it), so scripts
ask ampbench instead of re-deriving the key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ampbench.core.names import device_slug
from ampbench.core.store import BASELINES_DIR
from ampbench.results.baselines import save_baseline
from ampbench.results.run_dir import RunDir

__all__ = ["baseline_path", "save"]


def save(run_dir: Path, output: Path | None, warn: Callable[[str], None]) -> Path:
    return save_baseline(run_dir, output, warn=warn)


def baseline_path(target: Path, folder: Path = BASELINES_DIR) -> Path:
    """<folder>/<device-slug>/<suite>.json for a run folder (its ok trials' device; `unknown` without a
    trial) or a suite file (this machine's device)."""
    if Path(target).is_dir():
        rd = RunDir(target)
        info = rd.load_run()
        trials = rd.load_trials()
        ok = [t for t in trials if t.status == "ok"] or trials
        return Path(folder) / (device_slug(ok[0].env) if ok else "unknown") / f"{info.suite}.json"
    from ampbench.trackers.env import environment
    from ampbench.workloads.suites import load_suite

    return Path(folder) / device_slug(environment()) / f"{load_suite(Path(target)).suite.suite.name}.json"
