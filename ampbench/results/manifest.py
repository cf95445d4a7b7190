"""A run folder's manifest.json: the SHA-256 of every record a verdict depends on, as ampbench wrote it.

Trial files: their digests as the runner read them when each trial ended, so a record changed afterwards
(by a later trial's program through `{out}/../..`, or by hand) is refused by `check`, `report` and the
run's own end (exit 2, naming the file) instead of being judged. The runner keeps them in memory while
the run goes on (a program under test can rewrite the file on disk, not the runner's memory), checks
every trial file against them before summary, check and report, and writes manifest.json as each trial
ends. run.json and the check files (check.json, check-vs-*.json): their digests as each was written
(`note_record`, when the run has a manifest); a run.json changed since is refused like a trial file, a
check file changed since is refused where it is read back as the verdict of record (judge.recorded),
never where the run is judged again. Every update of the file holds its lock (core.store.lock_of), so a
check writing beside the runner loses no entry.

A checksum, not a signature: whoever can write the run folder can rewrite manifest.json too. What a
verdict read back rests on is its trials: judge.recorded judges them again. A run folder without
manifest.json (written by an earlier version, or by hand in tests) is read as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_json, folder_id, locked, read_bytes, read_json
from ampbench.core.store import RUN_JSON, TRIALS, lock_of

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "ampbench.manifest/1"


MAX_ENTRIES = 1_000_000   # trial files and records of one run folder


def file_digest(path: Path, root: Path, what: str = "trial file") -> str:
    return hashlib.sha256(read_bytes(path, what, root=root)).hexdigest()


def is_trial_entry(rel: str) -> bool:
    """A manifest entry of a trial file (trials/<key>.json), as opposed to a record (run.json, a check file)."""
    return Path(rel).parts[:1] == (TRIALS,)


def load_manifest(run_path: Path) -> dict[str, str] | None:
    """{path relative to the run folder: sha256}, or None when the run has no manifest."""
    path = Path(run_path) / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    doc: Any = read_json(path, "manifest", root=Path(run_path))
    files = doc.get("files") if isinstance(doc, dict) and doc.get("schema") == MANIFEST_SCHEMA else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ResultsError(f"{path}: not an ampbench manifest (schema {MANIFEST_SCHEMA!r} with `files`)")
    if len(files) > MAX_ENTRIES:
        raise ResultsError(f"{path}: {len(files):,} entries, over the {MAX_ENTRIES:,} a run folder can hold")
    return dict(files)


def _save(run_path: Path, digests: dict[str, str], root_id: Any = None) -> None:
    atomic_write_json(Path(run_path) / MANIFEST, {"schema": MANIFEST_SCHEMA, "files": dict(sorted(digests.items()))},
                      root=Path(run_path), root_id=root_id)


def note_record(run_path: Path, path: Path) -> None:
    """A record ampbench just wrote into a run folder (run.json, a check file) joins its manifest with the
    digest of what was written; a run without a manifest (an earlier version's) is left as it is."""
    run_path = Path(run_path)
    if not os.path.lexists(run_path / MANIFEST):
        return
    with locked(lock_of(run_path / MANIFEST), "the run's manifest"):
        digests = load_manifest(run_path) or {}
        digests[Path(path).relative_to(run_path).as_posix()] = file_digest(Path(path), run_path, "record")
        _save(run_path, digests)


def record_unchanged(run_path: Path, path: Path, what: str) -> None:
    """A record read back (a check file) is the one ampbench wrote, where the manifest lists it: else
    ResultsError naming it (a file edited by hand or by a tool since)."""
    digests = load_manifest(Path(run_path)) or {}
    rel = Path(path).relative_to(Path(run_path)).as_posix()
    if rel in digests and file_digest(Path(path), Path(run_path), what) != digests[rel]:
        raise ResultsError(f"{path}: changed after ampbench wrote it (its SHA-256 differs from {MANIFEST}); "
                           f"the {what} cannot be trusted: judge the run again (ampbench check {run_path})")


def verify(run_path: Path, digests: dict[str, str], trial_files: list[Path]) -> None:
    """Every trial file is the one recorded: same bytes, none missing, none added; and run.json, where the
    manifest lists it, is the one ampbench wrote (a threshold edited by hand would judge the trials anew)."""
    run_path = Path(run_path)
    if RUN_JSON in digests and (run_path / RUN_JSON).is_file() \
            and file_digest(run_path / RUN_JSON, run_path, "run file") != digests[RUN_JSON]:
        raise ResultsError(f"{run_path / RUN_JSON}: changed after ampbench wrote it (its SHA-256 differs from "
                           f"{MANIFEST}); the run's records cannot be trusted: re-run it")
    for p in trial_files:
        rel = p.relative_to(run_path).as_posix()
        if rel not in digests:
            raise ResultsError(f"{p}: not in the run's {MANIFEST}: a trial file added after the run wrote it; "
                               "remove it (or re-run the run)")
        if file_digest(p, run_path) != digests[rel]:
            raise ResultsError(f"{p}: changed after ampbench wrote it (its SHA-256 differs from {MANIFEST}); "
                               "the run's records cannot be trusted: re-run it")
    for rel in digests:
        if is_trial_entry(rel) and not (run_path / rel).is_file():
            raise ResultsError(f"{run_path / rel}: listed in {MANIFEST} but missing: removed after the run wrote it")


class Manifest:
    """The runner's in-memory digests of one run folder (thread-safe: trials end side by side)."""

    def __init__(self, run_path: Path, start: dict[str, str] | None = None):
        self.path = Path(run_path)
        self.digests = {k: v for k, v in (start or {}).items() if is_trial_entry(k)}   # the records: on disk
        self._lock = threading.Lock()
        self.folder = folder_id(self.path)   # the run folder itself: one removed or replaced is named, not refilled

    def still_there(self) -> None:
        """The run folder is still the one the run started in; otherwise ResultsError naming what was lost
        (a program under test that ran `rm -rf {out}/../..` destroyed records: an error, not a measurement)."""
        try:
            same = folder_id(self.path) == self.folder
        except OSError:
            same = False
        if not same:
            with self._lock:
                trials = sorted(Path(rel).name for rel in self.digests)
            lost = ", ".join(trials[:6]) + (f" and {len(trials) - 6} more" if len(trials) > 6 else "")
            raise ResultsError(f"{self.path}: the run folder was removed or replaced while the run went on (by the "
                               f"program under test?); lost: run.json, {len(trials)} trial file(s)"
                               f"{f' ({lost})' if lost else ''}, their logs and outputs; nothing more is written "
                               "there: run the suite again")

    def record(self, trial_path: Path) -> None:
        """A trial just ended: its file's digest, as read now, is the record; manifest.json follows."""
        self.still_there()
        rel = Path(trial_path).relative_to(self.path).as_posix()
        digest = file_digest(Path(trial_path), self.path)
        with self._lock:
            self.digests[rel] = digest
            self._write()

    def _write(self) -> None:
        """The trial digests from memory, the records' (note_record) as the file holds them, under its lock."""
        with locked(lock_of(self.path / MANIFEST), "the run's manifest"):
            records: dict[str, str] = {}
            with contextlib.suppress(ResultsError):   # an unreadable manifest: rewritten from memory
                records = {k: v for k, v in (load_manifest(self.path) or {}).items() if not is_trial_entry(k)}
            _save(self.path, {**records, **self.digests}, root_id=self.folder)

    def check(self, trial_files: list[Path]) -> None:
        """The trial files on disk against the digests in memory, then manifest.json written from memory."""
        self.still_there()
        with self._lock:
            verify(self.path, self.digests, trial_files)
            self._write()
