"""Published claims about AMP, judged against a run: a suite's `[[claims]]` (config.suite.ClaimConfig).

"The guide says 1.8x": each claim names a mode, a figure (speedup, memory, metric delta, time to train, largest
batch) and what it claims (a value within a tolerance, or a bound).  The figure's two-sided interval at
`thresholds.confidence` comes from the result that gives it, as that rule declares it (judge/rules/traits.py:
`interval`, read through the registry), the largest batch from the run's max-batch probe (probe.json).  Then:

- *confirmed*: the interval lies within what the claim allows;
- *refuted*: it lies wholly outside it;
- *not decidable*: it straddles an edge (with the seeds per mode at which an interval of the spread seen would
  fall on one side, where the spread is known: the planner's row for the figure's rule, else the figure's own),
  or the run cannot speak to it: AMP inactive on this device (every claim on a CPU), the mode not run, emulated
  AMP for a device figure (only numerics are emulated: metric claims are judged there, marked emulated).

A claim is judged like a rule but never joins a mode's verdict nor the exit code (`check --claims` exits 1 on a
refuted one, for those who gate on claims).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ampbench.config import REFERENCE_MODE, ClaimConfig, Suite
from ampbench.config.suite import RELATIVE_TOLERANCE
from ampbench.judge.distributions import t_ppf
from ampbench.judge.planner import PlanRow
from ampbench.judge.rules import registry
from ampbench.judge.rules.traits import Figure, FigureInterval
from ampbench.record.models import Trial
from ampbench.results.probe_file import ProbeFile
from ampbench.results.verdicts import ClaimOutcome, ClaimResult, ModeVerdict

MAX_SEEDS = 64   # the planner's limit

# a claim's figure -> the mode figure a rule declares (judge/rules/traits.py); max_batch comes from the probe
_TRAIT: dict[str, Figure] = {"speedup": "speedup", "memory": "memory_reduction", "metric_delta": "metric_delta",
                             "time_to_train": "time_to_target"}
WORDS = {"speedup": "speedup", "memory": "memory reduction", "metric_delta": "metric Δ",
         "time_to_train": "time to train, AMP/FP32", "max_batch": "largest batch"}
_FORMATS = {"speedup": "{:.3g}x", "time_to_train": "{:.3g}x", "memory": "{:.1%}", "max_batch": "{:.0f}",
            "metric_delta": "{:+.3g}"}


@dataclass(frozen=True)
class RunFacts:
    """What the claims are judged on: the run's suite, its trials, the mode verdicts, the planner's rows and the
    max-batch probe of its suite and profile (None: never probed)."""

    suite: Suite
    profile: str
    trials: list[Trial]
    verdicts: dict[str, ModeVerdict]
    plan: list[PlanRow]
    probe: ProbeFile | None = None


def judge_claims(facts: RunFacts) -> list[ClaimResult]:
    """Every claim of the suite, in its order."""
    return [judge_claim(c, facts) for c in facts.suite.claims]


def judge_claim(claim: ClaimConfig, facts: RunFacts) -> ClaimResult:
    why = _cannot_speak(claim, facts)
    emulated = _emulated(facts.trials, claim.mode)
    if why is not None:
        return _result(claim, "not decidable", None, why=why)
    iv, why = _interval(claim, facts)
    if iv is None:
        return _result(claim, "not decidable", None, why=why, emulated=emulated)
    outcome = decide(iv.low, iv.high, claim.band())
    need = None
    if outcome == "not decidable":
        need = seeds_to_decide(iv, _spread(claim, facts, iv), claim.band(), facts.suite.thresholds.confidence)
        why = "the interval straddles what the claim allows"
    return _result(claim, outcome, iv, why=why, need=need, emulated=emulated)


def decide(low: float, high: float, band: tuple[float, float]) -> ClaimOutcome:
    """confirmed: [low, high] within the band; refuted: wholly outside it; else not decidable."""
    lo, hi = band
    if lo <= low and high <= hi:
        return "confirmed"
    if high < lo or low > hi:
        return "refuted"
    return "not decidable"


def seeds_to_decide(iv: FigureInterval, sd: float | None, band: tuple[float, float], confidence: float,
                    limit: int = MAX_SEEDS) -> int | None:
    """The fewest seeds per mode n at which an interval of half-width t x sd x sqrt(2/n) around the estimate seen
    (log scale for a ratio) would fall within the band or wholly outside it: the planner's normal theory, the
    estimate taken as the truth.  None when the spread is unknown or `limit` seeds would not do (an estimate on
    the claim's edge)."""
    if sd is None or not math.isfinite(sd) or sd <= 0:
        return None
    tr = (lambda x: math.log(x) if x > 0 else -math.inf) if iv.log else (lambda x: x)
    est, lo, hi = tr(iv.estimate), tr(band[0]), tr(band[1]) if math.isfinite(band[1]) else math.inf
    for n in range(2, limit + 1):
        half = float(t_ppf((1 + confidence) / 2, 2 * n - 2)) * sd * math.sqrt(2 / n)
        if decide(est - half, est + half, (lo, hi)) != "not decidable":
            return n
    return None


# ---------------------------------------------------------------- what the run can say


def _amp_trials(trials: list[Trial]) -> list[Trial]:
    return [t for t in trials if t.status == "ok" and t.amp.requested]


def _emulated(trials: list[Trial], mode: str) -> bool:
    """The mode's AMP was emulated (issue 56's `amp.emulated`, read where the record has it): numerics only."""
    return any(getattr(t.amp, "emulated", False) is True for t in _amp_trials(trials) if t.mode == mode)


def _cannot_speak(claim: ClaimConfig, facts: RunFacts) -> str | None:
    """Why this run cannot decide the claim at all, or None."""
    amp = _amp_trials(facts.trials)
    if amp and not any(t.amp.active or getattr(t.amp, "emulated", False) is True for t in amp):
        device = all((t.amp.inactive_code or "device") == "device" for t in amp)
        return "AMP inactive (every op ran in float32" + ("; this device runs no AMP: run the suite on a GPU)"
                                                          if device else " in every AMP mode)")
    if claim.figure == "max_batch":
        return None
    if claim.mode not in {t.mode for t in facts.trials}:
        return f"mode {claim.mode} was not run (profile {facts.profile}, or --mode left it out)"
    mode = [t for t in amp if t.mode == claim.mode]
    if not mode:
        return f"no trial of {claim.mode} finished"
    if _emulated(facts.trials, claim.mode) and claim.figure != "metric_delta":
        return "not measured under emulation (emulated AMP reproduces the numerics only)"
    if not all(t.amp.active or getattr(t.amp, "emulated", False) is True for t in mode):
        return f"AMP inactive in {claim.mode}"
    return None


def _interval(claim: ClaimConfig, facts: RunFacts) -> tuple[FigureInterval | None, str]:
    """The claim's figure and its interval, or None and why not."""
    if claim.figure == "max_batch":
        return _max_batch(claim, facts)
    verdict = facts.verdicts.get(claim.mode)
    iv = registry.interval(verdict, _TRAIT[claim.figure], facts.suite.thresholds) if verdict is not None else None
    if iv is not None:
        return iv, ""
    have = sum(1 for t in facts.trials if t.mode == claim.mode and t.status == "ok")
    if claim.figure == "time_to_train" and facts.suite.train.target is None:
        return None, "the suite sets no [train] target to time the training to"
    return None, (f"no interval: {have} ok trial(s) of {claim.mode}; an interval needs 2 seeds per mode "
                  "that measured it (`ampbench plan RUN`)")


def _max_batch(claim: ClaimConfig, facts: RunFacts) -> tuple[FigureInterval | None, str]:
    probe = facts.probe
    hint = f"`ampbench probe SUITE --profile {facts.profile}` finds it"
    if probe is None:
        return None, f"no max-batch probe of this suite and profile: {hint}"
    if probe.device != "gpu":
        return None, "the probe ran on a CPU: host memory, not the GPU memory the claim is about"
    entry = probe.modes.get(claim.mode)
    if entry is None:
        return None, f"the probe did not search {claim.mode}: {hint}"
    if entry.max_batch is None or entry.status != "ok":
        return None, f"the probe's search for {claim.mode} stopped on an error ({entry.error or 'no size'})"
    if claim.mode != REFERENCE_MODE and entry.amp_active is False:
        return None, f"AMP inactive in the probe's {claim.mode}"
    mb = float(entry.max_batch)
    return FigureInterval(mb, mb, math.inf if entry.capped else mb), ""


def _spread(claim: ClaimConfig, facts: RunFacts, iv: FigureInterval) -> float | None:
    """The between-trial spread that sizes more seeds: the planner's row for the figure's rule where it has one
    (speedup, accuracy-parity), else the figure's own."""
    figure = _TRAIT.get(claim.figure)
    names = {r.name for r in registry.results() if r.figure == figure}
    row = next((r for r in facts.plan if r.mode == claim.mode and r.rule in names and r.spread is not None), None)
    return row.spread if row is not None else iv.sd


# ---------------------------------------------------------------- words


def figures_table() -> str:
    """docs/claims.md's table of the figures a claim can name, rendered from config.suite.CLAIM_FIGURES."""
    from ampbench.config import CLAIM_FIGURES

    lines = ["| figure | what it is | tolerance |", "|---|---|---|"]
    for name, what in CLAIM_FIGURES.items():
        tol = "relative to the value (0.15 = +-15%)" if name in RELATIVE_TOLERANCE else "in the figure's units"
        lines.append(f"| `{name}` | {what} | {tol} |")
    return "\n".join(lines)


def value_text(figure: str, x: float) -> str:
    return _FORMATS.get(figure, "{:.4g}").format(x) if math.isfinite(x) else "unbounded"


def claimed_text(claim: ClaimConfig) -> str:
    """The claim in words: "1.8x +-15%", "at least 40.0%", "+0 +- 0.02", "7 to 16"."""
    f = claim.figure
    if claim.value is not None:
        tol = claim.tolerance or 0.0
        return f"{value_text(f, claim.value)} ± " + (f"{tol:.0%}" if f in RELATIVE_TOLERANCE else
                                                      value_text(f, tol).lstrip("+"))
    if claim.at_least is not None and claim.at_most is not None:
        return f"{value_text(f, claim.at_least)} to {value_text(f, claim.at_most)}"
    if claim.at_least is not None:
        return f"at least {value_text(f, claim.at_least)}"
    return f"at most {value_text(f, claim.at_most if claim.at_most is not None else math.inf)}"


def measured_text(figure: str, iv: FigureInterval) -> str:
    if iv.low == iv.high:
        return value_text(figure, iv.estimate)
    return f"{value_text(figure, iv.estimate)} [{value_text(figure, iv.low)}, {value_text(figure, iv.high)}]"


def _result(claim: ClaimConfig, outcome: ClaimOutcome, iv: FigureInterval | None, why: str = "",
            need: int | None = None, emulated: bool = False) -> ClaimResult:
    lo, hi = claim.band()
    claimed = claimed_text(claim)
    what = f"{claim.mode} {WORDS[claim.figure]}"
    if iv is None:
        message = f"Not decidable: {why}. Claimed {what} {claimed}."
    else:
        seen = f"{what} {measured_text(claim.figure, iv)}"
        message = {"confirmed": f"Confirmed: {seen} lies within the claimed {claimed}.",
                   "refuted": f"Refuted: {seen} lies outside the claimed {claimed}.",
                   "not decidable": f"Not decidable: {seen} straddles the claimed {claimed}; "
                                    + (f"about {need} seeds per mode would decide it." if need else
                                       "more seeds than the planner's limit would be needed, or the spread is "
                                       "not known yet (`ampbench plan RUN`).")}[outcome]
    if emulated:
        message += " Emulated AMP: the numerics, not a device's."
    return ClaimResult(source=claim.source, scenario=claim.scenario, hardware=claim.hardware, mode=claim.mode,
                       figure=claim.figure, claimed=claimed, claimed_low=lo if math.isfinite(lo) else None,
                       claimed_high=hi if math.isfinite(hi) else None, outcome=outcome,
                       estimate=iv.estimate if iv else None, low=iv.low if iv else None,
                       high=iv.high if iv and math.isfinite(iv.high) else None, why=why, seeds_needed=need,
                       emulated=emulated, message=message)
