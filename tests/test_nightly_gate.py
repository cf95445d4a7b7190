"""Issue 55: the nightly gate, night after night, with the rule's own code (tests/nightly_sim.py) and through the
real path (run folders -> check --history -> history append -> the trend and the dashboard).

The simulation runs small draws with thresholds that still bite (the full tables: scripts/sim_nightly.py,
docs/checks.md); the real-path tests fail on the rule as it was before issue 55 (a creep absorbed, a fleet of
two GPU kinds compared across kinds by the trend and cut at every night by the dashboard).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ampbench.commands.check import check_run
from ampbench.commands.history import append_history
from tests import nightly_noise as nn
from tests import nightly_sim as ns
from tests.factories import GPU_ENV, StepNoise, make_run, make_suite, make_trials

GPU5 = nn.GpuNight(gpu_spread=0.05)
NOISE = StepNoise(step_sd=0.03, trial_sd=0.02)


def test_identical_code_fails_at_most_one_percent_of_nights_over_40_night_histories():
    """A GPU fleet with drift, a fleet of two SKUs 6% apart (alternating nights), machine episodes and shared
    nights, this CPU's slow episodes: at most 1% of nights FAILed, and few held out."""
    for i, model in enumerate((nn.GpuNight(gpu_spread=0.05, drift=0.005), nn.GpuNight(kinds=(0.0, 0.06)),
                               nn.GpuNight(episodes=0.2, shared=0.05), nn.CpuNight())):
        r = ns.rates(ns.simulate(50, model, nn.Change(), 550 + i, judged=30))
        assert r["night_fail"] <= 0.01 and r["held"] <= 0.08, (model, r)


def test_a_slowdown_of_one_modes_steps_fails_within_3_nights():
    """30% of the AMP steps (or the FP32 steps) 1.5-2x slower, the other mode untouched: before issue 55 FAILed
    within 3 nights in about 1% of histories; now in >= 95% (the gate sees the mode's own slow steps, the
    AMP/FP32 ratio cancels the GPU's level)."""
    for i, modes in enumerate(((nn.AMP,), (nn.FP32,))):
        r = ns.rates(ns.simulate(60, GPU5, nn.Change("steps", modes=modes), 560 + i, judged=3))
        assert r["within3"] >= 0.95, (modes, r)


def test_a_slowdown_of_every_modes_steps_fails_within_3_nights_after_one_pending_night():
    """Every third step 1.5x in both modes: the first night could be a machine busy all night (held out pending
    the next), the next night confirms it."""
    r = ns.rates(ns.simulate(60, GPU5, nn.Change("periodic"), 562, judged=3))
    assert r["within3"] >= 0.95 and r["held"] >= 0.95, r


def test_a_creep_fails_before_it_passes_12_percent():
    """1% a night, each night within history_min_change of the last: the reference level does not move with it."""
    c = nn.Change("creep", 0.01)
    r = ns.rates(ns.simulate(60, GPU5, c, 563, judged=13), c)
    assert r["before12"] >= 0.97, r


def test_a_20_percent_slowdown_fails_every_night_a_degraded_night_and_an_improvement_leave_no_fail():
    slow = ns.rates(ns.simulate(50, GPU5, nn.Change("uniform", 0.20), 564, judged=5))
    assert slow["within3"] == 1.0 and slow["every_later"] >= 0.98, slow
    once = nn.Change("once", 0.20)
    r = ns.rates(ns.simulate(50, GPU5, once, 565, judged=6), once)
    assert r["within3"] == 1.0 and r["after_fail"] <= 0.01 and r["after_held"] <= 0.01, r
    faster = ns.rates(ns.simulate(50, GPU5, nn.Change("faster", 0.10), 566, judged=6))
    assert faster["night_fail"] == 0.0 and faster["held"] == 0.0, faster


# ---------------------------------------------------------------- the real path


def _night(root: Path, suite, name: str, level: float, rng: np.random.Generator, env=GPU_ENV, jitter: float = 0.01,
           noise: StepNoise = NOISE) -> Path:
    lvl = level * math.exp(rng.normal(0, jitter))
    trials = make_trials(suite, base_time={m.name: 0.05 / lvl for m in suite.modes}, rng=rng, noise=noise, env=env,
                         wall_clock=1.8e9)
    return make_run(root, suite, trials, run_id=name, env=env)


