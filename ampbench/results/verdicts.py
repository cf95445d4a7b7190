"""Verdict vocabulary and check.json (**contract**): one entry per suite x mode x rule.

The store's model of check.json: the judge fills it, the report and the history read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.docs import VersionedDoc, load_doc, load_optional, write_doc
from ampbench.core.errors import ResultsError
from ampbench.record.models import CHECK_SCHEMA
from ampbench.results.manifest import note_record

Status = Literal["PASS", "FAIL", "INCONCLUSIVE", "ERROR"]

# Exit codes (contract: check.json `exit_code`, docs/results-format.md).
EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class RuleResult(BaseModel):
    model_config = ConfigDict(extra="allow")
    suite: str
    """The suite judged."""
    mode: str
    """The mode judged."""
    rule: str
    """The result's name (docs/reference/rules.md)."""
    status: Status
    """`PASS`, `FAIL`, `INCONCLUSIVE` or `ERROR`."""
    observed: Any = None
    """The measured value: a number, or an object the rule documents (docs/reference/rules.md)."""
    threshold: Any = None
    """What it was held to."""
    message: str
    """One sentence saying what was found."""
    trials: list[str] = []
    """The trial keys it looked at."""
    informational: bool = False
    """AMP did not really run: any status reads INCONCLUSIVE."""
    emulated: bool = False
    """Judged on emulated AMP (a mode's emulate = true): numerics, never device figures."""
    counted: bool = True
    """False: shown, not counted in the verdict (a device result where the suite judges numerics)"""
    details: dict[str, Any] = {}
    """The rule's numbers (bounds, seeds, ...); speedup: SpeedupDetails."""


class SpeedupDetails(BaseModel):
    """The speed rule's interval, as the summary, the report and the history read it."""

    model_config = ConfigDict(extra="allow")
    estimate: float
    ci_low: float
    ci_high: float


class ModeVerdict(BaseModel):
    model_config = ConfigDict(extra="allow")
    suite: str
    """The suite judged."""
    mode: str
    """The AMP mode."""
    verdict: Status
    """The worst of its rules' statuses (ERROR > FAIL > INCONCLUSIVE > PASS)."""
    rules: list[RuleResult]
    """Every result of every rule that applied to the mode, in the order they ran."""
    emulated: bool = False
    """The mode's AMP was emulated: its verdict reads "PASS (emulated)", never a plain PASS."""

    @property
    def verdict_text(self) -> str:
        """The verdict as every output shows it: an emulated mode's is marked."""
        return f"{self.verdict} (emulated)" if self.emulated else self.verdict

    @property
    def reasons(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status != "PASS"]


ClaimOutcome = Literal["confirmed", "refuted", "not decidable"]


class ClaimResult(BaseModel):
    """One published claim (a suite's `[[claims]]` entry) judged against the run (judge/rules/claims.py):
    `outcome` confirmed when the figure's interval [low, high] lies within what the claim allows
    [claimed_low, claimed_high], refuted when it lies outside, not decidable otherwise (`why`, and the seeds
    per mode that would decide it where the spread is known).  Never part of a mode's verdict."""

    model_config = ConfigDict(extra="allow")
    source: str
    """Who claims it (the suite's `[[claims]]` entry)."""
    scenario: str = ""
    """What the source measured."""
    hardware: str = ""
    """Where the source measured it."""
    mode: str
    """The mode it was judged on."""
    figure: str
    """The figure claimed (docs/claims.md)."""
    claimed: str
    """The claim in words: "1.8x +-15%", "at least 40%"."""
    claimed_low: float | None = None
    """What it allows (None: open on that side)"""
    claimed_high: float | None = None
    """What it allows, the upper end (null: open)."""
    outcome: ClaimOutcome
    """`confirmed`, `refuted` or `not decidable`."""
    estimate: float | None = None
    """The figure's estimate from this run."""
    low: float | None = None
    """The figure's two-sided interval at thresholds.confidence."""
    high: float | None = None
    """The interval's upper end."""
    why: str = ""
    """Not decidable: the reason ("AMP inactive", "the interval straddles ...")"""
    seeds_needed: int | None = None
    """Seeds per mode that would decide it, when the spread is known."""
    emulated: bool = False
    """Judged on emulated AMP (numerics only)"""
    message: str
    """One sentence saying what was found."""


