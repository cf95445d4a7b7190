"""The emulator's record on the hook's wire (record/wire.py's EmulationEvent): `event` turns `Emulator.record()`
into the event's fields in the user's program, `from_event` turns a checked event back into the record in
ampbench's worker (which record.models.Emulation reads).  Standard library only: both sides load it."""

from __future__ import annotations

from typing import Any

from .counts import KINDS
from .counts import MAX_LAYERS as _MAX_ROWS


def event(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the hook sends it: op calls as "low,float32" text, layers and the first overflow as rows."""
    ev: dict[str, Any] = {"steps": record.get("steps", 0), "counting": bool(record.get("counting")),
                          "decorated": bool(record.get("decorated")), "low_params": record.get("low_params", 0),
                          "layers_left_out": record.get("layers_left_out", 0),
                          "op_calls": {op: f"{c.get('low', 0)},{c.get('float32', 0)}"
                                       for op, c in list(record.get("op_calls", {}).items())[:20000]},
                          "layers": [[r.get("layer", ""), r.get("type", ""), *(r.get(k, 0) for k in KINDS)]
                                     for r in record.get("layers", [])[:_MAX_ROWS]]}
    for key in ("master_weight", "master_grad"):
        if isinstance(record.get(key), bool):
            ev[key] = record[key]
    first = record.get("first_overflow")
    if first:
        ev["first_overflow"] = [first.get("step", 0), first.get("phase", ""), first.get("layer", ""),
                                first.get("op", "")]
    return ev


def from_event(ev: dict[str, Any]) -> dict[str, Any]:
    """A checked "emulation" event back as the emulator's record (a malformed op count is left out; the totals
    summed from the layers, as the emulator sums them)."""
    calls = {}
    for op, text in (ev.get("op_calls") or {}).items():
        parts = str(text).split(",")
        if len(parts) == 2 and all(p.isdecimal() for p in parts):
            calls[op] = {"low": int(parts[0]), "float32": int(parts[1])}
    first = ev.get("first_overflow")
    layers = [dict(zip(("layer", "type", *KINDS), row)) for row in ev.get("layers") or []]
    return {"steps": ev.get("steps", 0), "counting": ev.get("counting", True), "decorated": ev.get("decorated", False),
            "master_weight": ev.get("master_weight"), "master_grad": ev.get("master_grad"),
            "low_params": ev.get("low_params", 0), "op_calls": calls, "layers_left_out": ev.get("layers_left_out", 0),
            "layers": layers, "totals": {k: sum(r[k] for r in layers) for k in KINDS},
            "first_overflow": dict(zip(("step", "phase", "layer", "op"), first)) if first else None}
