"""Can the verdicts be trusted on noisy runs?  A seeded simulation over the grid of issue 13.

Grid: AR(1) step noise rho 0 / 0.7, trial-to-trial spread 0.5% / 2% / 5%, run-to-run drift 0 / 2%,
metric seed sd 1/4 .. 1 x metric_abs_tol, 2 / 3 / 5 seeds (noise model: tests/verdict_sim.py), plus
heavy-tailed (t3, 5% and 12%), wide (log-normal 12%) and bimodal (two clusters 29% apart: the measured
toy machine) trial levels.  `run --until-decided` (seeds added, one look per seed, alpha spending) is
simulated through the same rule functions over all its looks.
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
from ampbench.judge.check import check_trials
from ampbench.judge.rules.parity import guarded_parity
from ampbench.results.baselines import Baseline, compact
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


# The grid's 36 cells are sized to their bounds (CI's CPU: 4000/1500 runs a cell took 8 CPU s): the worst cell's
# false FAIL measured 0.13% of 1500 (binomial standard error 0.09%: the 1% bound ~10 standard errors away), its
# false PASS 0.67% of 600 (s.e. 0.33%, the 5% bound ~13 away); GPU-like detection 99% of 600 (s.e. 0.4%, >= 95%).
# scripts/sim_verdicts.py runs the same grid with more replications for the docs' table.
GRID_SIMS_NULL, GRID_SIMS = 1500, 600


def test_history_throughput_error_rates_over_the_grid():
    worst_ff = worst_fp = 0.0
    rows = []
    for k, sp, d, rho in itertools.product(SEEDS, SPREADS, DRIFTS, RHOS):
        rng = np.random.default_rng(_seed(k, sp, d, rho))
        null = vs.rates(vs.history_outcomes(rng, GRID_SIMS_NULL, k, 0.0, sp, rho, d, TH))
        slow = vs.rates(vs.history_outcomes(rng, GRID_SIMS, k, 0.10, sp, rho, d, TH))
        worst_ff, worst_fp = max(worst_ff, null["FAIL"]), max(worst_fp, slow["PASS"])
        rows.append((k, sp, d, rho, null["FAIL"], slow["PASS"], slow["FAIL"]))
        assert null["FAIL"] <= 0.01, (k, sp, d, rho, null)
        assert slow["PASS"] <= 0.05, (k, sp, d, rho, slow)
    print(f"\n[sim] history-throughput: worst false FAIL {worst_ff:.2%}, worst false PASS {worst_fp:.2%} "
          f"over {len(rows)} cells x {GRID_SIMS_NULL}/{GRID_SIMS} runs")
    det = {(sp, d, rho): f for k, sp, d, rho, _, _, f in rows if k == 3 and sp <= 0.02}
    print("[sim] 10% slowdown FAILs at 3 seeds (spread, drift, rho): "
          + ", ".join(f"{key}: {v:.0%}" for key, v in det.items()))
    # GPU-like noise (spread 0.5%, no drift, independent steps): 3 seeds are plenty.
    assert det[(0.005, 0.0, 0.0)] >= 0.95


def _effective_sd(rng: np.random.Generator, spread: float, rho: float) -> float:
    """The between-trial sd of log per-trial medians a run would show (what the planner reads)."""
    return float(np.std(np.log(vs.trial_medians(rng, 1, 4000, 0.0, spread, rho, 0.0)), ddof=1))


@pytest.mark.parametrize("spread, rho", [(0.02, 0.0), (0.02, 0.7), (0.03, 0.0)])
def test_seed_planner_count_reaches_95_percent_detection(spread, rho):
    """Where 3 seeds are not enough, the planner's seed count reaches >= 95% detection and <= 1% false FAIL."""
    rng = np.random.default_rng(int(spread * 1000 + rho * 10))
    sd = _effective_sd(rng, spread, rho)
    gap = math.log((1 - TH.history_min_change) / (1 - 2 * TH.history_min_change))
    k = inference.seeds_needed(sd, gap, TH.confidence, drift_sd=inference.RUN_DRIFT_SD,
                               fail_confidence=1 - TH.history_alpha)
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