class CheckReport(VersionedDoc):
    SCHEMA: ClassVar[str] = CHECK_SCHEMA
    STRICT_JSON: ClassVar[bool] = True  # strict readers read it (core.docs: null + `nonfinite`)
    schema_: str = Field(CHECK_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.check/1`."""
    suite: str
    """The suite judged."""
    run_dir: str
    """The run folder judged."""
    profile: str = "default"
    """The run's profile."""
    config_hash: str = ""
    """The run's config hash."""
    strict: bool = False
    """`--strict` was given: INCONCLUSIVE counts as FAIL in the exit code."""
    baseline: str | None = None
    """The baseline compared with (its path), or null."""
    verdicts: list[ModeVerdict]
    """One per AMP mode."""
    exit_code: int
    """0 PASS, 1 FAIL, 2 ERROR or bad input, 3 only INCONCLUSIVE beside PASS."""
    notes: list[str] = []
    """Run-level remarks (e.g. a baseline mismatch that was allowed)."""
    claims: list[ClaimResult] = []
    """The suite's [[claims]], judged; they never change exit_code (check --claims)"""

    def write(self, path: Path) -> None:
        write_doc(path, self, root=Path(path).parent)  # RUN/check.json: not through a link
        note_record(Path(path).parent, Path(path))     # covered by the run's manifest (judge.recorded reads it back)


def load_check(path: Path, root: Path | None = None) -> CheckReport:
    return load_doc(path, CheckReport, "check file", root=root)


def load_check_optional(path: Path) -> CheckReport | None:
    """check.json if the run was checked; a corrupt one is an error, a missing one is not."""
    return load_optional(path, CheckReport, "check file", root=Path(path).parent)


_SEVERITY = {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}
_STATUSES: tuple[Status, ...] = ("PASS", "INCONCLUSIVE", "FAIL", "ERROR")


def as_status(value: object) -> Status:
    """A status computed as text (the vectorised decisions return numpy strings), checked."""
    text = str(value)
    for s in _STATUSES:
        if s == text:
            return s
    raise ValueError(f"not a verdict status: {text!r}")


def combine(statuses: list[Status]) -> Status:
    """A mode's verdict is its worst rule: ERROR > FAIL > INCONCLUSIVE > PASS."""
    return max(statuses, key=_SEVERITY.__getitem__, default="PASS")


def exit_code(verdicts: list[str], strict: bool = False) -> int:
    """0 all PASS; 2 crashed trials (ERROR); 1 any FAIL; 3 only INCONCLUSIVE beside PASS (1 if strict)."""
    if "ERROR" in verdicts:
        return EXIT_ERROR
    if "FAIL" in verdicts:
        return EXIT_FAIL
    if "INCONCLUSIVE" in verdicts:
        return EXIT_FAIL if strict else EXIT_INCONCLUSIVE
    return EXIT_PASS


def claims_exit(report: CheckReport) -> int:
    """`check --claims`: 1 when a claim is refuted (for those who gate on claims), unless the run itself is worse
    (2: a crashed trial); otherwise the run's own exit code."""
    if any(c.outcome == "refuted" for c in report.claims) and report.exit_code != EXIT_ERROR:
        return EXIT_FAIL
    return report.exit_code


__all__ = ["CheckReport", "ClaimResult", "ModeVerdict", "ResultsError", "RuleResult", "SpeedupDetails", "claims_exit", "combine", "exit_code", "load_check", "load_check_optional"]
