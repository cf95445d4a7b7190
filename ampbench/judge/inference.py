"""Trial-level inference: the unit of replication is a trial (a seed, or a run for history).

Per-step samples inside one trial are autocorrelated (thermal state, allocator, background load),
so a test on pooled steps treats hundreds of dependent numbers as independent and cries wolf.  Here
every trial is first reduced to one robust number (the median of its per-step rates, or its
metric, or its time to target), and the comparison of two arms is a two-sample t procedure on those
numbers (on the log scale for rates and times, so a ratio comes out).  The between-trial spread
already contains the within-trial noise, whatever its autocorrelation, which a block bootstrap
would have to estimate.  Both arms' spread enters through the pooled variance.

Decisions use one-sided bounds, each at its own level: PASS when the bound on the unfavourable side
clears the threshold at the suite's `confidence`; FAIL when the bound on the favourable side is still
beyond it at 1 - `fail_alpha` (history rules: 1 - `history_alpha`), so a false FAIL stays at its own
small rate however large the standard error is against the threshold; INCONCLUSIVE otherwise.  In a
sequential run (`run --until-decided`) both levels come from judge.sequential's alpha spending.

Every function has a batch form (rows = independent comparisons) that the simulation in
tests/test_verdict_sim.py calls, so the simulated error rates are those of the rule code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ampbench.judge import sequential
from ampbench.judge.distributions import norm_ppf, t_ppf
from ampbench.judge.measure import MIN_TRIALS

# How few trials per side may FAIL a rule depends on what its observations depend on (fail_floor).
# Throughput and times move with where a process landed: two tight trials per arm cannot tell a regression
# from two processes that landed on a slower and a faster CPU (bimodal trial levels, tests/verdict_sim.py:
# with 2 + 2 trials the t bound FAILs ~6% of identical comparisons; with 3 + 3, pooled, well under 1%).
MIN_FAIL_TRIALS = 3
# The final metric of a seeded training run (and its allocator peak) does not depend on where the process
# ran: the t bound decides from two trials per side (false FAIL at n = 2 measured in docs/checks.md).
MIN_FAIL_TRIALS_SEEDED = MIN_TRIALS
# Run-to-run drift of the whole machine (sd of the log level difference between two runs of the same
# code): invisible inside either run, so a history comparison adds it to the variance of its estimate.
RUN_DRIFT_SD = 0.01


@dataclass(frozen=True)
class Bounds:
    """Estimate, two-sided `confidence` interval and the one-sided `confidence` bounds that decide."""

    estimate: float
    low: float
    high: float
    lower: float
    upper: float
    sd: float  # between-trial sd on the analysis scale (log for ratios)
    df: int
    confidence: float
    fail_lower: float = math.nan  # one-sided bounds at the FAIL level (1 - fail alpha)
    fail_upper: float = math.nan
    fail_confidence: float = math.nan
    pass_confidence: float = math.nan  # one-sided level of lower/upper (default: confidence)
    min_fail_trials: int = MIN_FAIL_TRIALS  # below this many trials on a side the FAIL bounds are infinite


def fail_floor(placement: bool, pinned: bool = False, clustered: bool = False) -> int:
    """Trials per side a FAIL needs: MIN_FAIL_TRIALS for observations that depend on where a process ran
    (`placement`: throughput, times) unless the trials were `pinned` to one CPU set and do not cluster;
    MIN_FAIL_TRIALS_SEEDED for what only seeded training decides (the metric, the peak)."""
    if placement and (clustered or not pinned):
        return MIN_FAIL_TRIALS
    return MIN_FAIL_TRIALS_SEEDED


def _pooled(a: np.ndarray, b: np.ndarray, extra: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, np.ndarray, int]:
    """(difference of row means, its standard error, df).  The between-trial variance is pooled over
    both arms and any `extra` arms (other modes of the same runs: more degrees of freedom for the
    spread, which is a property of the machine and workload more than of the mode)."""
    arms = [a, b, *extra]
    df = sum(x.shape[-1] - 1 for x in arms)
    ss = sum(x.var(-1, ddof=1) * (x.shape[-1] - 1) for x in arms if x.shape[-1] > 1)
    sd = np.sqrt(ss / df)
    return a.mean(-1) - b.mean(-1), sd * math.sqrt(1 / a.shape[-1] + 1 / b.shape[-1]), df


def _bound(est: np.ndarray, t: float | np.ndarray, se: np.ndarray) -> np.ndarray:
    """est + t x se, where an infinite t (a look that spends nothing, too few trials) is an infinite bound
    even when se is 0 (inf x 0 would be NaN)."""
    t = np.asarray(t, float)
    with np.errstate(invalid="ignore"):
        out = est + t * se
    return np.where(np.isinf(t), np.copysign(np.inf, t), out)


def diff_bounds_batch(a: np.ndarray, b: np.ndarray, confidence: float,
                      extra: Sequence[np.ndarray] = (), drift_sd: float | np.ndarray = 0.0,
                      fail_confidence: float | None = None,
                      pass_confidence: float | None = None,
                      min_fail_trials: int = MIN_FAIL_TRIALS) -> dict[str, np.ndarray]:
    """Bounds on mean(a) - mean(b) for rows of (B, k1) and (B, k2) per-trial values (k >= 2);
    `drift_sd`: a between-run component added to the standard error (history comparisons).
    low/high: the two-sided `confidence` interval; lower/upper: one-sided bounds at `pass_confidence`
    (default `confidence`); fail_lower/fail_upper: at `fail_confidence` (default: the same), infinite
    with fewer than `min_fail_trials` on a side (fail_floor)."""
    est, se, df = _pooled(a, b, extra)
    se = np.sqrt(se ** 2 + np.asarray(drift_sd) ** 2)
    pc = confidence if pass_confidence is None else pass_confidence
    fc = pc if fail_confidence is None else fail_confidence
    t2 = t_ppf((1 + confidence) / 2, df)
    t1, tf = sequential.t_quantile(pc, df), sequential.t_quantile(fc, df)
    if min(a.shape[-1], b.shape[-1]) < min_fail_trials:
        tf = np.inf  # the FAIL bounds say nothing: no FAIL from fewer trials
    sd = np.sqrt(np.maximum(se ** 2 - np.asarray(drift_sd) ** 2, 0)) / math.sqrt(1 / a.shape[-1] + 1 / b.shape[-1])
    return {"estimate": est, "low": est - t2 * se, "high": est + t2 * se, "lower": est - t1 * se,
            "upper": est + t1 * se, "fail_lower": _bound(est, -tf, se), "fail_upper": _bound(est, tf, se),
            "sd": sd, "df": np.full(est.shape, df)}


def run_values_batch(trials: np.ndarray) -> np.ndarray:
    """Per-trial log figures -> one value per run: the median over its trials (last axis; NaN pads a run
    with fewer trials; NaN where it has none), (B, n) -> (B,) or (B, R, K) -> (B, R).  A median, so that one
    trial that ran wholly in a slow episode of the machine (judge.measure.run_floor) does not move the run.
    By sorting, without numpy's masked nanmedian: the nightly simulation takes it thousands of times."""
    x = np.asarray(trials, float)
    if x.shape[-1] == 0:
        return np.full(x.shape[:-1], np.nan)
    s = np.sort(x, -1)  # NaN sort last
    n = (~np.isnan(x)).sum(-1)
    lo = np.take_along_axis(s, np.maximum((n - 1) // 2, 0)[..., None], -1)[..., 0]
    hi = np.take_along_axis(s, np.minimum(n // 2, x.shape[-1] - 1)[..., None], -1)[..., 0]
    return np.where(n > 0, (lo + hi) / 2, np.nan)


def log_ratio_bounds(num: Sequence[float], den: Sequence[float], confidence: float,
                     extra: Sequence[Sequence[float]] = (), drift_sd: float = 0.0,
                     fail_confidence: float | None = None, pass_confidence: float | None = None,
                     min_fail_trials: int = MIN_FAIL_TRIALS) -> Bounds:
    """Bounds on the ratio of geometric means of per-trial values (rates or times), num / den;
    `extra`: per-trial values of other arms that only contribute to the pooled spread."""
    a, b = np.log(np.asarray(num, float))[None], np.log(np.asarray(den, float))[None]
    more = [np.log(np.asarray(x, float))[None] for x in extra if len(x) >= 2]
    r = diff_bounds_batch(a, b, confidence, more, drift_sd, fail_confidence, pass_confidence, min_fail_trials)
    e = {k: float(np.exp(v[0])) for k, v in r.items() if k not in ("sd", "df")}
    pc = confidence if pass_confidence is None else pass_confidence
    fc = pc if fail_confidence is None else fail_confidence
    return Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(r["sd"][0]),
                  int(r["df"][0]), confidence, e["fail_lower"], e["fail_upper"], fc, pc, min_fail_trials)


def decide_batch(lower: np.ndarray, upper: np.ndarray, threshold: float | np.ndarray,
                 higher_is_better: bool = True, fail_lower: np.ndarray | None = None,
                 fail_upper: np.ndarray | None = None) -> np.ndarray:
    """Three outcomes per row: 'PASS' (bound clears the threshold), 'FAIL' (shown beyond it), else
    'INCONCLUSIVE'.  higher_is_better: PASS needs lower >= threshold, FAIL needs upper < threshold.
    `fail_lower`/`fail_upper`: the bounds at the FAIL level when it differs from the PASS level."""
    fl = lower if fail_lower is None else fail_lower
    fu = upper if fail_upper is None else fail_upper
    if higher_is_better:
        ok, bad = lower >= threshold, fu < threshold
    else:
        ok, bad = upper <= threshold, fl > threshold
    return np.where(ok, "PASS", np.where(bad, "FAIL", "INCONCLUSIVE"))


def decide_bounds(b: Bounds, threshold: float, higher_is_better: bool = True) -> str:
    """decide_batch for one Bounds (its FAIL bounds when it has them)."""
    fl = b.lower if math.isnan(b.fail_lower) else b.fail_lower
    fu = b.upper if math.isnan(b.fail_upper) else b.fail_upper
    return str(decide_batch(np.array([b.lower]), np.array([b.upper]), threshold, higher_is_better,
                            np.array([fl]), np.array([fu]))[0])


def run_effect_sd_batch(values: np.ndarray) -> tuple[np.ndarray, int]:
    """The run-level sd of a metric from earlier runs: (tau per row, degrees of freedom of the run means).

    values: (B, R, M, k) per-seed metrics of R runs x M modes x k seeds (NaN pads).  Model: metric = mode
    level + run effect (sd tau, shared by the seeds of one mode in one run: the same data order, device
    and build) + seed noise (sd s).  A run mean over k seeds varies by tau^2 + s^2 / k; the spread of the
    run means (pooled over the modes, df sum(R - 1)) minus the seed part (the within-run variance over
    the harmonic mean k) estimates tau^2, at least 0."""
    with np.errstate(all="ignore"):
        means = np.nanmean(values, -1)  # (B, R, M)
        n = (~np.isnan(values)).sum(-1)
        v_b = np.nanvar(means, 1, ddof=1)  # (B, M)
        s2 = np.nansum((values - means[..., None]) ** 2, (1, 3)) / np.maximum((n - 1).clip(0).sum(1), 1)
        k_h = values.shape[1] / np.nansum(1.0 / np.where(n > 0, n, np.nan), 1)
        tau2 = np.nanmean(np.maximum(v_b - s2 / k_h, 0), -1)
    df = values.shape[2] * (values.shape[1] - 1)
    return np.sqrt(np.nan_to_num(tau2)), df


def parity_batch(ref: np.ndarray, cand: np.ndarray, abs_tol: float, sigma_k: float, confidence: float,
                 goal: str = "max", fail_confidence: float | None = None,
                 pass_confidence: float | None = None,
                 min_fail_trials: int = MIN_FAIL_TRIALS_SEEDED,
                 run_sd: float | np.ndarray = 0.0) -> dict[str, np.ndarray]:
    """Non-inferiority of the candidate's mean metric: bounds on how much worse it is than the reference.

    worse = mean(ref) - mean(cand) for goal max (positive = worse), margin = max(abs_tol, sigma_k x
    seed sd pooled over both arms).  PASS: upper bound of `worse` <= margin (non-inferiority shown);
    FAIL: lower bound at `fail_confidence` > margin (a drop beyond the margin shown); else INCONCLUSIVE.
    A seeded metric does not depend on placement, so two seeds per side can FAIL (fail_floor).
    `run_sd`: the sd of a run-level effect on the difference (run_effect_sd_batch, from a history): the
    seeds of one mode in one run share it, so it does not shrink with seeds (issue 40) and is added to
    the standard error; the margin's sigma term stays the seed sd.
    """
    a, b = (ref, cand) if goal == "max" else (cand, ref)
    r = diff_bounds_batch(a, b, confidence, drift_sd=run_sd, fail_confidence=fail_confidence,
                          pass_confidence=pass_confidence, min_fail_trials=min_fail_trials)
    margin = np.maximum(abs_tol, sigma_k * r["sd"])
    r["margin"] = margin
    r["status"] = decide_batch(r["lower"], r["upper"], margin, False, r["fail_lower"], r["fail_upper"])
    return r


def seeds_needed(sd: float | None, gap: float, confidence: float, power: float = 0.95,
                 false_alarm: float = 0.01, null_gap: float | None = None, max_seeds: int = 64,
                 drift_sd: float = 0.0, margin_k: float = 0.0, fail_confidence: float | None = None) -> int | None:
    """Seeds per arm so that a true effect `gap` beyond the threshold is shown with `power`, and a
    true effect `null_gap` on the good side (default: gap) is called a failure at most `false_alarm`.

    The decision bound is estimate +- t_conf x se, se = sqrt(2 sd^2 / k + drift_sd^2), t with 2k - 2
    degrees of freedom (conservative where the rule pools more arms); the estimate is normal around
    the truth, so: detection needs (t_conf + z_power) x se <= gap, a false alarm needs the estimate
    null_gap / se + t_conf standard errors off, i.e. (z_(1 - false_alarm) - t_conf) x se <= null_gap.
    The detection condition also carries the sampling noise of the estimated sd, which moves the
    bound (and, `margin_k` > 0, a margin of margin_k x the estimated sd: the parity margin) with it.
    None when the spread is unknown or `max_seeds` is not enough.  Detection is a FAIL, so t_conf is
    the FAIL level's quantile (`fail_confidence`, default `confidence`).
    """
    if sd is None or not math.isfinite(sd) or gap <= 0:
        return None
    null_gap = gap if null_gap is None else null_gap
    z_alarm = norm_ppf(1 - false_alarm)
    for k in range(MIN_TRIALS, max_seeds + 1):
        se = math.sqrt(sd ** 2 * 2 / k + drift_sd ** 2)
        df = 2 * k - 2
        tc = t_ppf(confidence if fail_confidence is None else fail_confidence, df)
        # the estimated sd moves the bound (t x se) and a sigma margin together: sd(s) ~ sd / sqrt(2 df)
        spread = math.hypot(se, (tc * math.sqrt(2 / k) + margin_k) * sd / math.sqrt(2 * df))
        if tc * se + t_ppf(power, df) * spread <= gap and (z_alarm - tc) * se <= null_gap:
            return k
    return None


@dataclass(frozen=True)
class PairedRatio:
    """A ratio from interleaved pairs (A B A B ...): geometric mean of the per-pair ratios and its interval."""

    estimate: float
    low: float
    high: float
    pairs: int
    sd: float  # sd of the per-pair log ratios
    pairs_for_claim: int | None  # pairs whose interval half-width would be <= `claim` at this sd

    def text(self, claim: float) -> str:
        need = "unknown (one pair)" if self.pairs_for_claim is None else str(self.pairs_for_claim)
        return (f"{self.estimate:.3f} ({self.pairs} pairs, 95% CI {self.low:.3f} to {self.high:.3f}; "
                f"a +-{claim:.0%} claim needs {need} pairs at this spread)")


def paired_ratio(num: Sequence[float], den: Sequence[float], confidence: float = 0.95,
                 claim: float = 0.02, max_pairs: int = 10_000) -> PairedRatio:
    """t interval on the log of per-pair ratios num_i / den_i (the pair is the unit: both sides of a
    pair ran back to back, so slow machine drift cancels inside it), and the pairs a claim of +-`claim`
    needs: the smallest n with t_(n-1) x sd / sqrt(n) <= log(1 + claim)."""
    r = np.log(np.asarray(num, float)) - np.log(np.asarray(den, float))
    n = len(r)
    est = float(np.exp(r.mean()))
    if n < 2:
        return PairedRatio(est, math.nan, math.nan, n, math.nan, None)
    sd = float(r.std(ddof=1))
    half = float(t_ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    target = math.log(1 + claim)
    need = next((k for k in range(2, max_pairs + 1)
                 if t_ppf((1 + confidence) / 2, k - 1) * sd / math.sqrt(k) <= target), None)
    return PairedRatio(est, float(np.exp(r.mean() - half)), float(np.exp(r.mean() + half)), n, sd, need)
