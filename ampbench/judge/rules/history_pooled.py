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
  machine was disturbed, or a change slows only part of the steps, which the floor cannot see;
- the trimmed mean rate (samples over the time of each trial's fastest 95% of steps), compared like the
  floor: it sees a change that slows part of the steps (issue 40), and so do the slow episodes of a
  shared machine, so its FAIL counts only where the step-time shape the runs recorded is steady
  (steady_batch); `statistic` and the message name the figure that decided (decided_by).

`check --baseline RUN` is the same rule against a history of one run (judge.pooled.one_run): the same figures
and gate, each compared between the two runs' trials (inference.diff_bounds_batch: their means, the trial
spread pooled over every mode of both runs), where the run-to-run drift one run cannot show is an allowance
the message states (`assumed_drift`).  Against one run or many, a result is withheld as "measurement disturbed" when the
two sides were not measured alike (judge.interference.unlike: either side loaded, whichever was faster),
a PASS as well as a FAIL: a machine under load has measured identical code both slower and faster (issue 62).

A night held out of the pool (judge.pooled.select: its estimate was below -history_min_change) that
FAILed opens a regression; while it is open, a night still below -history_min_change FAILs too
(persist).  The figures are judged per run at the fixed levels: more seeds do not narrow them
(judge.until).  History lines written before the floor was kept, or trials shorter than FLOOR_MIN_STEPS, leave the
median figure to decide, as before.  A slowdown must be shown beyond `history_min_change`, at
1 - history_alpha; a FAIL needs inference.MIN_FAIL_TRIALS trials (a median of two is their mean).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ampbench.judge import changepoint, inference, interference, measure, sequential
from ampbench.judge.pooled import MIN_RUNS, OpenRegression, PooledBaseline
from ampbench.judge.rules.context import Ctx, g, more_seeds_text
from ampbench.judge.rules.speed import clustering, fail_floor_of, level_text
from ampbench.judge.rules.traits import ResultName
from ampbench.results.baselines import STORED_REL_ERROR, CompactTrial
from ampbench.results.verdicts import RuleResult, Status, as_status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
HISTORY_THROUGHPUT = ResultName("history-throughput")

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


def figure_bounds(c: Ctx, cur: list[CompactTrial], pc: float, fc: float, key: str = "floor",
                  ) -> tuple[inference.Bounds, int, float] | None:
    """One run-unit comparison (`key` "floor": the fast floor, "trimmed": the trimmed mean rate): (bounds on
    the ratio, the runs it pooled, their mean figure in samples/s), or None when this run has fewer than
    MIN_TRIALS trials with the figure or the segment fewer than MIN_RUNS runs with it.  The other modes'
    run values add to the spread, not to the degrees of freedom: every mode of a night ran on the same
    device, so their run values share its level (inference.run_series_bounds_batch, df_per_mode)."""
    assert c.pooled is not None
    judged, series = FIGURES[key]
    now = [math.log(f) for t in cur if (f := judged(t.rates()))]
    runs = series(c.pooled, c.mode)
    if c.pooled.single:
        return _one_run_bounds(c, now, runs, pc, fc, key)
    if len(now) < inference.MIN_TRIALS or len(runs) < MIN_RUNS:
        return None
    extra = []
    for m in (x.name for x in c.suite.modes if x.name != c.mode):
        other = series(c.pooled, m)
        if len(other) >= 2:
            extra.append(inference.run_values_batch(_padded(other)))
    cur_v, base_v = inference.run_values_batch(np.array([now])), inference.run_values_batch(_padded(runs))
    fail_ok = len(now) >= inference.MIN_FAIL_TRIALS
    r = inference.run_series_bounds_batch(cur_v, base_v, c.th.confidence, extra, changepoint.DRIFT_FLOOR, fc, pc,
                                          fail_ok, df_per_mode=True)
    e = {k: float(math.exp(v[0])) for k, v in r.items() if k not in ("sd", "df")}
    return inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(r["sd"][0]),
                            int(r["df"][0]), c.th.confidence, e["fail_lower"], e["fail_upper"], fc, pc,
                            inference.MIN_FAIL_TRIALS), len(runs), float(np.exp(base_v[0].mean()))


