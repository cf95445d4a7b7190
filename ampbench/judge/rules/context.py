"""What every rule of one mode sees (`Ctx`), and the small text helpers their messages share."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE, Suite, Thresholds
from ampbench.core.files import last_line as results_last_line
from ampbench.judge import sequential
from ampbench.judge.pooled import PooledBaseline
from ampbench.judge.rules import reasons
from ampbench.judge.rules.advice_kit import Advice
from ampbench.judge.rules.traits import Result, ResultName
from ampbench.judge.sequential import Design
from ampbench.record.models import Trial
from ampbench.results.baselines import Baseline, CompactTrial, compact
from ampbench.results.verdicts import RuleResult, Status


@dataclass
class Ctx:
    """Everything the rules of one mode look at; `notes` carries facts one rule leaves for a later one."""

    suite: Suite
    mode: str
    plan: list[tuple[str, int]]
    trials: dict[tuple[str, int], Trial]
    baseline: Baseline | None
    baseline_note: str
    notes: dict[str, Any] = field(default_factory=dict)
    design: Design | None = None  # the looks of a sequential run (run --until-decided), None: fixed seeds
    drift_sd: float | None = None  # run-to-run drift estimated from the history (None: the default)
    pooled: PooledBaseline | None = None  # check --history: the runs since the last change point (judge.pooled)
    _compact: dict[str, list[CompactTrial]] = field(default_factory=dict)

    @property
    def th(self) -> Thresholds:
        return self.suite.thresholds

    @property
    def metric(self) -> str:
        return self.suite.suite.metric

    @property
    def goal(self) -> str:
        return self.suite.suite.metric_goal

    @property
    def is_ref(self) -> bool:
        return self.mode == REFERENCE_MODE

    def seeds(self, mode: str) -> list[int]:
        return [s for m, s in self.plan if m == mode]

    def present(self, mode: str) -> list[Trial]:
        return [self.trials[(mode, s)] for s in self.seeds(mode) if (mode, s) in self.trials]

    def ok(self, mode: str) -> list[Trial]:
        return [t for t in self.present(mode) if t.status == "ok"]

    def compact(self, mode: str) -> list[CompactTrial]:
        if mode not in self._compact:
            self._compact[mode] = [compact(t, self.metric) for t in self.ok(mode)]
        return self._compact[mode]

    @property
    def amp_inactive(self) -> bool:
        """No real and no emulated AMP in some ok trial: its figures compare FP32 with FP32."""
        ok = self.ok(self.mode)
        return not self.is_ref and bool(ok) and not all(t.amp.active or t.amp.emulated for t in ok)

    @property
    def emulated(self) -> bool:
        """The mode's AMP was emulated (trial/emulate): its numerics are judged, its device figures are not
        measured.  Read from the trials (the mode's `emulate` where none finished)."""
        if self.is_ref:
            return False
        trials = self.present(self.mode)
        if trials:
            return any(t.amp.emulated for t in trials)
        return self.suite.mode(self.mode).emulate

    def levels(self) -> tuple[float, float]:
        """(PASS, FAIL) one-sided confidences of this look: `confidence` and 1 - fail_alpha for a fixed-seed
        run; the alpha-spending boundaries of the current look in a sequential one (judge.sequential)."""
        return sequential.levels(self.th.confidence, self.th.fail_alpha, self.design, 0)

    def history_levels(self, baseline_trials: int) -> tuple[float, float]:
        """`levels` of a comparison with the baseline's `baseline_trials` trials, at 1 - history_alpha.  Two
        methods, not a flag, so the [thresholds] keys a rule reads are in its code (judge/rules/reads.py)."""
        return sequential.levels(self.th.confidence, self.th.history_alpha, self.design, baseline_trials)

    def rule(self, rule: ResultName, status: Status, observed: Any, threshold: Any, message: str,
             trials: list[str] | None = None, informational: bool = False, **details: Any) -> RuleResult:
        """One result; `informational` turns any status into INCONCLUSIVE (AMP did not really run)."""
        if informational:
            status = "INCONCLUSIVE"
            message = f"Informational (AMP inactive): {message}"
        if "reasons" in details:   # each an enumerated code its result declares (checked by `Rule.run`)
            details["reasons"] = reasons.plain(details["reasons"])
        return RuleResult(suite=self.suite.suite.name, mode=self.mode, rule=rule, status=status,
                          observed=plain(observed), threshold=plain(threshold), message=message,
                          trials=trials or [], informational=informational, details=plain(details))


def plain(x: Any) -> Any:
    """JSON-friendly: numpy scalars -> floats rounded to 6 significant digits; NaN/inf -> None."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return float(f"{x:.6g}") if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def g(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def n_of(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def all_of(count: int) -> str:
    return "the only trial" if count == 1 else f"all {count} trials"


def mean(v: list[float]) -> float:
    return float(np.mean(v)) if v else float("nan")


def finite(x: float | None) -> bool:
    """The worker records a non-finite loss as null (JSON has no NaN), so None counts as non-finite."""
    return x is not None and math.isfinite(x)


def last_line(text: str | None) -> str:
    """The line that says what went wrong (results.last_line), or a placeholder when none was recorded."""
    return results_last_line(text) or "no error recorded"


def one_seed_note(n_ref: int, n_cur: int) -> str:
    """The caveat every rule that had to use a single trial on a side adds to its message."""
    if min(n_ref, n_cur) == 1:
        return " One seed: the seed-to-seed spread is unknown, so this rests on a single trial."
    return ""


def more_seeds_text(have: int, need: int | None) -> str:
    """What more seeds would do for this rule alone; the run's one recommendation (judge.until.recommend, the
    most any undecided rule needs) is said once, under the outcome table and by `ampbench plan`."""
    if need is None:
        return "more seeds than the planner's limit would be needed (see `ampbench plan RUN`)"
    return f"more seeds decide it: this rule alone needs {need} per mode, {have} ran"


def batch_note(c: Ctx) -> str:
    """Said when AMP ran a different batch than FP32 (then per-sample figures are what compare)."""
    amp_b = {t.batch_size for t in c.ok(c.mode)}
    ref_b = {t.batch_size for t in c.ok(REFERENCE_MODE)}
    if amp_b and ref_b and amp_b != ref_b:
        return f" AMP batch {sorted(amp_b)} vs FP32 {sorted(ref_b)}."
    return ""


def always(c: Ctx) -> bool:
    """Every mode, fp32 included."""
    return True


def amp_only(c: Ctx) -> bool:
    """Each AMP mode."""
    return not c.is_ref


def with_baseline(c: Ctx) -> bool:
    """Each mode, when the run is judged against a baseline (--baseline) or the history (--history)."""
    return c.baseline is not None or c.pooled is not None


@dataclass(frozen=True)
class Rule:
    """A registered rule, self-contained: `judge` returns its results (none when it does not apply to
    the mode), `advice` what to try when one does not pass, `results` the result names it emits with what
    each is to the other verbs (judge/rules/traits.py; none given: one result, the rule's name, no role)."""

    name: str
    judge: Callable[[Ctx], list[RuleResult]]
    applies: Callable[[Ctx], bool] = always
    advice: Advice | None = None  # (result, mode config, mode diagnosis, batch size)
    results: tuple[Result, ...] = ()

    @property
    def labels(self) -> tuple[ResultName, ...]:
        """The result names it emits (empty: only its own name)."""
        return tuple(r.name for r in self.results)

    def emits(self, result_name: str) -> bool:
        return result_name in (self.labels or (self.name,))

    def declared(self, result_name: str) -> Result:
        """What this rule declares of one of its result names (a bare `Result` when it declares nothing)."""
        return next((r for r in self.results if r.name == result_name), Result(ResultName(result_name)))

    def run(self, c: Ctx) -> list[RuleResult]:
        """Its results for this mode, each carrying only reason codes its `Result` declares."""
        out = self.judge(c)
        for r in out:
            reasons.stray(r.rule, r.details.get("reasons", []), self.declared(r.rule).reasons)
        return out
