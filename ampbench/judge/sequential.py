"""Group-sequential looks for `ampbench run --until-decided`: alpha spending over repeated checks.

A run that adds seeds and re-checks after each one looks at its data several times; deciding every
look at the fixed-sample level would inflate both error rates (a false FAIL at any of ten looks is
still a false FAIL).  Each decision of a rule is its own one-sided test against the rule's threshold
(FAIL: "the problem is demonstrated" at level `fail_alpha`/`history_alpha`; PASS: "the threshold is
cleared" at level 1 - `confidence`), and each gets its own boundary from a Lan-DeMets spending
function (t = information so far / information at the seed cap):

    Pocock type (the default):    alpha(t) = alpha ln(1 + (e - 1) t)
    O'Brien-Fleming type ("obf"): alpha(t) = 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t))

O'Brien-Fleming spends almost nothing at the first looks and keeps the power of a fixed plan at the
cap; Pocock spends evenly, so an effect that 3 seeds already show is decided at 3 seeds.  Measured with
the rule code, 3 -> 16 seeds, a speedup 10% below min_speedup: Pocock decides at a median of 3 / 6 / 11
seeds at 2 / 5 / 8% spread, O'Brien-Fleming at 6 / 9 / 12; detection at the cap is 78% vs 88% at 8%.
But Pocock's first looks are where a bimodal machine (trials landing on a fast or a slow CPU) puts all
three trials of each arm in opposite clusters (1/64), and Pocock then FAILs 1.3% of identical code.
So the two decisions spend differently: PASS with Pocock (good code, the nightly's usual case, exits at
the first looks), FAIL with O'Brien-Fleming (a false FAIL is the costly error and the few-seed looks
are the ones that cry wolf).  Lan-DeMets spending
(not fixed boundaries) lets the looks fall where they do: a look is wherever the runner checked, and
a run cut short by its time budget has simply spent less alpha.

The boundaries on the z scale come from the recursive numerical integration of Armitage, McPherson
and Rowe (the score process has independent normal increments); a rule turns the current look's z
boundary into a nominal one-sided confidence, then into a t quantile with its own degrees of freedom.
The simulation in tests/test_verdict_sim.py runs the rule code through the looks and checks the
error rates over all looks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ampbench.judge.distributions import norm_cdf, norm_pdf, norm_ppf, norm_sf, t_ppf

_GRID = np.linspace(-9.0, 9.0, 1801)  # the score process S(t) ~ N(0, t), t <= 1: +-9 sd is plenty
_H = float(_GRID[1] - _GRID[0])


class Design(BaseModel):
    """The looks of one sequential run: seeds per arm at every check so far, and the planned cap."""

    model_config = ConfigDict(extra="forbid")
    looks: list[int] = Field(min_length=1)
    max_seeds: int = Field(ge=2)
    pass_spending: Literal["pocock", "obf"] = "pocock"  # PASS spends evenly: good code exits early
    fail_spending: Literal["pocock", "obf"] = "obf"  # FAIL spends late: the few-seed looks cry wolf most


def spent(alpha: float, t: float, kind: str = "pocock") -> float:
    """Lan-DeMets spending: the share of `alpha` spent by information fraction t (kind "obf":
    O'Brien-Fleming type; "pocock": Pocock type, alpha ln(1 + (e - 1) t))."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    if kind == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    return float(2 - 2 * norm_cdf(norm_ppf(1 - alpha / 2) / math.sqrt(t)))


@lru_cache(maxsize=64)
def _kernel(step: float) -> np.ndarray:
    """Transition density of the score process over an information increment `step`, times the grid step."""
    sd = math.sqrt(step)
    return norm_pdf((_GRID[:, None] - _GRID[None, :]) / sd) / sd * _H


@lru_cache(maxsize=4096)
def _state(fracs: tuple[float, ...], alpha: float, kind: str) -> tuple[tuple[float, ...], np.ndarray]:
    """(boundaries so far, density of the score at the last look over the paths not yet stopped);
    built look by look, so a run's k-th look reuses its first k - 1 (Lan-DeMets: a boundary depends
    only on the looks before it)."""
    t = fracs[-1]
    bounds: tuple[float, ...] = ()
    dens: np.ndarray | None = None
    if len(fracs) == 1:
        prev_t, prev_spent = 0.0, 0.0
    else:
        bounds, dens = _state(fracs[:-1], alpha, kind)
        prev_t, prev_spent = fracs[-2], spent(alpha, fracs[-2], kind)
    if t <= prev_t:
        raise ValueError(f"information fractions must increase: {fracs}")
    target, step = spent(alpha, t, kind) - prev_spent, t - prev_t
    if dens is None:
        def cross(b: float) -> float:
            return float(norm_sf(b))
        new = norm_pdf(_GRID / math.sqrt(t)) / math.sqrt(t)
    else:
        w = dens * _H

        def cross(b: float) -> float:
            return float(np.sum(w * norm_sf((b * math.sqrt(t) - _GRID) / math.sqrt(step))))
        new = _kernel(round(step, 9)) @ dens
    from scipy import optimize  # here only: its import is paid by the runs that compute a boundary

    b = math.inf if target <= 1e-15 else float(optimize.brentq(lambda x: cross(x) - target, -5.0, 40.0, xtol=1e-10))
    if math.isfinite(b):
        new = np.where(_GRID < b * math.sqrt(t), new, 0.0)
    return (*bounds, b), new


def z_bounds(fracs: tuple[float, ...], alpha: float, kind: str = "pocock") -> tuple[float, ...]:
    """Upper z boundaries c_1..c_K at information fractions `fracs` (increasing, last <= 1) such that
    P(Z_i >= c_i at some look i <= k) = spent(alpha, t_k, kind) under the null, for every k (the recursive
    numerical integration of Armitage, McPherson and Rowe on a grid of the score process)."""
    return _state(tuple(fracs), alpha, kind)[0]


def fractions(looks: Sequence[int], max_seeds: int, info: Callable[[int], float] = float) -> tuple[float, ...]:
    """Information fraction at each look; `info(k)` is the information with k seeds per arm (k for two
    growing arms; 1 / (1/k + 1/k_baseline) when one arm is a fixed baseline)."""
    top = info(max_seeds)
    out: list[float] = []
    for k in looks:
        f = min(info(k) / top, 1.0)
        if out and f <= out[-1]:  # a repeated look at the same data spends nothing new: skip it
            continue
        out.append(f)
    return tuple(round(f, 9) for f in out)


def nominal_confidence(design: Design | None, alpha: float, info: Callable[[int], float] = float,
                       kind: str = "pocock") -> float:
    """The one-sided confidence the current (last) look decides at: 1 - alpha for a fixed-seed run."""
    if design is None:
        return 1 - alpha
    fr = fractions(design.looks, max(design.max_seeds, max(design.looks)), info)
    c = z_bounds(fr, alpha, kind)[-1]
    return 1.0 if not math.isfinite(c) else float(norm_cdf(c))


def t_quantile(confidence: float, df: int | np.ndarray) -> np.ndarray | float:
    """t multiplier of a one-sided bound at `confidence` (inf when the look spends nothing)."""
    if confidence >= 1.0:
        return np.inf if np.isscalar(df) else np.full(np.shape(df), np.inf)
    return t_ppf(confidence, df)


def levels(confidence: float, fail_alpha: float, design: Design | None = None,
           baseline_trials: int = 0) -> tuple[float, float]:
    """(PASS, FAIL) one-sided confidences a rule decides at: (confidence, 1 - fail_alpha) with fixed
    seeds, the current look's spending boundaries in a sequential run.  `baseline_trials` > 0: one arm
    is a fixed baseline of that many trials (history rules), so information grows more slowly."""
    info = baseline_info(baseline_trials) if baseline_trials else float
    if design is None:
        return confidence, 1 - fail_alpha
    return (nominal_confidence(design, 1 - confidence, info, design.pass_spending),
            nominal_confidence(design, fail_alpha, info, design.fail_spending))


def baseline_info(k_baseline: int) -> Callable[[int], float]:
    """Information with k current seeds against a fixed baseline of k_baseline trials."""
    return lambda k: 1.0 / (1.0 / k + 1.0 / max(k_baseline, 1))