def _one_run_bounds(c: Ctx, now: list[float], runs: list[list[float]], pc: float, fc: float,
                    key: str) -> tuple[inference.Bounds, int, float] | None:
    """figure_bounds against one baseline run: the two runs' trial figures compared as a t comparison of their
    means, the trial spread pooled over every mode of both runs and the drift one run cannot show assumed
    (inference.diff_bounds_batch).  Not the series' medians: without a series the spread of a median of a few
    trials is not known (bimodal trial levels, the measured toy machine, keep it as wide as the trials' own,
    and a median judged as a mean FAILed 19% of identical runs at 12 seeds, tests/test_verdict_sim.py)."""
    assert c.pooled is not None and c.pooled.assumed_drift is not None
    judged, series = FIGURES[key]
    if len(now) < inference.MIN_TRIALS or not runs or len(runs[0]) < inference.MIN_TRIALS:
        return None
    extra = []
    for m in (x.name for x in c.suite.modes if x.name != c.mode):
        mine = [math.log(f) for t in c.compact(m) if (f := judged(t.rates()))]
        extra += [np.array([arm]) for arm in (mine, *series(c.pooled, m)[:1]) if len(arm) >= 2]
    r = inference.diff_bounds_batch(np.array([now]), np.array([runs[0]]), c.th.confidence, extra,
                                    c.pooled.assumed_drift, fc, pc, inference.MIN_FAIL_TRIALS)
    e = {k: float(math.exp(v[0])) for k, v in r.items() if k not in ("sd", "df")}
    return inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(r["sd"][0]),
                            int(r["df"][0]), c.th.confidence, e["fail_lower"], e["fail_upper"], fc, pc,
                            inference.MIN_FAIL_TRIALS), 1, float(np.exp(np.mean(runs[0])))


def floor_bounds(c: Ctx, cur: list[CompactTrial], pc: float, fc: float) -> tuple[inference.Bounds, int, float] | None:
    """figure_bounds of the fast floor."""
    return figure_bounds(c, cur, pc, fc, "floor")


FIGURES: dict[str, tuple[Callable[[np.ndarray], float | None], Callable[[PooledBaseline, str], list[list[float]]]]] = {
    "floor": (measure.judged_floor, PooledBaseline.floors),
    "trimmed": (measure.judged_trimmed, PooledBaseline.trimmed),
}
STEADY_SD = 0.03  # sd of log(trimmed mean / fast floor) over the segment's trials at most this: a steady machine
STEADY_SD_RUN = 2 * STEADY_SD  # and over this run's trials (a run of 3 estimates the sd loosely)


