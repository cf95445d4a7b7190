"""time-to-target (MLPerf's time-to-train): AMP must reach the suite's target; its time ratio vs FP32."""

from __future__ import annotations

from typing import Any

from ampbench.config import REFERENCE_MODE, ModeConfig, TargetConfig, Thresholds
from ampbench.judge import inference, stats
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.context import Ctx, Rule, g, one_seed_note
from ampbench.judge.rules.reasons import NOT_EMULATED, R
from ampbench.judge.rules.traits import FigureInterval, Result, ResultName
from ampbench.record.models import Trial
from ampbench.record.target import first_reach
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult, Status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
TIME_TO_TARGET_NAME = ResultName("time-to-target")


def _record(t: Trial, metric: str, value: float, goal: Any) -> dict[str, Any] | None:
    """The trial's time_to_target record for this target, recomputed from its evals when absent."""
    rec = t.time_to_target
    if rec and rec.get("metric") == metric and rec.get("value") == value:
        return rec
    if not t.evals:
        return None
    try:
        return first_reach(t.evals, metric, value, goal)
    except ValueError:
        return None


def _ratio_text(c: Ctx, amp: list[float], ref: list[float]) -> tuple[float | None, str, dict]:
    if not amp or not ref:
        return None, "", {}
    point = (sum(amp) / len(amp)) / (sum(ref) / len(ref))
    if min(len(amp), len(ref)) < inference.MIN_TRIALS:
        return point, f" Time-to-target ratio AMP/FP32 {point:.3f} (point estimate).{one_seed_note(len(ref), len(amp))}", {}
    b = inference.log_ratio_bounds(amp, ref, c.th.confidence)
    return b.estimate, (f" Time-to-target ratio AMP/FP32 {b.estimate:.3f} ({b.confidence:.0%} CI [{b.low:.3f}, "
                        f"{b.high:.3f}], {len(amp)} vs {len(ref)} seeds; below 1 = AMP faster)."), \
        {"ci_low": b.low, "ci_high": b.high}


def rule_time_to_target(c: Ctx) -> list[RuleResult]:
    """PASS when every AMP trial reached the target; FAIL when one did not while FP32 did; otherwise
    INCONCLUSIVE.  observed = AMP/FP32 ratio of mean wall seconds to the target (a number, or null);
    details hold its interval and the per-trial seconds."""
    tgt = c.suite.train.target
    assert tgt is not None
    threshold = {"metric": tgt.metric, "value": tgt.value, "goal": c.goal}
    amp = {t.key: _record(t, tgt.metric, tgt.value, c.goal) for t in c.ok(c.mode)}
    ref = {t.key: _record(t, tgt.metric, tgt.value, c.goal) for t in c.ok(REFERENCE_MODE)}
    if not amp or not ref or any(r is None for r in [*amp.values(), *ref.values()]):
        return [c.rule(TIME_TO_TARGET_NAME, "INCONCLUSIVE", None, threshold,
                       f"No eval records of {tgt.metric!r} to find when the target {g(tgt.value)} was reached "
                       "(set train.eval_every).", informational=c.amp_inactive, reasons=["no-evals"])]
    amp_s = [r["wall_s"] for r in amp.values() if r and r["reached"]]
    ref_s = [r["wall_s"] for r in ref.values() if r and r["reached"]]
    missed = [k for k, r in amp.items() if r and not r["reached"]]
    ratio, ratio_txt, extra = _ratio_text(c, amp_s, ref_s)
    status, code, msg = _target_outcome(c, tgt, amp, missed, len(ref_s), len(ref))
    return [c.rule(TIME_TO_TARGET_NAME, status, ratio, threshold, msg + ratio_txt, trials=missed,
                   informational=c.amp_inactive, amp_wall_s=amp_s, fp32_wall_s=ref_s, reasons=[code], **extra)]


def _target_outcome(c: Ctx, tgt: TargetConfig, amp: dict[str, dict[str, Any] | None], missed: list[str],
                    ref_reached: int, ref_n: int) -> tuple[Status, str, str]:
    """(status, reason code, message) from who reached the target: AMP short of a target every FP32 trial
    reached is a FAIL ("missed", each missing trial's best value named); both short says the target or the
    run length does not fit the profile, not that AMP is worse ("both-missed"); all AMP trials reaching
    it is a PASS ("reached")."""
    best = ", ".join(f"{k} best {g(r['best'])}" for k, r in amp.items() if r and not r["reached"])
    if missed and ref_reached == ref_n:
        return "FAIL", "missed", (f"{c.mode} did not reach {tgt.metric} {g(tgt.value)} in {len(missed)} trial(s) "
                                  f"({best}) while FP32 did in all.")
    if missed:
        return "INCONCLUSIVE", "both-missed", (f"{c.mode} missed {tgt.metric} {g(tgt.value)} in {len(missed)} "
                                               f"trial(s) ({best}), and FP32 missed it in {ref_n - ref_reached}: "
                                               "the target or the run length does not fit this profile.")
    return "PASS", "reached", f"{c.mode} reached {tgt.metric} {g(tgt.value)} in all {len(amp)} trials."


def _has_target(c: Ctx) -> bool:
    """An AMP mode of a suite with a [train] target."""
    return not c.is_ref and c.suite.train.target is not None


def advise_target(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """No evaluations to time; AMP short of a target FP32 reached (a parity problem: the black-list and O1
    advice); a target neither side reached in this run's length."""
    reasons = kit.reasons(r)
    if r.informational:
        return [kit.INACTIVE]
    if "no-evals" in reasons:
        return ["Evaluate during training so the step that reaches the target is known: set `eval_every` in "
                "`[train]` (e.g. a tenth of `steps`)."]
    if "both-missed" in reasons:
        return ["FP32 missed the target too: raise `steps` in `[train]`, or set `[train] target` to what FP32 "
                "reaches in this profile."]
    return ["AMP fell short of a target FP32 reached: the accuracy-parity advice applies.", *kit.black_list(m, diag),
            *kit.o1(m)]


def time_ratio_interval(r: RuleResult, th: Thresholds) -> FigureInterval | None:
    """AMP/FP32 wall time to the target (the time-to-train ratio) and its interval over the trials that reached it
    (a ratio of geometric means); None below two such trials a side."""
    amp, ref = r.details.get("amp_wall_s"), r.details.get("fp32_wall_s")
    if not isinstance(amp, list) or not isinstance(ref, list):
        return None
    d = stats.difference([float(x) for x in amp], [float(x) for x in ref], th.confidence, log=True)
    return None if d is None else FigureInterval(d.estimate, d.low, d.high, log=True, sd=d.sd, n=d.n)


TIME_TO_TARGET = Rule("time-to-target", rule_time_to_target, _has_target, advice=advise_target,
                      results=(Result(TIME_TO_TARGET_NAME, figure="time_to_target", interval=time_ratio_interval,
                                      device=True, reasons=(
                          (R.REACHED, ""), (R.MISSED, "FP32 reached it"), (R.BOTH_MISSED, ""), (R.NO_EVALS, ""),
                          NOT_EMULATED)),))
