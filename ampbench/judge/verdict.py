"""Verdict vocabulary and check.json (**contract**): one entry per suite x mode x rule.

Kept apart from check.py so the runner, the checker and the report share one definition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ampbench.results import CHECK_SCHEMA, ResultsError, load_doc, write_doc

Status = Literal["PASS", "FAIL", "INCONCLUSIVE", "ERROR"]

# Exit codes (contract: check.json `exit_code`, docs/results-format.md).
EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class RuleResult(BaseModel):
    model_config = ConfigDict(extra="allow")
    suite: str
    mode: str
    rule: str
    status: Status
    observed: Any = None
    threshold: Any = None
    message: str
    trials: list[str] = []


class ModeVerdict(BaseModel):
    model_config = ConfigDict(extra="allow")
    suite: str
    mode: str
    verdict: Status
    rules: list[RuleResult]

    @property
    def reasons(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status != "PASS"]


class CheckReport(BaseModel):
    SCHEMA: ClassVar[str] = CHECK_SCHEMA
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(CHECK_SCHEMA, alias="schema")
    suite: str
    run_dir: str
    profile: str = "default"
    config_hash: str = ""
    strict: bool = False
    baseline: str | None = None
    verdicts: list[ModeVerdict]
    exit_code: int
    notes: list[str] = []

    def write(self, path: Path) -> None:
        write_doc(path, self, root=Path(path).parent)  # RUN/check.json: not through a link


def load_check(path: Path, root: Path | None = None) -> CheckReport:
    return load_doc(path, CheckReport, "check file", root=root)


_SEVERITY = {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}


def combine(statuses: list[str]) -> Status:
    """A mode's verdict is its worst rule: ERROR > FAIL > INCONCLUSIVE > PASS."""
    return max(statuses, key=_SEVERITY.__getitem__, default="PASS")  # type: ignore[return-value]


def exit_code(verdicts: list[str], strict: bool = False) -> int:
    """0 all PASS; 2 crashed trials (ERROR); 1 any FAIL; 3 only INCONCLUSIVE beside PASS (1 if strict)."""
    if "ERROR" in verdicts:
        return EXIT_ERROR
    if "FAIL" in verdicts:
        return EXIT_FAIL
    if "INCONCLUSIVE" in verdicts:
        return EXIT_FAIL if strict else EXIT_INCONCLUSIVE
    return EXIT_PASS


__all__ = ["CheckReport", "ModeVerdict", "ResultsError", "RuleResult", "combine", "exit_code", "load_check"]
