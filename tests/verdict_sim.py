"""The noise model behind the verdict error rates (tests/test_verdict_sim.py, scripts/sim_verdicts.py).

Throughput of one run of one mode, per step, on the log scale:
    log rate = log(true rate) + run level + trial level + AR(1) step noise, then stalls
  - run level ~ N(0, drift / sqrt(2)): `drift` is the sd of the level *difference between two runs*
    (run-to-run drift: "same code, another day");
  - trial level ~ N(0, spread): trial-to-trial (seed-to-seed) spread inside a run;
  - step noise: AR(1) with coefficient rho and marginal sd 5%; 2% of steps stall 1.5-3x;
  - 60 measured steps per trial.
Metric: per-seed value ~ N(mean, metric_sd).
Each function returns the rule's outcome for many independent comparisons at once, computed by the
same functions the rules call (judge.inference), so the rates are those of the rule code.
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.config import Thresholds
from ampbench.judge import inference

STEPS = 60
STEP_SD = 0.05
STALL_RATE = 0.02
DEFAULTS = Thresholds()


def trial_medians(rng: np.random.Generator, sims: int, seeds: int, log_rate: float, spread: float, rho: float,
                  drift: float, steps: int = STEPS) -> np.ndarray:
    """(sims, seeds) per-trial median samples/s of `sims` independent runs of one mode."""
    x = rng.normal(0, STEP_SD, (sims, seeds))
    noise = np.empty((sims, seeds, steps))
    innov = math.sqrt(1 - rho ** 2)
    for i in range(steps):
        x = rho * x + innov * rng.normal(0, STEP_SD, (sims, seeds)) if i else x
        noise[:, :, i] = x
    stalls = rng.random(noise.shape) < STALL_RATE
    noise[stalls] -= np.log(rng.uniform(1.5, 3.0, stalls.sum()))
    level = rng.normal(0, drift / math.sqrt(2), (sims, 1)) + rng.normal(0, spread, (sims, seeds))
    return np.exp(log_rate + level + np.median(noise, axis=-1))


def _bounds(a: np.ndarray, b: np.ndarray, confidence: float, extra: list[np.ndarray] | None = None,
            drift_sd: float = 0.0) -> dict[str, np.ndarray]:
    r = inference.diff_bounds_batch(np.log(a), np.log(b), confidence, extra or [], drift_sd)
    return {k: np.exp(v) if k not in ("sd", "df") else v for k, v in r.items()}


def history_outcomes(rng: np.random.Generator, sims: int, seeds: int, slowdown: float, spread: float, rho: float,
                     drift: float, th: Thresholds = DEFAULTS) -> np.ndarray:
    """history-throughput outcome ('PASS'/'FAIL'/'INCONCLUSIVE') of a current run slower by `slowdown`.

    Each run has two modes sharing the run's level (the judged one and one whose spread is pooled in,
    as the rule does with the other modes of both runs)."""
    base = trial_medians(rng, sims, 2 * seeds, 0.0, spread, rho, drift)
    cur = trial_medians(rng, sims, 2 * seeds, math.log(1 - slowdown), spread, rho, drift)
    b = _bounds(cur[:, :seeds], base[:, :seeds], th.confidence, [np.log(cur[:, seeds:]), np.log(base[:, seeds:])],
                inference.RUN_DRIFT_SD)
    return inference.decide_batch(b["lower"], b["upper"], 1 - th.history_min_change)


def speedup_outcomes(rng: np.random.Generator, sims: int, seeds: int, true_speedup: float, spread: float,
                     rho: float, th: Thresholds = DEFAULTS) -> tuple[np.ndarray, np.ndarray]:
    """(speedup outcome, interval covers the true ratio) — both arms in one run, so no drift between them."""
    ref = trial_medians(rng, sims, seeds, 0.0, spread, rho, 0.0)
    amp = trial_medians(rng, sims, seeds, math.log(true_speedup), spread, rho, 0.0)
    b = _bounds(amp, ref, th.confidence)
    # Same-run arms share no level, but each arm's pooled step noise shifts its median alike: the
    # true ratio of trial medians is true_speedup.
    covers = (b["low"] <= true_speedup) & (true_speedup <= b["high"])
    return inference.decide_batch(b["lower"], b["upper"], th.min_speedup), covers


def parity_outcomes(rng: np.random.Generator, sims: int, seeds: int, drop: float, metric_sd: float,
                    th: Thresholds = DEFAULTS) -> np.ndarray:
    ref = rng.normal(0.8, metric_sd, (sims, seeds))
    amp = rng.normal(0.8 - drop, metric_sd, (sims, seeds))
    return inference.parity_batch(ref, amp, th.metric_abs_tol, th.metric_sigma_k, th.confidence)["status"]


def true_margin(metric_sd: float, th: Thresholds = DEFAULTS) -> float:
    return max(th.metric_abs_tol, th.metric_sigma_k * metric_sd)


def rates(outcomes: np.ndarray) -> dict[str, float]:
    return {k: float((outcomes == k).mean()) for k in ("PASS", "FAIL", "INCONCLUSIVE")}
