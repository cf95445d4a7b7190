"""A run folder's manifest.json: the SHA-256 of every trial file as the runner read it when the trial
ended, so a record changed afterwards (by a later trial's program through `{out}/../..`, or by hand)
is refused by `check`, `report` and the run's own end (exit 2, naming the file) instead of being judged.

The runner keeps the digests in memory while the run goes on (a program under test can rewrite the
file on disk, not the runner's memory), checks every trial file against them before summary, check
and report, and writes manifest.json as each trial ends. A run folder without manifest.json (written
by an earlier version, or by hand in tests) is read as before.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_json, folder_id, read_bytes, read_json

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "ampbench.manifest/1"


def file_digest(path: Path, root: Path) -> str:
    return hashlib.sha256(read_bytes(path, "trial file", root=root)).hexdigest()


def load_manifest(run_path: Path) -> dict[str, str] | None:
    """{path relative to the run folder: sha256}, or None when the run has no manifest."""
    path = Path(run_path) / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    doc: Any = read_json(path, "manifest", root=Path(run_path))
    files = doc.get("files") if isinstance(doc, dict) and doc.get("schema") == MANIFEST_SCHEMA else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ResultsError(f"{path}: not an ampbench manifest (schema {MANIFEST_SCHEMA!r} with `files`)")
    return dict(files)


def verify(run_path: Path, digests: dict[str, str], trial_files: list[Path]) -> None:
    """Every trial file is the one recorded: same bytes, none missing, none added."""
    run_path = Path(run_path)
    for p in trial_files:
        rel = p.relative_to(run_path).as_posix()
        if rel not in digests:
            raise ResultsError(f"{p}: not in the run's {MANIFEST}: a trial file added after the run wrote it; "
                               "remove it (or re-run the run)")
        if file_digest(p, run_path) != digests[rel]:
            raise ResultsError(f"{p}: changed after ampbench wrote it (its SHA-256 differs from {MANIFEST}); "
                               "the run's records cannot be trusted: re-run it")
    for rel in digests:
        if not (run_path / rel).is_file():
            raise ResultsError(f"{run_path / rel}: listed in {MANIFEST} but missing: removed after the run wrote it")


class Manifest:
    """The runner's in-memory digests of one run folder (thread-safe: trials end side by side)."""

    def __init__(self, run_path: Path, start: dict[str, str] | None = None):
        self.path = Path(run_path)
        self.digests = dict(start or {})
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
        atomic_write_json(self.path / MANIFEST, {"schema": MANIFEST_SCHEMA, "files": dict(sorted(self.digests.items()))},
                          root=self.path, root_id=self.folder)

    def check(self, trial_files: list[Path]) -> None:
        """The trial files on disk against the digests in memory, then manifest.json written from memory."""
        self.still_there()
        with self._lock:
            verify(self.path, self.digests, trial_files)
            self._write()
