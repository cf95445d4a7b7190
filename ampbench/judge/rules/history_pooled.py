"""history-throughput against the pooled history baseline (`check --history`, judge.pooled).

The unit of the baseline is the run.  Two figures of each run are compared with the segment's:

- the fast floor (judge.measure.run_floor: per trial the 95th percentile of its per-step rates, per
  run the median over its trials), against the mean of the segment's run floors with the t prediction
  interval from their spread (inference.run_series_bounds_batch).  It decides: a slow episode of the
  machine (every step up to twice as slow for seconds, a whole trial at times) leaves it in place, a
  change of the code moves it.  On the real run set of issue 34's first idle retake (docs/checks.md)
  the median figure FAILed an unchanged run and missed 3 of 4 planted 20% slowdowns; the floor FAILs
  all 4 and no unchanged run (tests/test_history_replay.py replays it);
- the median figure (the speed rule's, inference.series_bounds_batch), reported beside it; where it
  shows a slowdown that the floor rules out, the result is INCONCLUSIVE ("typical-steps-slower"): the
  machine was disturbed, or a change slows only part of the steps, which the floor cannot see.

History lines written before the floor was kept, or trials shorter than FLOOR_MIN_STEPS, leave the
median figure to decide, as before.  A slowdown must be shown beyond `history_min_change`, at
1 - history_alpha; a FAIL needs inference.MIN_FAIL_TRIALS trials (a median of two is their mean).
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.judge import changepoint, inference, interference, measure
from ampbench.judge.pooled import MIN_RUNS
from ampbench.judge.rules.context import Ctx, g, more_seeds_text
from ampbench.judge.rules.speed import clustering, fail_floor_of, level_text
from ampbench.results.baselines import CompactTrial
from ampbench.results.verdicts import RuleResult, Status, as_status

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


def floor_bounds(c: Ctx, cur: list[CompactTrial], pc: float, fc: float) -> tuple[inference.Bounds, int, float] | None:
    """The fast-floor comparison: (bounds on the ratio, the runs it pooled, their mean floor in samples/s),
    or None when this run has fewer than MIN_TRIALS trials with a floor or the segment fewer than
    MIN_RUNS runs with floors."""
    assert c.pooled is not None
    now = [math.log(f) for t in cur if (f := measure.judged_floor(t.rates()))]
    runs = c.pooled.floors(c.mode)
    if len(now) < inference.MIN_TRIALS or len(runs) < MIN_RUNS:
        return None
    extra = []
    for m in (x.name for x in c.suite.modes if x.name != c.mode):
        other = c.pooled.floors(m)
        if len(other) >= 2:
            extra.append(inference.run_values_batch(_padded(other)))
    cur_v, base_v = inference.run_values_batch(np.array([now])), inference.run_values_batch(_padded(runs))
    fail_ok = len(now) >= inference.MIN_FAIL_TRIALS
    r = inference.run_series_bounds_batch(cur_v, base_v, c.th.confidence, extra, changepoint.DRIFT_FLOOR, fc, pc,
                                          fail_ok)
    e = {k: float(math.exp(v[0])) for k, v in r.items() if k not in ("sd", "df")}
    return inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(r["sd"][0]),
                            int(r["df"][0]), c.th.confidence, e["fail_lower"], e["fail_upper"], fc, pc,
                            inference.MIN_FAIL_TRIALS), len(runs), float(np.exp(base_v[0].mean()))


def decide(floor: Status | None, median: Status) -> tuple[Status, list[str]]:
    """The rule's status and extra reason codes from the floor's and the median's decisions: the floor
    decides; a slowdown of the median that the floor rules out is not a PASS."""
    if floor is None:
        return median, []
    if floor == "PASS" and median == "FAIL":
        return "INCONCLUSIVE", ["typical-steps-slower"]
    return floor, []


def ci_text(b: inference.Bounds) -> str:
    return f"{b.estimate - 1:+.1%} ({b.confidence:.0%} CI {b.low - 1:+.1%} to {b.high - 1:+.1%})"


def split_text(m: float, median: inference.Bounds, floor: inference.Bounds) -> str:
    """The sentence of a typical-steps-slower result (against one run or a series)."""
    return (f"; the median step is slower beyond {m:.0%} (FAIL bound {median.fail_upper - 1:+.1%}) but the fastest "
            f"steps are not (PASS bound {floor.lower - 1:+.1%}): slow episodes of the machine during this run, or a "
            "change that slows only part of the steps. Rerun; if it repeats, compare the step-time plots.")


def pooled_throughput(c: Ctx, cur: list[CompactTrial]) -> RuleResult:
    """observed = relative change of throughput against the segment (a number): of the fast floor where
    both sides have it, else of the median figure.  PASS: the lower bound of the change is above
    -history_min_change; FAIL: its upper bound at 1 - history_alpha is below it."""
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
    med_status = as_status(inference.decide_bounds(b, 1 - m))
    fl = floor_bounds(c, cur, pc, fc)
    fb = fl[0] if fl else None
    status, split = decide(as_status(inference.decide_bounds(fb, 1 - m)) if fb else None, med_status)
    drift = float(r["drift"][0])
    base_gm = measure.geomean([measure.geomean(np.exp(x)) for x in runs])  # the mean of the run means (log scale)
    median_text = (f"median figure {g(measure.geomean(np.exp(now)))} samples/s ({len(now)} trials) vs {g(base_gm)} "
                   f"({base_n} trials, pooled): {ci_text(b)}; run-to-run drift {drift:.1%} and trial spread {b.sd:.1%} "
                   "estimated from the segment")
    d = fb if fb is not None else b  # the bounds that decided
    if fb is not None and fl is not None:
        floors = [f for t in cur if (f := measure.judged_floor(t.rates()))]
        msg = (f"{c.mode} fast-floor throughput {g(measure.run_floor(floors) or 0)} samples/s (the 95th percentile "
               f"of the per-step rates, median of {len(floors)} trials) vs {g(fl[2])}, the mean floor over the "
               f"{fl[1]} runs of the history since {p.since}: {ci_text(fb)}; run-to-run sd {fb.sd:.1%} from the segment. The "
               f"{median_text}")
    else:
        msg = (f"{c.mode} throughput: {median_text.removeprefix('median figure ')}, over the {len(runs)} runs "
               f"of the history since {p.since} (no fast floor on both sides: older history lines or short trials)")
    if status in ("FAIL", "PASS"):
        msg += slowdown_decided(status, m, d)
    elif split:
        msg += split_text(m, b, d)
    else:
        msg += (f"; a slowdown beyond {m:.0%} is not demonstrated, nor ruled out (PASS bound {d.lower - 1:+.1%}, "
                f"FAIL bound {'n/a' if not math.isfinite(d.fail_upper) else format(d.fail_upper - 1, '+.1%')}, "
                f"{level_text(d)}).")
    why = None if status == "PASS" else interference.disturbed(cur, p.evidence(c.mode), d.estimate, m,
                                                               ("this run", "the baseline runs"))
    codes = [HISTORY_CODE[status]] + split + (["disturbed"] if why else []) + (["clustered"] if clustered else [])
    if why:
        status, msg = "INCONCLUSIVE", f"{why[0].upper()}{why[1:]}. {msg}"
    if clustered:
        msg += f" Note: {clustered}."
    return c.rule("history-throughput", status, d.estimate - 1, threshold, msg, ratio=d.estimate, lower=d.lower,
                  upper=d.upper, fail_upper=d.fail_upper, ci_low=d.low, ci_high=d.high, seeds=[len(now), base_n],
                  runs=len(runs), drift_sd=drift, disturbed=bool(why), clustered=clustered, baseline_runs=ids,
                  statistic="fast-floor" if fb is not None else "median", floor_runs=fl[1] if fl else 0,
                  floor_sd=fb.sd if fb is not None else None, median_ratio=b.estimate, median_lower=b.lower,
                  median_fail_upper=b.fail_upper, median_status=med_status, reasons=codes)