def test_a_creep_of_1_percent_a_night_fails_before_it_passes_12_percent(tmp_path):
    """Ten nights, then 1% less every night on a GPU-like machine (night-to-night level 1.5%, trials 0.5%), each night
    checked with --history and appended as the nightly does: a night FAILs before the loss passes 12%.  The rule
    before issue 55 let each night join the pool (within history_min_change of it) and restarted the segment at the
    step the creep made: this history was never FAILed up to 15%."""
    suite = make_suite(seeds=[0, 1, 2])
    hist, rng = tmp_path / "hist", np.random.default_rng(21)
    quiet = StepNoise(step_sd=0.01, trial_sd=0.005)
    for i in range(10):
        append_history(_night(tmp_path / "runs", suite, f"a{i:02d}", 1.0, rng, jitter=0.015, noise=quiet), hist)
    first = None
    for j in range(12):
        run = _night(tmp_path / "runs", suite, f"c{j:02d}", 1 - 0.01 * (j + 1), rng, jitter=0.015, noise=quiet)
        rules = [r for v in check_run(run, history=hist).verdicts for r in v.rules if r.rule == "history-throughput"]
        append_history(run, hist)
        if any(r.status == "FAIL" for r in rules):
            first = j
            assert all(r.details["baseline_runs"][0] == "a00" for r in rules), [r.details["baseline_runs"] for r in rules]
            break
    assert first is not None and 0.01 * (first + 1) <= 0.12, first


def test_a_fleet_of_two_gpu_kinds_is_judged_compared_and_drawn_per_kind(tmp_path):
    """Two SKUs 6% apart on alternating nights: check --history judges a night against its own kind's nights only
    (and says so when its kind has too few), the trend compares each night with its own kind's previous night,
    the dashboard draws one figure per kind and cuts neither at every night."""
    from ampbench.report.publish import publish
    from ampbench.report.trend import trend_section
    from ampbench.report.view import Ctx

    suite = make_suite(seeds=[0, 1, 2])
    slow_kind = GPU_ENV.model_copy(update={"device_name": "NVIDIA Other GPU"})
    hist, rng = tmp_path / "hist", np.random.default_rng(22)
    for i in range(8):
        a, b = (GPU_ENV, 1.0) if i % 2 == 0 else (slow_kind, 0.94)
        append_history(_night(tmp_path / "runs", suite, f"n{i:02d}", b, rng, env=a), hist)
    rep = check_run(_night(tmp_path / "runs", suite, "cur", 0.94, rng, env=slow_kind), history=hist)
    rules = [r for v in rep.verdicts for r in v.rules if r.rule == "history-throughput"]
    assert rules and all(set(r.details["baseline_runs"]) == {"n01", "n03", "n05", "n07"} for r in rules)
    assert all(r.status != "FAIL" for r in rules), [r.message for r in rules]
    third = GPU_ENV.model_copy(update={"device_name": "NVIDIA Third GPU"})
    alone = check_run(_night(tmp_path / "runs", suite, "new", 1.0, rng, env=third), history=hist)
    assert any("not borrowed" in n and "nvidia-other-gpu" in n for n in alone.notes), alone.notes
    page = (publish(hist, tmp_path / "site").parent / "toy.html").read_text()
    assert page.count("<h3>Device kind") == 2 and "device changed" not in page
    import json

    entries = [json.loads(x) for x in (hist / "toy.jsonl").read_text().splitlines()]
    text = trend_section("toy", entries, Ctx(out_dir=tmp_path, plots_dir=tmp_path / "plots", multi=False))
    assert "+6." not in text and "-5." not in text and "-6." not in text, text


def test_a_history_of_one_run_is_judged_by_the_same_gate():
    """gate.judge_runs (what `check --baseline RUN` can call, issue 62): the nightly gate's figures, comparisons
    and step-time gate against N earlier runs, N = 1 with a prior run-to-run spread; a 20% slowdown of both
    modes FAILs, the same code does not, slow steps of AMP alone FAIL AMP on the ratio."""
    from ampbench.judge import gate, inference

    rng = np.random.default_rng(9)

    def run(level: float, amp_steps: float = 1.0) -> np.ndarray:
        rates = [[(1000 + 600 * m) * level / np.where(rng.random(200) < (0.3 if m and amp_steps > 1 else 0), amp_steps,
                                                        1.0) * np.exp(rng.normal(0, 0.01, 200)) for _ in range(3)]
                 for m in (0, 1)]
        return gate.trial_figures(rates)

    lv = gate.Levels(0.05)
    base, inter = run(1.0), np.ones(2, bool)
    prior = (inference.RUN_DRIFT_SD, math.inf)
    same, _ = gate.judge_runs(run(1.0), [base], 0, inter, lv, prior)
    slow, _ = gate.judge_runs(run(0.8), [base], 0, inter, lv, prior)
    amp, ev = gate.judge_runs(run(1.0, amp_steps=1.8), [base], 0, inter, lv, prior)
    none, _ = gate.judge_runs(run(1.0), [], 0, inter, lv)
    assert [g.status[0] for g in same] == ["PASS", "PASS"] and [g.status[0] for g in slow] == ["FAIL", "FAIL"]
    assert amp[0].status[0] == "PASS" and amp[1].status[0] == "FAIL" and ev["own"][0, 1]
    assert gate.TESTS[amp[1].decided[0]][1] == "ratio" or amp[1].tests[6]["status"][0] == "FAIL"
    assert [g.status[0] for g in none] == ["INCONCLUSIVE", "INCONCLUSIVE"]
