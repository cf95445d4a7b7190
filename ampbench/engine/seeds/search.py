"""Bisect's seeds: a look at a commit adds seeds only while the searched rule (in the searched modes) is
undecided, up to the search's cap; the reference of a history rule (the good endpoint) trains every seed up
to the cap at once, since no later look can add to the baseline every comparison is made against."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ampbench.config import Suite
from ampbench.engine.seeds.until_decided import UntilDecided
from ampbench.record.models import RunInfo


class SearchSeeds(UntilDecided):
    """One bisect look's seeds (`reference`: the good endpoint of a history rule, all seeds up front)."""

    kind: ClassVar[str] = "search"
    reference: bool = False   # the good endpoint of a history rule: every seed up front, none added
    adds: bool = True         # False: nothing to decide against yet (a history rule before its reference)

    def _adding(self) -> bool:
        return self.adds and not self.reference

    def initial(self, suite: Suite) -> list[int] | None:
        """The reference's seeds: the suite's, extended to the cap.  With 3, a real search on a loaded machine
        skipped 6 good commits in a row ("the baseline's 3 trials keep this comparison undecided, whatever
        this run adds")."""
        if not self.reference:
            return None
        seeds = list(suite.suite.seeds)
        while len(seeds) < self.max_seeds:
            seeds.append(max(seeds) + 1)
        return seeds

    def start(self, info: RunInfo, suite: Suite) -> None:
        if self._adding():
            super().start(info, suite)

    def check(self, suite: Suite, where: Path | str | None) -> None:
        if self._adding():
            super().check(suite, where)

    def unhonoured(self, info: RunInfo) -> list[str]:
        """A look that adds no seed asks nothing of run.json's `sequential` when resumed."""
        return super().unhonoured(info) if self._adding() else []
