"""bisect.json (**contract**): the state of an `ampbench bisect` search, written after every candidate.

It is what `bisect --resume DIR` continues from: the suite, the repository and the commits in history
order, the rule being searched, each judged candidate (its run folder, the rule's status and figure, the
seeds it took) and, once over, the result.  A candidate's trials live in its own run folder under
`runs/`; nothing of the user's repository is written (the commits are checked out in `src/`, ampbench's
own clone).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ampbench.core.docs import VersionedDoc, load_doc, write_doc
from ampbench.core.errors import ResultsError

BISECT_SCHEMA = "ampbench.bisect/1"
BISECT_JSON = "bisect.json"
MAX_POINTS = 100_000      # commits or versions of one search
# A point of the range: a full commit id (kind "commits"), or a PEP 440 version (kind "package"); neither can
# start with '-', so none is ever read by git or pip as an option
COMMIT_ID = r"^[0-9a-f]{40}([0-9a-f]{24})?$"
VERSION = r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,127}$"
SUITE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"   # runs/<suite>/: a name, never a path (core.files.safe_name)
Text = Annotated[str, Field(max_length=4096)]


class Candidate(BaseModel):
    """One judged commit: its place in the range, the rule's outcome and the numbers behind it."""

    model_config = ConfigDict(extra="allow")
    index: int = Field(ge=0, lt=MAX_POINTS)
    """Position in `commits` (0 = good endpoint)"""
    sha: Text
    """The commit (or the version, kind `package`)."""
    role: Literal["good-endpoint", "bad-endpoint", "candidate", "recheck"] = "candidate"
    """`good-endpoint`, `bad-endpoint`, `candidate` or `recheck`."""
    run_dir: Text = ""
    """Its run folder (under the search's runs/)."""
    status: Literal["PASS", "FAIL", "INCONCLUSIVE", "ERROR", ""] = ""
    """The rule's status ("" while running)"""
    verdict: Literal["good", "bad", "skip", ""] = ""
    """`good`, `bad` or `skip`."""
    observed: Any = None
    """The rule's observed figure (e.g. -0.18 for 18% slower)"""
    message: Annotated[str, Field(max_length=20_000)] = ""
    """The rule's sentence."""
    seeds: int = Field(0, ge=0, le=10_000_000)
    """Ok trials the verdict rests on, over every judged mode."""
    cost_s: float = Field(0.0, ge=0, allow_inf_nan=False)
    """Wall time of its trials."""
    version: Text = ""
    """Kind "package": the package version judged (also `sha`) ..."""
    env: Text = ""
    """... and the environment it ran in (envs/<version>/, made by bisect)"""
    devices: list[Text] = Field([], max_length=1024)
    """--parallel K: the devices its run had, and the runs side by side on the node while it ran
    (time-weighted mean count, itself included: K when every share was busy throughout); [] and None when
    it ran alone."""
    crowding: float | None = Field(None, ge=0, le=1024, allow_inf_nan=False)
    """Runs side by side on the node while it ran (time-weighted mean, itself included); null when alone."""


