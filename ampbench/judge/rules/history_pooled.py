"""history-throughput against the pooled history baseline (`check --history`, judge.pooled).

The unit of the baseline is the run: the current run's mean log samples/s against the mean of the
segment's run means, with the run-to-run drift and the trial spread estimated from the same segment
(inference.series_bounds_batch).  A slowdown must be shown beyond `history_min_change`, at
1 - history_alpha, as against one baseline run.
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.judge import changepoint, inference, interference, measure
from ampbench.judge.pooled import MIN_RUNS
from ampbench.judge.rules.context import Ctx, g, more_seeds_text
from ampbench.judge.rules.speed import clustering, fail_floor_of, level_text
from ampbench.results.baselines import CompactTrial
from ampbench.results.verdicts import RuleResult, as_status


HISTORY_CODE = {"PASS": "no-slowdown", "FAIL": "slowdown", "INCONCLUSIVE": "undecided", "ERROR": "error"}


def _logs(trials: list[CompactTrial]) -> list[float]:
    return measure.log_rates([t.rates() for t in trials])


def _padded(runs: list[list[float]]) -> np.ndarray:
    """(1, R, K) with NaN after each run's own trials."""
    k = max(len(r) for r in runs)
    return np.array([[r + [math.nan] * (k - len(r)) for r in runs]])


def _other_modes(c: Ctx) -> list[tuple[np.ndarray, np.ndarray]]:
    """(this run, segment) of every other mode with trials on both sides: more df for both variances."""
    assert c.pooled is not None
    out = []
    for m in (x.name for x in c.suite.modes if x.name != c.mode):
        now, runs = _logs(c.compact(m)), c.pooled.rates(m)
        if now and len(runs) >= 2:
            out.append((np.array([now]), _padded(runs)))
    return out


def slowdown_decided(status: str, m: float, b: inference.Bounds) -> str:
    """The sentence a decided history-throughput result ends with, against one baseline run or a series."""
    if status == "FAIL":
        return f"; a slowdown beyond {m:.0%} is demonstrated (upper bound {b.fail_upper - 1:+.1%}, {level_text(b)})."
    return f"; no slowdown beyond {m:.0%} (lower bound {b.lower - 1:+.1%}, {level_text(b)})."


def pooled_throughput(c: Ctx, cur: list[CompactTrial]) -> RuleResult:
    """observed = relative change of throughput against the segment (a number).  PASS: the lower bound
    of the change is above -history_min_change; FAIL: its upper bound at 1 - history_alpha is below it."""
    assert c.pooled is not None
    p, m = c.pooled, c.th.history_min_change
    threshold = {"min_change": m, "confidence": c.th.confidence, "alpha": c.th.history_alpha}
    runs, now = p.rates(c.mode), _logs(cur)
    ids = p.run_ids
    if len(runs) < MIN_RUNS:
        return c.rule("history-throughput", "INCONCLUSIVE", None, threshold,
                      f"Not enough data: the history holds {len(runs)} run(s) of {c.mode} since {p.since}; the "
                      f"run-to-run drift needs {MIN_RUNS}.", baseline_runs=ids, reasons=["few-runs"])
    if len(now) < inference.MIN_TRIALS:
        return c.rule("history-throughput", "INCONCLUSIVE", None, threshold,
                      f"Not enough data: {len(now)} trial(s) of this run have {measure.MIN_STEPS} measured steps; "
                      f"{more_seeds_text(len(now), inference.MIN_TRIALS)}.", baseline_runs=ids, reasons=["few-seeds"])
    clustered = clustering([cur, *[c.compact(x.name) for x in c.suite.modes if x.name != c.mode]])
    base_n = sum(len(r) for r in runs)
    pc, fc = c.levels(history=True, baseline_trials=base_n)
    r = inference.series_bounds_batch(np.array([now]), _padded(runs), c.th.confidence, _other_modes(c),
                                      changepoint.DRIFT_FLOOR, fc, pc, fail_floor_of([cur], clustered))
    e = {k: float(math.exp(v[0])) for k, v in r.items() if k not in ("sd", "drift", "df")}
    b = inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(r["sd"][0]),
                         int(r["df"][0]), c.th.confidence, e["fail_lower"], e["fail_upper"], fc, pc,
                         fail_floor_of([cur], clustered))
    status = as_status(inference.decide_bounds(b, 1 - m))
    drift = float(r["drift"][0])
    base_gm = measure.geomean([measure.geomean(np.exp(x)) for x in runs])  # the mean of the run means (log scale)
    msg = (f"{c.mode} throughput {g(measure.geomean(np.exp(now)))} samples/s ({len(now)} trials) vs {g(base_gm)} "
           f"over the {len(runs)} runs of the history since {p.since} ({base_n} trials, pooled): "
           f"{b.estimate - 1:+.1%} ({b.confidence:.0%} CI {b.low - 1:+.1%} to {b.high - 1:+.1%}; run-to-run drift "
           f"{drift:.1%} and trial spread {b.sd:.1%} estimated from the segment)")
    if status in ("FAIL", "PASS"):
        msg += slowdown_decided(status, m, b)
    else:
        msg += (f"; a slowdown beyond {m:.0%} is not demonstrated, nor ruled out (PASS bound {b.lower - 1:+.1%}, "
                f"FAIL bound {'n/a' if not math.isfinite(b.fail_upper) else format(b.fail_upper - 1, '+.1%')}, "
                f"{level_text(b)}).")
    why = None if status == "PASS" else interference.disturbed(cur, p.evidence(c.mode), b.estimate, m,
                                                               ("this run", "the baseline runs"))
    codes = [HISTORY_CODE[status]] + (["disturbed"] if why else []) + (["clustered"] if clustered else [])
    if why:
        status, msg = "INCONCLUSIVE", f"{why[0].upper()}{why[1:]}. {msg}"
    if clustered:
        msg += f" Note: {clustered}."
    return c.rule("history-throughput", status, b.estimate - 1, threshold, msg, ratio=b.estimate, lower=b.lower,
                  upper=b.upper, fail_upper=b.fail_upper, ci_low=b.low, ci_high=b.high, seeds=[len(now), base_n],
                  runs=len(runs), drift_sd=drift, disturbed=bool(why), clustered=clustered, baseline_runs=ids,
                  reasons=codes)
