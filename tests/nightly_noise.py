"""GPU-nightly noise and regressions as they really come, night by night (issue 55).

A night is one run: 2 modes x 3 trials x 200 measured steps on one GPU of the fleet, the trials one
after another in the runner's seed-major order (fp32 s0, amp s0, fp32 s1, ...), or side by side
(`run --devices`: the two modes of a seed at once).  What moves a night, besides the code:

- the fleet: `kinds` SKUs whose levels differ (two SKUs 6% apart), each with `gpus` GPUs whose levels
  spread uniformly over `gpu_spread` (max - min); the night lands on a kind (alternating, or at random)
  and on one of its GPUs; both modes share that GPU (the AMP/FP32 ratio cancels its level);
- drift: a random walk of `drift` per night (thermal state, driver clocks), shared by the kinds;
- per trial a level (sd `trial_sd`), per step jitter (`step_sd`) and a loader stall every 50th step;
- machine slow-step episodes (`episodes`: the share of nights with any): stretches in wall time in which
  every step runs 1.3-2x slower, hitting whichever trials run then, both modes at the same wall time;
- shared nights (`shared`: their share): another job on the node all night, short slow stretches
  covering 10-40% of the wall time at 1.3-2x, in every trial of every mode.

`CpuNight` is this CPU machine's slow episodes (tests/test_floor_sim EpisodeNoise), each night its own
regime.  A `Change` lands on the first scenario night: uniform, part of the steps (30% at random, or every
third), after part of the trial, a creep (a further loss every night), one degraded night, an improvement;
in both modes or one.  `night()` gives every trial's figures (log fast floor, trimmed mean and median rate,
record.rates' definitions) and its wall-clock window, which is all a history line and a run record keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ampbench.record.rates import floor_rates_batch, trimmed_rates_batch
from tests.test_floor_sim import EpisodeNoise

MODES, TRIALS, STEPS = 2, 3, 200
AMP, FP32 = 1, 0


def _stretches(rng: np.random.Generator, rows: int, length: int, share: np.ndarray, mean_len: float) -> np.ndarray:
    """(rows, length) bool: a two-state Markov chain in wall time, slow a `share` of the time in stretches of
    `mean_len` steps on average (share 0: never)."""
    leave = 1.0 / mean_len
    enter = np.clip(share / np.maximum(1 - share, 1e-3) * leave, 0, 1)
    out = np.empty((rows, length), bool)
    state = rng.random(rows) < share
    for k in range(length):
        out[:, k] = state
        u = rng.random(rows)
        state = np.where(state, u >= leave, u < enter)
    return out


def order(side_by_side: bool = False) -> np.ndarray:
    """(modes, trials) the slot each trial runs in: seed-major one after another, or the two modes of a seed
    at once (run --devices)."""
    seeds = np.arange(TRIALS)
    return np.stack([seeds * (1 if side_by_side else MODES) + (0 if side_by_side else m) for m in range(MODES)])


def windows(side_by_side: bool = False) -> np.ndarray:
    """(modes, trials, 2) each trial's wall-clock start and end (a trial's steps take one unit)."""
    slot = order(side_by_side).astype(float)
    return np.stack([slot, slot + 1.0], -1)


@dataclass(frozen=True)
class GpuNight:
    kinds: tuple[float, ...] = (0.0,)   # log level offset of each SKU
    alternate: bool = True              # kinds alternate nights (else drawn at random)
    gpu_spread: float = 0.05
    gpus: int = 8
    drift: float = 0.0
    trial_sd: float = 0.005
    step_sd: float = 0.01
    stall_every: int = 50
    stall_factor: float = 2.5
    episodes: float = 0.0               # share of nights with machine slow-step episodes
    shared: float = 0.0                 # share of nights shared all night with another job
    side_by_side: bool = False

    def start(self, rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
        levels = rng.uniform(-self.gpu_spread / 2, self.gpu_spread / 2, (rows, len(self.kinds), self.gpus))
        return {"gpus": levels, "walk": np.zeros(rows), "n": np.zeros(1, int),
                "phase": rng.integers(0, len(self.kinds), rows)}

    def kind(self, rng: np.random.Generator, state: dict[str, np.ndarray]) -> np.ndarray:
        rows = state["walk"].shape[0]
        if len(self.kinds) == 1:
            return np.zeros(rows, int)
        if self.alternate:
            return (state["phase"] + state["n"][0]) % len(self.kinds)
        return rng.integers(0, len(self.kinds), rows)

    def _machine(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """(rows, modes, trials, steps) slow factor of the machine's episodes and shared nights (1: none)."""
        slots = MODES * TRIALS if not self.side_by_side else TRIALS
        line = np.ones((rows, slots * STEPS))
        for share_of_nights, share, mean_len in ((self.episodes, (0.02, 0.3), 40.0), (self.shared, (0.1, 0.4), 3.0)):
            if not share_of_nights:
                continue
            on = rng.random(rows) < share_of_nights
            slow = _stretches(rng, rows, slots * STEPS, np.where(on, rng.uniform(*share, rows), 0.0), mean_len)
            line = np.where(slow, line * rng.uniform(1.3, 2.0, (rows, 1)), line)
        idx = order(self.side_by_side)[..., None] * STEPS + np.arange(STEPS)
        return line[:, idx]

    def night(self, rng: np.random.Generator, state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(step times (rows, modes, trials, steps) at level 1, the kind of each row's night)."""
        rows = state["walk"].shape[0]
        kind = self.kind(rng, state)
        state["n"] += 1
        state["walk"] = state["walk"] + rng.normal(0, self.drift, rows)
        gpu = state["gpus"][np.arange(rows), kind, rng.integers(0, self.gpus, rows)]
        level = np.exp(-(gpu + np.asarray(self.kinds)[kind] + state["walk"]))[:, None, None, None]
        trial = np.exp(rng.normal(0, self.trial_sd, (rows, MODES, TRIALS, 1)))
        jitter = np.exp(rng.normal(0, self.step_sd, (rows, MODES, TRIALS, STEPS)))
        offset = rng.integers(0, self.stall_every, (rows, MODES, TRIALS, 1))
        stall = (np.arange(STEPS) + offset) % self.stall_every == 0
        t = level * trial * jitter * np.where(stall, self.stall_factor, 1.0)
        if self.episodes or self.shared:
            t = t * self._machine(rng, rows)
        return t, kind


@dataclass(frozen=True)
class CpuNight:
    """This CPU machine's slow episodes (EpisodeNoise), each night its own regime."""

    noise: EpisodeNoise = field(default_factory=EpisodeNoise)
    side_by_side: bool = False

    def start(self, rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
        return {"walk": np.zeros(rows)}

    def night(self, rng: np.random.Generator, state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        rows = state["walk"].shape[0]
        t = self.noise.times(rng, (rows, 1, MODES * TRIALS), STEPS)[:, 0].reshape(rows, MODES, TRIALS, STEPS)
        return t, np.zeros(rows, int)


@dataclass(frozen=True)
class Change:
    """What lands on the first scenario night (night index `j` = 0) and after."""

    kind: str = "none"  # none, uniform, steps, periodic, late, creep, once, faster
    size: float = 0.0   # uniform/once: the slowdown; creep: the loss per night; faster: the gain
    modes: tuple[int, ...] = (FP32, AMP)

    def start(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """Per history: the slow steps' factor (steps: 1.5-2.0; periodic 1.5; late 1.15)."""
        lo, hi = {"steps": (1.5, 2.0), "periodic": (1.5, 1.5), "late": (1.15, 1.15)}.get(self.kind, (1.0, 1.0))
        return rng.uniform(lo, hi, rows)

    def level(self, j: int) -> float:
        """The throughput the change leaves on scenario night j (1: none), for uniform changes."""
        if self.kind == "uniform" or (self.kind == "once" and j == 0):
            return 1 - self.size
        if self.kind == "creep":
            return 1 - self.size * (j + 1)
        if self.kind == "faster":
            return 1 + self.size
        return 1.0

    def apply(self, rng: np.random.Generator, t: np.ndarray, factor: np.ndarray, j: int) -> np.ndarray:
        if self.kind == "none" or j < 0:
            return t
        out = t.copy()
        f = factor[:, None, None]
        for m in self.modes:
            x = out[:, m]
            if self.kind in ("uniform", "once", "creep", "faster"):
                x = x / self.level(j)
            elif self.kind == "steps":
                x = np.where(rng.random(x.shape) < 0.3, x * f, x)
            elif self.kind == "periodic":
                x = np.where((np.arange(STEPS) + rng.integers(0, 3, x.shape[:-1])[..., None]) % 3 == 0,
                             x * f, x)
            elif self.kind == "late":
                x = np.where(np.arange(STEPS) >= 0.3 * STEPS, x * f, x)
            out[:, m] = x
        return out


def figures(t: np.ndarray) -> np.ndarray:
    """(rows, modes, trials, steps) step times -> (3, rows, modes, trials) log fast floor, log trimmed mean and
    log median rate of each trial (samples per step cancel in every ratio)."""
    r = 1.0 / t
    return np.stack([np.log(floor_rates_batch(r)), np.log(trimmed_rates_batch(r)), np.log(np.median(r, -1))])


def nights(rows: int, model: GpuNight | CpuNight, change: Change, seed: int, count: int, first: int):
    """Yield (night index, figures (3, rows, modes, trials), kind (rows,)) for `count` nights, the change
    landing on night `first`."""
    rng = np.random.default_rng(seed)
    state, factor = model.start(rng, rows), change.start(rng, rows)
    for n in range(count):
        t, kind = model.night(rng, state)
        yield n, figures(change.apply(rng, t, factor, n - first)), kind
