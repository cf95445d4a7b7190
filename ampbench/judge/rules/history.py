"""history-throughput, history-metric, history-memory: this run's mode against the same mode in a baseline.

Throughput's unit is the run (judge.rules.history_pooled: one baseline run is a history of one run); the
metric's and the peak's is the seed.  A drift of the whole machine between runs is not visible inside
either run, which is why a slowdown must be shown beyond `history_min_change` (not merely beyond zero)
before the rule FAILs.
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.config import ModeConfig, Suite, Thresholds
from ampbench.core.units import bytes_h
from ampbench.judge import inference, measure
from ampbench.judge.rules import sizing
from ampbench.judge.rules.advice_kit import DISTURBED, reasons
from ampbench.judge.rules.context import Ctx, Rule, g, mean, more_seeds_text, one_seed_note, with_baseline
from ampbench.judge.rules.history_one_run import one_run_throughput
from ampbench.judge.rules.history_pooled import HISTORY_THROUGHPUT, pooled_throughput
from ampbench.judge.rules.memory import SOURCE_TEXT
from ampbench.judge.rules.parity import ACCURACY_PARITY_NAME, PARITY_CODE, PARITY_REASONS, noninferiority
from ampbench.judge.rules.reasons import NOT_EMULATED, R
from ampbench.judge.rules.traits import Effect, PlanSize, Result, ResultName, Seeding
from ampbench.record.models import Trial
from ampbench.results.baselines import CompactTrial
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
HISTORY_METRIC = ResultName("history-metric")
HISTORY_MEMORY = ResultName("history-memory")

# the comparison `ampbench compare` applies both ways and `ampbench bisect` searches by default


def rule_history(c: Ctx) -> list[RuleResult]:
    """Throughput, metric and peak memory of this mode against the same mode in the baseline: one
    baseline run (--baseline), or the runs of the history since its last change point (--history).
    Throughput is judged by the nightly gate either way (judge.gate): one baseline run is a history of one run
    (history_one_run.one_run_throughput), whose run-to-run drift is assumed: the history's estimate
    (judge.changepoint.drift) where the caller has one, else inference.RUN_DRIFT_SD."""
    if c.pooled is not None:
        return _pooled(c)
    assert c.baseline is not None
    base = c.baseline.trials(c.mode)
    if not base:
        return [c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, None,
                       f"{c.baseline_note}The baseline has no ok trial of mode {c.mode}.", reasons=["no-baseline-trials"])]
    cur = c.compact(c.mode)
    drift = inference.RUN_DRIFT_SD if c.drift_sd is None else c.drift_sd
    out = [one_run_throughput(c, cur, c.baseline, drift), history_metric(c, cur, base)]
    mem = history_memory(c, cur, base)
    return out + ([mem] if mem else [])


def _pooled(c: Ctx) -> list[RuleResult]:
    """Against the pooled baseline: throughput over its runs, metric and memory per seed (judge.pooled)."""
    assert c.pooled is not None
    cur, seeds = c.compact(c.mode), c.pooled.per_seed(c.mode)
    if not seeds:
        return [c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, None,
                       f"The pooled baseline ({c.pooled.describe()}) has no ok trial of mode {c.mode}.",
                       reasons=["no-baseline-trials"])]
    out = [pooled_throughput(c, cur), history_metric(c, cur, seeds)]
    mem = history_memory(c, cur, seeds)
    return out + ([mem] if mem else [])


def _metrics(trials: list[CompactTrial]) -> list[float]:
    return [t.metric for t in trials if t.metric is not None and math.isfinite(t.metric)]


def history_metric(c: Ctx, cur: list[CompactTrial], base: list[CompactTrial]) -> RuleResult:
    """observed = how much worse this run's mean metric is than the baseline's (positive = worse)."""
    now, then, note = _metrics(cur), _metrics(base), c.baseline_note
    if not now or not then:
        return c.rule(HISTORY_METRIC, "INCONCLUSIVE", None, None,
                      f"{note}Metric {c.metric!r} missing here or in the baseline.", reasons=["metric-missing"])
    worse = (mean(then) - mean(now)) if c.goal == "max" else (mean(now) - mean(then))
    head = f"{note}{c.mode} mean {c.metric} {g(mean(now))} vs baseline {g(mean(then))}: "
    if min(len(now), len(then)) < inference.MIN_TRIALS:
        return c.rule(HISTORY_METRIC, "INCONCLUSIVE", worse, c.th.metric_abs_tol,
                      f"{head}worse by {g(worse, 3)}; not judged: {more_seeds_text(1, inference.MIN_TRIALS)}."
                      + one_seed_note(len(then), len(now)), current_mean=mean(now), baseline_mean=mean(then),
                      reasons=["seed-sd-unknown"])
    status, tail, extra = noninferiority(c, then, now, "this run", history=True)
    return c.rule(HISTORY_METRIC, status, worse, extra["margin"], head + tail, current_mean=mean(now),
                  baseline_mean=mean(then), reasons=[PARITY_CODE[status]], **extra)


def history_memory(c: Ctx, cur: list[CompactTrial], base: list[CompactTrial]) -> RuleResult | None:
    """observed = relative growth of the median peak (a number); peaks are close to deterministic."""
    now = [t.peak_bytes for t in cur if t.peak_bytes > 0]
    then = [t.peak_bytes for t in base if t.peak_bytes > 0]
    src_now, src_then = {t.memory_source for t in cur}, {t.memory_source for t in base}
    if not now or not then or src_now != src_then or len(src_now) != 1:
        return None
    grow = float(np.median(now)) / float(np.median(then)) - 1
    lim = c.th.history_min_change
    msg = (f"{c.baseline_note}{c.mode} peak memory ({SOURCE_TEXT.get(next(iter(src_now)), 'peak')}) "
           f"{bytes_h(float(np.median(now)))} vs baseline {bytes_h(float(np.median(then)))}: {grow:+.1%} "
           f"({'above' if grow > lim else 'within'} the {lim:.0%} allowed growth).")
    return c.rule(HISTORY_MEMORY, "FAIL" if grow > lim else "PASS", grow, lim, msg,
                  reasons=["grew" if grow > lim else "within"])


HISTORY_ADVICE = ("Compare this run's environment (Paddle/CUDA/cuDNN versions, driver, `default_lists_hash` of the AMP "
                  "op lists) with the baseline's: a changed op list or library moves numbers without any suite change. "
                  "If the change is intended, record a new baseline with `ampbench baseline save RUN_DIR`.")


SPLIT_ADVICE = ("Run the suite again and check it against the same history: this run's typical step slowed while "
                "its fastest steps kept their speed, which slow episodes of a shared or virtual machine cause. If the "
                "typical step is slower again, the change slows part of the steps (data loading, a periodic "
                "operation): compare the step-time plot of RUN_DIR with one of a history run.")


def advise_history(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    if "disturbed" in reasons(r):
        return [DISTURBED]
    if "typical-steps-slower" in reasons(r):
        return [SPLIT_ADVICE]
    return [HISTORY_ADVICE]


def _log_history_figures(trials: list[Trial]) -> list[float] | None:
    """Log fast floors of the trials, the figure history-throughput decides on when every trial has one;
    None when one has not (then the median figure decides and is planned for)."""
    floors = [measure.judged_floor(t.step_rates()) for t in trials]
    return [math.log(f) for f in floors if f] if all(floors) else None


def plan_history(suite: Suite, mode: str, ok: dict[str, list[Trial]]) -> PlanSize | None:
    """The planner's row (every mode): the spread pooled over every mode (the log fast floor where every
    trial has one, else the log median), and a throughput drop of 2 x history_min_change to detect."""
    th, metric = suite.thresholds, suite.suite.metric
    m = th.history_min_change
    gap = math.log((1 - m) / (1 - 2 * m)) if m < 0.5 else m
    floors = [_log_history_figures(ts) for ts in ok.values() if ts]
    groups = floors if all(f is not None for f in floors) else [sizing.log_medians(ts, metric) for ts in ok.values()]
    sd = sizing.pooled_sd(*[x for x in groups if x is not None])  # history pools every mode
    return PlanSize(sd, f"{2 * m:.0%} slowdown",
                    inference.seeds_needed(sd, gap, th.confidence, drift_sd=inference.RUN_DRIFT_SD,
                                           fail_confidence=1 - th.history_alpha))


def history_effect(r: RuleResult, th: Thresholds) -> Effect | None:
    """The change seen so far against 1 - history_min_change; the baseline's trials (details.seeds[1]) are
    fixed, and the run-to-run drift stays whatever this run adds."""
    d = r.details
    if not d.get("ratio") or len(d.get("seeds") or []) != 2:
        return None
    return Effect(float(d["ratio"]), 1 - th.history_min_change, th.history_alpha, int(d["seeds"][1]),
                  float(d.get("drift_sd") or 0.0))


HISTORY = Rule("history", rule_history, with_baseline, advice=advise_history, results=(
    Result(HISTORY_THROUGHPUT, seeds=Seeding(plan=plan_history, effect=history_effect), bisect="history",
           figure="history_change", device=True, reasons=(
               (R.NO_SLOWDOWN, ""), (R.SLOWDOWN, ""), (R.UNDECIDED, ""), (R.ERROR, ""), (R.TYPICAL_STEPS_SLOWER, ""),
               (R.SLOW_STEPS, "the trimmed mean FAILed it"),
               (R.SLOW_STEPS_UNCONFIRMED, "slow steps in every mode's trials, not seen the night before: held out "
                                          "pending the next night"),
               (R.PENDING, "held out of the baseline until the next night"),
               (R.AMP_FP32_RATIO, "the AMP/FP32 ratio FAILed it"),
               (R.BELOW_REFERENCE, "FAILed against the reference level"), (R.SHORT_TRIALS, ""),
               (R.FEW_SEEDS, ""), (R.FEW_RUNS, ""), (R.NO_BASELINE_TRIALS, ""), (R.DISTURBED, ""), (R.CLUSTERED, ""),
               (R.OVERLAPPED, "trials of the run side by side on one device"), NOT_EMULATED)),
    Result(HISTORY_METRIC, seeds=Seeding(sized_by=ACCURACY_PARITY_NAME), bisect="history",  # parity's test
           reasons=PARITY_REASONS),
    Result(HISTORY_MEMORY, bisect="history", device=True, reasons=((R.WITHIN, ""), (R.GREW, ""), NOT_EMULATED)),
))
