"""Where the emulated trial lost values: per layer, how many overflowed to inf, how many nonzero values
were flushed to zero (forward activations and, separately, the gradients flowing back through them), and
how many weight updates were lost to rounding (O2 without master weights); the first overflow's step,
phase, layer and op.

Counted against the format's thresholds (formats.py) on the float32 value about to be rounded, so a value
that was already inf or zero upstream is not counted again.  The count reads the tensor to the host
(numpy, a copy): fast on a CPU, and an emulated trial is never timed for speed.  Standard library only
at import (numpy is imported when counting): the hook loads this package by its path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .formats import Format

KINDS = ("overflow", "underflow", "grad_overflow", "grad_underflow", "lost_updates")
MODEL = "(model)"   # the outermost layer's own name in the per-layer table
OUTSIDE = "(outside any layer)"
MAX_LAYERS = 2000   # a bounded record: a model with more layers keeps the first 2000 that lost a value


def lost_values(array: Any, fmt: Format) -> tuple[int, int]:
    """(overflowed, flushed) values of a float32 array when rounded to `fmt`: finite values at or above
    the overflow threshold, nonzero values at or below the flush threshold (NaN is neither)."""
    import numpy as np

    m = np.abs(array)
    if m.size == 0:
        return 0, 0
    over = 0
    if not m.max() < fmt.overflow_at:   # rare (NaN too): only then the exact count (infs already upstream left out)
        over = int(np.count_nonzero(m >= fmt.overflow_at) - np.count_nonzero(np.isinf(m)))
    small = m[m <= fmt.flush_at]        # zeros and the values that flush (few, for most tensors)
    return over, int(np.count_nonzero(small))


@dataclass
class Counts:
    """Running totals per layer and kind, and the first overflow."""

    layers: dict[str, dict[str, int]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    first_overflow: dict[str, Any] | None = None
    dropped_layers: int = 0

    def add(self, layer: str, op: str, kind: str, n: int, step: int) -> None:
        if not n:
            return
        row = self.layers.get(layer)
        if row is None:
            if len(self.layers) >= MAX_LAYERS:
                self.dropped_layers += 1
                return
            row = self.layers[layer] = dict.fromkeys(KINDS, 0)
        row[kind] += n
        if self.first_overflow is None and kind in ("overflow", "grad_overflow"):
            self.first_overflow = {"step": step, "phase": "forward" if kind == "overflow" else "backward",
                                   "layer": layer, "op": op}

    def totals(self) -> dict[str, int]:
        return {k: sum(row[k] for row in self.layers.values()) for k in KINDS}

    def record(self) -> dict[str, Any]:
        """Per layer, worst first (overflows, then flushed and lost values)."""
        def worst(item: tuple[str, dict[str, int]]) -> tuple[int, int, str]:
            name, r = item
            return -(r["overflow"] + r["grad_overflow"]), -(r["underflow"] + r["grad_underflow"] + r["lost_updates"]), name
        rows = [{"layer": name, "type": self.types.get(name, ""), **row}
                for name, row in sorted(self.layers.items(), key=worst)]
        return {"layers": rows, "totals": self.totals(), "first_overflow": self.first_overflow,
                "layers_left_out": self.dropped_layers}
