"""Can the verdicts be trusted?  A seeded simulation of many runs drawn from one noise model.

At the suite defaults (config.Thresholds) and the noise model below:
  - A/A comparisons (nothing changed) raise a false alarm <= 1% of the time;
  - a 10% throughput drop against a baseline, and an AMP accuracy drop of twice the parity margin,
    are detected >= 95% of the time;
  - the speedup rule passes a true speedup 10% above min_speedup >= 95% of the time and one 10%
    below it <= 1% of the time.
The rates are printed (run with -s to see them).  The decisions come from the same stats functions
the rules call, and a few draws are pushed through check_trials to prove it.

Noise model (stated so the numbers can be argued with):
  throughput: per-step time log-normal (sd 5%) with 2% stalls of 1.5-3x, a per-trial level (sd 1.5%),
    and a per-run level (sd 1%, the "different day, same machine" drift between a run and its baseline);
    3 seeds x 100 measured steps per mode.
  metric: seed-to-seed sd = metric_abs_tol / 2 (0.005), 3 seeds per mode.
"""

from __future__ import annotations

import numpy as np
import pytest

from ampbench.config import Thresholds
from ampbench.judge import stats
from ampbench.judge.baseline import Baseline, compact
from ampbench.judge.check import check_trials
from tests.factories import StepNoise, make_suite, make_trials, plan_of

TH = Thresholds()
SEEDS, STEPS = 3, 100
RUN_SD = 0.01
NOISE = StepNoise(step_sd=0.05, trial_sd=0.015, stall_rate=0.02)
METRIC_SD = TH.metric_abs_tol / 2


def _runs(rng: np.random.Generator, sims: int, base_time: float, run_sd: float = RUN_SD,
          steps: int = STEPS) -> np.ndarray:
    """(sims, seeds, steps) per-step samples/s of `sims` independent runs of one mode."""
    day = np.exp(rng.normal(0, run_sd, (sims, 1, 1)))
    trial = np.exp(rng.normal(0, NOISE.trial_sd, (sims, SEEDS, 1)))
    t = base_time * day * trial * np.exp(rng.normal(0, NOISE.step_sd, (sims, SEEDS, steps)))
    stalls = rng.random(t.shape) < NOISE.stall_rate
    t[stalls] *= rng.uniform(1.5, NOISE.stall_max, stalls.sum())
    return 8 / t


def _history_rate(slowdown: float, sims: int, seed: int, run_sd: float = RUN_SD) -> float:
    rng = np.random.default_rng(seed)
    base = _runs(rng, sims, 0.05, run_sd).reshape(sims, -1)
    cur = _runs(rng, sims, 0.05 / (1 - slowdown), run_sd).reshape(sims, -1)
    _, _, regression, _ = stats.shift_batch(cur, base, TH.history_min_change, TH.history_alpha)
    return float(regression.mean())