@pytest.mark.parametrize("slowdown, amp_drop", [(0.0, 0.0), (0.10, 0.10)])
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
    # history-throughput against one baseline run is judge.gate against a history of one run (issue 62): the
    # rule decides as history_one_run.judge_mode does on the trials' figures, with the assumed 1% drift
    from ampbench.judge import gate
    from ampbench.judge.rules import history_one_run as one

    def figures(trials):
        return gate.trial_figures([[compact(t, "accuracy").rates() for t in trials if t.mode == m]
                                   for m in ("fp32", "amp-o1-fp16")])
    lv = gate.Levels(TH.history_min_change, TH.confidence, 1 - TH.history_alpha)
    g, _ = one.judge_mode(figures(cur), figures(base_trials), 1, 0, np.ones(2, bool), lv, inference.RUN_DRIFT_SD)
    r = rules["history-throughput"]
    k = int(g.decided[0])
    assert r.status == g.status[0] and r.details["statistic"] == one.STATISTIC[gate.TESTS[k][0]]
    assert r.observed == pytest.approx(math.exp(g.tests[k]["estimate"][0]) - 1, abs=1e-5)
    want = str(g.status[0])
    # without a history a FAIL must also clear a run effect the seeds cannot show (issue 55: guarded_parity)
    _, par = guarded_parity(np.array([ref]), np.array([amp]), TH.metric_abs_tol, TH.metric_sigma_k, TH.confidence,
                            "max", 1 - TH.fail_alpha, TH.confidence, None)
    assert rules["accuracy-parity"].status == par[0]
    assert (want == "FAIL") == (slowdown > 0) and (par[0] == "FAIL") == (amp_drop > 0)


@pytest.mark.parametrize("frac", [0.5, 1.0])
def test_seed_planner_count_reaches_95_percent_parity_detection(frac):
    sd = frac * TH.metric_abs_tol
    margin = vs.true_margin(sd, TH)
    k = inference.seeds_needed(sd, margin, TH.confidence, fail_confidence=1 - TH.fail_alpha,
                               margin_k=TH.metric_sigma_k if TH.metric_sigma_k * sd >= 0.8 * TH.metric_abs_tol else 0)
    rng = np.random.default_rng(int(frac * 100))
    drop = vs.rates(vs.parity_outcomes(rng, 10 * SIMS, k, 2 * margin, sd, TH))
    null = vs.rates(vs.parity_outcomes(rng, 10 * SIMS, k, 0.0, sd, TH))
    assert k is not None and k > 3 and drop["FAIL"] >= 0.95 and null["FAIL"] <= 0.01


# Trial levels that are not normal: heavy tails (t3), a wide log-normal, two clusters (the measured toy).
KINDS = (("t3", 0.05), ("normal", 0.12), ("bimodal", 0.29))


@pytest.mark.parametrize("kind, spread", KINDS)
def test_false_fail_is_bounded_for_heavy_tailed_and_bimodal_trial_levels(kind, spread):
    """FAIL at its own level (history_alpha, fail_alpha) keeps false FAILs <= 1% whatever the trial-level
    distribution, where deciding FAIL at `confidence` gave ~2% (issue 23).  One exception is measured and
    documented: speedup at 3 + 3 seeds on the bimodal machine, where all three trials of each arm land in
    opposite clusters with probability 1/64 and no test on six numbers can tell that from a regression (and at
    2 + 2 the mirror image, a false PASS, 1/16).  --until-decided and --affinity are the remedies."""
    for k in SEEDS:
        rng = np.random.default_rng(_seed(k, spread, 11))
        hist = vs.rates(vs.history_outcomes(rng, SIMS_NULL, k, 0.0, spread, 0.0, 0.02, TH, kind))
        slow = vs.rates(vs.history_outcomes(rng, SIMS, k, 0.10, spread, 0.0, 0.02, TH, kind))
        good, _ = vs.speedup_outcomes(rng, SIMS_NULL, k, TH.min_speedup * 1.1, spread, 0.0, TH, kind)
        bad, _ = vs.speedup_outcomes(rng, SIMS, k, TH.min_speedup * 0.9, spread, 0.0, TH, kind)
        assert hist["FAIL"] <= 0.01 and slow["PASS"] <= 0.05, (kind, k, hist, slow)
        bound = 1 / 64 + 0.006 if (kind, k) == ("bimodal", 3) else 0.01
        # and the same split the other way passes a true 0.9 x min_speedup at 2 + 2 seeds (1/16)
        pass_bound = 1 / 16 + 0.012 if (kind, k) == ("bimodal", 2) else 0.05
        assert vs.rates(good)["FAIL"] <= bound and vs.rates(bad)["PASS"] <= pass_bound, (kind, k)
        if k == 2:  # two trials per side never FAIL (inference.MIN_FAIL_TRIALS)
            assert hist["FAIL"] == 0 and vs.rates(good)["FAIL"] == 0


