"""The search of `ampbench bisect`: which candidate to judge next, when the search is over, how sure it is.

Pure: commits are indices 0..n-1 in history order (0 the good endpoint, n-1 the bad one) and each judged
candidate carries the verdict its rule gave ("good" = the rule PASSed, "bad" = it FAILed, "skip" = it stayed
INCONCLUSIVE within the seed budget).  A noisy verdict is the reason this is more than `git bisect`:

- the next candidate is the unjudged commit nearest the middle of the open range, stepping around skipped
  ones (as `git bisect skip` does), so one undecided commit costs one more evaluation, not the search;
- a commit skipped inside the open range gets one more look on fresh trials before the range is settled;
- when the open range holds no judgeable commit, the boundary pair (the last good and the first bad commit,
  endpoints aside) is judged once more on fresh trials; a recheck that disagrees replaces the first look and
  the search goes on from there;
- with several devices the search takes k candidates at once (`next_batch`, k-section): the range is cut
  into k + 1 parts per round instead of 2, each candidate still decided alone, so the noise model and the
  bound below are unchanged; the rounds of wall time fall, the evaluations rise;
- the search ends when nothing is left to judge or recheck: a boundary of adjacent commits names the first
  bad commit, a range of skipped commits names the range;
- every decision the search rested on could have been wrong with at most its rule's error rate: a FAIL on a
  good commit at the rule's false-FAIL level, a PASS on a bad one at 1 - confidence (the rule's PASS rules out
  a change beyond its threshold at that confidence).  `wrong_step_bound` is their Bonferroni sum: an upper
  bound on the probability that some step went the wrong way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ampbench.results.verdicts import RuleResult

Verdict = Literal["good", "bad", "skip"]
LookStatus = Literal["PASS", "FAIL", "INCONCLUSIVE", "ERROR"]   # a look's status, as bisect.json records it


@dataclass
class Search:
    """The state of one bisection over `n` commits (0 good, n-1 bad, both confirmed by the caller)."""

    n: int
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    rechecked: set[int] = field(default_factory=set)
    retried: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError("a bisection needs a good and a bad commit")
        self.verdicts.setdefault(0, "good")
        self.verdicts.setdefault(self.n - 1, "bad")

    def bounds(self) -> tuple[int, int]:
        """(last good, first bad) read in history order: the last good commit before the first bad one.
        A good verdict after a bad one (noise, or a regression that was fixed) does not move the range."""
        first_bad = min(i for i, v in self.verdicts.items() if v == "bad")
        last_good = max(i for i, v in self.verdicts.items() if v == "good" and i < first_bad)
        return last_good, first_bad

    def open_candidates(self) -> list[int]:
        """Commits strictly inside the open range that are not judged yet."""
        lo, hi = self.bounds()
        return [i for i in range(lo + 1, hi) if i not in self.verdicts]

    def next_candidate(self) -> int | None:
        """The unjudged commit nearest the middle of the open range; None when the search is over."""
        lo, hi = self.bounds()
        todo = self.open_candidates()
        if not todo:
            return None
        mid = (lo + hi) / 2
        return min(todo, key=lambda i: (abs(i - mid), i))

    def record(self, index: int, verdict: Verdict, recheck: bool = False) -> None:
        """A candidate's verdict; a second look's (a recheck or a retry) replaces the first when it decided:
        an undecided recheck of a decided commit neither confirms nor contradicts it, and keeps the first
        (a real search lost a good boundary commit to an INCONCLUSIVE recheck and named a range, not a commit)."""
        if not 0 < index < self.n - 1:
            raise ValueError(f"candidate {index} is an endpoint or outside the range")
        first = self.verdicts.get(index)
        if recheck:
            (self.retried if first == "skip" else self.rechecked).add(index)
            if verdict == "skip" and first in ("good", "bad"):
                return
        self.verdicts[index] = verdict

    def next_step(self) -> tuple[str, int] | None:
        """("candidate", i) while the open range holds an unjudged commit; then ("recheck", i) for a commit of
        the open range skipped once (fresh trials often decide it) and for a boundary commit not rechecked yet
        (the endpoints were confirmed by the caller); None when the search is over."""
        nxt = self.next_candidate()
        if nxt is not None:
            return "candidate", nxt
        lo, hi = self.bounds()
        mid = (lo + hi) / 2
        skipped = sorted((i for i in range(lo + 1, hi) if i not in self.retried), key=lambda i: (abs(i - mid), i))
        if skipped:
            return "recheck", skipped[0]
        todo = [i for i in (lo, hi) if 0 < i < self.n - 1 and i not in self.rechecked]
        return ("recheck", todo[0]) if todo else None

    def next_batch(self, k: int) -> list[tuple[str, int]]:
        """Up to `k` steps to run side by side (k-section): while the open range holds unjudged commits, the
        ones nearest the k points that cut it into k + 1 equal parts (for k = 1 the middle: `next_step`);
        then the second looks `next_step` would take one by one, up to k of them.  Each is decided on its
        own at the rule's levels, so the noise model is the sequential one; a skipped one is stepped around
        as ever.  Recording the whole batch narrows the range to the part between the last good and the
        first bad commit, so a round of k candidates cuts it about (k + 1)-fold where one cuts it 2-fold:
        fewer rounds of wall time, more evaluations of device time."""
        if k < 1:
            raise ValueError("a batch holds at least one step")
        lo, hi = self.bounds()
        todo = self.open_candidates()
        if todo:
            picks: list[int] = []
            for j in range(1, k + 1):
                rest = [i for i in todo if i not in picks]
                if not rest:
                    break
                target = lo + j * (hi - lo) / (k + 1)
                picks.append(min(rest, key=lambda i: (abs(i - target), i)))
            return [("candidate", i) for i in sorted(picks)]
        mid = (lo + hi) / 2
        skipped = sorted((i for i in range(lo + 1, hi) if i not in self.retried), key=lambda i: (abs(i - mid), i))
        ends = [i for i in (lo, hi) if 0 < i < self.n - 1 and i not in self.rechecked]
        return [("recheck", i) for i in [*skipped, *ends][:k]]

    def result(self) -> tuple[int, int] | None:
        """(last good, first bad) once the search is over: adjacent when it named one commit, wider when
        every commit between them was skipped; None while steps remain."""
        return self.bounds() if self.next_step() is None else None

    def decisions(self) -> list[int]:
        """The judged candidates the result rests on (endpoints and decided commits, not skipped ones)."""
        return sorted(i for i, v in self.verdicts.items() if v != "skip")


def wrong_step_bound(verdicts: dict[int, Verdict], fail_alpha: float, pass_beta: float) -> float:
    """Upper bound on P(some decision of the search was wrong): each FAIL ("bad") at `fail_alpha`, each PASS
    ("good") at `pass_beta` (Bonferroni; skipped commits decided nothing)."""
    bad = sum(1 for v in verdicts.values() if v == "bad")
    good = sum(1 for v in verdicts.values() if v == "good")
    return min(1.0, bad * fail_alpha + good * pass_beta)


def look_verdict(rule: str, results: list[RuleResult]) -> tuple[LookStatus, Verdict, Any, str]:
    """One look's status, verdict, figure and message from the rule's results over the judged modes: the first
    FAIL (bad), else the first mode when all PASS (good), else the first mode that did not PASS (skip: an
    informational or inconclusive result proves neither side).  No result at all: skip."""
    if not results:
        return "ERROR", "skip", None, f"{rule} was not judged (no ok trial?)"
    statuses = ["INCONCLUSIVE" if r.informational else r.status for r in results]
    status: LookStatus
    verdict: Verdict
    if "FAIL" in statuses:
        decided, status, verdict = results[statuses.index("FAIL")], "FAIL", "bad"
    elif all(s == "PASS" for s in statuses):
        decided, status, verdict = results[0], "PASS", "good"
    else:
        decided = results[next(i for i, s in enumerate(statuses) if s != "PASS")]
        status, verdict = "INCONCLUSIVE", "skip"
    return status, verdict, decided.observed, decided.message