def steady_batch(seg: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """Whether the step-time shape is steady enough for the trimmed mean's FAIL to count, per row.

    seg: (B, M) log(trimmed mean / fast floor) of the segment's trials (NaN pads), cur: (B, n) this run's.
    The trimmed mean sees slow steps whatever slows them; a code change slows the same share of steps in
    every trial and night, the slow episodes of a shared machine a share that changes from trial to trial
    (tests/test_floor_sim.py: that sd is 0.05-0.19 under the measured episodes, at most 0.005 on a machine
    without them).  So the gate is the spread of the trimmed-to-floor ratio over the segment's trials and
    over this run's: the history and this run must both show a steady shape; its level may move."""
    with np.errstate(all="ignore"):
        s_seg = np.nanstd(seg, -1, ddof=1)
        s_cur = np.std(cur, -1, ddof=1) if cur.shape[-1] > 1 else np.zeros(cur.shape[0])
    return (s_seg <= STEADY_SD) & (s_cur <= STEADY_SD_RUN)


def _shape(c: Ctx, cur: list[CompactTrial]) -> tuple[bool, float, float] | None:
    """(steady, segment sd, this run's sd) of log(trimmed / floor) over every mode's trials, or None
    when the segment has fewer than MIN_RUNS trials with both figures (older lines)."""
    assert c.pooled is not None
    seg = [math.log(p.trimmed_samples_per_s / p.floor_samples_per_s) for m in c.suite.modes
           for p in c.pooled.points(m.name) if p.trimmed_samples_per_s and p.floor_samples_per_s]
    now = []
    for t in [*cur, *[x for m in c.suite.modes if m.name != c.mode for x in c.compact(m.name)]]:
        f, tr = measure.judged_floor(t.rates()), measure.judged_trimmed(t.rates())
        if f and tr:
            now.append(math.log(tr / f))
    if len(seg) < MIN_RUNS or not now:
        return None
    steady = bool(steady_batch(np.array([seg]), np.array([now]))[0])
    return steady, float(np.std(seg, ddof=1)), float(np.std(now, ddof=1)) if len(now) > 1 else 0.0


def decide(floor: Status | None, median: Status, trimmed: Status | None = None,
           steady: bool = False) -> tuple[Status, list[str]]:
    """The rule's status and extra reason codes from the figures' decisions.  The floor decides; on a
    steady machine (steady_batch) the trimmed mean counts beside it: its FAIL is a FAIL ("slow-steps": a
    change that slows part of the steps) and a PASS needs both; elsewhere a slowdown of the median or of
    the trimmed mean that the floor rules out is not a PASS ("typical-steps-slower")."""
    if floor is None:
        return median, []
    if floor == "FAIL":
        return floor, []
    if steady and trimmed is not None:
        if trimmed == "FAIL":
            return "FAIL", ["slow-steps"]
        if trimmed == "INCONCLUSIVE" and floor == "PASS":
            return "INCONCLUSIVE", ["slow-steps-undecided"]
    if floor == "PASS" and (median == "FAIL" or trimmed == "FAIL"):
        return "INCONCLUSIVE", ["typical-steps-slower"]
    return floor, []


def persist(status: Status, estimate: float, m: float, open_regression: bool) -> tuple[Status, list[str]]:
    """A regression FAILed on an earlier night, held out of the pool and not accepted, stays FAILed on a night
    whose counted estimate (ratio) is still below 1 - min_change, though this night alone does not
    demonstrate it: the evidence of the FAILed night stands until the level recovers or a person accepts it."""
    if open_regression and status == "INCONCLUSIVE" and estimate < 1 - m:
        return "FAIL", ["open-regression"]
    return status, []


def ci_text(b: inference.Bounds) -> str:
    return f"{b.estimate - 1:+.1%} ({b.confidence:.0%} CI {b.low - 1:+.1%} to {b.high - 1:+.1%})"


def split_text(m: float, median: inference.Bounds, floor: inference.Bounds) -> str:
    """The sentence of a typical-steps-slower result (against one run or a series)."""
    return (f"; the median step is slower beyond {m:.0%} (FAIL bound {median.fail_upper - 1:+.1%}) but the fastest "
            f"steps are not (PASS bound {floor.lower - 1:+.1%}): slow episodes of the machine during this run, or a "
            "change that slows only part of the steps. Rerun; if it repeats, compare the step-time plots.")


def _median_bounds(c: Ctx, cur: list[CompactTrial], now: list[float], pc: float, fc: float,
                   floor_trials: int) -> tuple[inference.Bounds, float]:
    """The median figure against the segment (inference.series_bounds_batch): bounds and run-to-run drift."""
    assert c.pooled is not None
    if c.pooled.single:
        return _one_run_median(c, now, pc, fc, floor_trials)
    r = inference.series_bounds_batch(np.array([now]), _padded(c.pooled.rates(c.mode)), c.th.confidence,
                                      _other_modes(c), changepoint.DRIFT_FLOOR, fc, pc, floor_trials)
    e = {k: float(math.exp(v[0])) for k, v in r.items() if k not in ("sd", "drift", "df")}
    return inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(r["sd"][0]),
                            int(r["df"][0]), c.th.confidence, e["fail_lower"], e["fail_upper"], fc, pc,
                            floor_trials), float(r["drift"][0])


