"""Baselines for `check --baseline`: a compact file of raw samples, or a previous run folder.

A baseline keeps, per mode and seed, the raw measured step times and samples per step (so every
statistic is recomputed from raw samples, as pytest-benchmark does), the final metric and the
peak memory.  `ampbench baseline save RUN_DIR` writes one per device and suite
(results/baselines/<device-slug>/<suite>.json), which nightly CI commits.  The same compact
per-trial view (`CompactTrial`) is what the checker uses for the current run, so a baseline file
and a run folder are judged by identical code.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ampbench.config import REFERENCE_MODE, Suite
from ampbench.core.docs import VersionedDoc, load_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, check_output, safe_name
from ampbench.core.json_read import read_json
from ampbench.core.names import (
    device_slug,  # one definition, shared with nightly.sh
    utc_now,
)
from ampbench.core.store import BASELINES_DIR, RunPaths
from ampbench.record.models import RUN_SCHEMA, Interference, RunInfo, Trial
from ampbench.record.rates import rates_from
from ampbench.results.run_dir import open_run

BASELINE_SCHEMA = "ampbench.baseline/1"
DEFAULT_BASELINE_DIR = BASELINES_DIR


class CompactTrial(BaseModel):
    """What a verdict needs from one trial; built from a Trial or read from a baseline file."""

    model_config = ConfigDict(extra="allow")
    mode: str
    """The trial's mode."""
    seed: int
    """The trial's seed."""
    status: str = "ok"
    """The trial's status."""
    step_time_s: list[float] = []
    """Measured (non-warm-up) steps only."""
    samples: int | list[int] = 0
    """Per measured step; one int when constant."""
    metric: float | None = None
    """The trial's primary metric."""
    peak_bytes: int = 0
    """The peak memory a mode is judged on (Trial.peak_memory())."""
    memory_source: str = "none"
    """Where that peak comes from: `cuda`, `host`, `rss`, `none`."""
    amp_active: bool = False
    """AMP really ran."""
    batch_size: int = 0
    """Micro-batch per device."""
    interference: Interference | None = None
    """CPU share and GPU evidence (interference rules)"""
    cpu_count: int = 0
    """Cores of the machine (judges how saturated it was)"""
    node: str = ""
    """Where it ran (node_of); "" in files written before it was kept."""

    def rates(self) -> np.ndarray:
        """Samples per second of each measured step (the same definition as Trial.step_rates)."""
        return rates_from(self.step_time_s, self.samples)


