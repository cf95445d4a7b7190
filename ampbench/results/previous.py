"""`--baseline last`: the previous run of the same suite on the same machine and config, found by key.

Runs are stored per suite (results/runs/<suite>/<run id>); the key that makes two runs comparable is
(suite, device slug, config hash), as pytest-benchmark keys its saved runs per machine.  The previous
run is the latest run folder beside this one with the same key that started before it and has at
least one ok trial; unreadable or foreign folders are skipped, never followed through a symlink.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ampbench.core.errors import ResultsError
from ampbench.core.names import device_slug
from ampbench.core.store import RunPaths
from ampbench.record.models import RunInfo
from ampbench.results.run_dir import RunDir, load_trial

LAST = "last"
MAX_CANDIDATES = 10_000  # run folders looked at beside the run (bounded: a huge folder is not walked)


@dataclass(frozen=True)
class RunKey:
    suite: str
    device: str
    config_hash: str

    def describe(self) -> str:
        return f"suite {self.suite!r} on device {self.device!r} with config {self.config_hash}"


def _key(rd: RunDir, info: RunInfo) -> RunKey | None:
    """The run's key from run.json and its first ok trial's device (None: no ok trial)."""
    for p in rd.trial_files():
        try:
            t = load_trial(p)
        except ResultsError:
            continue
        if t.status == "ok":
            return RunKey(info.suite, device_slug(t.env), info.config_hash)
    return None


def previous_run(run_dir: Path) -> Path:
    """The latest earlier run with the same key, or ResultsError naming the key and the folder searched."""
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    info = rd.load_run()
    key = _key(rd, info)
    if key is None:
        raise ResultsError(f"{run_dir}: no ok trial, so it has no machine key to find its previous run by")
    best: tuple[str, str, Path] | None = None
    parent = run_dir.resolve().parent
    for n, cand in enumerate(sorted(parent.iterdir())):
        if n >= MAX_CANDIDATES:
            break
        if cand.is_symlink() or not cand.is_dir() or cand.resolve() == run_dir.resolve():
            continue
        if not RunPaths(cand).run_json.is_file() or RunPaths(cand).run_json.is_symlink():
            continue
        try:
            other = RunDir(cand).load_run()
        except ResultsError:
            continue
        if (other.suite, other.config_hash) != (key.suite, key.config_hash) or not other.started:
            continue
        if not info.started or other.started >= info.started:
            continue
        if _key(RunDir(cand), other) != key:
            continue
        if best is None or (other.started, other.run_id) > best[:2]:
            best = (other.started, other.run_id, cand)
    if best is None:
        raise ResultsError(f"{run_dir}: --baseline last: no earlier run of {key.describe()} in {parent}")
    return best[2]


def resolve_baseline(run_dir: Path, baseline: Path | str | None) -> Path | None:
    """`last` -> the previous run's folder; anything else unchanged."""
    if baseline is not None and str(baseline) == LAST:
        return previous_run(Path(run_dir))
    return None if baseline is None else Path(baseline)