def _one_run_median(c: Ctx, now: list[float], pc: float, fc: float, floor_trials: int) -> tuple[inference.Bounds, float]:
    """The median figure against one baseline run: the trials' log medians, their spread pooled over every mode
    of both runs, the assumed drift added (inference.log_ratio_bounds)."""
    assert c.pooled is not None and c.pooled.assumed_drift is not None
    extra = [list(np.exp(arm)) for m in (x.name for x in c.suite.modes if x.name != c.mode)
             for arm in (_logs(c.compact(m)), *c.pooled.rates(m)[:1]) if len(arm) >= 2]
    b = inference.log_ratio_bounds(list(np.exp(now)), list(np.exp(c.pooled.rates(c.mode)[0])), c.th.confidence,
                                   extra, c.pooled.assumed_drift, fc, pc, floor_trials)
    return b, c.pooled.assumed_drift


def _status(b: inference.Bounds | None, m: float) -> Status | None:
    return as_status(inference.decide_bounds(b, 1 - m)) if b is not None else None


def decided_by(status: Status, codes: list[str], floor: float | None, trimmed: float | None, steady: bool) -> str:
    """Which figure decided, from the floor's and the trimmed mean's estimates (ratios; None: no figure): the
    trimmed mean where it FAILed or held a PASS back, or where it counts (steady) and shows the larger
    slowdown of an undecided pair; else the floor; the median figure without a floor."""
    if floor is None:
        return "median"
    if trimmed is not None and ("slow-steps" in codes or "slow-steps-undecided" in codes):
        return "trimmed-mean"
    if trimmed is not None and steady and status == "INCONCLUSIVE" and trimmed < floor:
        return "trimmed-mean"
    return "fast-floor"


def _figures_text(c: Ctx, cur: list[CompactTrial], fl: tuple[inference.Bounds, int, float],
                  tl: tuple[inference.Bounds, int, float] | None, shape: tuple[bool, float, float] | None) -> str:
    assert c.pooled is not None
    fb = fl[0]
    floors = [f for t in cur if (f := measure.judged_floor(t.rates()))]
    if c.pooled.assumed_drift is not None:   # one baseline run: the trials' geometric means, a t comparison
        out = (f"{c.mode} fast-floor throughput {g(measure.geomean(floors) if floors else 0)} samples/s (the 95th "
               f"percentile of the per-step rates, geometric mean of {len(floors)} trials) vs {g(fl[2])}, the baseline "
               f"run's: {ci_text(fb)}; trial spread {fb.sd:.1%} from both runs, run-to-run drift "
               f"{c.pooled.assumed_drift:.1%} assumed. ")
    else:
        out = (f"{c.mode} fast-floor throughput {g(measure.run_floor(floors) or 0)} samples/s (the 95th percentile "
               f"of the per-step rates, median of {len(floors)} trials) vs {g(fl[2])}, the mean floor over the "
               f"{fl[1]} runs of the history since {c.pooled.since}: {ci_text(fb)}; run-to-run sd {fb.sd:.1%} from the "
               "segment. ")
    if tl is not None:
        trims = [f for t in cur if (f := measure.judged_trimmed(t.rates()))]
        shown = measure.geomean(trims) if c.pooled.single and trims else measure.run_floor(trims) or 0
        gate = "" if shape is None else (
            f"; it counts: the step-time shape is steady (sd of trimmed/floor {shape[1]:.1%} over the segment, "
            f"{shape[2]:.1%} in this run, at most {STEADY_SD:.0%} / {STEADY_SD_RUN:.0%})" if shape[0] else
            f"; it does not count here: the step-time shape is not steady (sd of trimmed/floor {shape[1]:.1%} over "
            f"the segment, {shape[2]:.1%} in this run, above {STEADY_SD:.0%} / {STEADY_SD_RUN:.0%}: slow episodes "
            "of the machine move it)")
        out += (f"The trimmed mean (samples over the time of the fastest 95% of the steps) "
                f"{g(shown)} vs {g(tl[2])}: {ci_text(tl[0])}{gate}. ")
    return out + "The "


