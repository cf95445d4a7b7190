"""Where an emulated trial lost values (trial/emulate): its layers' overflowed, flushed and lost-update
counts summed over a mode's trials, worst first, the first overflow, and what to try for the worst layer.

Read by `ampbench diagnose` (which needs no re-run for it: the emulated trials recorded it) and by report.md's
"Where values were lost" section, so a user sees which layer needs the black list or bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ampbench.record.models import EmulatedLayer, Trial

KINDS = ("overflow", "underflow", "grad_overflow", "grad_underflow", "lost_updates")


@dataclass
class ModeLosses:
    """One emulated mode: its layers' counts over its trials, and the earliest first overflow."""

    mode: str
    dtype: str
    level: str
    layers: list[EmulatedLayer] = field(default_factory=list)
    first_overflow: dict[str, Any] | None = None   # {step, phase, layer, op, seed}
    low_calls: int = 0
    calls: int = 0
    master_weight: bool | None = None
    layers_left_out: int = 0   # layers past the trials' record cap (trial/emulate/counts.py MAX_LAYERS)


def mode_losses(mode: str, trials: list[Trial]) -> ModeLosses | None:
    """The emulated trials of `mode` summed; None when none of them was emulated."""
    ts = [t for t in trials if t.mode == mode and t.amp.emulated and t.amp.emulation is not None]
    if not ts:
        return None
    out = ModeLosses(mode=mode, dtype=ts[0].amp.dtype, level=ts[0].amp.level)
    rows: dict[str, EmulatedLayer] = {}
    for t in ts:
        e = t.amp.emulation
        assert e is not None
        out.master_weight = e.master_weight
        out.layers_left_out += e.layers_left_out
        for by in e.op_calls.values():
            out.low_calls += by.get("low", 0)
            out.calls += by.get("low", 0) + by.get("float32", 0)
        for row in e.layers:
            acc = rows.setdefault(row.layer, EmulatedLayer(layer=row.layer, type=row.type))
            for k in KINDS:
                setattr(acc, k, getattr(acc, k) + getattr(row, k))
        first = e.first_overflow
        if first and (out.first_overflow is None or first.get("step", 0) < out.first_overflow.get("step", 0)):
            out.first_overflow = {**first, "seed": t.seed}
    out.layers = sorted(rows.values(), key=lambda r: (-(r.overflow + r.grad_overflow),
                                                      -(r.underflow + r.grad_underflow + r.lost_updates), r.layer))
    return out


def advice(m: ModeLosses) -> list[str]:
    """What to try for the worst layer (plain text; `code` spans quote TOML)."""
    out: list[str] = []
    worst = next((r for r in m.layers if r.overflow or r.grad_overflow), None)
    if worst is not None and m.dtype == "float16":
        where = "its output" if worst.overflow else "the gradient flowing through it"
        out.append(f"layer {worst.layer} ({worst.type or 'layer'}) overflowed float16 in {where}: keep its op in "
                   "float32 with `custom_black_list`, scale the loss less (`scaler.init_loss_scaling`), or use "
                   "`dtype = \"bfloat16\"` (float32's range)")
    if any(r.grad_underflow for r in m.layers) and m.dtype == "float16":
        out.append("gradients were flushed to zero in float16: a GradScaler (on by default for float16) keeps "
                   "them; a larger `scaler.init_loss_scaling` keeps more")
    if any(r.lost_updates for r in m.layers):
        out.append("weight updates smaller than half a low-precision ulp were lost: keep float32 master weights "
                   "(`master_weight` on, the default at O2)")
    return out