def _metrics(seed: int, sims: int, drop: float, sd: float, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(0.8, sd, (sims, seeds)), rng.normal(0.8 - drop, sd, (sims, seeds))


def _parity_rate(drop: float, sims: int, seed: int, sd: float = METRIC_SD, seeds: int = SEEDS) -> float:
    ref, amp = _metrics(seed, sims, drop, sd, seeds)
    return float(stats.parity_fails(ref, amp, TH.metric_abs_tol, TH.metric_sigma_k).mean())


def _speedup_rates(true_speedup: float, sims: int, seed: int, resamples: int = 300) -> tuple[float, float]:
    """(fraction PASS, fraction of intervals covering the true ratio); both modes share one run
    (no run-level noise); 60 measured steps per trial and 300 resamples keep it to a second or two."""
    rng = np.random.default_rng(seed)
    ref = _runs(rng, sims, 0.05, run_sd=0.0, steps=60)
    amp = _runs(rng, sims, 0.05 / true_speedup, run_sd=0.0, steps=60)
    _, low, high = stats.bootstrap_ratio_batch(amp, ref, TH.confidence, resamples, seed=seed)
    return float((low >= TH.min_speedup).mean()), float(((low <= true_speedup) & (true_speedup <= high)).mean())


def test_batch_statistics_equal_the_per_comparison_ones_the_rules_use():
    rng = np.random.default_rng(0)
    cur, base = _runs(rng, 20, 0.05 / 0.95), _runs(rng, 20, 0.05)
    ratio, p, reg, _ = stats.shift_batch(cur.reshape(20, -1), base.reshape(20, -1), 0.03, 0.01)
    assert 0 < reg.mean() < 1  # both outcomes seen
    for i in range(20):
        one = stats.throughput_shift(list(cur[i]), list(base[i]), 0.03, 0.01)
        assert one.ratio == pytest.approx(ratio[i]) and one.p_value == pytest.approx(p[i])
        assert one.regression == reg[i]
    ref, amp = _metrics(1, 300, 0.012, METRIC_SD, SEEDS)
    fails = stats.parity_fails(ref, amp, TH.metric_abs_tol, TH.metric_sigma_k)
    for r, a, f in zip(ref, amp, fails):
        m = stats.parity_margin(list(r), TH.metric_abs_tol, TH.metric_sigma_k)
        assert (stats.worse_by(float(a.mean()), float(r.mean()), "max") > m.value) == f
    assert 0 < fails.mean() < 1  # the cross-check saw both outcomes
    _, low, high = stats.bootstrap_ratio_batch(cur[:3], base[:3], resamples=300, seed=5)
    for i in range(3):
        one = stats.bootstrap_median_ratio(list(cur[i]), list(base[i]), resamples=300, seed=5)
        assert one.low == pytest.approx(low[i], rel=0.03) and one.high == pytest.approx(high[i], rel=0.03)


def test_history_throughput_false_alarm_and_power():
    false_alarm = _history_rate(0.0, 2000, seed=1)
    power = _history_rate(0.10, 2000, seed=2)
    grid = {sd: _history_rate(0.0, 500, seed=3, run_sd=sd) for sd in (0.005, 0.02, 0.03)}
    print(f"\n[sim] history-throughput: A/A false alarm {false_alarm:.2%} (n=2000), "
          f"10% drop detected {power:.2%} (n=2000); run-to-run sd -> A/A false alarm (n=500): "
          + ", ".join(f"{sd:.1%}: {r:.1%}" for sd, r in grid.items()))
    assert false_alarm <= 0.01
    assert power >= 0.95


def test_accuracy_parity_false_alarm_and_power():
    margin = max(TH.metric_abs_tol, TH.metric_sigma_k * METRIC_SD)  # the margin at the true seed sd
    false_alarm = _parity_rate(0.0, 20000, seed=4)
    power = _parity_rate(2 * margin, 20000, seed=5)
    grid = {(n, k): _parity_rate(0.0, 20000, seed=6, sd=k * TH.metric_abs_tol, seeds=n)
            for n in (1, 3, 5) for k in (0.25, 0.5, 1.0)}
    print(f"\n[sim] accuracy-parity: A/A false alarm {false_alarm:.2%}, drop of 2x margin ({2 * margin:.3f}) "
          f"detected {power:.2%} (n=20000 each); A/A false alarm by (seeds, seed sd / abs_tol): "
          + ", ".join(f"({n}, {k}): {r:.1%}" for (n, k), r in grid.items()))
    pgrid = {(n, k): _parity_rate(2 * max(TH.metric_abs_tol, TH.metric_sigma_k * k * TH.metric_abs_tol), 20000,
                                  seed=7, sd=k * TH.metric_abs_tol, seeds=n) for n in (3, 5) for k in (0.25, 1.0)}
    print("[sim] accuracy-parity: power for a drop of 2x margin by (seeds, seed sd / abs_tol): "
          + ", ".join(f"({n}, {k}): {r:.1%}" for (n, k), r in pgrid.items()))
    assert false_alarm <= 0.01
    assert power >= 0.95


def test_speedup_rule_power_false_pass_and_coverage():
    need = TH.min_speedup
    power, cover_hi = _speedup_rates(need * 1.10, 120, seed=7)
    false_pass, cover_lo = _speedup_rates(need * 0.90, 120, seed=8)
    at, cover_at = _speedup_rates(need, 120, seed=9)
    print(f"\n[sim] speedup: true {need * 1.1:.2f}x passes {power:.1%}, true {need * 0.9:.2f}x passes "
          f"{false_pass:.1%}, true = min passes {at:.1%}; CI coverage {cover_hi:.0%}/{cover_lo:.0%}/{cover_at:.0%} "
          f"(nominal {TH.confidence:.0%}; n=120 each)")
    assert power >= 0.95 and false_pass <= 0.01
    # Resampling only 3 seeds under-covers a little (seed-to-seed variance is underestimated by ~1/3);
    # what matters for the verdict: at exactly min_speedup the rule passes rarely (one-sided error).
    assert min(cover_hi, cover_lo, cover_at) >= 0.80 and at <= 0.10


@pytest.mark.parametrize("slowdown, amp_drop", [(0.0, 0.0), (0.10, 0.02)])
def test_simulated_runs_through_check_trials_agree_with_the_stats(slowdown, amp_drop):
    """The rule code makes the same decision as the simulated statistics on whole trial sets."""
    suite = make_suite(seeds=list(range(SEEDS)))
    rng = np.random.default_rng(10 + int(slowdown * 100))
    base_trials = make_trials(suite, rng=rng, noise=NOISE, n_steps=STEPS + 5,
                              metrics={"fp32": [0.8] * 3, "amp-o1-fp16": [0.8] * 3})
    baseline = Baseline(suite=suite.suite.name, config_hash=suite.config_hash(), device="nvidia-test-gpu-24gb",
                        modes={m.name: [compact(t, "accuracy") for t in base_trials if t.mode == m.name]
                               for m in suite.modes})
    ref = list(rng.normal(0.8, METRIC_SD, SEEDS))
    amp = list(rng.normal(0.8 - amp_drop, METRIC_SD, SEEDS))
    cur = make_trials(suite, rng=rng, noise=NOISE, n_steps=STEPS + 5,
                      base_time={"fp32": 0.05, "amp-o1-fp16": 0.05 / (1 - slowdown)},
                      metrics={"fp32": ref, "amp-o1-fp16": amp})
    verdicts = check_trials(suite, cur, plan_of(suite), baseline=baseline)
    rules = {r.rule: r for r in verdicts[1].rules}
    shift = stats.throughput_shift([compact(t, "accuracy").rates() for t in cur if t.mode == "amp-o1-fp16"],
                                   [t.rates() for t in baseline.modes["amp-o1-fp16"]],
                                   TH.history_min_change, TH.history_alpha)
    margin = stats.parity_margin(ref, TH.metric_abs_tol, TH.metric_sigma_k)
    assert (rules["history-throughput"].status == "FAIL") == shift.regression == (slowdown > 0)
    parity_fail = stats.worse_by(float(np.mean(amp)), float(np.mean(ref)), "max") > margin.value
    assert (rules["accuracy-parity"].status == "FAIL") == parity_fail