def pooled_throughput(c: Ctx, cur: list[CompactTrial]) -> RuleResult:
    """observed = relative change of throughput against the segment (a number), of the figure that decided
    (`statistic`): the fast floor; the trimmed mean beside it where the step-time shape is steady; the
    median figure where the lines keep no floor.  PASS: the lower bound of the change is above
    -history_min_change; FAIL: its upper bound at 1 - history_alpha is below it, or the open regression of
    the history goes on (persist)."""
    assert c.pooled is not None
    p, m = c.pooled, c.th.history_min_change
    threshold = {"min_change": m, "confidence": c.th.confidence, "alpha": c.th.history_alpha}
    runs, now = p.rates(c.mode), _logs(cur)
    ids = p.run_ids
    short = _pooled_short(c, runs, now, threshold)
    if short is not None:
        return short
    clustered = clustering([cur, *[c.compact(x.name) for x in c.suite.modes if x.name != c.mode]])
    base_n = sum(len(r) for r in runs)
    # fixed levels, also in a sequential run: more seeds do not narrow a run-unit interval, so --until-decided
    # never adds one for this rule (judge.until.PER_RUN_WHY) and its looks do not spend its alpha
    pc, fc = _levels(c, base_n)
    b, drift = _median_bounds(c, cur, now, pc, fc, fail_floor_of([cur], clustered))
    med_status = as_status(inference.decide_bounds(b, 1 - m))
    fl, tl = floor_bounds(c, cur, pc, fc), figure_bounds(c, cur, pc, fc, "trimmed")
    fb, tb = (fl[0] if fl else None), (tl[0] if tl else None)
    shape = _shape(c, cur) if tb is not None else None
    steady = bool(shape and shape[0])
    status, split = decide(_status(fb, m), med_status, _status(tb, m), steady)
    figure = decided_by(status, split, fb.estimate if fb else None, tb.estimate if tb else None, steady)
    d = {"fast-floor": fb, "trimmed-mean": tb}.get(figure) or b  # the bounds that decided
    status, held = persist(status, d.estimate, m, p.open_regression is not None)
    msg = c.baseline_note + _pooled_figures_text(c, cur, now, runs, b, drift, fl, tl, shape)
    msg += _ending(status, split + held, m, b, d, figure, p.open_regression) + _one_run_caveat(c, status, d, len(now))
    # weighed alike: either side loaded withholds the decision, a PASS too (identical code measured under
    # load came out 17% slower and 34% faster than its idle twin: docs/checks.md)
    why = interference.unlike(cur, p.evidence(c.mode), ("this run", "the baseline run" if p.single else
                                                          "the baseline runs"), d.estimate)
    codes = [HISTORY_CODE[status]] + split + held + (["disturbed"] if why else []) + (["clustered"] if clustered else [])
    if why:
        status, msg = "INCONCLUSIVE", f"{c.baseline_note}{why[0].upper()}{why[1:]}. {msg[len(c.baseline_note):]}"
    if clustered:
        msg += f" Note: {clustered}."
    return c.rule(HISTORY_THROUGHPUT, status, _change(d.estimate), threshold, msg, ratio=d.estimate, lower=d.lower,
                  upper=d.upper, fail_upper=d.fail_upper, ci_low=d.low, ci_high=d.high, seeds=[len(now), base_n],
                  runs=len(runs), drift_sd=drift, disturbed=bool(why), clustered=clustered, baseline_runs=ids,
                  statistic=figure, **_figure_details(fl, tb, shape, steady, m, p.single),
                  median_ratio=b.estimate, median_lower=b.lower, median_fail_upper=b.fail_upper,
                  median_status=med_status, open_regression=p.open_regression.since if p.open_regression else None,
                  reasons=codes)


