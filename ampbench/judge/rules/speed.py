"""speedup, and the trial-level throughput comparison that history-throughput shares with it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ampbench.config import REFERENCE_MODE, ModeConfig, Suite, Thresholds
from ampbench.judge import clusters, inference, interference, measure, why_slow
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules import sizing
from ampbench.judge.rules.context import Ctx, Rule, amp_only, batch_note, g, more_seeds_text, one_seed_note
from ampbench.judge.rules.reasons import NOT_EMULATED, PAIRS, R
from ampbench.judge.rules.traits import Effect, FigureInterval, PlanSize, Result, ResultName, Seeding
from ampbench.record.models import Trial
from ampbench.results.baselines import CompactTrial
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult, Status, as_status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
SPEEDUP_NAME = ResultName("speedup")


@dataclass(frozen=True)
class Comparison:
    """Per-trial median rates of two arms and, when there is enough data, the bounds on their ratio."""

    num: np.ndarray
    den: np.ndarray
    short: list[str]  # trials left out for too few measured steps
    bounds: inference.Bounds | None

    @property
    def point(self) -> float:
        """Ratio of geometric means of per-trial medians (defined even with one trial per side)."""
        return measure.geomean(self.num) / measure.geomean(self.den)

    def caveat(self) -> str:
        return one_seed_note(len(self.den), len(self.num))


Figure = Callable[[np.ndarray], "float | None"]  # per-step rates -> a trial's figure (measure.judged_*)


def _medians(trials: list[CompactTrial], figure: Figure = measure.judged_rate) -> tuple[list[float], list[str]]:
    out, short = [], []
    for t in trials:
        r = t.rates()
        rate = figure(r)
        if rate is not None:
            out.append(rate)
        else:
            short.append(f"{t.mode}__seed{t.seed} ({len(r)} steps)")
    return out, short


def compare(num: list[CompactTrial], den: list[CompactTrial], confidence: float,
            extra: list[list[CompactTrial]] | None = None, drift_sd: float = 0.0,
            levels: tuple[float, float] | None = None,
            min_fail_trials: int = inference.MIN_FAIL_TRIALS, figure: Figure = measure.judged_rate) -> Comparison | None:
    """None when a side has no trial with enough measured steps; `extra` arms only add to the spread;
    `levels`: the (PASS, FAIL) one-sided confidences (Ctx.levels), default `confidence` for both;
    `min_fail_trials`: the FAIL floor (fail_floor_of); `figure`: the per-trial figure compared, the median
    rate, or the fast floor (measure.judged_floor) for history-throughput."""
    a, sa = _medians(num, figure)
    b, sb = _medians(den, figure)
    if not a or not b:
        return None
    ok = min(len(a), len(b)) >= inference.MIN_TRIALS
    more = [_medians(x, figure)[0] for x in extra or []]
    pc, fc = levels or (confidence, confidence)
    bounds = inference.log_ratio_bounds(a, b, confidence, more, drift_sd, fc, pc, min_fail_trials) if ok else None
    return Comparison(np.array(a), np.array(b), sa + sb, bounds)


def shortfall_codes(cmp: Comparison | None) -> list[str]:
    """The reason codes of a comparison below the minimum (what shortfall_text says)."""
    return (["short-trials"] if cmp is None or cmp.short else []) + \
        (["few-seeds"] if cmp is not None and cmp.bounds is None else [])


RATE_CODE = {"PASS": "shown", "FAIL": "below", "INCONCLUSIVE": "undecided", "ERROR": "error"}


def shortfall_text(cmp: Comparison | None, need_seeds: int | None = None) -> str:
    """How much more data a comparison below the minimum needs."""
    parts = []
    if cmp is None or cmp.short:
        short = "" if cmp is None else f" ({', '.join(cmp.short)})"
        parts.append(f"every trial needs at least {measure.MIN_STEPS} measured steps{short}: raise train.steps")
    if cmp is not None and cmp.bounds is None:
        have = min(len(cmp.num), len(cmp.den))
        parts.append(more_seeds_text(have, max(inference.MIN_TRIALS, need_seeds or 0)))
    return "; ".join(parts)


def planned_seeds(cmp: Comparison, gap: float, confidence: float, drift_sd: float = 0.0,
                  fail_confidence: float | None = None) -> int | None:
    sd = cmp.bounds.sd if cmp.bounds else None
    return inference.seeds_needed(sd, gap, confidence, drift_sd=drift_sd, fail_confidence=fail_confidence)


def _causes(c: Ctx) -> list[str]:
    """Why this mode was not faster, as its trials measured it (judge/why_slow.py), heaviest first."""
    return [x.text for x in why_slow.rank(c.ok(c.mode))]


def rule_speedup(c: Ctx) -> list[RuleResult]:
    """Geometric-mean ratio of per-trial median samples/s, AMP / FP32, against min_speedup.

    PASS: the one-sided lower bound >= min_speedup; FAIL: the upper bound < min_speedup; otherwise
    INCONCLUSIVE with the seeds needed.  observed = the ratio (a number); details hold the bounds.
    """
    need = c.th.min_speedup
    amp, ref = c.compact(c.mode), c.compact(REFERENCE_MODE)
    clustered = clustering([amp, ref])
    cmp = compare(amp, ref, c.th.confidence, levels=c.levels(), min_fail_trials=fail_floor_of([amp, ref], clustered))
    if cmp is None or cmp.bounds is None:
        est = None if cmp is None else cmp.point
        head = "" if cmp is None else f"AMP/FP32 throughput {est:.3f} (point estimate). "
        return [c.rule(SPEEDUP_NAME, "INCONCLUSIVE", est, need, f"{head}Not enough data: {shortfall_text(cmp)}."
                       + ("" if cmp is None else cmp.caveat()), informational=c.amp_inactive,
                       why_not_faster=_causes(c), reasons=shortfall_codes(cmp))]
    b = cmp.bounds
    status = as_status(inference.decide_bounds(b, need))
    amp_rate, ref_rate = measure.geomean(cmp.num), measure.geomean(cmp.den)
    msg = (f"AMP {g(amp_rate)} vs FP32 {g(ref_rate)} "
           f"samples/s (per-trial medians, {len(cmp.num)} vs {len(cmp.den)} seeds): speedup {b.estimate:.3f}, "
           f"{b.confidence:.0%} CI [{b.low:.3f}, {b.high:.3f}]; PASS bound {b.lower:.3f}, FAIL bound {fail_bound(b)} "
           f"({level_text(b)}) vs min_speedup {g(need)}")
    if status == "PASS":
        msg += ": shown."
    elif status == "FAIL":
        msg += ": below it, shown."
    else:
        seeds = planned_seeds(cmp, -math.log(0.9), c.th.confidence, fail_confidence=1 - c.th.fail_alpha)
        msg += f": not demonstrated either way; {more_seeds_text(len(cmp.num), seeds)}."
    why = _disturbance(c, status, b.estimate / need)
    codes = [RATE_CODE[status]] + (["disturbed"] if why else []) + (["clustered"] if clustered else [])
    if why:
        status, msg = "INCONCLUSIVE", f"{why[0].upper()}{why[1:]}. {msg}"
    if clustered:
        msg += f" Note: {clustered}."
    causes = [] if status == "PASS" else _causes(c)
    return [c.rule(SPEEDUP_NAME, status, b.estimate, need, msg + batch_note(c), informational=c.amp_inactive,
                   clustered=clustered, why_not_faster=causes,
                   estimate=b.estimate, ci_low=b.low, ci_high=b.high, lower=b.lower, upper=b.upper,
                   fail_upper=b.fail_upper, fail_confidence=b.fail_confidence,
                   amp_samples_per_s=amp_rate, fp32_samples_per_s=ref_rate,
                   confidence=b.confidence, seeds=[len(cmp.num), len(cmp.den)], disturbed=bool(why), reasons=codes)]


def clustering(arms: list[list[CompactTrial]]) -> str | None:
    """"trial levels cluster: ..." when the arms' per-trial levels form two groups (judge.clusters)."""
    levels, cpus = [], []
    for arm in arms:
        kept = [t for t in arm if measure.judged_rate(t.rates()) is not None]
        levels.append(measure.log_rates([t.rates() for t in kept]))
        cpus.append([list(t.interference.main_cpus) if t.interference is not None else [] for t in kept])
    found = clusters.find(levels, cpus)
    return found.describe() if found else None


