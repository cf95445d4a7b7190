"""Statistics shared by the report and the rules: bootstrap intervals of pooled medians (the report's
per-mode figures), parity margins, loss trends, loss-scale collapse.  The verdicts' trial-level
inference lives in inference.py.

Everything works on raw per-step samples grouped by trial (never on pre-aggregated numbers), so a
baseline file or a run folder give the same answers.  Randomness is always an explicit seed: the
same inputs give the same interval on every machine.  numpy arrays in, small dataclasses out; no
knowledge of trials or suites here (check.py does that).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Groups = Sequence[np.ndarray]  # one 1-D array of per-step values per trial (seed)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Margin:
    """Parity margin = max(abs_tol, sigma_k * seed sd); `source` says which term won."""

    value: float
    sd: float | None
    n: int
    source: str  # "abs_tol" | "sigma" | "abs_tol-only (one seed)"


def stable_seed(*parts: object) -> int:
    """A reproducible seed from names (Python's hash() is salted per process)."""
    return zlib.crc32("|".join(map(str, parts)).encode())


def pooled_median(groups: Groups) -> float:
    return float(np.median(np.concatenate([np.asarray(g, float) for g in groups])))


def _resample_medians(table: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Two-stage bootstrap medians for a batch of equal-length trial tables.

    table: (B, k trials, L steps) -> (B, reps) medians of resamples drawn as: k trials with
    replacement, then L steps with replacement within each drawn trial.  Resampling trials carries
    seed-to-seed variation into the interval, which a plain step bootstrap would hide; with k = 1
    this is the ordinary bootstrap of the median.
    """
    bsz, k, length = table.shape
    chosen = rng.integers(0, k, size=(bsz, reps, k, 1)) if k > 1 else np.zeros((bsz, reps, 1, 1), dtype=np.intp)
    steps = rng.integers(0, length, size=(bsz, reps, k, length))
    vals = table[np.arange(bsz)[:, None, None, None], chosen, steps]
    return np.median(vals.reshape(bsz, reps, k * length), axis=-1)


def _ragged_medians(groups: Groups, reps: int, rng: np.random.Generator) -> np.ndarray:
    """The same two-stage resampling when trials have different step counts: (1, reps).

    Each slot keeps the length of its original trial, so the pooled sample size never changes.
    """
    arrs = [np.asarray(g, float) for g in groups]
    k = len(arrs)
    lens = np.array([len(a) for a in arrs])
    flat = np.concatenate(arrs)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]])
    chosen = rng.integers(0, k, size=(reps, k))
    src = chosen[:, np.repeat(np.arange(k), lens)]  # (reps, N): source trial of each pooled position
    idx = offs[src] + np.floor(rng.random(src.shape) * lens[src]).astype(np.intp)
    return np.median(flat[idx], axis=1)[None, :]


def _as_table(groups: Groups) -> np.ndarray | None:
    arrs = [np.asarray(g, float) for g in groups]
    return np.stack(arrs)[None] if len({len(a) for a in arrs}) == 1 else None


def bootstrap_ratio_batch(
    num: np.ndarray | Groups,
    den: np.ndarray | Groups,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    chunk: int = 4_000_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile bootstrap CIs of median(pooled num) / median(pooled den) for a batch.

    num, den: (B, k, L) tables (B independent comparisons), or for B = 1 lists of per-trial arrays
    of any lengths.  Returns (estimate, low, high), each of shape (B,).  Resampling runs in chunks
    so memory stays bounded for long runs.
    """
    rng = np.random.default_rng(seed)
    sides: list[np.ndarray | list[np.ndarray]] = []  # a (B, k, L) table, or B = 1 ragged trials
    for side in (num, den):
        if isinstance(side, np.ndarray) and side.ndim == 3:
            sides.append(side)
            continue
        groups = list(side)
        if not groups or any(len(g) == 0 for g in groups):
            raise ValueError("bootstrap needs at least one non-empty trial on each side")
        t = _as_table(groups)
        sides.append(t if t is not None else groups)
    size = sum(s.size if isinstance(s, np.ndarray) else sum(map(len, s)) for s in sides)
    step = max(1, chunk // max(1, size))
    draws: list[np.ndarray] = []
    done = 0
    while done < resamples:
        r = min(step, resamples - done)
        meds = [_resample_medians(s, r, rng) if isinstance(s, np.ndarray) else _ragged_medians(s, r, rng)
                for s in sides]
        draws.append(meds[0] / meds[1])
        done += r
    dist = np.concatenate(draws, axis=1)
    a = (1 - confidence) / 2
    low, high = np.quantile(dist, [a, 1 - a], axis=1)

    def pooled(s: np.ndarray | list[np.ndarray]) -> np.ndarray:
        if isinstance(s, np.ndarray):
            return np.median(s.reshape(s.shape[0], -1), axis=1)
        return np.array([pooled_median(s)])

    est = pooled(sides[0]) / pooled(sides[1])
    return est, low, high


def bootstrap_median_ratio(
    num: Groups,
    den: Groups,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    chunk: int = 4_000_000,
) -> Interval:
    """CI of median(AMP samples/s) / median(FP32 samples/s), or current / baseline; two-stage per side."""
    est, low, high = bootstrap_ratio_batch(list(num), list(den), confidence, resamples, seed, chunk)
    return Interval(float(est[0]), float(low[0]), float(high[0]), confidence, resamples)


def seed_sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation across seeds (ddof=1); None with fewer than two values."""
    v = np.asarray(values, float)
    return float(np.std(v, ddof=1)) if len(v) >= 2 else None


def pooled_sd(groups: Sequence[Sequence[float]]) -> tuple[float | None, int]:
    """SD pooled across groups, each centred on its own mean; returns (sd, degrees of freedom)."""
    ss, df = 0.0, 0
    for g in groups:
        v = np.asarray(g, float)
        if len(v) >= 2:
            ss += float(((v - v.mean()) ** 2).sum())
            df += len(v) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


def parity_margin(ref_values: Sequence[float], abs_tol: float, sigma_k: float) -> Margin:
    """max(abs_tol, sigma_k x seed-to-seed SD of the reference); one seed -> abs_tol alone."""
    return margin_from_sd(seed_sd(ref_values), len(ref_values), abs_tol, sigma_k)


def margin_from_sd(sd: float | None, n: int, abs_tol: float, sigma_k: float) -> Margin:
    if sd is None:
        return Margin(abs_tol, None, n, "abs_tol-only (one seed)")
    sig = sigma_k * sd
    return Margin(max(abs_tol, sig), sd, n, "sigma" if sig > abs_tol else "abs_tol")


def worse_by(candidate: float, reference: float, goal: str) -> float:
    """How much worse `candidate` is than `reference` (positive = worse), for either goal."""
    return reference - candidate if goal == "max" else candidate - reference


def loss_fell(losses: Sequence[float | None], rel: float = 0.0) -> tuple[bool, float, float]:
    """Median of the last quarter below the median of the first quarter (by more than `rel`).

    Returns (fell, first, last); non-finite losses count against falling.
    """
    v = np.array([np.nan if x is None else x for x in losses], float)
    n = len(v)
    if n < 2:
        return False, float("nan"), float("nan")
    w = max(1, n // 4)
    first, last = v[:w], v[-w:]
    if not np.all(np.isfinite(last)):
        return False, float(np.nanmedian(first)) if np.isfinite(first).any() else float("nan"), float("nan")
    f, l_ = float(np.nanmedian(first)) if np.isfinite(first).any() else float("nan"), float(np.median(last))
    if not math.isfinite(f):
        return False, f, l_
    return bool(l_ < f - rel * abs(f)), f, l_


@dataclass(frozen=True)
class Collapse:
    """Where a loss-scale collapse began and why it counts as one."""

    began_step: int
    detected_step: int
    kind: str  # "floor" | "halvings"
    scale: float
    halvings: int


def find_scale_collapse(
    steps: Sequence[int],
    scales: Sequence[float | None],
    losses: Sequence[float | None],
    floor: float,
    halvings: int,
) -> Collapse | None:
    """First loss-scale collapse in a trial, or None.

    A collapse is either the scale falling below `floor` (NaN included), or `halvings` decreases
    without any recovery (increase) in between, after which the loss never fell again by at least 1%
    (judged from just before the first decrease to the end of the trial): the dynamic scaler chasing
    overflows that will never stop (PaddleOCR issues #6848, #10365).  It "began" at the first
    decrease after which the loss never fell again (an isolated overflow earlier, after which
    training went on, is not part of it); failing that, at the first decrease since the last increase.
    """
    prev: float | None = None
    drops: list[int] = []  # indices of the decreases since the last increase

    def stalled_from() -> int | None:
        """Earliest decrease of the current run after which the loss never fell again, if at least
        `halvings` decreases followed it (itself included)."""
        for k, j in enumerate(drops):
            if len(drops) - k < halvings:
                return None
            if not loss_fell(list(losses[max(0, j - 1):]), rel=0.01)[0]:
                return j
        return None

    for i, (st, sc) in enumerate(zip(steps, scales)):
        if sc is None:
            continue
        sc = float(sc)
        if prev is not None and math.isfinite(sc):
            if sc < prev:
                drops.append(i)
            elif sc > prev:
                drops = []
        if not sc >= floor:  # NaN scales count as below the floor
            j = next((j for j in drops if not loss_fell(list(losses[max(0, j - 1):]), rel=0.01)[0]),
                     drops[0] if drops else i)
            return Collapse(int(steps[j]), int(st), "floor", sc, len(drops))
        if drops and drops[-1] == i and len(drops) >= halvings:
            began = stalled_from()
            if began is not None:
                return Collapse(int(steps[began]), int(st), "halvings", sc, len(drops) - drops.index(began))
        prev = sc
    return None