def _levels(c: Ctx, base_n: int) -> tuple[float, float]:
    """(PASS, FAIL) one-sided levels: fixed against a series, also in a sequential run (more seeds do not narrow
    a run-unit interval, so --until-decided never adds one for it, judge.until.PER_RUN_WHY, and its looks do not
    spend its alpha); against one run, whose interval this run's trials are part of, the look's levels."""
    assert c.pooled is not None
    if c.pooled.single:
        return c.levels(history=True, baseline_trials=base_n)
    return sequential.levels(c.th.confidence, c.th.history_alpha)


def _one_run_caveat(c: Ctx, status: Status, d: inference.Bounds, n: int) -> str:
    """What a history of one run cannot decide, said with every result against one --baseline run; undecided,
    how many seeds would decide (planned for the gap between no change and twice history_min_change)."""
    p, m = c.pooled, c.th.history_min_change
    if p is None or p.assumed_drift is None:
        return ""
    more = ""
    if status == "INCONCLUSIVE":
        gap = math.log((1 - m) / (1 - 2 * m)) if m < 0.5 else m
        need = inference.seeds_needed(d.sd, gap, c.th.confidence, drift_sd=p.assumed_drift,
                                      fail_confidence=1 - c.th.history_alpha)
        text = more_seeds_text(n, need)
        more = f" {text[0].upper()}{text[1:]}."
    return (f"{more} One baseline run is a history of one run: how far this machine's runs drift from one another is "
            f"not measured but assumed ({p.assumed_drift:.1%}), so a change within that drift cannot be told from the "
            f"code's, and on a machine whose runs drift more (shared, loaded) neither a PASS nor a FAIL beyond "
            f"{m:.0%} holds: `check --history` with {MIN_RUNS} runs or more measures the drift.")


def _change(ratio: float) -> float:
    """ratio - 1, a difference below a baseline file's storage rounding shown as 0 (a run checked against its
    own baseline is unchanged, not +4e-07)."""
    x = ratio - 1
    return 0.0 if abs(x) <= 2 * STORED_REL_ERROR else x


def _pooled_short(c: Ctx, runs: list[list[float]], now: list[float], threshold: dict[str, float]) -> RuleResult | None:
    """The INCONCLUSIVE of too little data to compare, or None when there is enough: a segment of fewer
    than MIN_RUNS runs cannot show the run-to-run drift, a run with fewer than MIN_TRIALS trials of
    MIN_STEPS measured steps has no spread of its own."""
    assert c.pooled is not None
    p = c.pooled
    if p.single and (not runs or len(runs[0]) < inference.MIN_TRIALS):
        have = len(runs[0]) if runs else 0
        return c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, threshold,
                      f"{c.baseline_note}Not enough data: the baseline run has {have} trial(s) of {c.mode} with "
                      f"{measure.MIN_STEPS} measured steps; its trial spread needs {inference.MIN_TRIALS} (save a "
                      "baseline from a run with more seeds).", reasons=["few-seeds"])
    if len(runs) < MIN_RUNS and not p.single:
        return c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, threshold,
                      f"Not enough data: the history holds {len(runs)} run(s) of {c.mode} since {p.since}; the "
                      f"run-to-run drift needs {MIN_RUNS}.", baseline_runs=p.run_ids, reasons=["few-runs"])
    if len(now) < inference.MIN_TRIALS:
        return c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, threshold,
                      f"{c.baseline_note}Not enough data: {len(now)} trial(s) of this run have {measure.MIN_STEPS} "
                      "measured steps; "
                      f"{more_seeds_text(len(now), inference.MIN_TRIALS)}.", baseline_runs=p.run_ids,
                      reasons=["few-seeds"])
    return None


