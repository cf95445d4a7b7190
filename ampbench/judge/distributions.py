"""The Student-t and normal distribution functions the rules use, from scipy.special.

These are the very functions scipy.stats' `t` and `norm` call (scipy 1.17 stats/_continuous_distns.py:
`t._ppf` is `special.stdtrit(df, q)`, `norm._ppf` is `special.ndtri`, `norm._cdf` is `special.ndtr`,
`norm._sf(x)` is `ndtr(-x)`, `norm._pdf` is `exp(-x**2/2)/sqrt(2*pi)`), so every figure is unchanged.
Why not `scipy.stats` itself: importing it costs about one CPU second (0.5 s in `_stats_py` alone, plus
spatial, interpolate and Cython), paid by every ampbench process that judges, which is nearly every CLI
call; scipy.special costs a tenth of that.  The few places that need a test scipy.stats offers
(Welch's t-test in judge.changepoint) import it where they use it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

_SQRT_2PI = math.sqrt(2 * math.pi)


def t_ppf(q: Any, df: Any) -> Any:
    """Quantile of Student's t with `df` degrees of freedom (scipy.stats.t.ppf)."""
    return special.stdtrit(df, q)


def norm_ppf(q: Any) -> Any:
    """Standard normal quantile (scipy.stats.norm.ppf)."""
    return special.ndtri(q)


def norm_cdf(x: Any) -> Any:
    """Standard normal distribution function (scipy.stats.norm.cdf)."""
    return special.ndtr(x)


def norm_sf(x: Any) -> Any:
    """Standard normal upper tail, 1 - cdf without its cancellation (scipy.stats.norm.sf)."""
    return special.ndtr(-np.asarray(x))


def norm_pdf(x: Any) -> Any:
    """Standard normal density (scipy.stats.norm.pdf)."""
    x = np.asarray(x, dtype=float)
    return np.exp(-x * x / 2.0) / _SQRT_2PI