class BisectFile(VersionedDoc):
    SCHEMA: ClassVar[str] = BISECT_SCHEMA
    schema_: str = Field(BISECT_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.bisect/1`."""
    suite: str
    """The suite."""
    suite_file: str
    """Its file."""
    repo: str
    """Kind "commits": the repository searched ("" for a package range)"""
    kind: Literal["commits", "package"] = "commits"
    """"commits": `commits` are the repository's commits; "package": they are the versions of `package` that
    the index (pip's options in `index`) offered from `good` to `bad`, each run in its own environment made
    from the suite's interpreter `python` (commands.bisect_packages)"""
    package: str = ""
    """Kind `package`: the package searched."""
    index: list[Text] = Field([], max_length=64)
    """Pip's index options as given."""
    python: Text = ""
    """The suite's interpreter each version's environment is made from."""
    command: list[Text] = Field([], max_length=4096)
    """Kind "package": the suite's workload.command (its [0] replaced per version)"""
    slurm: dict[str, Any] | None = None
    """--launcher slurm: the candidates' runs as Slurm jobs (SlurmOptions)"""
    good: str
    """The good revision as given (`commits[0]` is its commit)."""
    bad: str
    """The bad revision as given."""
    rule: str
    """The result searched (`bisect --rule`)."""
    modes: list[Text] = Field(max_length=1000)
    """The modes whose rule decides (any FAIL = bad, every PASS = good)"""
    max_seeds: int = Field(ge=1, le=10_000)
    """Seed cap per mode."""
    commits: list[str] = Field(min_length=2, max_length=MAX_POINTS)
    """Good .. bad in first-parent order (kind "commits"), or the versions, oldest first (kind "package")."""
    clone_token: str = Field("", max_length=64)
    """Kind "commits": the token in each clone's .git/ampbench-owner."""
    profile: str | None = None
    """The profile."""
    overrides: list[Text] = Field([], max_length=4096)
    """--set, then what runs the program from bisect's clone (src/)"""
    parallel: int = Field(1, ge=1, le=64)
    """Candidates a round (k-section), side by side on `devices`."""
    devices: list[Text] = Field([], max_length=1024)
    """The pool they share (CUDA_VISIBLE_DEVICES entries)"""
    slot_overrides: list[list[Text]] = Field([], max_length=64)
    """With parallel > 1: `overrides` for each clone (src/, src-1/, ...)"""
    subjects: list[Text] = Field([], max_length=MAX_POINTS)
    """Each commit's subject (kind `package`: `NAME==V`)."""
    candidates: list[Candidate] = Field([], max_length=MAX_POINTS)
    """Every judged point, in the order judged."""
    stopped: Annotated[str, Field(max_length=20_000)] = ""
    """Why the search ended without a result ("" otherwise)"""
    first_bad: int | None = Field(None, ge=0, lt=MAX_POINTS)
    """Index into commits."""
    last_good: int | None = Field(None, ge=0, lt=MAX_POINTS)
    """Index into commits."""
    wrong_step_bound: float | None = Field(None, ge=0, le=1)
    """At most this probability that a step went the wrong way."""

    @model_validator(mode="after")
    def _consistent(self) -> BisectFile:
        """A file edited by hand or by a tool is refused (exit 2, the key named) before any of it is used: points
        that git or pip could read as an option, candidates that name no point of the range, indexes outside it."""
        if not re.match(SUITE_NAME, self.suite) or ".." in self.suite:
            raise ValueError(f"suite: {self.suite[:80]!r} cannot name a folder (letters, digits, '_', '.', '-')")
        pattern = re.compile(COMMIT_ID if self.kind == "commits" else VERSION)
        bad = next((c for c in self.commits if not pattern.match(c)), None)
        if bad is not None:
            what = "a full commit id (40 hex digits)" if self.kind == "commits" else "a version (PEP 440)"
            raise ValueError(f"commits: {bad[:80]!r} is not {what}")
        n = len(self.commits)
        if not self.subjects:
            self.subjects = [""] * n
        if len(self.subjects) != n:
            raise ValueError(f"subjects: {len(self.subjects)} for {n} commits")
        for c in self.candidates:
            if c.index >= n or c.sha != self.commits[c.index]:
                raise ValueError(f"candidates: index {c.index} ({c.sha[:12]!r}) is not a point of the range")
        if any(i is not None and i >= n for i in (self.first_bad, self.last_good)):
            raise ValueError(f"first_bad/last_good: outside the range of {n}")
        if self.parallel > 1 and self.kind == "commits" and len(self.slot_overrides) != self.parallel:
            raise ValueError(f"slot_overrides: {len(self.slot_overrides)} for parallel {self.parallel}")
        return self

    def write(self, folder: Path) -> None:
        write_doc(Path(folder) / BISECT_JSON, self, root=Path(folder))

    def judged(self, index: int, role: str | None = None) -> Candidate | None:
        """The newest decided record of a commit (a recheck wins over the first look when role is None)."""
        rows = [c for c in self.candidates if c.index == index and c.verdict and (role is None or c.role == role)]
        return rows[-1] if rows else None


def load_bisect(folder: Path) -> BisectFile:
    """bisect.json validated (schema and bounds, BisectFile._consistent), and every candidate's run folder
    inside this search's runs/ (a run folder named elsewhere is never read or resumed)."""
    folder = Path(folder)
    doc = load_doc(folder / BISECT_JSON, BisectFile, "bisect file", root=folder)
    runs = (folder / "runs").resolve()
    for c in doc.candidates:
        where = Path(c.run_dir)
        if c.run_dir and (".." in where.parts or not where.resolve().is_relative_to(runs)):
            raise ResultsError(f"{folder / BISECT_JSON}: candidates: run_dir {c.run_dir[:200]!r} is not inside "
                               f"this search's runs/ folder")
    return doc
