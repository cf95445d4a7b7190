"""`check --baseline` (one baseline run, judge.rules.history_one_run) simulated with the rule's own code.

Identical code, K trials a mode on each side, every trial's level drawn from the noise of the measured toy
(trials in two clusters 29% apart, tests/verdict_sim.py's bimodal kind) or normal noise; each mode decided by
history_one_run.judge_mode as the rule decides it.  The prior's variance of a run's value is a formula of the
trials' spread: it holds for their mean whatever the trials' distribution, and not for their median (the rule
judged medians until this test: at K = 5 the AMP mode of identical code FAILed 8.2% of 600 comparisons on the
bimodal machine; with means 1.0%, and a 20% slowdown at K = 3 under 5% normal noise FAILed 87-89% instead of
77%).  Sizes: 300 null comparisons (binomial SE at 1%: 0.57 pt; the bound 2.5% sits 2.6 SE above 1% and 5 SE
below the median rule's 8.2%), 120 with a slowdown.
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.judge import gate, inference
from ampbench.judge.rules import history_one_run as h1

MODES = 2   # fp32 (the reference, index 0) and one AMP mode: its level and its AMP/FP32 ratio are judged


def _levels(rng: np.random.Generator, kind: str, spread: float, k: int) -> np.ndarray:
    if kind == "bimodal":
        return np.where(rng.random((MODES, k)) < 0.5, 0.0, math.log(1 + spread))
    return spread * rng.normal(size=(MODES, k))


def _statuses(seed: int, n: int, kind: str, spread: float, k: int, effect: float) -> list[tuple[str, str]]:
    """n comparisons of a run against a baseline run: (fp32 status, amp status) each."""
    rng = np.random.default_rng(seed)
    lv = gate.Levels(0.05, 0.95, 0.99, fail_ok=k >= inference.MIN_FAIL_TRIALS)
    out = []
    for _ in range(n):
        drift_c, drift_b = rng.normal(0, inference.RUN_DRIFT_SD, 2)
        cur = _levels(rng, kind, spread, k) + drift_c + math.log(1 - effect)
        base = _levels(rng, kind, spread, k) + drift_b
        figs = [np.stack([x + rng.normal(0, 0.005, x.shape) for _ in gate.FIGURES]) for x in (cur, base)]
        got = []
        for j in range(MODES):
            g, _ = h1.judge_mode(figs[0], figs[1], j, 0 if j else None, np.ones(MODES, bool), lv,
                                 inference.RUN_DRIFT_SD)
            got.append(str(g.status[0]))
        out.append((got[0], got[1]))
    return out


def _rate(results: list[tuple[str, str]], mode: int, status: str) -> float:
    return sum(r[mode] == status for r in results) / len(results)


def test_identical_code_on_the_bimodal_machine_is_failed_at_about_alpha():
    res = _statuses(1, 300, "bimodal", 0.29, 5, 0.0)
    assert _rate(res, 0, "FAIL") <= 0.025 and _rate(res, 1, "FAIL") <= 0.025, (
        _rate(res, 0, "FAIL"), _rate(res, 1, "FAIL"))


def test_a_20_percent_slowdown_under_normal_noise_is_failed():
    res = _statuses(2, 120, "normal", 0.05, 3, 0.20)
    assert _rate(res, 0, "FAIL") >= 0.8 and _rate(res, 1, "FAIL") >= 0.8, (_rate(res, 0, "FAIL"), _rate(res, 1, "FAIL"))
    assert _rate(res, 0, "PASS") == 0 and _rate(res, 1, "PASS") == 0
