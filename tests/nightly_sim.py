"""Simulated nightly histories judged night after night by the pooled history rule's own code (issue 40).

A history is 10 unchanged nights, then `judged` nights, each night two modes x 3 trials x 200 steps on
the night's device.  Every judged night is decided as `check --history` decides it, with the functions
the rule calls: per-trial figures (record.rates floor_rates_batch / trimmed_rates_batch, the median),
run values and bounds (inference.run_values_batch, run_series_bounds_batch with df per mode,
series_bounds_batch for the median), the step-time gate (history_pooled.steady_batch), the combination
(history_pooled.decide, decided_by, persist), and the pool's rule (judge.pooled.select): a night whose
counted estimate is below -min_change stays out of the pool, an open FAILed regression persists.  The
pool is the newest POOL kept nights (the rule's cap is 20: a smaller pool is the harder case); change
points are not sought (a held-out night cannot form one; the unchanged series here has none to find).

Noise models (`GpuNight`): the night lands on one of the SKU's 8 GPUs, whose levels spread uniformly
over `gpu_spread` (max - min, 2-5% between GPUs of one SKU); both modes of a night share it; thermal
drift as a random walk of `drift` per night; per trial a level (sd 0.5%); per step jitter (sd 1%) and a
loader stall every 50th step (2.5x).  `CpuNight` is this CPU machine's slow episodes (tests/test_floor_sim
EpisodeNoise).  Regressions (`Regression`) start at the 11th night: uniform, in 30% of the steps (each
hit step 50-100% slower, the factor drawn per history), or after warm-up (every step from 20-50% of the
trial on, 20-35% slower).

`legacy=True` judges as before issue 40 (floor and median only, every night pooled, df summed over the
modes), for the docs/checks.md table.  `python -m tests.nightly_sim` prints that table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ampbench.judge import changepoint, inference, sequential
from ampbench.judge.rules.history_pooled import decide, decided_by, persist, steady_batch
from ampbench.record.rates import floor_rates_batch, trimmed_rates_batch
from tests.test_floor_sim import EpisodeNoise

MIN_CHANGE, ALPHA, CONF = 0.05, 0.01, 0.95
POOL, FIRST, TRIALS, STEPS, MODES = 10, 10, 3, 200, 2


@dataclass(frozen=True)
class GpuNight:
    gpu_spread: float = 0.05
    gpus: int = 8
    drift: float = 0.0
    trial_sd: float = 0.005
    step_sd: float = 0.01
    stall_every: int = 50
    stall_factor: float = 2.5

    def start(self, rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
        levels = rng.uniform(-self.gpu_spread / 2, self.gpu_spread / 2, (rows, self.gpus))
        return {"gpus": levels, "walk": np.zeros(rows)}

    def night(self, rng: np.random.Generator, state: dict[str, np.ndarray]) -> np.ndarray:
        """Step times (rows, modes, trials, steps) of one night at level 1."""
        rows = state["walk"].shape[0]
        state["walk"] = state["walk"] + rng.normal(0, self.drift, rows)
        gpu = state["gpus"][np.arange(rows), rng.integers(0, self.gpus, rows)]
        level = np.exp(-(gpu + state["walk"]))[:, None, None, None]
        trial = np.exp(rng.normal(0, self.trial_sd, (rows, MODES, TRIALS, 1)))
        jitter = np.exp(rng.normal(0, self.step_sd, (rows, MODES, TRIALS, STEPS)))
        offset = rng.integers(0, self.stall_every, (rows, MODES, TRIALS, 1))
        stall = (np.arange(STEPS) + offset) % self.stall_every == 0
        return level * trial * jitter * np.where(stall, self.stall_factor, 1.0)


@dataclass(frozen=True)
class CpuNight:
    """This CPU machine's slow episodes (EpisodeNoise), each night its own regime."""

    noise: EpisodeNoise = field(default_factory=EpisodeNoise)

    def start(self, rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
        return {"walk": np.zeros(rows)}

    def night(self, rng: np.random.Generator, state: dict[str, np.ndarray]) -> np.ndarray:
        rows = state["walk"].shape[0]
        return self.noise.times(rng, (rows, MODES, TRIALS), STEPS)


@dataclass(frozen=True)
class Regression:
    kind: str = "none"  # none, uniform, steps, warmup
    size: float = 0.0   # uniform: the slowdown

    def start(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """Per history: the slow steps' factor (steps: 1.5-2.0; warmup: 1.2-1.35)."""
        lo, hi = {"steps": (1.5, 2.0), "warmup": (1.2, 1.35)}.get(self.kind, (1.0, 1.0))
        return rng.uniform(lo, hi, rows)

    def apply(self, rng: np.random.Generator, t: np.ndarray, factor: np.ndarray) -> np.ndarray:
        f = factor[:, None, None, None]
        if self.kind == "uniform":
            return t / (1 - self.size)
        if self.kind == "steps":
            return np.where(rng.random(t.shape) < 0.3, t * f, t)
        if self.kind == "warmup":
            start = (rng.uniform(0.2, 0.5, t.shape[:-1]) * STEPS)[..., None]
            return np.where(np.arange(STEPS) >= start, t * f, t)
        return t


def _figures(t: np.ndarray) -> np.ndarray:
    """(..., steps) step times -> (3, ...) log floor, log trimmed mean, log median rate per trial."""
    r = 1.0 / t
    return np.stack([np.log(floor_rates_batch(r)), np.log(trimmed_rates_batch(r)), np.log(np.median(r, -1))])


def _pool_index(kept: np.ndarray, night: int) -> np.ndarray:
    """(rows, POOL) indexes of the newest POOL kept nights before `night` (the first FIRST are kept)."""
    key = np.where(kept[:, :night], np.arange(night), -1)
    return np.sort(key, -1)[:, -POOL:]


def _mode_status(fig: np.ndarray, idx: np.ndarray, night: int, mode: int, legacy: bool,
                 levels: tuple[float, float]) -> dict[str, np.ndarray]:
    """Each figure's status and estimate (log) for one mode of one night: the rule's batch functions."""
    pc, fc = levels
    rows = np.arange(fig.shape[1])[:, None]
    other = 1 - mode
    thr = math.log(1 - MIN_CHANGE)
    out: dict[str, np.ndarray] = {}
    for k, name in ((0, "floor"), (1, "trimmed")):
        cur = inference.run_values_batch(fig[k, :, night, mode])
        base = inference.run_values_batch(fig[k][rows, idx, mode])
        extra = [inference.run_values_batch(fig[k][rows, idx, other])]
        b = inference.run_series_bounds_batch(cur, base, CONF, extra, changepoint.DRIFT_FLOOR, fc, pc, True,
                                              df_per_mode=not legacy)
        out[name] = inference.decide_batch(b["lower"], b["upper"], thr, fail_upper=b["fail_upper"])
        out[name + "_est"] = b["estimate"]
    m = inference.series_bounds_batch(fig[2, :, night, mode], fig[2][rows, idx, mode], CONF,
                                      [(fig[2, :, night, other], fig[2][rows, idx, other])],
                                      changepoint.DRIFT_FLOOR, fc, pc, inference.MIN_FAIL_TRIALS)
    out["median"] = inference.decide_batch(m["lower"], m["upper"], thr, fail_upper=m["fail_upper"])
    return out


def simulate(rows: int, model: GpuNight | CpuNight, reg: Regression, seed: int, judged: int = 6,
             legacy: bool = False) -> np.ndarray:
    """(rows, judged) night outcomes: 2 FAIL, 1 INCONCLUSIVE, 0 PASS (the worst over the modes)."""
    rng = np.random.default_rng(seed)
    state, factor = model.start(rng, rows), reg.start(rng, rows)
    nights = FIRST + judged
    figs = np.empty((3, rows, nights, MODES, TRIALS))
    for n in range(nights):
        t = model.night(rng, state)
        figs[:, :, n] = _figures(reg.apply(rng, t, factor) if n >= FIRST else t)
    kept = np.ones((rows, nights), bool)
    failed = np.zeros((rows, nights), bool)
    out = np.zeros((rows, judged), int)
    levels = sequential.levels(CONF, ALPHA, None, POOL * TRIALS)
    shape = figs[1] - figs[0]  # log(trimmed / floor) per trial
    for n in range(FIRST, nights):
        idx = _pool_index(kept, n) if not legacy else np.arange(n - POOL, n)[None].repeat(rows, 0)
        seg = shape[np.arange(rows)[:, None], idx].reshape(rows, -1)
        steady = steady_batch(seg, shape[:, n].reshape(rows, -1))
        open_ = _open(kept[:, :n], failed[:, :n])
        worst = np.zeros(rows, int)
        low = np.zeros(rows, bool)
        for mode in range(MODES):
            st_ = _mode_status(figs, idx, n, mode, legacy, levels)
            for i in range(rows):
                f_est, t_est = math.exp(st_["floor_est"][i]), math.exp(st_["trimmed_est"][i])
                if legacy:
                    status, codes = decide(str(st_["floor"][i]), str(st_["median"][i]))  # type: ignore[arg-type]
                    est = f_est
                else:
                    status, codes = decide(str(st_["floor"][i]), str(st_["median"][i]),  # type: ignore[arg-type]
                                           str(st_["trimmed"][i]), bool(steady[i]))  # type: ignore[arg-type]
                    by = decided_by(status, codes, f_est, t_est, bool(steady[i]))
                    est = t_est if by == "trimmed-mean" else f_est
                    status, _ = persist(status, est, MIN_CHANGE, bool(open_[i]))
                worst[i] = max(worst[i], {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2}[status])
                low[i] |= est < 1 - MIN_CHANGE
        out[:, n - FIRST] = worst
        failed[:, n] = worst == 2
        kept[:, n] = legacy | ~low
    return out


def _open(kept: np.ndarray, failed: np.ndarray) -> np.ndarray:
    """Per row: the newest nights are held out and one of them FAILed (judge.pooled's open regression)."""
    rows, n = kept.shape
    out = np.zeros(rows, bool)
    for i in range(rows):
        j = n - 1
        while j >= 0 and not kept[i, j]:
            out[i] |= failed[i, j]
            j -= 1
    return out


def rates(out: np.ndarray) -> dict[str, float]:
    """Share of nights FAILed; of histories FAILed within 3 nights; of those FAILed on every night after
    their first FAIL."""
    fail = out == 2
    first = np.where(fail.any(1), fail.argmax(1), out.shape[1])
    every = np.array([fail[i, first[i]:].all() for i in range(out.shape[0]) if first[i] < out.shape[1]])
    return {"night_fail": float(fail.mean()), "within3": float((first < 3).mean()),
            "every_later": float(every.mean()) if every.size else math.nan}


MODELS = {
    "GPU, 2% between GPUs": GpuNight(gpu_spread=0.02),
    "GPU, 5% between GPUs": GpuNight(gpu_spread=0.05),
    "GPU, 5% + drift 0.5%/night": GpuNight(gpu_spread=0.05, drift=0.005),
    "GPU, 10% between GPUs (sd 3%, stress)": GpuNight(gpu_spread=0.10),
    "CPU slow episodes": CpuNight(),
}
CASES = {
    "identical code": Regression(),
    "uniform 5%": Regression("uniform", 0.05),
    "uniform 10%": Regression("uniform", 0.10),
    "uniform 20%": Regression("uniform", 0.20),
    "30% of steps 1.5-2x (13-23%)": Regression("steps"),
    "after warm-up 1.2-1.35x": Regression("warmup"),
}


def table(rows: int = 1000) -> str:
    """docs/checks.md's nightly table (`python -m tests.nightly_sim`, a few minutes)."""
    out = [("| machine | case | nights FAILed (now / before) | FAILed within 3 nights (now / before) | "
            "every later night FAILed (now / before) |"), "|---|---|---|---|---|"]
    for i, (mname, model) in enumerate(MODELS.items()):
        for j, (cname, reg) in enumerate(CASES.items()):
            now = rates(simulate(rows, model, reg, 100 * i + j))
            old = rates(simulate(rows, model, reg, 100 * i + j, legacy=True))
            out.append(f"| {mname} | {cname} | {now['night_fail']:.2%} / {old['night_fail']:.2%} | "
                       f"{now['within3']:.1%} / {old['within3']:.1%} | {now['every_later']:.1%} / "
                       f"{old['every_later']:.1%} |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table())
