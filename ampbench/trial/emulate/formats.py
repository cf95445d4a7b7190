"""The two low-precision storage formats AMP uses, as IEEE 754 / Google Brain define them, and the
thresholds at which rounding a float32 value to them overflows or flushes it to zero.

Rounding is round-to-nearest, ties to even (what `paddle.cast` does on CPU and what CUDA's
`__float2half_rn` / `__float2bfloat16_rn` do), so the thresholds are the midpoints:

- float16 (1-5-10): largest finite 65504 = (2 - 2^-10) * 2^15; a value whose magnitude reaches 65520
  (the midpoint to 2^16, a tie rounding to the even neighbour 2^16) becomes inf.  Smallest subnormal
  2^-24; 2^-25 is the tie between 0 and 2^-24 and rounds to the even 0, so 0 < |x| <= 2^-25 flushes to 0.
- bfloat16 (1-8-7): float32's exponent, so largest finite (2 - 2^-7) * 2^127 ~ 3.3895e38 and
  overflow from (2 - 2^-8) * 2^127 ~ 3.3962e38; smallest subnormal 2^-133, flush for 0 < |x| <= 2^-134.

Standard library only: the hook loads this package into a user's program by its path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    """One storage format: its name as Paddle spells the dtype, and where rounding to it loses a value."""

    name: str
    mantissa_bits: int      # stored fraction bits (10 for float16, 7 for bfloat16)
    max_exponent: int       # exponent of the largest finite value (15, 127)
    min_exponent: int       # exponent of the smallest normal value (-14, -126)

    @property
    def max_finite(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, -self.mantissa_bits), self.max_exponent)

    @property
    def overflow_at(self) -> float:
        """|x| at and above which rounding gives inf: half an ulp above the largest finite value (the tie
        between it and 2^(max_exponent+1), which rounds to the even neighbour, inf)."""
        return self.max_finite + self.ulp(self.max_finite) / 2

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.min_exponent - self.mantissa_bits)

    @property
    def flush_at(self) -> float:
        """|x| at and below which a nonzero value rounds to zero (half the smallest subnormal, a tie to 0)."""
        return self.min_subnormal / 2

    def ulp(self, x: float) -> float:
        """The spacing of the format's values at |x| (the subnormal spacing below the normal range)."""
        if x == 0 or not math.isfinite(x):
            return self.min_subnormal
        exp = max(math.frexp(abs(x))[1] - 1, self.min_exponent)
        return math.ldexp(1.0, exp - self.mantissa_bits)


FLOAT16 = Format("float16", mantissa_bits=10, max_exponent=15, min_exponent=-14)
BFLOAT16 = Format("bfloat16", mantissa_bits=7, max_exponent=127, min_exponent=-126)
FORMATS = {f.name: f for f in (FLOAT16, BFLOAT16)}