class Baseline(VersionedDoc):
    SCHEMA: ClassVar[str] = BASELINE_SCHEMA
    schema_: str = Field(BASELINE_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.baseline/1`."""
    suite: str
    """The suite."""
    profile: str = "default"
    """The profile."""
    config_hash: str = ""
    """The config hash a compared run must match (else `--allow-mismatch`)."""
    device: str = "unknown"
    """A slug of the device name (a baseline is kept per device)."""
    device_name: str = ""
    """The device's name."""
    paddle: str = ""
    """Paddle's version."""
    metric: str = ""
    """The primary metric."""
    metric_goal: str = "max"
    """`max` or `min`."""
    created: str = ""
    """When it was saved (UTC)."""
    source: str = ""
    """The run folder it came from."""
    modes: dict[str, list[CompactTrial]] = {}
    """Mode -> its compact trials; raw per-step times are kept so every statistic is recomputed from samples."""
    path: str = Field("", exclude=True)
    """Where it was loaded from (not saved)"""

    def trials(self, mode: str, ok_only: bool = True) -> list[CompactTrial]:
        return [t for t in self.modes.get(mode, []) if t.status == "ok" or not ok_only]

    def nodes(self) -> set[str]:
        """The nodes its ok trials ran on (empty for a file written before they were kept)."""
        return {t.node for ts in self.modes.values() for t in ts if t.status == "ok" and t.node}


# ---------------------------------------------------------------- trial -> compact view


def node_of(t: Trial) -> str:
    """Where a trial ran: Slurm's node name when it ran as a job (two slurmd on one host are two nodes), else
    its host; "" when neither was recorded."""
    return (t.slurm.node if t.slurm is not None and t.slurm.node else "") or t.host


def compact(trial: Trial, metric: str) -> CompactTrial:
    """The compact view of a trial (raw measured step times kept, so any statistic can be redone)."""
    steps = trial.measured_steps()
    samples = trial.step_samples()
    peak, source = trial.peak_memory()
    value = trial.metrics.get(metric)
    share = trial.interference.cpu_share if trial.interference and trial.interference.cpu_share else None
    interference = (trial.interference or Interference()).model_copy(
        update={"cpu_share": share if share is not None else trial.cpu_share()})
    return CompactTrial(
        mode=trial.mode, seed=trial.seed, status=trial.status, step_time_s=[float(s.time_s) for s in steps],
        samples=samples[0] if samples and len(set(samples)) == 1 else samples,
        metric=None if value is None else float(value), peak_bytes=peak, memory_source=source,
        amp_active=trial.amp.active, batch_size=trial.batch_size, interference=interference,
        cpu_count=trial.env.cpu_count, node=node_of(trial),
    )


def read_run(run_dir: Path) -> tuple[RunInfo, Suite, list[Trial]]:
    """run.json, the effective suite and every trial file (see `ampbench.results.open_run`)."""
    run = open_run(run_dir)
    return run.info, run.suite, run.trials


def from_run(run_dir: Path) -> Baseline:
    """A baseline built in memory from a previous run folder (its trials as they are)."""
    info, suite, trials = read_run(Path(run_dir))
    return from_trials(info, suite, trials, source=str(run_dir))


def from_trials(info: RunInfo, suite: Suite, trials: list[Trial], source: str = "") -> Baseline:
    meta = suite.suite
    env = next((t.env for t in trials if t.status == "ok"), trials[0].env if trials else info.env)
    modes: dict[str, list[CompactTrial]] = {}
    for t in trials:
        modes.setdefault(t.mode, []).append(compact(t, meta.metric))
    return Baseline(
        suite=info.suite, profile=info.profile, config_hash=info.config_hash, device=device_slug(env),
        device_name=env.device_name or env.device, paddle=env.paddle, metric=meta.metric,
        metric_goal=meta.metric_goal, created=utc_now(),
        source=source, modes=modes,
    )


# ---------------------------------------------------------------- files


STORED_DIGITS = 6                 # significant digits of a baseline's step times
STORED_REL_ERROR = 5 * 10.0 ** -STORED_DIGITS  # so a run against its own baseline differs by up to this much


def _round(x: float) -> float:
    return float(f"{x:.{STORED_DIGITS}g}") if math.isfinite(x) else x


def dumps(b: Baseline) -> str:
    """Indented JSON with number lists kept on one line (small, diff-able file)."""
    data = b.model_dump(mode="json", by_alias=True)
    for trials in data["modes"].values():
        for t in trials:
            t["step_time_s"] = [_round(x) for x in t["step_time_s"]]
    text = json.dumps(data, indent=1)
    return re.sub(r"\[\s*([-0-9.eE+,\s]*?)\s*\]",
                  lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",") if v.strip()) + "]", text) + "\n"


def save_baseline(run_dir: Path, output: Path | None = None,
                  warn: Callable[[str], None] | None = None) -> Path:
    """Write the compact baseline of a run; default results/baselines/<device-slug>/<suite>.json.
    `warn` hears why the baseline may not be what nightly GPU CI should compare against (a CPU run)."""
    if output is not None:
        check_output(Path(output), [RunPaths(run_dir).run_json], allow_records=True, kinds=(".json",))
    b = from_run(Path(run_dir))
    if not any(b.trials(m) for m in b.modes):
        raise ResultsError(f"{run_dir}: no trial finished ok; nothing to save as a baseline")
    if REFERENCE_MODE not in b.modes or not b.trials(REFERENCE_MODE):
        raise ResultsError(f"{run_dir}: no ok '{REFERENCE_MODE}' trial; a baseline needs the reference mode")
    path = Path(output) if output else \
        DEFAULT_BASELINE_DIR / safe_name(b.device, "device") / f"{safe_name(b.suite, 'suite')}.json"
    if warn is not None and b.device == "cpu":
        warn(f"{run_dir} ran on {b.device}: AMP is inactive on a CPU, so this baseline holds FP32 numbers for every "
             "mode; nightly GPU CI should compare against a baseline saved from a GPU run")
    atomic_write_text(path, dumps(b))
    return path


def read_baseline_file(path: Path) -> Baseline:
    return load_doc(path, Baseline, "baseline file")


def load_baseline(path: Path, suite: str | None = None, device: str | None = None) -> Baseline:
    """A baseline file, a previous run folder (or its run.json), or a folder of baseline files.

    In a folder of baselines (e.g. results/baselines) the one for `suite` is picked, preferring
    `device` (a slug) when several devices have one.
    """
    path = Path(path)
    if path.is_file():
        data = read_json(path, "baseline file")
        if isinstance(data, dict) and data.get("schema") == RUN_SCHEMA:
            return _at(from_run(path.parent), path.parent)
        return _at(read_baseline_file(path), path)
    if not path.is_dir():
        raise ResultsError(f"{path}: baseline not found (give a baseline JSON, a folder of them, or a run folder)")
    if RunPaths(path).run_json.is_file():
        return _at(from_run(path), path)
    found: list[tuple[Path, Baseline]] = []
    for p in sorted(path.rglob("*.json")):
        data = read_json(p, "baseline file")
        if isinstance(data, dict) and data.get("schema") == BASELINE_SCHEMA and (suite is None or data.get("suite") == suite):
            found.append((p, read_baseline_file(p)))
    if device and len(found) > 1:
        found = [f for f in found if f[1].device == device] or found
    if not found:
        raise ResultsError(f"{path}: no baseline for suite {suite!r} in this folder "
                           f"(save one with `ampbench baseline save RUN_DIR`)")
    if len(found) > 1:
        names = ", ".join(str(p) for p, _ in found)
        raise ResultsError(f"{path}: several baselines match suite {suite!r} ({names}); pass one file")
    return _at(found[0][1], found[0][0])


def _at(b: Baseline, path: Path) -> Baseline:
    b.path = str(path)
    return b


def describe(b: Baseline) -> dict[str, Any]:
    """The identity fields compared before a history check."""
    return {"suite": b.suite, "config_hash": b.config_hash, "device": b.device, "profile": b.profile}
