"""How closely emulated AMP reproduced real AMP: one mode trained both ways on a GPU (real float16/bfloat16
kernels, and `emulate = true`: float32 kernels with values rounded), same seed, same data order, compared
step by step.  `ampbench selftest` runs it on the first GPU it is given (commands/selftest.py); the
tolerance is documented in docs/emulation.md, and nothing here has been measured on a GPU yet.

Why a tolerance and not equality: the real run's kernels differ from float32 ones beyond rounding at op
boundaries (cuBLAS/cuDNN accumulation order and algorithm, fused kernels, TF32 in float32 ops), so the two
loss curves drift apart by rounding noise; what emulation must get right is where the numerics break:
the steps the scaler skipped, the scale trajectory, and the curve's course.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ampbench.record.models import StepRecord, Trial

# The documented tolerance (docs/emulation.md "Fidelity"): loss curves agree to a median relative
# difference of 2% over the steps both recorded and 5% at the last one; the skipped steps differ by at most
# one; the loss scales match on at least 90% of the steps both recorded.
LOSS_MEDIAN_REL = 0.02
LOSS_LAST_REL = 0.05
SKIPPED_DIFF = 1
SCALE_SAME_SHARE = 0.9


@dataclass(frozen=True)
class Fidelity:
    """One mode's real trial against its emulated twin: the figures and whether each is within tolerance."""

    mode: str
    steps: int                       # steps both trials recorded a finite loss for
    loss_median_rel: float | None
    loss_last_rel: float | None
    skipped_real: int
    skipped_emulated: int
    scale_same_share: float | None   # None: no loss scale recorded by either (bfloat16, scaler off)

    @property
    def loss_ok(self) -> bool:
        return (self.loss_median_rel is not None and self.loss_last_rel is not None
                and self.loss_median_rel <= LOSS_MEDIAN_REL and self.loss_last_rel <= LOSS_LAST_REL)

    @property
    def skipped_ok(self) -> bool:
        return abs(self.skipped_real - self.skipped_emulated) <= SKIPPED_DIFF

    @property
    def scale_ok(self) -> bool:
        return self.scale_same_share is None or self.scale_same_share >= SCALE_SAME_SHARE

    @property
    def ok(self) -> bool:
        return self.loss_ok and self.skipped_ok and self.scale_ok

    def detail(self) -> str:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.1%}"
        return (f"loss rel. diff median {pct(self.loss_median_rel)} (<= {LOSS_MEDIAN_REL:.0%}), last "
                f"{pct(self.loss_last_rel)} (<= {LOSS_LAST_REL:.0%}) over {self.steps} steps; skipped "
                f"{self.skipped_real} real vs {self.skipped_emulated} emulated (<= {SKIPPED_DIFF} apart); loss scale "
                f"same on {pct(self.scale_same_share)} of steps (>= {SCALE_SAME_SHARE:.0%})")


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def _finite_loss(s: StepRecord) -> float | None:
    return s.loss if s.loss_seen and s.loss is not None and math.isfinite(s.loss) else None


def compare(real: Trial, emulated: Trial) -> Fidelity:
    """The two trials step by step (matched by step number)."""
    emu = {s.step: s for s in emulated.steps}
    pairs = [(s, emu[s.step]) for s in real.steps if s.step in emu]
    finite = [(_finite_loss(a), _finite_loss(b)) for a, b in pairs]
    losses = [(a, b) for a, b in finite if a is not None and b is not None]
    rels = [_rel(a, b) for a, b in losses]
    scaled = [(a.loss_scale, b.loss_scale) for a, b in pairs if a.loss_scale is not None or b.loss_scale is not None]
    share = sum(1 for a, b in scaled if a == b) / len(scaled) if scaled else None
    return Fidelity(mode=real.mode, steps=len(losses), loss_median_rel=statistics.median(rels) if rels else None,
                    loss_last_rel=rels[-1] if rels else None, skipped_real=sum(s.found_inf for s in real.steps),
                    skipped_emulated=sum(s.found_inf for s in emulated.steps), scale_same_share=share)
