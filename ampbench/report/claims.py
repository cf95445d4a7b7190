"""The claims a suite tests (its `[[claims]]`, judged in check.json's `claims`): one row per claim, citing its
source, what it claims, what this run measured, and confirmed / refuted / not decidable (and why).  One model,
two renderings, as the outcome table: the console prints it after the outcome (report/console.py), report.md
has a Claims section after the Outcome.  A claim never changes a verdict; the section says so."""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.judge.claims import WORDS, measured_text
from ampbench.judge.rules.traits import FigureInterval
from ampbench.report.fmt import md_code, md_prose, md_table, md_text
from ampbench.report.view import RunView, h
from ampbench.results.verdicts import ClaimResult

HEADERS = ("Source", "Mode", "Claim", "Measured [CI]", "Outcome")
NEVER_VERDICT = "Claims are judged on this run's figures and never change a mode's verdict (`check --claims` exits 1 " \
                "on a refuted one)."


@dataclass(frozen=True)
class ClaimRow:
    """One claim as the tables show it, raw (each rendering escapes it its own way)."""

    source: str
    mode: str
    claim: str
    measured: str
    outcome: str

    @classmethod
    def of(cls, c: ClaimResult) -> ClaimRow:
        where = "; ".join(x for x in (c.scenario, c.hardware) if x)
        source = f"{c.source} ({where})" if where else c.source
        measured = "—" if c.estimate is None else _measured(c)
        outcome = c.outcome + (f": {c.why}" if c.outcome == "not decidable" and c.why else "")
        if c.outcome == "not decidable" and c.seeds_needed:
            outcome += f" (about {c.seeds_needed} seeds per mode would decide it)"
        if c.emulated:
            outcome += " (emulated)"
        return cls(source, c.mode, f"{WORDS.get(c.figure, c.figure)} {c.claimed}", measured, outcome)


def _measured(c: ClaimResult) -> str:
    high = c.high if c.high is not None else float("inf")
    est = c.estimate if c.estimate is not None else float("nan")
    return measured_text(c.figure, FigureInterval(est, c.low if c.low is not None else est, high))


def claim_rows(claims: list[ClaimResult]) -> list[ClaimRow]:
    return [ClaimRow.of(c) for c in claims]


def claims_md(v: RunView, level: int) -> str:
    """report.md's Claims section ('' when the suite makes none): each claim with its source cited, escaped."""
    if v.check is None or not v.check.claims:
        return ""
    rows = [[md_text(r.source), md_code(r.mode), md_text(r.claim), md_text(r.measured),
             f"**{md_prose(r.outcome)}**" if r.outcome.startswith("refuted") else md_prose(r.outcome)]
            for r in claim_rows(v.check.claims)]
    return "\n\n".join([h(level, "Claims"), md_table(list(HEADERS), rows, ["l", "l", "l", "r", "l"]),
                        NEVER_VERDICT])
