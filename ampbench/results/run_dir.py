"""A run folder (its layout: core.store) read and written, and `open_run`.

`open_run` is the one way every later stage (check, report, baseline, history, diagnose, resume)
reads a finished run: run.json validated, its suite re-validated once into a `Suite`, and every
trial file checked to belong to this run and, where the run has a manifest.json, to be the bytes
the runner recorded (results/manifest.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
from pydantic import ValidationError

from ampbench.config.suite import Suite
from ampbench.core.docs import load_doc, write_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import os_reason, refuse_link
from ampbench.core.names import new_run_id
from ampbench.core.store import RunPaths
from ampbench.record.models import RunInfo, Trial
from ampbench.results.manifest import load_manifest, note_record, verify


def load_trial(path: Path, root: Path | None = None) -> Trial:
    return load_doc(path, Trial, "trial file", root=root)


class RunDir(RunPaths):
    """A run folder: its paths (core.store.RunPaths, the one layout) and the raw reads and writes of its files."""

    def write_run(self, info: RunInfo) -> None:
        write_doc(self.run_json, info, root=self.path)
        note_record(self.path, self.run_json)   # the manifest (when the run has one) covers what was written

    def write(self, rel: str, text: str) -> Path:
        """A file of the run folder (report.md, summary.csv, check.json ...), atomically, no link followed."""
        from ampbench.core.files import atomic_write_text

        atomic_write_text(self.path / rel, text, root=self.path)
        return self.path / rel

    def load_run(self) -> RunInfo:
        if not self.path.is_dir():
            raise ResultsError(f"{self.path}: run folder not found")
        return load_doc(self.run_json, RunInfo, "run file", root=self.path)

    def trial_files(self) -> list[Path]:
        if not self.trials_dir.is_dir():
            return []
        if self.trials_dir.is_symlink():
            refuse_link(self.trials_dir)
        return sorted(self.trials_dir.glob("*.json"))

    def load_trial(self, p: Path) -> Trial:
        return load_trial(p, root=self.path)

    def load_trials(self) -> list[Trial]:
        """All trial files, sorted by (mode order in the plan, seed); any bad file raises."""
        trials = [self.load_trial(p) for p in self.trial_files()]
        try:
            modes = list(dict.fromkeys(p.mode for p in self.load_run().plan))
        except ResultsError:
            modes = []
        return sort_trials(trials, modes)

    def finished_keys(self, config_hash: str | None = None, suite: str | None = None) -> set[str]:
        """Trials that need no re-run on --resume: readable, status ok, named for what they hold, and
        (if given) of the same config and suite; anything else is re-run and overwritten."""
        done = set()
        for p in self.trial_files():
            try:
                t = self.load_trial(p)
            except ResultsError:
                continue
            if (t.status == "ok" and p.stem == t.key and (not config_hash or t.config_hash == config_hash)
                    and (not suite or t.suite == suite)):
                done.add(t.key)
        return done


# Suite keys earlier versions wrote into run.json's `config` although nothing read them; dropped on
# read so those runs still open (a suite file that sets one is refused as an unknown key).
RETIRED_CONFIG_KEYS = (("train", "log_every"), ("thresholds", "bootstrap_resamples"))


def migrate_config(config: dict[str, Any]) -> dict[str, Any]:
    """run.json's `config` without the retired keys (a copy; the file itself is never rewritten)."""
    out = dict(config)
    for section, key in RETIRED_CONFIG_KEYS:
        table = out.get(section)
        if isinstance(table, dict) and key in table:
            out[section] = {k: v for k, v in table.items() if k != key}
    return out


def suite_of(info: RunInfo, where: Path | str) -> Suite:
    """The run's effective suite, validated once from run.json's `config`."""
    try:
        return Suite.model_validate(migrate_config(info.config))
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ResultsError(f"{where}: config.{key}: {err['msg']} (run.json written by another version?)") from None


def new_run_dir(parent: Path) -> tuple[RunDir, str]:
    """A fresh run folder under `parent` with an id no concurrent run can take: time, pid and random
    bits, created with mkdir(exist_ok=False) and retried on the (unlikely) collision."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            run_id = new_run_id()
            try:
                (parent / run_id).mkdir()
                return RunDir(parent / run_id), run_id
            except FileExistsError:
                continue
    except OSError as e:
        raise ResultsError(f"{parent}: cannot create a run folder: {os_reason(e)}") from None
    raise ResultsError(f"{parent}: could not find a free run id")


@contextlib.contextmanager
def run_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on a run folder while trials are written into it: a second `run
    --resume` of the same folder is refused instead of re-running the same trials. The lock file
    is never a symlink (filelock would open whatever it points to)."""
    lock = RunPaths(path).lock_path
    refuse_link(lock)
    if lock.exists() and not lock.is_file():
        raise ResultsError(f"{lock}: not a regular file; refusing to use it as the run's lock")
    try:
        with filelock.FileLock(lock, timeout=0):
            yield
    except filelock.Timeout:
        raise ResultsError(f"{path}: another ampbench process is writing this run folder "
                           "(it holds its .lock); wait for it to finish") from None
    except OSError as e:
        raise ResultsError(f"{path}: cannot lock the run folder: {os_reason(e)}") from None


def check_belongs(path: Path, trial: Trial, info: RunInfo) -> None:
    """Refuse a trial file copied in from another suite, renamed, or of another configuration."""
    if trial.suite != info.suite:
        raise ResultsError(f"{path}: a trial of suite {trial.suite!r} in a {info.suite!r} run folder; move it out")
    if path.stem != trial.key:
        raise ResultsError(f"{path}: holds trial {trial.key!r} but is named {path.stem!r}; rename or remove it")
    if trial.config_hash and info.config_hash and trial.config_hash != info.config_hash:
        raise ResultsError(f"{path}: config hash {trial.config_hash} differs from the run's {info.config_hash}: "
                           "a trial from another configuration; move it out or re-run it")


@dataclass(frozen=True)
class OpenRun:
    """A validated run folder: its record, its suite, and its trials in plan order."""

    dir: RunDir
    info: RunInfo
    suite: Suite
    trials: list[Trial]

    @property
    def path(self) -> Path:
        return self.dir.path


def open_run(path: str | Path) -> OpenRun:
    """run.json, the effective suite and every trial file, refusing files that belong elsewhere."""
    rd = RunDir(path)
    info = rd.load_run()
    suite = suite_of(info, rd.run_json)
    unknown = sorted({p.mode for p in info.plan} - {m.name for m in suite.modes})
    if unknown:
        raise ResultsError(f"{rd.run_json}: plan names mode(s) {unknown} that its config does not define")
    files = rd.trial_files()
    digests = load_manifest(rd.path)
    if digests is not None:   # records changed after the run wrote them are refused, never judged
        verify(rd.path, digests, files)
    trials = []
    for p in files:
        t = rd.load_trial(p)
        check_belongs(p, t, info)
        trials.append(t)
    return OpenRun(dir=rd, info=info, suite=suite, trials=sort_trials(trials, [m.name for m in suite.modes]))


def sort_trials(trials: list[Trial], modes: list[str]) -> list[Trial]:
    """The one trial order: modes as listed (the suite's, or the plan's), then seed."""
    order = {m: i for i, m in enumerate(modes)}
    return sorted(trials, key=lambda t: (order.get(t.mode, len(order)), t.mode, t.seed))
