"""The max-batch search (pure) and probe.json (**contract**, docs/results-format.md).

Kept apart from the `ampbench probe` verb, which starts trial processes through the runner, so that
the report and the schema export can read probe.json without importing the runner (and the runner's
own imports of the report cannot close a cycle through here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.docs import VersionedDoc, load_optional
from ampbench.core.store import PROBE_JSON, RunPaths, probe_folders
from ampbench.record.models import Memory

PROBE_SCHEMA = "ampbench.probe/1"
FITS_STATUSES = ("ok", "diverged")  # diverging in a few steps still means the batch fitted in memory


# ------------------------------------------------------------------ the search


@dataclass
class Attempt:
    batch_size: int
    fits: bool
    peak_bytes: int | None


@dataclass
class SearchResult:
    max_batch: int        # largest batch that fitted; 0 when even batch 1 did not
    capped: bool          # every tried size fitted up to the --max-batch limit (the true limit may be higher)
    attempts: list[Attempt]

    @property
    def peak_at_max(self) -> int | None:
        return next((a.peak_bytes for a in self.attempts if a.batch_size == self.max_batch and a.fits), None)


class AttemptFailed(Exception):
    """An attempt ended neither fitting nor out of memory (crash, timeout): the search stops."""


def search_max_batch(attempt: Callable[[int], tuple[bool, int | None]], start: int = 1,
                     max_batch: int = 256) -> SearchResult:
    """Doubling from `start` until a failure or `max_batch`, then binary search; assumes that
    memory grows with batch size.  No size is tried twice.  `attempt` may raise AttemptFailed."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    attempts: list[Attempt] = []

    def tried(b: int) -> bool:
        fits, peak = attempt(b)
        attempts.append(Attempt(b, bool(fits), peak))
        return bool(fits)

    lo, hi = 0, None  # largest known fit, smallest known failure
    b = max(1, min(start, max_batch))
    while True:
        if not tried(b):
            hi = b
            break
        lo = b
        if b >= max_batch:
            break
        b = min(2 * b, max_batch)
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if tried(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(max_batch=lo, capped=hi is None, attempts=attempts)


# ------------------------------------------------------------------ probe.json


class _Open(BaseModel):
    # Readers tolerate fields added by later versions (the results-format versioning policy).
    model_config = ConfigDict(extra="allow")


class ProbeAttempt(_Open):
    """One training trial at one batch size."""

    batch_size: int
    """The batch tried."""
    fits: bool
    """Status ok or diverged: the batch fitted in memory."""
    status: str
    """The trial's status (ok, oom, diverged, crashed, timeout)"""
    peak_bytes: int | None = None
    """The figure the ceiling applies to: device memory on GPU, peak RSS on CPU."""
    memory: Memory = Memory()
    """The trial's memory record."""
    amp_active: bool = False
    """AMP really ran."""
    steps_done: int = 0
    """Steps the attempt trained."""
    wall_s: float = 0.0
    """Seconds, process start to trial file."""
    trial: str = ""
    """The attempt's trial file, relative to the probe folder."""
    error: str | None = None
    """The line that says why, when it did not fit."""


class ProbeMode(_Open):
    """The search for one precision mode."""

    configured_batch: int
    """Where the search started (the suite's batch)."""
    max_batch: int | None = None
    """0: even batch 1 ran out of memory; null: the search stopped on an error."""
    capped: bool = False
    """Every size up to --max-batch fitted (the real limit may be higher)"""
    peak_bytes_at_max: int | None = None
    """Peak memory at `max_batch`."""
    status: Literal["ok", "error"] = "ok"
    """`ok`, or `error` when the search stopped on one."""
    error: str | None = None
    """Why it stopped."""
    amp_requested: bool = False
    """The mode asks for AMP."""
    amp_active: bool | None = None
    """Every fitting attempt ran AMP."""
    attempts: list[ProbeAttempt] = []
    """Every attempt, in the order they ran."""


class ProbeFile(VersionedDoc):
    """probe.json: the largest batch each mode trains without running out of memory."""

    SCHEMA: ClassVar[str] = PROBE_SCHEMA
    STRICT_JSON: ClassVar[bool] = True  # strict readers read it (core.docs: null + `nonfinite`)
    schema_: str = Field(PROBE_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.probe/1`."""
    suite: str
    """The suite probed."""
    suite_file: str
    """Its file."""
    profile: str
    """The profile."""
    run_id: str
    """The probe folder's name."""
    device: Literal["cpu", "gpu"]
    """`cpu` or `gpu`."""
    ceiling: Literal["memory_limit", "device"]
    """What limits a batch: `memory_limit` (`--memory-limit`, on each attempt's RSS) or `device` (the GPU's
    memory)."""
    memory_limit_bytes: int | None = None
    """The limit, or null."""
    steps: int
    """Training steps per attempt."""
    max_batch_limit: int
    """--max-batch."""
    seed: int
    """The seed every attempt ran (the suite's first)."""
    config_hash: str = ""
    """The config hash."""
    started: str = ""
    """UTC, ISO 8601."""
    finished: str | None = None
    """Null while probing (the file is rewritten after every mode)"""
    modes: dict[str, ProbeMode] = {}
    """Mode -> its search."""


def load_probe(run_dir: str | Path) -> ProbeFile | None:
    """probe.json of a run folder, or None when it has none (for the report)."""
    return load_optional(RunPaths(run_dir).probe_json, ProbeFile, "probe file", root=Path(run_dir))


def newest_probe(suite_dir: Path, suite: str, profile: str | None = None,
                 finished: bool = False) -> tuple[ProbeFile, Path] | None:
    """The one finder of a probe beside the runs: the newest (by its start, then folder name) probe folder
    under one suite's folder that is of `suite` (and of `profile`, and finished, when asked)."""
    found = []
    for folder in probe_folders(suite_dir):
        doc = load_probe(folder)
        if doc is None or doc.suite != suite or (profile is not None and doc.profile != profile):
            continue
        if not finished or doc.finished:
            found.append((doc.started, folder.name, doc, folder))
    if not found:
        return None
    _, _, doc, folder = max(found, key=lambda x: x[:2])
    return doc, folder


NoProbeKind = Literal["no-file", "other-program", "none-beside"]


class NoProbe(Exception):
    """No probe sized this program: `kind` says which way (the named folder holds no probe.json, it is a probe
    of another suite or profile, or none beside the runs fits), `given` the folder named; the message why."""

    def __init__(self, kind: NoProbeKind, why: str, given: Path | None = None) -> None:
        super().__init__(why)
        self.kind, self.given = kind, given


def find_probe(suite_dir: Path, suite: str, profile: str, given: Path | None = None) -> tuple[ProbeFile, Path]:
    """The one rule for which probe sized a program (`run --at-max-batch`, `tune`'s max-batch rung and the
    report all use it): the `given` folder (or its probe.json), taken as it is when it is a probe of this
    suite and profile; else the newest finished probe of the suite and profile under `suite_dir`, the
    suite's folder beside the runs.  A probe of another profile sized another program (its steps, its
    batch, its device), so it is never taken.  Returns (probe, its folder); raises NoProbe saying why."""
    if given is not None:
        folder = given.parent if given.name == PROBE_JSON else given
        probe = load_probe(folder)
        if probe is None:
            raise NoProbe("no-file", "no probe.json there", given)
        if probe.suite != suite or probe.profile != profile:
            raise NoProbe("other-program", f"a probe of suite {probe.suite!r}, profile {probe.profile!r}; this run is suite {suite!r}, "
                          f"profile {profile!r}: its batches were found for another program", given)
        return probe, folder
    found = newest_probe(suite_dir, suite, profile, finished=True)
    if found is None:
        raise NoProbe("none-beside", f"no finished probe of suite {suite!r}, profile {profile!r} under {suite_dir}")
    return found


def run_probe(run_path: Path, suite: str, profile: str) -> tuple[ProbeFile, Path] | None:
    """The probe of a run, by the rule `run --at-max-batch` sizes a run with (find_probe): the run folder's own
    probe.json (a probe's own folder), else the newest finished probe of the run's suite and profile beside it
    (`ampbench probe --out` writes <out>/<suite>/<run-id>-probe/, next to the runs); None when no probe sized
    this program.  Returns (probe, its probe.json).  The report shows it; a claim about the largest batch is
    judged on it (judge/claims.py)."""
    own = run_path if RunPaths(run_path).probe_json.is_file() else None
    try:
        probe, folder = find_probe(run_path.parent, suite, profile, own)
    except NoProbe:
        return None
    return probe, RunPaths(folder).probe_json
