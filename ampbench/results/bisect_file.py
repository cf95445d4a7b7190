"""bisect.json (**contract**): the state of an `ampbench bisect` search, written after every candidate.

It is what `bisect --resume DIR` continues from: the suite, the repository and the commits in history
order, the rule being searched, each judged candidate (its run folder, the rule's status and figure, the
seeds it took) and, once over, the result.  A candidate's trials live in its own run folder under
`runs/`; nothing of the user's repository is written (the commits are checked out in `src/`, ampbench's
own clone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.docs import VersionedDoc, load_doc, write_doc

BISECT_SCHEMA = "ampbench.bisect/1"
BISECT_JSON = "bisect.json"


class Candidate(BaseModel):
    """One judged commit: its place in the range, the rule's outcome and the numbers behind it."""

    model_config = ConfigDict(extra="allow")
    index: int                   # position in `commits` (0 = good endpoint)
    sha: str
    role: Literal["good-endpoint", "bad-endpoint", "candidate", "recheck"] = "candidate"
    run_dir: str = ""
    status: str = ""             # the rule's status: PASS / FAIL / INCONCLUSIVE ("" while running)
    verdict: Literal["good", "bad", "skip", ""] = ""
    observed: Any = None         # the rule's observed figure (e.g. -0.18 for 18% slower)
    message: str = ""
    seeds: int = 0               # ok trials the verdict rests on, over every judged mode
    cost_s: float = 0.0
    version: str = ""            # kind "package": the package version judged (also `sha`) ...
    env: str = ""                # ... and the environment it ran in (envs/<version>/, made by bisect)
    # --parallel K: the devices its run had, and the runs side by side on the node while it ran (time-weighted
    # mean count, itself included: K when every share was busy throughout); [] and None when it ran alone
    devices: list[str] = []
    crowding: float | None = None


class BisectFile(VersionedDoc):
    SCHEMA: ClassVar[str] = BISECT_SCHEMA
    schema_: str = Field(BISECT_SCHEMA, alias="schema")
    suite: str
    suite_file: str
    repo: str                    # kind "commits": the repository searched ("" for a package range)
    # "commits": `commits` are the repository's commits; "package": they are the versions of `package` that the
    # index (pip's options in `index`) offered from `good` to `bad`, each run in its own environment made from
    # the suite's interpreter `python` (commands.bisect_packages)
    kind: Literal["commits", "package"] = "commits"
    package: str = ""
    index: list[str] = []
    python: str = ""
    command: list[str] = []      # kind "package": the suite's workload.command (its [0] replaced per version)
    slurm: dict[str, Any] | None = None  # --launcher slurm: the candidates' runs as Slurm jobs (SlurmOptions)
    good: str                    # the revisions as given, and their commits
    bad: str
    rule: str
    modes: list[str]             # the modes whose rule decides (any FAIL = bad, every PASS = good)
    max_seeds: int
    commits: list[str]           # good .. bad, history order (first parent); or the versions, oldest first
    profile: str | None = None
    overrides: list[str] = []    # --set, then what runs the program from bisect's clone (src/)
    parallel: int = Field(1, ge=1, le=64)  # candidates a round (k-section), side by side on `devices`
    devices: list[str] = []      # the pool they share (CUDA_VISIBLE_DEVICES entries)
    slot_overrides: list[list[str]] = []  # with parallel > 1: `overrides` for each clone (src/, src-1/, ...)
    subjects: list[str] = []
    candidates: list[Candidate] = []
    stopped: str = ""            # why the search ended without a result ("" otherwise)
    first_bad: int | None = None  # index into commits
    last_good: int | None = None
    wrong_step_bound: float | None = None

    def write(self, folder: Path) -> None:
        write_doc(Path(folder) / BISECT_JSON, self, root=Path(folder))

    def judged(self, index: int, role: str | None = None) -> Candidate | None:
        """The newest decided record of a commit (a recheck wins over the first look when role is None)."""
        rows = [c for c in self.candidates if c.index == index and c.verdict and (role is None or c.role == role)]
        return rows[-1] if rows else None


def load_bisect(folder: Path) -> BisectFile:
    return load_doc(Path(folder) / BISECT_JSON, BisectFile, "bisect file", root=Path(folder))