def test_fail_at_confidence_alone_would_cry_wolf_on_the_bimodal_machine():
    """The regression test of the cause: the same comparisons decided FAIL at `confidence` (the old rule)
    give clearly more false FAILs than at history_alpha."""
    old = Thresholds(min_speedup=1.3, history_alpha=1 - TH.confidence)
    rng = np.random.default_rng(5)
    now = vs.rates(vs.history_outcomes(rng, SIMS_NULL, 3, 0.0, 0.29, 0.0, 0.0, TH, "bimodal"))["FAIL"]
    rng = np.random.default_rng(5)
    before = vs.rates(vs.history_outcomes(rng, SIMS_NULL, 3, 0.0, 0.29, 0.0, 0.0, old, "bimodal"))["FAIL"]
    assert before > 1.5 * now and now <= 0.01


SEQ_SIMS = 1500
SEQ_CELLS = [("normal", 0.02, 0.0), ("normal", 0.02, 0.7), ("normal", 0.05, 0.0), ("t3", 0.05, 0.0),
             ("normal", 0.12, 0.0), ("bimodal", 0.29, 0.0)]


@pytest.mark.parametrize("kind, spread, rho", SEQ_CELLS)
def test_until_decided_error_rates_over_all_looks(kind, spread, rho):
    """run --until-decided from 3 seeds to a cap of 12, one look per added seed: false FAIL <= 1% and
    false PASS <= 5% over all looks, for history (2% drift), speedup and parity, with the rule functions."""
    rng = np.random.default_rng(_seed(spread, rho, 21) + len(kind))
    null, used0 = vs.sequential_history(rng, 2 * SEQ_SIMS, 3, 12, 0.0, spread, rho, 0.02, TH, kind)
    slow, _ = vs.sequential_history(rng, SEQ_SIMS, 3, 12, 0.10, spread, rho, 0.02, TH, kind)
    good, _ = vs.sequential_speedup(rng, 2 * SEQ_SIMS, 3, 12, TH.min_speedup * 1.1, spread, rho, TH, kind)
    bad, used = vs.sequential_speedup(rng, SEQ_SIMS, 3, 12, TH.min_speedup * 0.9, spread, rho, TH, kind)
    r = {name: vs.rates(o) for name, o in (("null", null), ("slow", slow), ("good", good), ("bad", bad))}
    print(f"\n[sim] until-decided {kind} {spread:.0%} rho {rho}: history false FAIL {r['null']['FAIL']:.2%}, "
          f"false PASS {r['slow']['PASS']:.2%} (median seeds {np.median(used0):g}); speedup false FAIL "
          f"{r['good']['FAIL']:.2%}, false PASS {r['bad']['PASS']:.2%}, detected {r['bad']['FAIL']:.1%} "
          f"(median seeds {np.median(used):g})")
    assert r["null"]["FAIL"] <= 0.01 and r["good"]["FAIL"] <= 0.01
    assert r["slow"]["PASS"] <= 0.05 and r["bad"]["PASS"] <= 0.05
    assert used.min() >= 3 and used.max() <= 12


def test_until_decided_parity_error_rates_over_all_looks():
    for frac in (0.5, 1.0):
        sd = frac * TH.metric_abs_tol
        rng = np.random.default_rng(int(frac * 10) + 3)
        null, _ = vs.sequential_parity(rng, 10 * SEQ_SIMS, 3, 12, 0.0, sd, TH)
        drop, _ = vs.sequential_parity(rng, 4 * SEQ_SIMS, 3, 12, 2 * vs.true_margin(sd, TH), sd, TH)
        assert vs.rates(null)["FAIL"] <= 0.01 and vs.rates(drop)["PASS"] <= 0.05, frac


def test_until_decided_uses_fewer_seeds_than_the_fixed_plan_of_the_same_power():
    """Where the effect is large the sequential run stops early; at the cap it keeps the fixed plan's power."""
    rng = np.random.default_rng(99)
    out, used = vs.sequential_speedup(rng, SEQ_SIMS, 3, 12, TH.min_speedup * 0.9, 0.05, 0.0, TH)
    power = vs.rates(out)["FAIL"]
    fixed = next(k for k in range(3, 13)
                 if vs.rates(vs.speedup_outcomes(np.random.default_rng(k), SEQ_SIMS, k, TH.min_speedup * 0.9, 0.05,
                                                 0.0, TH)[0])["FAIL"] >= power - 0.005)
    print(f"\n[sim] speedup 10% below min at 5% spread: sequential {power:.1%} detected with median "
          f"{np.median(used):g} seeds, fixed plan of that power {fixed} seeds")
    assert power >= 0.95 and np.median(used) < fixed