def _pooled_figures_text(c: Ctx, cur: list[CompactTrial], now: list[float], runs: list[list[float]],
                         b: inference.Bounds, drift: float, fl: tuple[inference.Bounds, int, float] | None,
                         tl: tuple[inference.Bounds, int, float] | None,
                         shape: tuple[bool, float, float] | None) -> str:
    """The message's figures against the segment: the fast floor and the trimmed mean (_figures_text) then
    the median figure; the median figure alone where the history lines or this run's trials keep no floor."""
    assert c.pooled is not None
    base_n = sum(len(r) for r in runs)
    base_gm = measure.geomean([measure.geomean(np.exp(x)) for x in runs])  # the mean of the run means (log scale)
    whence = (f"run-to-run drift {drift:.1%} assumed, trial spread {b.sd:.1%} from both runs" if c.pooled.single else
              f"run-to-run drift {drift:.1%} and trial spread {b.sd:.1%} estimated from the segment")
    median_text = (f"median figure {g(measure.geomean(np.exp(now)))} samples/s ({len(now)} trials) vs {g(base_gm)} "
                   f"({base_n} trials{'' if c.pooled.single else ', pooled'}): {ci_text(b)}; {whence}")
    if fl is not None:
        return _figures_text(c, cur, fl, tl, shape) + median_text
    over = "against the baseline run" if c.pooled.single else \
        f"over the {len(runs)} runs of the history since {c.pooled.since}"
    return (f"{c.mode} throughput: {median_text.removeprefix('median figure ')}, {over} (no fast floor on both "
            "sides: older history lines or short trials)")


def _figure_details(fl: tuple[inference.Bounds, int, float] | None, tb: inference.Bounds | None,
                    shape: tuple[bool, float, float] | None, steady: bool, m: float, single: bool = False) -> dict[str, Any]:
    """The result's details of the run-unit figures, in check.json's order: the fast floor's (runs pooled,
    spread, ratio, decision) and the trimmed mean's (ratio, decision, whether it counts), the step-time
    shape's spreads, and whether the comparison was per run (a floor on both sides); empty values where a
    figure is missing, so every result carries the same keys."""
    fb = fl[0] if fl else None
    return {"floor_runs": fl[1] if fl else 0, "floor_sd": fb.sd if fb is not None else None,
            "floor_ratio": fb.estimate if fb is not None else None, "floor_status": _status(fb, m),
            "trimmed_ratio": tb.estimate if tb is not None else None, "trimmed_status": _status(tb, m),
            "trimmed_counts": steady, "shape_sd": list(shape[1:]) if shape else None,
            # against one run the trial spread of this run is part of the interval: more seeds narrow it
            "per_run": fb is not None and not single}


def _ending(status: Status, codes: list[str], m: float, median: inference.Bounds, d: inference.Bounds, figure: str,
            open_regression: OpenRegression | None) -> str:
    """The sentence the result ends with: what was demonstrated, by which figure."""
    by = {"fast-floor": "the fast floor", "trimmed-mean": "the trimmed mean", "median": "the median figure"}[figure]
    if "open-regression" in codes and open_regression is not None:
        return (f"; this night alone does not demonstrate a slowdown beyond {m:.0%}, but its estimate "
                f"({d.estimate - 1:+.1%}, {by}) is still below -{m:.0%}: the {open_regression.describe()}.")
    if status in ("FAIL", "PASS"):
        return slowdown_decided(status, m, d) + f" Decided by {by}."
    if "typical-steps-slower" in codes:
        return split_text(m, median, d)
    if "slow-steps-undecided" in codes:
        return (f"; the fast floor shows no slowdown beyond {m:.0%}, but the trimmed mean, which counts on this "
                f"steady machine, neither rules one out nor demonstrates it (PASS bound {d.lower - 1:+.1%}, FAIL "
                f"bound {d.fail_upper - 1:+.1%}): part of the steps may be slower.")
    fail_text = "n/a" if not math.isfinite(d.fail_upper) else format(d.fail_upper - 1, "+.1%")
    return (f"; a slowdown beyond {m:.0%} is not demonstrated, nor ruled out ({by}: PASS bound {d.lower - 1:+.1%}, "
            f"FAIL bound {fail_text}, {level_text(d)}).")
