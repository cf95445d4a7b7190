"""baseline-quality and accuracy-parity: FP32 learned, and AMP is not worse than FP32 beyond the margin."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE, ModeConfig, Suite, Thresholds
from ampbench.judge import inference, sequential, stats
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules import sizing
from ampbench.judge.rules.context import Ctx, Rule, all_of, amp_only, g, mean, more_seeds_text, one_seed_note
from ampbench.judge.rules.reasons import R
from ampbench.judge.rules.traits import FigureInterval, PlanSize, Result, ResultName, Seeding
from ampbench.record.models import Trial
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult, Status, as_status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
BASELINE_QUALITY_NAME = ResultName("baseline-quality")
ACCURACY_PARITY_NAME = ResultName("accuracy-parity")


def _loss_problem(ref: list[Trial]) -> tuple[str | None, list[str]]:
    falls = [(t, *stats.loss_fell([s.loss for s in t.steps if s.loss_seen])) for t in ref]
    flat = [(t, a, b) for t, fell, a, b in falls if not fell]
    if not flat:
        return None, []
    return ("FP32 loss did not fall in " + ", ".join(f"{t.key} ({g(a)} -> {g(b)})" for t, a, b in flat),
            [t.key for t, _, _ in flat])


def _floor_problem(c: Ctx, vals: list[float], floor: float | None) -> str | None:
    if floor is None:
        return None
    if not vals:
        return f"FP32 metric {c.metric!r} not recorded, so min_baseline_metric {floor} cannot be checked"
    m = mean(vals)
    if c.goal == "max" and m < floor:
        return f"FP32 mean {c.metric} {g(m)} is below min_baseline_metric {g(floor)}"
    if c.goal == "min" and m > floor:
        return f"FP32 mean {c.metric} {g(m)} is above min_baseline_metric {g(floor)} (lower is better)"
    return None


def rule_baseline_quality(c: Ctx) -> list[RuleResult]:
    """Parity means nothing if FP32 learned nothing: its loss must fall, its metric reach the floor.

    Leaves the reason in c.notes["quality_problem"] for accuracy-parity to cite.
    observed = {"fp32_mean": mean metric or null, "loss_fell": trials whose loss fell, "trials": ok FP32 trials}.
    """
    ref = c.ok(REFERENCE_MODE)
    floor = c.th.min_baseline_metric
    threshold = {"min_baseline_metric": floor, "loss_fell": len(ref)}
    if not ref:
        c.notes["quality_problem"] = "no ok fp32 trial"
        return [c.rule(BASELINE_QUALITY_NAME, "INCONCLUSIVE", None, threshold, "No ok fp32 trial.", reasons=["no-fp32"])]
    loss_problem, flat = _loss_problem(ref)
    vals = [t.metrics[c.metric] for t in ref if c.metric in t.metrics and math.isfinite(t.metrics[c.metric])]
    floor_problem = _floor_problem(c, vals, floor)
    problems = [p for p in (loss_problem, floor_problem) if p]
    codes = (["loss-flat"] if loss_problem else []) + (["below-floor"] if floor_problem else [])
    observed = {"fp32_mean": mean(vals) if vals else None, "loss_fell": len(ref) - len(flat), "trials": len(ref)}
    if problems:
        why = "; ".join(problems)
        c.notes["quality_problem"] = why
        return [c.rule(BASELINE_QUALITY_NAME, "INCONCLUSIVE", observed, threshold,
                       why + ": FP32 itself did not learn enough for parity to mean anything.", trials=flat,
                       reasons=codes)]
    floor_txt = f", mean {c.metric} {g(mean(vals))} meets min_baseline_metric {g(floor)}" if floor is not None else \
        " (no min_baseline_metric set)"
    return [c.rule(BASELINE_QUALITY_NAME, "PASS", observed, threshold, f"FP32 loss fell in {all_of(len(ref))}{floor_txt}.",
                   reasons=["learned"])]


def metric_values(trials: list[Trial], metric: str) -> tuple[list[float], list[str], list[str]]:
    """(finite values, trials missing the metric, trials where it is not finite)."""
    vals, missing, bad = [], [], []
    for t in trials:
        v = t.metrics.get(metric)
        if v is None:
            missing.append(t.key)
        elif not math.isfinite(v):
            bad.append(t.key)
        else:
            vals.append(float(v))
    return vals, missing, bad


def margin_text(margin: float, sd: float | None, n: int, c: Ctx) -> str:
    if sd is None:
        return f"margin {g(margin)} = metric_abs_tol (one FP32 seed or one AMP seed: seed sd unknown)"
    return (f"margin {g(margin)} = max(metric_abs_tol {g(c.th.metric_abs_tol)}, {g(c.th.metric_sigma_k)} x "
            f"seed sd {g(sd)} pooled over {n} seeds of both arms)")


# Without a history the run-level spread of the metric is not estimated, and the seeds of one mode in one run
# share it (data order, device, build): a FAIL then allows a run effect on each mode's mean of up to
# UNSEEN_RUN_K x the seed sd (seeds correlated up to rho = K^2 / (1 + K^2) = 0.8).  Simulated (scripts/
# sim_verdicts.py --only correlated): identical code FAILs at most 1% at any tolerance for rho <= 0.8, n = 2-5.
UNSEEN_RUN_K = 2.0


def guarded_parity(ref: np.ndarray, cand: np.ndarray, abs_tol: float, sigma_k: float, confidence: float, goal: str,
                   fc: float, pc: float, run_sd: float | np.ndarray | None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """inference.parity_batch, and its status where a FAIL must also clear an unseen run effect (`run_sd` None:
    no history estimated it; UNSEEN_RUN_K): (the test's results, the guarded status per row)."""
    r = inference.parity_batch(ref, cand, abs_tol, sigma_k, confidence, goal, fail_confidence=fc, pass_confidence=pc,
                               run_sd=0.0 if run_sd is None else run_sd)
    if run_sd is not None:
        return r, r["status"]
    g = inference.parity_batch(ref, cand, abs_tol, sigma_k, confidence, goal, fail_confidence=fc, pass_confidence=pc,
                               run_sd=math.sqrt(2) * UNSEEN_RUN_K * r["sd"])
    return r, np.where((r["status"] == "FAIL") & (g["status"] != "FAIL"), "INCONCLUSIVE", r["status"])


def noninferiority(c: Ctx, ref: list[float], cand: list[float], who: str,
                   history: bool = False) -> tuple[Status, str, dict[str, Any]]:
    """(status, message tail, details) of the one-sided test of `cand` against `ref` (>= 2 values each).
    PASS at `confidence`, FAIL at 1 - fail_alpha (history: 1 - history_alpha), or a sequential look's levels.
    Without a history's run-level sd, a FAIL must also clear a run effect the seeds cannot show (guarded_parity):
    else INCONCLUSIVE ("run-effect-unknown"), saying what would decide."""
    pc, fc = c.history_levels(len(ref)) if history else c.levels()
    run_sd, run_text = run_effect(c, history)
    r, guarded = guarded_parity(np.array([ref]), np.array([cand]), c.th.metric_abs_tol, c.th.metric_sigma_k,
                                c.th.confidence, c.goal, fc, pc, run_sd if run_text is not None or history else None)
    worse, lo, up, margin, sd = (float(r[k][0]) for k in ("estimate", "fail_lower", "upper", "margin", "sd"))
    status = as_status(r["status"][0])
    withheld = status == "FAIL" and guarded[0] != "FAIL"
    fail = f"FAIL {g(lo, 3)} at {fc:.4g}" if math.isfinite(lo) else \
        f"no FAIL from fewer than {inference.MIN_FAIL_TRIALS_SEEDED} seeds per side"
    conf = f"one-sided bounds: {fail}, PASS {g(up, 3)} at {pc:.4g}"
    head = f"{who} worse by {g(worse, 3)} ({conf}), {margin_text(margin, sd, len(ref) + len(cand), c)}"
    tol_decides = c.th.metric_abs_tol >= c.th.metric_sigma_k * sd
    if run_text is None and c.pooled is None and tol_decides and c.th.metric_abs_tol < _separable(sd, fc):
        run_text = (f"metric_abs_tol {g(c.th.metric_abs_tol)} is tighter than two seeds per side can separate "
                    f"({g(_separable(sd, fc), 3)} at this seed sd), and the seeds of one mode share its run (data "
                    "order, device, build): without a history of earlier runs (check --history) a run-level effect "
                    "is not estimated and would read as an AMP effect")
    head += f"; {run_text}" if run_text else ""
    if status == "PASS":
        tail = f"; non-inferiority shown (upper bound {g(up, 3)} <= margin)."
        if worse < -margin:
            tail += " Better than the reference beyond the margin: not a regression, but the numerics differ."
    elif withheld:
        status = "INCONCLUSIVE"
        tail = (f"; the seeds show a drop beyond the margin (lower bound {g(lo, 3)} > margin), but not beyond what a run "
                f"effect the seeds share could make (up to {UNSEEN_RUN_K:g} x the seed sd on each mode's mean: data "
                "order, device, build), which no history of earlier runs estimates here: not a FAIL. What decides: "
                "check --history with 3 or more earlier runs of this suite (their run-level spread), or more seeds "
                "if the drop is larger than that effect.")
    elif status == "FAIL":
        tail = f"; a drop beyond the margin is shown (lower bound {g(lo, 3)} > margin)."
    else:
        k = c.th.metric_sigma_k if c.th.metric_sigma_k * sd >= 0.8 * c.th.metric_abs_tol else 0.0
        need = inference.seeds_needed(sd, margin, c.th.confidence, margin_k=k,
                                      fail_confidence=1 - (c.th.history_alpha if history else c.th.fail_alpha))
        tail = f"; not demonstrated either way: {more_seeds_text(min(len(ref), len(cand)), need)}."
    return status, head + tail, {"lower": lo, "upper": up, "margin": margin, "sd": sd, "run_sd": run_sd,
                                 "pass_confidence": pc, "fail_confidence": fc, "run_effect_unknown": withheld}


def _separable(sd: float, fc: float) -> float:
    """The smallest drop two seeds per side can show at the FAIL level: t(fc, 2 df) x sd x sqrt(2 / 2)."""
    return float(sequential.t_quantile(fc, 2)) * sd


def run_effect(c: Ctx, history: bool) -> tuple[float, str | None]:
    """The run-level sd added to a metric comparison, from the pooled history's earlier runs of this config
    (issue 40: the seeds of one mode in one run share its data order, device and build, so their spread
    misses it): on the difference of two modes of one run sqrt(2) tau; on this run against the segment's
    mean tau sqrt(1 + 1/R).  (0, None) without a history of MIN_RUNS runs."""
    if c.pooled is None:
        return 0.0, None
    found = c.pooled.metric_run_sd([REFERENCE_MODE, c.mode] if not history else [c.mode])
    if found is None:
        return 0.0, None
    tau, runs = found
    sd = tau * (math.sqrt(1 + 1 / runs) if history else math.sqrt(2))
    return sd, (f"run-level sd {g(tau, 3)} of the metric estimated from the {runs} runs of the history (the seeds "
                f"of one run share it; {g(sd, 3)} added to the standard error)")


PARITY_CODE = {"PASS": "noninferior", "FAIL": "worse", "INCONCLUSIVE": "undecided", "ERROR": "error"}


def rule_accuracy_parity(c: Ctx) -> list[RuleResult]:
    """AMP's mean metric not worse than FP32's beyond the margin (a non-inferiority test).

    observed = how much worse AMP's mean is (positive = worse, either goal); threshold = the margin.
    """
    ref_vals, ref_missing, ref_bad = metric_values(c.ok(REFERENCE_MODE), c.metric)
    amp_vals, amp_missing, amp_bad = metric_values(c.ok(c.mode), c.metric)
    if amp_bad:
        return [c.rule(ACCURACY_PARITY_NAME, "FAIL", None, None,
                       f"AMP metric {c.metric!r} is not finite in {', '.join(amp_bad)}.", trials=amp_bad,
                       reasons=["amp-nonfinite"])]
    if ref_missing or amp_missing or ref_bad or not ref_vals or not amp_vals:
        which = ref_missing + amp_missing + ref_bad
        why = f"metric {c.metric!r} missing or not finite in {', '.join(which)}" if which else "no ok trials to compare"
        return [c.rule(ACCURACY_PARITY_NAME, "INCONCLUSIVE", None, None, f"Cannot compare accuracy: {why}.", trials=which,
                       reasons=["metric-missing"])]
    amp_mean, ref_mean = mean(amp_vals), mean(ref_vals)
    worse = stats.worse_by(amp_mean, ref_mean, c.goal)
    direction = "lower is better" if c.goal == "min" else "higher is better"
    head = f"AMP mean {c.metric} {g(amp_mean)} vs FP32 {g(ref_mean)} ({len(amp_vals)} vs {len(ref_vals)} seeds, {direction}): "
    status: Status
    details: dict[str, Any] = {"amp_mean": amp_mean, "fp32_mean": ref_mean, "amp_values": amp_vals,
               "fp32_values": ref_vals}
    if min(len(ref_vals), len(amp_vals)) < inference.MIN_TRIALS:
        margin = c.th.metric_abs_tol
        status, msg = "INCONCLUSIVE", (f"{head}worse by {g(worse, 3)} ({margin_text(margin, None, 0, c)}); not "
                                       f"judged: {more_seeds_text(1, inference.MIN_TRIALS)}."
                                       + one_seed_note(len(ref_vals), len(amp_vals)))
        details["reasons"] = ["seed-sd-unknown"]
    else:
        status, tail, extra = noninferiority(c, ref_vals, amp_vals, "AMP")
        margin, msg = extra["margin"], head + tail
        details.update(extra, reasons=[PARITY_CODE[status]] + (["run-effect-unknown"] if extra["run_effect_unknown"]
                                                               else []))
    if c.amp_inactive:
        return [c.rule(ACCURACY_PARITY_NAME, status, worse, margin, msg, informational=True, **details)]
    problem = c.notes.get("quality_problem")
    if problem:
        return [c.rule(ACCURACY_PARITY_NAME, "INCONCLUSIVE", worse, margin, f"Not judged ({problem}). {msg}",
                       **{**details, "reasons": ["baseline-quality", *details["reasons"]]})]
    return [c.rule(ACCURACY_PARITY_NAME, status, worse, margin, msg, **details)]


def _parity(m: ModeConfig, diag: ModeDiagnosis | None, reasons: set[str]) -> list[str]:
    out = kit.black_list(m, diag)
    out += kit.o1(m)
    if m.level == "O2" and m.master_weight is False:
        out.append(f"Keep float32 master weights in O2 (small updates vanish in float16 weights): "
                   f"{kit.toml_line('master_weight', True)}.")
    if not m.use_promote:
        out.append(f"Let mixed float16/float32 inputs promote to float32: {kit.toml_line('use_promote', True)}.")
    out += kit.scaler_for_underflow(m, diag)
    out += kit.bf16(m)
    if m.dtype == "bfloat16":
        out.append("bfloat16 keeps only 8 mantissa bits; float16 keeps 11 (with loss scaling): "
                   f"{kit.toml_line('dtype', 'float16')}.")
    if "seed-sd-unknown" in reasons:
        out.append("With one FP32 seed the margin ignores seed-to-seed noise: add seeds (`seeds = [0, 1, 2]` in "
                   "`[suite]`) for a noise-aware margin.")
    return out


def advise_parity(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """Black-list, O1, master weights, promotion, loss scale, the other dtype; more seeds."""
    return [kit.INACTIVE] if r.informational else _parity(m, diag, kit.reasons(r))


BASELINE_QUALITY_ADVICE = ("FP32 must learn before parity means anything: raise `steps` in `[train]` (or the profile's "
                           "`train = { steps = ... }`), or run the GPU profile, whose budget is sized for quality.")


def advise_baseline_quality(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    return [BASELINE_QUALITY_ADVICE]


BASELINE_QUALITY = Rule("baseline-quality", rule_baseline_quality, amp_only, advice=advise_baseline_quality,
                        results=(Result(BASELINE_QUALITY_NAME, reasons=(
                            (R.LEARNED, ""), (R.NO_FP32, ""), (R.LOSS_FLAT, ""), (R.BELOW_FLOOR, ""))),))



def plan_parity(suite: Suite, mode: str, ok: dict[str, list[Trial]]) -> PlanSize | None:
    """The planner's row (AMP modes): the metric's seed sd pooled over the mode and FP32, and a metric drop
    of twice the parity margin to detect."""
    if mode == REFERENCE_MODE:
        return None
    th, metric = suite.thresholds, suite.suite.metric
    sd = sizing.pooled_sd(sizing.metric_values(ok[mode], metric), sizing.metric_values(ok.get(REFERENCE_MODE, []), metric))
    margin = max(th.metric_abs_tol, th.metric_sigma_k * sd) if sd is not None else th.metric_abs_tol
    return PlanSize(sd, f"{metric} drop of 2 x margin",
                    inference.seeds_needed(sd, margin, th.confidence, margin_k=sizing.margin_k(th, sd),
                                           fail_confidence=1 - th.fail_alpha))


PARITY_SEEDS = Seeding(plan=plan_parity)
def metric_delta_interval(r: RuleResult, th: Thresholds) -> FigureInterval | None:
    """AMP's mean metric minus FP32's (the outcome table's delta, signed) with its two-sided interval, from the
    per-seed values the rule kept; None below two seeds a side."""
    amp, ref = r.details.get("amp_values"), r.details.get("fp32_values")
    if not isinstance(amp, list) or not isinstance(ref, list):
        return None
    d = stats.difference([float(x) for x in amp], [float(x) for x in ref], th.confidence)
    return None if d is None else FigureInterval(d.estimate, d.low, d.high, sd=d.sd, n=d.n)


# accuracy-parity's codes, history-metric's too (the same test against a baseline)
PARITY_REASONS = ((R.NONINFERIOR, ""), (R.WORSE, ""), (R.UNDECIDED, ""), (R.ERROR, ""),
                  (R.RUN_EFFECT_UNKNOWN, "a drop the seeds show, not beyond a run effect they share: no history "
                                         "estimated it"),
                  (R.SEED_SD_UNKNOWN, "one seed a side: the margin is `metric_abs_tol`"), (R.METRIC_MISSING, ""),
                  (R.AMP_NONFINITE, ""), (R.BASELINE_QUALITY, "not judged: FP32 did not learn"))
ACCURACY_PARITY = Rule("accuracy-parity", rule_accuracy_parity, amp_only, advice=advise_parity,
                       results=(Result(ACCURACY_PARITY_NAME, seeds=PARITY_SEEDS, tune="parity", bisect="in-run",
                                       figure="metric_delta", reasons=PARITY_REASONS,
                                       interval=metric_delta_interval, reference=True),))