# Realistic seed spreads of a final metric, relative to metric_abs_tol: 0.07 is the GPU-like resnet run of
# issue 34 (sd 0.0007 against 0.01), 4 a metric far noisier than its tolerance.
METRIC_SPREADS = (0.07, 0.25, 0.5, 1.0, 2.0, 4.0)


@pytest.mark.parametrize("kind", ["normal", "t3"])
def test_metric_rules_fail_from_two_seeds_within_fail_alpha(kind):
    """accuracy-parity and history-metric have no 3-seed floor (a seeded metric does not depend on where
    the process ran): at 2 + 2 seeds identical code FAILs at most fail_alpha of the time, Gaussian or
    heavy-tailed seed spread, and a collapse far beyond the margin with a tight spread is FAILed."""
    worst = 0.0
    for frac in METRIC_SPREADS:
        rng = np.random.default_rng(_seed(frac, 31) + len(kind))
        null = vs.rates(vs.parity_outcomes(rng, 40000, 2, 0.0, frac * TH.metric_abs_tol, TH, kind))
        worst = max(worst, null["FAIL"])
        assert null["FAIL"] <= TH.fail_alpha, (kind, frac, null)
    rng = np.random.default_rng(32)
    collapse = vs.rates(vs.parity_outcomes(rng, 2000, 2, 0.2, 0.0007, TH, kind))
    assert collapse["FAIL"] >= 0.95, collapse
    print(f"\n[sim] parity at 2 seeds ({kind}): worst false FAIL {worst:.2%}; a 0.2 drop at sd 0.0007 FAILs "
          f"{collapse['FAIL']:.0%}")


def test_pooled_history_baseline_error_rates():
    """history-throughput on the median figure against 10 earlier runs (check --history with lines that keep no
    fast floor: judge.gate's run-unit prediction): identical code FAILs at most history_alpha, a 20% slowdown is
    FAILed >= 80% at 3 trials and 6% trial spread with 2% drift, where one baseline run of 3 trials FAILs it far
    less often."""
    rng = np.random.default_rng(41)
    null = vs.rates(vs.pooled_outcomes(rng, 2000, 10, 3, 0.0, 0.06, 0.0, 0.02, TH))
    slow = vs.rates(vs.pooled_outcomes(rng, 600, 10, 3, 0.20, 0.06, 0.0, 0.02, TH))
    one = vs.rates(vs.history_outcomes(rng, 600, 3, 0.20, 0.06, 0.0, 0.02, TH))
    assert null["FAIL"] <= TH.history_alpha and slow["PASS"] == 0, (null, slow)
    assert slow["FAIL"] >= 0.80 and slow["FAIL"] > one["FAIL"] + 0.1, (slow, one)
    print(f"\n[sim] pooled history (10 runs x 3 trials, 6% spread, 2% drift): false FAIL {null['FAIL']:.2%}, "
          f"20% slowdown FAILs {slow['FAIL']:.0%} (one baseline run: {one['FAIL']:.0%})")


@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_seeds_sharing_a_run_do_not_fail_identical_code_at_any_tolerance(seeds):
    """issues 40, 55: a run effect shared by the seeds of one mode (sd 0.1 pt, seed sd 0.05 pt: rho 0.8).  Judged on
    the seeds alone accuracy parity FAILed identical code more often with more seeds (2-11%); without a history the
    rule now lets a FAIL stand only beyond a run effect the seeds cannot show (parity.guarded_parity): at most 1% at
    every tolerance down to none; with the run-level sd from 10 earlier runs (check --history) at most 1%; a
    5-point drop still FAILs at 2 seeds per side."""
    for k, tol in enumerate((0.0, 0.05, 0.1)):
        rng = np.random.default_rng(400 + 10 * seeds + k)
        today, hist, now = vs.correlated_parity_outcomes(rng, 6000, seeds, 0.1, 0.05, tol)
        assert (now == "FAIL").mean() <= 0.01 and (hist == "FAIL").mean() <= 0.01, (tol, (now == "FAIL").mean())
        if seeds == 5 and tol == 0.1:
            assert (today == "FAIL").mean() > 0.03  # the seeds alone cry wolf
    _, _, drop = vs.correlated_parity_outcomes(np.random.default_rng(7), 2000, 2, 0.1, 0.05, 0.1, drop=5.0)
    assert (drop == "FAIL").mean() >= 0.99
