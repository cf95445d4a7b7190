"""The noise model behind the verdict error rates (tests/test_verdict_sim.py, scripts/sim_verdicts.py).

Throughput of one run of one mode, per step, on the log scale:
    log rate = log(true rate) + run level + trial level + AR(1) step noise, then stalls
  - run level ~ N(0, drift / sqrt(2)): `drift` is the sd of the level *difference between two runs*
    (run-to-run drift: "same code, another day");
  - trial level: trial-to-trial (seed-to-seed) spread inside a run, one of the LEVELS kinds:
    "normal" N(0, spread); "t3" Student t with 3 degrees of freedom scaled to sd `spread` (heavy tails:
    now and then a trial far off); "bimodal" each trial lands in one of two clusters `spread` apart
    (log scale) with probability 1/2, plus N(0, 1%) inside a cluster: the measured toy machine, where
    one process lands on a faster or slower virtual CPU and stays there (spread 0.29 = 10.5k vs 14k/s);
  - step noise: AR(1) with coefficient rho and marginal sd 5%; 2% of steps stall 1.5-3x;
  - 60 measured steps per trial.
Metric: per-seed value ~ N(mean, metric_sd), or heavy-tailed (t3 scaled to metric_sd).
Pooled history baseline (check --history): R earlier runs, each its own run level, against the current run.
Each function returns the rule's outcome for many independent comparisons at once, computed by the
same functions the rules call (judge.inference), so the rates are those of the rule code.
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.config import Thresholds
from ampbench.judge import inference, sequential

STEPS = 60
STEP_SD = 0.05
STALL_RATE = 0.02
DEFAULTS = Thresholds()


LEVELS = ("normal", "t3", "bimodal")


def trial_levels(rng: np.random.Generator, shape: tuple[int, ...], spread: float, kind: str = "normal") -> np.ndarray:
    """Trial-to-trial levels (log scale) of the given kind (see the module docstring)."""
    if kind == "normal":
        return rng.normal(0, spread, shape)
    if kind == "t3":
        return rng.standard_t(3, shape) * spread / math.sqrt(3.0)  # var of t3 is 3
    if kind == "bimodal":
        return (rng.random(shape) < 0.5) * spread - spread / 2 + rng.normal(0, 0.01, shape)
    raise ValueError(kind)


def trial_medians(rng: np.random.Generator, sims: int, seeds: int, log_rate: float, spread: float, rho: float,
                  drift: float, steps: int = STEPS, kind: str = "normal") -> np.ndarray:
    """(sims, seeds) per-trial median samples/s of `sims` independent runs of one mode."""
    # float32 steps (their median is all that is kept): half the memory traffic of the draws and the
    # partition, which were three quarters of this module's test time
    shocks = rng.standard_normal((steps, sims, seeds), dtype=np.float32) * np.float32(STEP_SD)
    noise = np.empty((sims, seeds, steps), dtype=np.float32)
    innov = np.float32(math.sqrt(1 - rho ** 2))
    x = shocks[0]
    for i in range(steps):
        x = np.float32(rho) * x + innov * shocks[i] if i else x
        noise[:, :, i] = x
    stalls = rng.random(noise.shape, dtype=np.float32) < STALL_RATE
    noise[stalls] -= np.log(rng.uniform(1.5, 3.0, stalls.sum())).astype(np.float32)
    level = rng.normal(0, drift / math.sqrt(2), (sims, 1)) + trial_levels(rng, (sims, seeds), spread, kind)
    return np.exp(log_rate + level + np.median(noise, axis=-1))


def _bounds(a: np.ndarray, b: np.ndarray, confidence: float, extra: list[np.ndarray] | None = None,
            drift_sd: float = 0.0, levels: tuple[float, float] | None = None) -> dict[str, np.ndarray]:
    pc, fc = levels or (confidence, confidence)
    r = inference.diff_bounds_batch(np.log(a), np.log(b), confidence, extra or [], drift_sd, fc, pc)
    return {k: np.exp(v) if k not in ("sd", "df") else v for k, v in r.items()}


def _decide(b: dict[str, np.ndarray], threshold: float) -> np.ndarray:
    return inference.decide_batch(b["lower"], b["upper"], threshold, True, b["fail_lower"], b["fail_upper"])


def _history_decision(cur: np.ndarray, base: np.ndarray, k: int, kb: int, th: Thresholds,
                      design: sequential.Design | None) -> np.ndarray:
    """The rule's decision on the first k current and kb baseline trials; columns [0, K) are the judged
    mode, [K, 2K) the other mode whose spread is pooled in (K = cur.shape[1] // 2)."""
    half_c, half_b = cur.shape[1] // 2, base.shape[1] // 2
    lv = sequential.levels(th.confidence, th.history_alpha, design, kb)
    b = _bounds(cur[:, :k], base[:, :kb], th.confidence, [np.log(cur[:, half_c:half_c + k]),
                                                          np.log(base[:, half_b:half_b + kb])],
                inference.RUN_DRIFT_SD, lv)
    return _decide(b, 1 - th.history_min_change)


def history_outcomes(rng: np.random.Generator, sims: int, seeds: int, slowdown: float, spread: float, rho: float,
                     drift: float, th: Thresholds = DEFAULTS, kind: str = "normal") -> np.ndarray:
    """history-throughput outcome ('PASS'/'FAIL'/'INCONCLUSIVE') of a current run slower by `slowdown`.

    Each run has two modes sharing the run's level (the judged one and one whose spread is pooled in,
    as the rule does with the other modes of both runs)."""
    base = trial_medians(rng, sims, 2 * seeds, 0.0, spread, rho, drift, kind=kind)
    cur = trial_medians(rng, sims, 2 * seeds, math.log(1 - slowdown), spread, rho, drift, kind=kind)
    return _history_decision(cur, base, seeds, seeds, th, None)


def _speedup_decision(amp: np.ndarray, ref: np.ndarray, k: int, th: Thresholds,
                      design: sequential.Design | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    lv = sequential.levels(th.confidence, th.fail_alpha, design)
    b = _bounds(amp[:, :k], ref[:, :k], th.confidence, levels=lv)
    return _decide(b, th.min_speedup), b


def speedup_outcomes(rng: np.random.Generator, sims: int, seeds: int, true_speedup: float, spread: float,
                     rho: float, th: Thresholds = DEFAULTS, kind: str = "normal") -> tuple[np.ndarray, np.ndarray]:
    """(speedup outcome, interval covers the true ratio) — both arms in one run, so no drift between them."""
    ref = trial_medians(rng, sims, seeds, 0.0, spread, rho, 0.0, kind=kind)
    amp = trial_medians(rng, sims, seeds, math.log(true_speedup), spread, rho, 0.0, kind=kind)
    out, b = _speedup_decision(amp, ref, seeds, th, None)
    # Same-run arms share no level, but each arm's pooled step noise shifts its median alike: the
    # true ratio of trial medians is true_speedup.
    covers = (b["low"] <= true_speedup) & (true_speedup <= b["high"])
    return out, covers


def pooled_outcomes(rng: np.random.Generator, sims: int, runs: int, seeds: int, slowdown: float, spread: float,
                    rho: float, drift: float, th: Thresholds = DEFAULTS, kind: str = "normal") -> np.ndarray:
    """history-throughput against a pooled baseline of `runs` earlier runs (check --history), each with
    two modes of `seeds` trials sharing the run's level; the current run is slower by `slowdown`: the median
    figure's run values by judge.gate's prediction (what decides where the lines keep no fast floor)."""
    base = np.log(np.stack([trial_medians(rng, sims, 2 * seeds, 0.0, spread, rho, drift, kind=kind)
                            for _ in range(runs)], axis=1))
    cur = np.log(trial_medians(rng, sims, 2 * seeds, math.log(1 - slowdown), spread, rho, drift, kind=kind))
    from ampbench.judge import gate

    pc, fc = sequential.levels(th.confidence, th.history_alpha)
    lv = gate.Levels(th.history_min_change, pc, fc, seeds >= inference.MIN_FAIL_TRIALS)
    labels = np.zeros((sims, runs), int)
    mode = inference.run_values_batch(base[:, :, :seeds])
    sp = gate.Spread((mode, labels), ((inference.run_values_batch(base[:, :, seeds:]), labels),))
    return gate.predict(inference.run_values_batch(cur[:, :seeds]), mode, sp, lv)["status"]


def metric_values(rng: np.random.Generator, shape: tuple[int, ...], mean: float, sd: float,
                  kind: str = "normal") -> np.ndarray:
    """A final metric per seed: normal, or heavy-tailed (Student t3 scaled to sd `sd`: now and then a seed
    far off, as a diverged or lucky run)."""
    if kind == "normal":
        return rng.normal(mean, sd, shape)
    if kind == "t3":
        return mean + rng.standard_t(3, shape) * sd / math.sqrt(3.0)
    raise ValueError(kind)


def _parity_decision(ref: np.ndarray, amp: np.ndarray, k: int, th: Thresholds,
                     design: sequential.Design | None) -> np.ndarray:
    pc, fc = sequential.levels(th.confidence, th.fail_alpha, design)
    return inference.parity_batch(ref[:, :k], amp[:, :k], th.metric_abs_tol, th.metric_sigma_k, th.confidence,
                                  fail_confidence=fc, pass_confidence=pc)["status"]


def parity_outcomes(rng: np.random.Generator, sims: int, seeds: int, drop: float, metric_sd: float,
                    th: Thresholds = DEFAULTS, kind: str = "normal") -> np.ndarray:
    ref = metric_values(rng, (sims, seeds), 0.8, metric_sd, kind)
    amp = metric_values(rng, (sims, seeds), 0.8 - drop, metric_sd, kind)
    return _parity_decision(ref, amp, seeds, th, None)


def _first_decision(decide, k0: int, kmax: int, sims: int) -> tuple[np.ndarray, np.ndarray]:
    """Run the looks k0, k0+1, .., kmax (one matched seed added per look, as run --until-decided does):
    (outcome of the first look that decides, or INCONCLUSIVE at the cap; seeds per arm used)."""
    out = np.full(sims, "INCONCLUSIVE", dtype=object)
    used = np.full(sims, kmax)
    open_ = np.ones(sims, bool)
    for k in range(k0, kmax + 1):
        design = sequential.Design(looks=list(range(k0, k + 1)), max_seeds=kmax)
        status = decide(k, design)
        now = open_ & (status != "INCONCLUSIVE")
        out[now], used[now] = status[now], k
        open_ &= ~now
        if not open_.any():
            break
    return out.astype(str), used


def sequential_history(rng: np.random.Generator, sims: int, k0: int, kmax: int, slowdown: float, spread: float,
                       rho: float, drift: float, th: Thresholds = DEFAULTS, kind: str = "normal",
                       baseline_seeds: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """history-throughput under run --until-decided: the baseline run is fixed (its `baseline_seeds`,
    default kmax: it was itself a run to its cap), the current run adds matched seeds from k0 to kmax."""
    kb = kmax if baseline_seeds is None else baseline_seeds
    base = trial_medians(rng, sims, 2 * kb, 0.0, spread, rho, drift, kind=kind)
    cur = trial_medians(rng, sims, 2 * kmax, math.log(1 - slowdown), spread, rho, drift, kind=kind)
    return _first_decision(lambda k, d: _history_decision(cur, base, k, kb, th, d), k0, kmax, sims)


def sequential_speedup(rng: np.random.Generator, sims: int, k0: int, kmax: int, true_speedup: float, spread: float,
                       rho: float, th: Thresholds = DEFAULTS, kind: str = "normal") -> tuple[np.ndarray, np.ndarray]:
    ref = trial_medians(rng, sims, kmax, 0.0, spread, rho, 0.0, kind=kind)
    amp = trial_medians(rng, sims, kmax, math.log(true_speedup), spread, rho, 0.0, kind=kind)
    return _first_decision(lambda k, d: _speedup_decision(amp, ref, k, th, d)[0], k0, kmax, sims)


def sequential_parity(rng: np.random.Generator, sims: int, k0: int, kmax: int, drop: float, metric_sd: float,
                      th: Thresholds = DEFAULTS) -> tuple[np.ndarray, np.ndarray]:
    ref = rng.normal(0.8, metric_sd, (sims, kmax))
    amp = rng.normal(0.8 - drop, metric_sd, (sims, kmax))
    return _first_decision(lambda k, d: _parity_decision(ref, amp, k, th, d), k0, kmax, sims)


def true_margin(metric_sd: float, th: Thresholds = DEFAULTS) -> float:
    return max(th.metric_abs_tol, th.metric_sigma_k * metric_sd)


def rates(outcomes: np.ndarray) -> dict[str, float]:
    return {k: float((outcomes == k).mean()) for k in ("PASS", "FAIL", "INCONCLUSIVE")}


def correlated_parity_outcomes(rng: np.random.Generator, sims: int, seeds: int, run_sd: float, seed_sd: float,
                               abs_tol: float, drop: float = 0.0, history_runs: int = 10,
                               th: Thresholds = DEFAULTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """accuracy-parity of one run whose seeds share a run effect per mode (sd `run_sd`: same data order,
    device, build) at a tight `abs_tol`: (outcomes on the seeds alone as before issue 55, outcomes with the
    run-level sd the rule estimates from `history_runs` earlier runs of both modes (inference.run_effect_sd_batch),
    outcomes without a history as the rule decides now: a FAIL must clear an unseen run effect, parity.guarded_parity)."""
    from ampbench.judge.rules.parity import guarded_parity

    def runs(n: int) -> np.ndarray:
        return rng.normal(0, run_sd, (sims, n, 2, 1)) + rng.normal(0, seed_sd, (sims, n, 2, seeds))

    cur = runs(1)[:, 0]
    cur[:, 1] -= drop
    tau, _ = inference.run_effect_sd_batch(runs(history_runs))
    fc = 1 - th.fail_alpha
    out = []
    for extra in (0.0, math.sqrt(2) * tau):
        r = inference.parity_batch(cur[:, 0], cur[:, 1], abs_tol, th.metric_sigma_k, th.confidence, "max",
                                   fail_confidence=fc, run_sd=extra)
        out.append(r["status"])
    _, guarded = guarded_parity(cur[:, 0], cur[:, 1], abs_tol, th.metric_sigma_k, th.confidence, "max", fc,
                                th.confidence, None)
    return out[0], out[1], guarded
