"""A verdict read back (`check --recorded`, report, history append, sweep) is no better than its trials.

check.json is a file: an edit to it (every mode PASS, exit 0) must not become the verdict of record. The
newest check file of a run is accepted only when

1. the run's manifest, where it lists the file, holds its digest (results.manifest: a checksum of what
   `check` wrote, no signature: whoever can write the folder can rewrite both);
2. each mode's verdict is the worst of its recorded counted rules (never PASS while one is not) and the exit code
   the one its verdicts give (`strict` as recorded);
3. judged again from its trials (which open_run checked against the manifest), with no reference, each
   mode's verdict over the results judged from the trials alone (all but those that `needs_reference`;
   AMP inactive is never PASS) is no worse than the recorded one, and a mode whose trials do not PASS is
   recorded at all;
4. its published claims (check.json `claims`, what `check --claims` exits on) are the ones the run's suite
   holds, in its order, each with the outcome, figures and seeds judged again (a claim is judged on a
   result's per-seed figures, never on a reference; a largest-batch claim on the suite's max-batch probe,
   which is read again as it is now: judge.claims).

Otherwise ResultsError, one line naming the file and the mode: judge the run again. What is trusted as
recorded: the results judged against a reference (history-*; accuracy-parity widened by the pooled
history) as far as the digest protects them, a recorded status worse than the trials give (a check
written by an earlier version may be stricter), and the notes and messages, which are prose.
"""

from __future__ import annotations

import math
from pathlib import Path

from ampbench.core.errors import ResultsError
from ampbench.judge.check import judge_run
from ampbench.judge.rules import registry
from ampbench.results.manifest import record_unchanged
from ampbench.results.run_dir import OpenRun
from ampbench.results.verdicts import (
    CheckReport,
    ClaimResult,
    ModeVerdict,
    combine,
    exit_code,
    load_check_optional,
)


def recorded_verdict(run: OpenRun) -> CheckReport | None:
    """The run's newest check file, verified against its trials (module docstring); None when never checked."""
    path = run.dir.latest_check_path()
    found = load_check_optional(path)
    if found is not None:
        verify(run, found, path)
    return found


_SEVERITY = {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}


def _trials_verdict(v: ModeVerdict) -> str:
    """The mode's verdict over the counted results judged from its trials alone (judge.check.judge_mode's rule:
    under `judges = "numerics"` an emulated mode's device results are shown, not counted)."""
    worst = combine([r.status for r in v.rules if r.counted and not registry.result(r.rule).needs_reference])
    return "INCONCLUSIVE" if worst == "PASS" and v.verdict == "INCONCLUSIVE" else worst


def verify(run: OpenRun, recorded: CheckReport, path: Path) -> None:
    """ResultsError when the recorded verdict is better than the run's trials give (module docstring)."""
    again_cmd = f"judge the run again: ampbench check {run.path}"
    record_unchanged(run.path, path, "verdict of record")
    for v in recorded.verdicts:
        worst = combine([r.status for r in v.rules if r.counted])   # an emulated mode's device results may not count
        if v.verdict != worst and not (worst == "PASS" and v.verdict == "INCONCLUSIVE"):
            raise ResultsError(f"{path}: {v.mode} is recorded {v.verdict} but its rules make it {worst}; {again_cmd}")
    if recorded.exit_code != exit_code([v.verdict for v in recorded.verdicts], strict=recorded.strict):
        raise ResultsError(f"{path}: exit code {recorded.exit_code} is not the one its verdicts give; {again_cmd}")
    mine = {v.mode: v.verdict for v in recorded.verdicts}
    judged = judge_run(run, strict=recorded.strict)
    _verify_claims(recorded.claims, judged.claims, f"{path}: ", f"; {again_cmd}")
    for v in judged.verdicts:
        truth = _trials_verdict(v)
        got = mine.get(v.mode)
        if got is None and truth != "PASS":
            raise ResultsError(f"{path}: records no verdict for {v.mode}, whose trials give {truth}; {again_cmd}")
        if got is not None and _SEVERITY[got] < _SEVERITY[truth]:
            raise ResultsError(f"{path}: records {v.mode} {got} but its trials give {truth}"
                               f"{_why(v, truth)}: edited after the check? {again_cmd}")


def _why(v: ModeVerdict, truth: str) -> str:
    rules = [r.rule for r in v.rules if r.status == truth and not registry.result(r.rule).needs_reference]
    return f" ({', '.join(rules)})" if rules else " (AMP inactive)"


def _verify_claims(recorded: list[ClaimResult], judged: list[ClaimResult], where: str, again: str) -> None:
    """ResultsError unless the recorded claims are the ones judged again (module docstring, 4)."""
    if len(recorded) != len(judged):
        raise ResultsError(f"{where}records {len(recorded)} claim(s), the run's suite holds {len(judged)}{again}")
    for i, (got, truth) in enumerate(zip(recorded, judged), start=1):
        name = f"claim {i} ({truth.mode} {truth.figure})"
        if _claim_of(got) != _claim_of(truth):
            raise ResultsError(f"{where}{name} is not the suite's claim {i}{again}")
        if got.outcome != truth.outcome or not _same_figures(got, truth):
            raise ResultsError(f"{where}{name} is recorded {got.outcome}{_figures(got)} but judged again it is "
                               f"{truth.outcome}{_figures(truth)}: edited after the check?{again}")


def _claim_of(c: ClaimResult) -> tuple[str, ...]:
    return c.source, c.scenario, c.hardware, c.mode, c.figure, c.claimed


def _same_figures(a: ClaimResult, b: ClaimResult) -> bool:
    def same(x: float | None, y: float | None) -> bool:
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            return x == y or (x is not None and y is not None and math.isnan(x) and math.isnan(y))
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return (all(same(x, y) for x, y in ((a.estimate, b.estimate), (a.low, b.low), (a.high, b.high)))
            and a.seeds_needed == b.seeds_needed and a.emulated == b.emulated)


def _figures(c: ClaimResult) -> str:
    return "" if c.low is None or c.high is None else f" [{c.low:.4g}, {c.high:.4g}]"
