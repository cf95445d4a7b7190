"""Op-level facts both stacks share: one op output's summary in a Paddle numerics dump (`[PRECISION] ...`
line), recorded by the run side (trial.numerics) and compared by the analysis side (diagnose/), and the
ops that only cast."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

FP16_MAX = 65504.0  # float16's largest finite value: beyond it an FP16 output overflows
# Ops that only move data between dtypes: a float16 cast proves nothing about AMP (a workload may
# store labels as fp16). Paddle 2.x names the eager cast `transfer_dtype`.  Shared by the trackers that
# count op calls and the judge that explains them (judge/why_slow.py).
CAST_OPS = frozenset({"cast", "cast_", "transfer_dtype"})


def json_float(x: float) -> float | str:
    """JSON has no inf/nan: keep them as the strings Paddle prints."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


@dataclass
class OpStat:
    """One line of a Paddle numerics dump: an op's output summary."""

    op: str
    dtype: str
    numel: int
    max: float
    min: float
    mean: float
    num_nan: int = 0
    num_inf: int = 0
    num_zero: int = 0
    error: bool = False  # Paddle marked it [ERROR]: the output holds NaN or Inf

    @property
    def phase(self) -> str:
        return "backward" if "_grad" in self.op else "forward"

    @property
    def magnitude(self) -> float:
        """max |x| as far as max/min tell (NaN when either is NaN)."""
        return max(abs(self.max), abs(self.min))

    @property
    def nonfinite(self) -> bool:
        return self.error or self.num_nan > 0 or self.num_inf > 0 or not (
            math.isfinite(self.max) and math.isfinite(self.min))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("max", "min", "mean"):
            d[k] = json_float(d[k])
        d["phase"] = self.phase
        return d