def pinned(arms: list[list[CompactTrial]]) -> bool:
    """Every trial ran on one and the same CPU set narrower than the machine (run --affinity), so where a
    process landed cannot differ between trials."""
    trials = [t for arm in arms for t in arm]
    sets = {tuple(t.interference.cpu_affinity) if t.interference is not None else () for t in trials}
    if len(sets) != 1:
        return False
    cpus = sets.pop()
    machine = max((t.cpu_count for t in trials), default=0)
    return bool(cpus) and 0 < len(cpus) < machine


def fail_floor_of(arms: list[list[CompactTrial]], clustered: str | None) -> int:
    """The FAIL floor of a throughput comparison (inference.fail_floor): 3 trials per side, 2 when every
    trial was pinned to one CPU set and the trial levels show no clustering."""
    return inference.fail_floor(placement=True, pinned=pinned(arms), clustered=clustered is not None)


def level_text(b: inference.Bounds) -> str:
    """The two one-sided levels a decision used, e.g. "PASS at 95%, FAIL at 99%"."""
    def pct(x: float) -> str:
        return "100%" if x >= 1 else f"{float(f'{100 * x:.4g}'):g}%"
    if not math.isfinite(b.fail_upper):
        return (f"one-sided, PASS at {pct(b.pass_confidence)}; no FAIL from fewer than "
                f"{b.min_fail_trials} trials per side (throughput depends on where a process ran; "
                "--affinity pins it)")
    return f"one-sided, PASS at {pct(b.pass_confidence)}, FAIL at {pct(b.fail_confidence)}"


