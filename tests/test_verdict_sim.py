"""Can the verdicts be trusted on noisy runs?  A seeded simulation over the grid of issue 13.

Grid: AR(1) step noise rho 0 / 0.7, trial-to-trial spread 0.5% / 2% / 5%, run-to-run drift 0 / 2%,
metric seed sd 1/4 .. 1 x metric_abs_tol, 2 / 3 / 5 seeds (noise model: tests/verdict_sim.py).
A rule has three outcomes; its errors are a false FAIL (nothing wrong, FAIL) and a false PASS (a
real regression, PASS).  Asserted everywhere in the grid: false FAIL <= 1%, false PASS <= 5% for a 10%
slowdown (history), a speedup 10% below min_speedup and a metric drop of twice the margin.  At 3 seeds
with spread <= 2%: the speedup interval covers the truth >= 90%; a 10% slowdown FAILs >= 95% where the
seeds suffice, and at the seed planner's count where they do not.  scripts/sim_verdicts.py runs the
same grid with more replications and writes the table in docs/checks.md.  Run with -s for the rates.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ampbench.config import Thresholds
from ampbench.judge import inference
from ampbench.results.baselines import Baseline, compact
from ampbench.judge.check import check_trials
from tests import verdict_sim as vs
from tests.factories import StepNoise, make_suite, make_trials, plan_of

TH = Thresholds(min_speedup=1.3)
SIMS = 1500
SIMS_NULL = 4000  # false FAIL rates near the 1% bound need more runs to be told from it
SEEDS = (2, 3, 5)
SPREADS = (0.005, 0.02, 0.05)
DRIFTS = (0.0, 0.02)
RHOS = (0.0, 0.7)


def _seed(*parts: float) -> int:
    """A fixed seed per grid cell (Python's hash() is salted per process)."""
    return int(sum((i + 1) * 1000 * p for i, p in enumerate(parts))) + 17


def test_history_throughput_error_rates_over_the_grid():
    worst_ff = worst_fp = 0.0
    rows = []
    for k, sp, d, rho in itertools.product(SEEDS, SPREADS, DRIFTS, RHOS):
        rng = np.random.default_rng(_seed(k, sp, d, rho))
        null = vs.rates(vs.history_outcomes(rng, SIMS_NULL, k, 0.0, sp, rho, d, TH))
        slow = vs.rates(vs.history_outcomes(rng, SIMS, k, 0.10, sp, rho, d, TH))
        worst_ff, worst_fp = max(worst_ff, null["FAIL"]), max(worst_fp, slow["PASS"])
        rows.append((k, sp, d, rho, null["FAIL"], slow["PASS"], slow["FAIL"]))
        assert null["FAIL"] <= 0.01, (k, sp, d, rho, null)
        assert slow["PASS"] <= 0.05, (k, sp, d, rho, slow)
    print(f"\n[sim] history-throughput: worst false FAIL {worst_ff:.2%}, worst false PASS {worst_fp:.2%} "
          f"over {len(rows)} cells x {SIMS_NULL}/{SIMS} runs")
    det = {(sp, d, rho): f for k, sp, d, rho, _, _, f in rows if k == 3 and sp <= 0.02}
    print("[sim] 10% slowdown FAILs at 3 seeds (spread, drift, rho): "
          + ", ".join(f"{key}: {v:.0%}" for key, v in det.items()))
    # GPU-like noise (spread 0.5%, no drift, independent steps): 3 seeds are plenty.
    assert det[(0.005, 0.0, 0.0)] >= 0.95


def _effective_sd(rng: np.random.Generator, spread: float, rho: float) -> float:
    """The between-trial sd of log per-trial medians a run would show (what the planner reads)."""
    return float(np.std(np.log(vs.trial_medians(rng, 1, 4000, 0.0, spread, rho, 0.0)), ddof=1))


@pytest.mark.parametrize("spread, rho", [(0.02, 0.0), (0.02, 0.7), (0.05, 0.0)])
def test_seed_planner_count_reaches_95_percent_detection(spread, rho):
    """Where 3 seeds are not enough, the planner's seed count reaches >= 95% detection and <= 1% false FAIL."""
    rng = np.random.default_rng(int(spread * 1000 + rho * 10))
    sd = _effective_sd(rng, spread, rho)
    gap = math.log((1 - TH.history_min_change) / (1 - 2 * TH.history_min_change))
    k = inference.seeds_needed(sd, gap, TH.confidence, drift_sd=inference.RUN_DRIFT_SD)
    assert k is not None and k >= 3
    slow = vs.rates(vs.history_outcomes(rng, SIMS, k, 0.10, spread, rho, 0.0, TH))
    null = vs.rates(vs.history_outcomes(rng, SIMS, k, 0.0, spread, rho, 0.0, TH))
    print(f"\n[sim] spread {spread:.1%} rho {rho}: sd {sd:.3f} -> planner {k} seeds: 10% slowdown FAILs "
          f"{slow['FAIL']:.1%}, false FAIL {null['FAIL']:.2%}")
    assert slow["FAIL"] >= 0.95 and null["FAIL"] <= 0.01


def test_speedup_error_rates_and_coverage():
    need = TH.min_speedup
    for k, sp, rho in itertools.product(SEEDS, SPREADS, RHOS):
        rng = np.random.default_rng(_seed(k, sp, rho, 7))
        good, cover_good = vs.speedup_outcomes(rng, SIMS, k, need * 1.10, sp, rho, TH)
        bad, cover_bad = vs.speedup_outcomes(rng, SIMS, k, need * 0.90, sp, rho, TH)
        assert vs.rates(good)["FAIL"] <= 0.01, (k, sp, rho)
        assert vs.rates(bad)["PASS"] <= 0.05, (k, sp, rho)
        if k == 3 and sp <= 0.02:
            assert min(cover_good.mean(), cover_bad.mean()) >= 0.90, (k, sp, rho)


def test_accuracy_parity_error_rates():
    for k, frac in itertools.product(SEEDS, (0.25, 0.5, 1.0)):
        sd = frac * TH.metric_abs_tol
        rng = np.random.default_rng(_seed(k, frac, 3))
        null = vs.rates(vs.parity_outcomes(rng, 20 * SIMS, k, 0.0, sd, TH))
        drop = vs.rates(vs.parity_outcomes(rng, 20 * SIMS, k, 2 * vs.true_margin(sd, TH), sd, TH))
        assert null["FAIL"] <= 0.01 and drop["PASS"] <= 0.05, (k, frac, null, drop)


@pytest.mark.parametrize("slowdown, amp_drop", [(0.0, 0.0), (0.10, 0.03)])
def test_rule_code_decides_as_the_simulated_statistics(slowdown, amp_drop):
    """check_trials on whole trial sets makes the decision the batch functions (used above) make."""
    suite = make_suite(seeds=[0, 1, 2])
    rng = np.random.default_rng(10 + int(slowdown * 100))
    noise = StepNoise(step_sd=0.05, trial_sd=0.01)
    base_trials = make_trials(suite, rng=rng, noise=noise, n_steps=65, metrics={"fp32": [0.8] * 3,
                                                                                 "amp-o1-fp16": [0.8] * 3})
    baseline = Baseline(suite=suite.suite.name, config_hash=suite.config_hash(), device="nvidia-test-gpu-24gb",
                        modes={m.name: [compact(t, "accuracy") for t in base_trials if t.mode == m.name]
                               for m in suite.modes})
    ref, amp = list(rng.normal(0.8, 0.005, 3)), list(rng.normal(0.8 - amp_drop, 0.005, 3))
    cur = make_trials(suite, rng=rng, noise=noise, n_steps=65,
                      base_time={"fp32": 0.05, "amp-o1-fp16": 0.05 / (1 - slowdown)},
                      metrics={"fp32": ref, "amp-o1-fp16": amp})
    rules = {r.rule: r for r in check_trials(suite, cur, plan_of(suite), baseline=baseline)[1].rules}
    med = {side: [float(np.median(compact(t, "accuracy").rates())) for t in ts if t.mode == "amp-o1-fp16"]
           for side, ts in (("cur", cur), ("base", base_trials))}
    other = [[float(np.median(compact(t, "accuracy").rates())) for t in ts if t.mode == "fp32"]
             for ts in (cur, base_trials)]
    b = inference.log_ratio_bounds(med["cur"], med["base"], TH.confidence, other, inference.RUN_DRIFT_SD)
    want = inference.decide_batch(np.array([b.lower]), np.array([b.upper]), 1 - TH.history_min_change)[0]
    assert rules["history-throughput"].status == want
    assert rules["history-throughput"].observed == pytest.approx(b.estimate - 1, abs=1e-5)
    par = inference.parity_batch(np.array([ref]), np.array([amp]), TH.metric_abs_tol, TH.metric_sigma_k,
                                 TH.confidence)
    assert rules["accuracy-parity"].status == par["status"][0]
    assert (want == "FAIL") == (slowdown > 0) and (par["status"][0] == "FAIL") == (amp_drop > 0)


@pytest.mark.parametrize("frac", [0.5, 1.0])
def test_seed_planner_count_reaches_95_percent_parity_detection(frac):
    sd = frac * TH.metric_abs_tol
    margin = vs.true_margin(sd, TH)
    k = inference.seeds_needed(sd, margin, TH.confidence,
                               margin_k=TH.metric_sigma_k if TH.metric_sigma_k * sd >= 0.8 * TH.metric_abs_tol else 0)
    rng = np.random.default_rng(int(frac * 100))
    drop = vs.rates(vs.parity_outcomes(rng, 10 * SIMS, k, 2 * margin, sd, TH))
    null = vs.rates(vs.parity_outcomes(rng, 10 * SIMS, k, 0.0, sd, TH))
    assert k is not None and k > 3 and drop["FAIL"] >= 0.95 and null["FAIL"] <= 0.01
