"""The store's layout: the one place the names of a run folder's files, and the default locations of
runs, baselines and history, are spelled.  Paths only: nothing here reads or writes a file.

Both stacks need the layout (the run side writes trials, logs and numerics dumps where the analysis
side reads them), so it lives at the bottom: `results.RunDir` adds the validated reads and atomic
writes on top of `RunPaths`, the worker and the launcher ask `RunPaths.of_trial_file` instead of
re-deriving the folder from a trial file's path.

```
<runs>/<suite>/<run-id>/          <runs>: results/runs by default (`--out`)
  run.json  trials/<key>.json  logs/<key>.log  logs/<key>.ranks/  specs/<key>.json  numerics/<key>/
  summary.csv  check.json  check-vs-<baseline>.json  report.md  report.html  plots/
  diagnose/<mode>/ (a short run of its own)  diagnosis.json  diagnosis.md  .lock
  probe.json  attempts/<mode>/bs<batch>/ (each a run folder)    in a `<run-id>-probe` folder
```
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

RUNS_DIR = Path("results/runs")            # where `ampbench run` and `ampbench probe` create run folders
BASELINES_DIR = Path("results/baselines")  # <device-slug>/<suite>.json, committed by nightly CI
HISTORY_DIR = Path("results/history")      # <suite>.jsonl, one line per nightly run
ACCEPTED_SUFFIX = ".accepted.json"         # <suite>.accepted.json beside <suite>.jsonl: accepted new levels

RUN_JSON = "run.json"
TRIALS = "trials"
OUTPUTS = "outputs"   # a command trial's {out} folders, one per trial key
CHECK_JSON = "check.json"
PROBE_JSON = "probe.json"
PROBE_TAG = "probe"                        # a probe's folder: <run-id>-probe, beside the runs
REPORT = "report"                          # report.md / report.html (several runs: comparison.md)
COMPARISON = "comparison"
PLOTS = "plots"


def lock_of(path: Path) -> Path:
    """The lock file that serialises read-modify-write of a shared file (a history file and its accepts, a run
    folder's manifest.json): `.<name>.lock` beside it."""
    return Path(path).with_name(f".{Path(path).name}.lock")


def trial_key(mode: str, seed: int) -> str:
    """A trial's name in its run folder (file stems of trials/, logs/, specs/, numerics/)."""
    return f"{mode}__seed{seed}"


class RunPaths:
    """Where each file of one run folder lives."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def of_trial_file(cls, trial_file: Path) -> RunPaths | None:
        """The run folder a trial file sits in (<run>/trials/<key>.json); None for a file elsewhere
        (a worker started by hand, a test writing a trial to a scratch path)."""
        p = Path(trial_file)
        return cls(p.parent.parent) if p.parent.name == TRIALS else None

    @staticmethod
    def output_dir_of(trial_file: Path) -> Path:
        """A command trial's `{out}` folder, <run>/outputs/<key>, beside its <run>/trials/<key>.json (for a
        trial file elsewhere, the same place relative to it)."""
        p = Path(trial_file)
        return p.parent.parent / OUTPUTS / p.stem

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def trials_dir(self) -> Path:
        return self.path / TRIALS

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    @property
    def specs_dir(self) -> Path:
        return self.path / "specs"

    @property
    def plots_dir(self) -> Path:
        return self.path / PLOTS

    @property
    def numerics_dir(self) -> Path:
        return self.path / "numerics"

    def trial_path(self, mode: str, seed: int) -> Path:
        return self.trial_file(trial_key(mode, seed))

    def trial_file(self, key: str) -> Path:
        return self.trials_dir / f"{key}.json"

    def log_path(self, mode: str, seed: int) -> Path:
        return self.logs_dir / f"{trial_key(mode, seed)}.log"

    @property
    def array_log(self) -> Path:
        """An array job's own output (Slurm's `%A_%a`: array id, task); each trial's goes to its own log."""
        return self.logs_dir / "slurm-array-%A_%a.log"

    def spec_path(self, mode: str, seed: int) -> Path:
        return self.specs_dir / f"{trial_key(mode, seed)}.json"

    def ranks_dir(self, mode: str, seed: int) -> Path:
        return self.logs_dir / f"{trial_key(mode, seed)}.ranks"

    def numerics_path(self, key: str, rank: int = 0) -> Path:
        """A trial's numerics dumps; data-parallel rank r > 0 beside it (Paddle names the file after the
        device only, so ranks sharing a folder would interleave their lines)."""
        return self.numerics_dir / (key + (f".rank{rank}" if rank else ""))

    def diagnose_dir(self, mode: str) -> Path:
        """`ampbench diagnose`'s own short run of one mode (its trials, logs and dumps)."""
        return self.path / "diagnose" / mode

    def attempt_dir(self, mode: str, batch: int) -> Path:
        """One `ampbench probe` attempt: a run folder of its own inside the probe's."""
        return self.path / "attempts" / mode / f"bs{batch}"

    @property
    def check_path(self) -> Path:
        return self.path / CHECK_JSON

    def check_vs_path(self, baseline_name: str) -> Path:
        """A check against a baseline: its own file, so it never replaces the run's check.json."""
        return self.path / f"check-vs-{baseline_name}.json"

    def check_paths(self) -> list[Path]:
        """check.json and every check-vs-*.json that exist as regular files (no link)."""
        found = [self.check_path, *sorted(self.path.glob("check-vs-*.json"))]
        return [p for p in found if p.is_file() and not p.is_symlink()]

    def latest_check_path(self) -> Path:
        """The verdict of record: the newest of check.json (the run's own check) and check-vs-*.json (each
        check against a baseline, which never replaces check.json); check.json when none exists."""
        return newest(self.check_paths(), prefer=self.check_path) or self.check_path

    def report_path(self, ext: str = ".md", several: bool = False) -> Path:
        return self.path / ((COMPARISON if several else REPORT) + ext)

    @property
    def summary_csv(self) -> Path:
        return self.path / "summary.csv"

    @property
    def probe_json(self) -> Path:
        return self.path / PROBE_JSON

    @property
    def diagnosis_json(self) -> Path:
        return self.path / "diagnosis.json"

    @property
    def diagnosis_md(self) -> Path:
        return self.path / "diagnosis.md"

    @property
    def lock_path(self) -> Path:
        return self.path / ".lock"


def newest(paths: Iterable[Path], prefer: Path | None = None) -> Path | None:
    """The one "newest X" rule: the latest modification time; on a tie the one that is not `prefer`
    (a check against a baseline written in the same instant as check.json is the newer verdict)."""
    found = list(paths)
    return max(found, key=lambda p: (p.stat().st_mtime_ns, p != prefer)) if found else None


def probe_folders(suite_dir: Path) -> list[Path]:
    """Every probe folder (one holding probe.json, no link) of one suite's folder, newest first by name
    (run ids start with the local start time)."""
    if not Path(suite_dir).is_dir():
        return []
    found = [p.parent for p in Path(suite_dir).glob(f"*/{PROBE_JSON}")]
    return sorted((f for f in found if not f.is_symlink() and not (f / PROBE_JSON).is_symlink()),
                  key=lambda f: f.name, reverse=True)


__all__ = ["BASELINES_DIR", "HISTORY_DIR", "PROBE_TAG", "RUNS_DIR", "RunPaths", "newest", "probe_folders", "trial_key"]