def fail_bound(b: inference.Bounds, ratio: bool = True) -> str:
    """The FAIL bound as text ("n/a" below the FAIL floor)."""
    if not math.isfinite(b.fail_upper):
        return "n/a"
    return f"{b.fail_upper - 1:+.1%}" if not ratio else f"{b.fail_upper:.3f}"


def _disturbance(c: Ctx, status: Status, ratio_to_need: float) -> str | None:
    """A FAIL/INCONCLUSIVE explained by a disturbed AMP arm, or a PASS inflated by a disturbed FP32 arm."""
    amp, ref, tol = c.compact(c.mode), c.compact(REFERENCE_MODE), c.th.history_min_change
    if status == "PASS":
        why = interference.explain(ref, amp, 1.0, tol)
        return f"measurement disturbed (fp32: {why}; the speedup may be inflated)" if why else None
    why = interference.explain(amp, ref, min(1.0, ratio_to_need), tol)
    return f"measurement disturbed ({c.mode}: {why})" if why else None


def _speedup(m: ModeConfig, batch_size: int | None) -> list[str]:
    out = []
    if m.level == "O1":
        out.append("O2 runs nearly everything in low precision and skips most casts (keep FP32 master weights): "
                   f"{kit.toml_line('level', 'O2')} with {kit.toml_line('master_weight', True)}.")
    b = m.batch_size or batch_size
    if b:
        out.append(f"AMP usually frees memory for a larger batch, which keeps Tensor Cores busy: {kit.toml_line('batch_size', b * 2)} "
                   "(parity is then judged across batch sizes; the report notes it).")
    else:
        out.append("AMP usually frees memory for a larger batch: set `batch_size` in this mode to twice the FP32 batch.")
    if m.custom_black_list:
        out.append(f"Every black-listed op adds casts around it; drop entries you do not need (current: "
                   f"{kit.toml_list(m.custom_black_list)}).")
    out.append("Tensor Cores need matmul/conv dimensions (hidden sizes, channels, batch x sequence) in multiples of 8; "
               "`tox -e bench` times the white- and black-list ops in FP32 and auto_cast on this GPU.")
    return out


def advise_speedup(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """The measured causes first (judge/why_slow.py: data wait, host share, shapes, op census), ranked; then
    O2, a larger batch, fewer black-listed ops, Tensor-Core-friendly shapes."""
    causes = [f"Why not faster (measured): {x}." for x in r.details.get("why_not_faster") or []]
    if r.informational:
        return [*causes, kit.INACTIVE]
    if "disturbed" in kit.reasons(r):   # the measurement first: the rule itself says it was disturbed
        return [kit.DISTURBED, *causes]
    return causes + _speedup(m, batch_size)


def plan_speedup(suite: Suite, mode: str, ok: dict[str, list[Trial]]) -> PlanSize | None:
    """The planner's row (AMP modes): the spread of log per-trial median throughput pooled over the mode and
    FP32, and a speedup 10% below min_speedup to detect."""
    if mode == REFERENCE_MODE:
        return None
    th, metric = suite.thresholds, suite.suite.metric
    sd = sizing.pooled_sd(sizing.log_medians(ok[mode], metric), sizing.log_medians(ok.get(REFERENCE_MODE, []), metric))
    return PlanSize(sd, "speedup 10% below min_speedup",
                    inference.seeds_needed(sd, -math.log(0.9), th.confidence, fail_confidence=1 - th.fail_alpha))


def speedup_effect(r: RuleResult, th: Thresholds) -> Effect | None:
    """The speedup seen so far against min_speedup; both arms grow with every seed."""
    est = r.details.get("estimate")
    return Effect(float(est), th.min_speedup, th.fail_alpha) if est else None


def speedup_interval(r: RuleResult, th: Thresholds) -> FigureInterval | None:
    """The speedup and its two-sided interval as the rule decided them (its details); None below two seeds."""
    d = r.details
    if not all(isinstance(d.get(k), (int, float)) for k in ("estimate", "ci_low", "ci_high")):
        return None
    seeds = [int(x) for x in d.get("seeds") or [] if isinstance(x, int)]
    return FigureInterval(float(d["estimate"]), float(d["ci_low"]), float(d["ci_high"]), log=True,
                          n=min(seeds, default=0))


SPEEDUP = Rule("speedup", rule_speedup, amp_only, advice=advise_speedup,
               results=(Result(SPEEDUP_NAME, seeds=Seeding(plan=plan_speedup, effect=speedup_effect), tune="speed",
                               bisect="in-run", figure="speedup", device=True, reasons=(
                                   (R.SHOWN, ""), (R.BELOW, ""), (R.UNDECIDED, ""), (R.ERROR, ""), (R.SHORT_TRIALS, ""),
                                   (R.FEW_SEEDS, ""), (R.DISTURBED, ""),
                                   (R.CLUSTERED, "the measured causes are in `why_not_faster`"), *PAIRS,
                                   NOT_EMULATED),
                               interval=speedup_interval),))
