"""Statistics shared by the rules: parity margins, loss trends, loss-scale collapse.  The verdicts'
trial-level inference lives in inference.py, a mode's samples/s and its interval in measure.py.

numpy arrays in, small dataclasses out; no knowledge of trials or suites here (check.py does that).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Margin:
    """Parity margin = max(abs_tol, sigma_k * seed sd); `source` says which term won."""

    value: float
    sd: float | None
    n: int
    source: str  # "abs_tol" | "sigma" | "abs_tol-only (one seed)"


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


@dataclass(frozen=True)
class Difference:
    """The difference of two groups' means (or of their log means: a ratio) and its two-sided interval."""

    estimate: float
    low: float
    high: float
    sd: float    # pooled between-trial sd on the scale compared
    n: int       # the smaller group's size


def difference(a: Sequence[float], b: Sequence[float], confidence: float, log: bool = False) -> Difference | None:
    """mean(a) - mean(b) (log: exp of the log means' difference, a ratio of geometric means) with its pooled-sd
    t interval at two-sided `confidence`; None with fewer than two values a side or non-positive values for a
    ratio.  A spread of zero (identical values) gives a point interval."""
    from ampbench.judge.distributions import t_ppf

    x, y = np.asarray(a, float), np.asarray(b, float)
    if min(len(x), len(y)) < 2 or (log and (np.any(x <= 0) or np.any(y <= 0))):
        return None
    if log:
        x, y = np.log(x), np.log(y)
    sd, df = pooled_sd([x.tolist(), y.tolist()])
    est = float(x.mean() - y.mean())
    half = float(t_ppf((1 + confidence) / 2, df)) * (sd or 0.0) * math.sqrt(1 / len(x) + 1 / len(y))
    lo, hi = est - half, est + half
    if log:
        est, lo, hi = math.exp(est), math.exp(lo), math.exp(hi)
    return Difference(est, lo, hi, sd or 0.0, min(len(x), len(y)))


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


def _never_fell_after(losses: Sequence[float | None], j: int) -> bool:
    """The loss never fell again by 1%, judged from just before decrease `j` to the end of the trial."""
    return not loss_fell(list(losses[max(0, j - 1):]), rel=0.01)[0]


def _stalled_from(drops: list[int], losses: Sequence[float | None], halvings: int) -> int | None:
    """Earliest decrease of the current run after which the loss never fell again, if at least
    `halvings` decreases followed it (itself included)."""
    for k, j in enumerate(drops):
        if len(drops) - k < halvings:
            return None
        if _never_fell_after(losses, j):
            return j
    return None


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
            j = next((j for j in drops if _never_fell_after(losses, j)), drops[0] if drops else i)
            return Collapse(int(steps[j]), int(st), "floor", sc, len(drops))
        if drops and drops[-1] == i and len(drops) >= halvings:
            began = _stalled_from(drops, losses, halvings)
            if began is not None:
                return Collapse(int(steps[began]), int(st), "halvings", sc, len(drops) - drops.index(began))
        prev = sc
    return None
