"""The emulator: every op an emulated auto_cast runs is decided by Paddle's rule (policy.py) and its
low-precision inputs and outputs are rounded to the AMP dtype and back (`paddle.cast` twice, so the
backward pass rounds the gradient flowing through the same point), while the kernels run in float32
(a Tensor Core reads float16, accumulates in float32 and writes float16).

A tensor that holds a low-precision value carries a marker (LOW, the dtype's name), so a gray op sees
which inputs "are" float16 and promotes as Paddle does.  O2 parameters (`decorate`) are float32 tensors
that stand for the low-precision parameter: each use rounds them (with master weights the float32
tensor is the master copy; without, it is rounded after every update and an update smaller than half a
float16 ulp is lost, as on the GPU).  Their gradients are stored in the low dtype too, rounded before
the scaler unscales them and after (unless `master_grad`).

Standard library only at import (Paddle comes in as an argument): the hook loads this package by path.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any

from .counts import MODEL, OUTSIDE, Counts, lost_values
from .formats import FORMATS, Format
from .ops import OpPatch
from .policy import EXACT, NO_AMP, X_ONLY, X_ONLY_PROMOTE, Policy, legacy_name

LOW = "_ampbench_low"          # on a tensor: the dtype its float32 value stands for
PARAM = "_ampbench_low_param"  # on an O2 parameter: the dtype the GPU would store it in


class Emulator:
    """One process's emulated AMP (the patches are process-wide, as Paddle's own AMP state is)."""

    def __init__(self, paddle: Any, counting: bool = True) -> None:
        self.paddle, self.counting = paddle, counting
        self.policies: list[Policy | None] = []
        self.policy: Policy | None = None
        self.busy = False                  # inside the emulator's own Paddle calls: ops run as Paddle's
        self.step = 1
        self.counts = Counts()
        self.calls: dict[str, list[int]] = {}     # op -> [low-precision calls, float32 calls]
        self.layers: list[str] = []               # the layer stack of the forward under way
        self.names: dict[int, str] = {}           # id(layer) -> dotted name in its outermost model
        self.params: dict[int, Any] = {}          # id(param) -> weakref of an O2 low-precision parameter
        self.param_layer: dict[int, str] = {}
        self.master_weight = True
        self.master_grad = False
        self.decorated = False
        self.patch = OpPatch(paddle, self.call, self.active, lambda: not self.busy)
        self.undo: list[Callable[[], None]] = []
        from paddle.incubate.autograd.phi_ops_map import op_map

        self.legacy = {v["phi_name"]: k for k, v in op_map.items() if v.get("phi_name")}
        self.fp32 = paddle.float32
        self.dtypes = {name: getattr(paddle, name) for name in FORMATS}
        # a parameter's forward value is not counted (it is stored, not computed); its gradient is
        self.param_type = paddle.base.framework.EagerParamBase
        self.grad_enabled = paddle.is_grad_enabled

    # ------------------------------------------------------------------ state

    def active(self) -> bool:
        return self.policy is not None and not self.busy

    def enter(self, policy: Policy | None) -> None:
        self.policies.append(self.policy)
        self.policy = policy

    def exit(self) -> None:
        self.policy = self.policies.pop() if self.policies else None

    @property
    def fmt(self) -> Format:
        return FORMATS[self.policy.dtype if self.policy is not None else "float16"]

    def layer(self) -> str:
        return self.layers[-1] if self.layers else OUTSIDE

    def enter_layer(self, layer: Any) -> None:
        key = id(layer)
        name = self.names.get(key)
        if name is None:   # the outermost layer of a forward: its sublayers named from it
            for sub_name, sub in layer.named_sublayers(include_self=True):
                shown = _safe_name(sub_name) or MODEL
                self.names.setdefault(id(sub), shown)
                self.counts.types.setdefault(shown, _safe_name(type(sub).__name__))
            name = self.names[key]
        self.layers.append(name)

    # ------------------------------------------------------------------ one op

    def call(self, fn: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        """One op under an emulated auto_cast: Paddle's decision, inputs rounded, outputs rounded."""
        policy = self.policy
        if name == "cast":
            return self.cast(fn, args, kwargs)
        if name.endswith("_") or name in NO_AMP or policy is None:   # in-place ops and cast skip AMP
            return fn(*args, **kwargs)
        slots = _float_slots(args, self.fp32, self.paddle.Tensor)
        if not slots:
            return fn(*args, **kwargs)
        op = legacy_name(name, self.legacy)
        seen = slots[:1] if op in X_ONLY_PROMOTE else slots
        low = policy.low(op, [self.is_low(_get(args, s), policy.dtype) for s in seen])
        tally = self.calls.setdefault(op, [0, 0])
        tally[0 if low else 1] += 1
        self.busy = True
        try:
            args = self.inputs(args, slots, 1 if op in X_ONLY else len(slots), low, op)
        finally:
            self.busy = False
        out = fn(*args, **kwargs)
        if not low:
            return out
        if op in EXACT:
            return _mark(out, policy.dtype, self.paddle.Tensor)
        self.busy = True
        try:
            return self.outputs(out, op, first_only="norm" in op)
        finally:
            self.busy = False

    def cast(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A program's own cast (`x.astype("float16")`, `paddle.cast`): to the AMP dtype, the value rounded and
        marked (float32 storage: the CPU has no float16 kernels for what follows); back to float32, a new
        unmarked tensor (Paddle's `astype` returns the tensor itself when the dtypes already match)."""
        x, dtype = (list(args) + [kwargs.get("dtype")])[:2] if args else (kwargs.get("x"), kwargs.get("dtype"))
        name = _dtype_name(dtype)
        if not isinstance(x, self.paddle.Tensor) or x.dtype != self.fp32:
            return fn(*args, **kwargs)
        if name in FORMATS:
            self.busy = True
            try:
                return self.round(x, "cast", name)
            finally:
                self.busy = False
        return fn(*args, **kwargs)

    def is_low(self, t: Any, dtype: str) -> bool:
        return getattr(t, LOW, None) == dtype or getattr(t, PARAM, None) == dtype

    def inputs(self, args: tuple, slots: list[tuple[int, int | None]], cast: int, low: bool, op: str) -> tuple:
        """Round the inputs a low-precision op casts (its first `cast` floating inputs: batch_norm and
        layer_norm cast `x` only) and every O2 parameter wherever it is read (it is stored low)."""
        dtype = self.policy.dtype if self.policy is not None else ""
        out: list[Any] | None = None
        for i, slot in enumerate(slots):
            t = _get(args, slot)
            if getattr(t, PARAM, None) is not None or (low and i < cast and getattr(t, LOW, None) != dtype):
                out = list(args) if out is None else out
                param = getattr(t, PARAM, None)
                _set(out, slot, self.round(t, op, param or dtype, count=not isinstance(t, self.param_type)))
        return tuple(out) if out is not None else args

    def outputs(self, out: Any, op: str, first_only: bool) -> Any:
        if isinstance(out, self.paddle.Tensor):
            return self.round(out, op) if out.dtype == self.fp32 else out
        if isinstance(out, (tuple, list)) and out:
            items = list(out)
            for i, t in enumerate(items[:1] if first_only else items):
                if isinstance(t, self.paddle.Tensor) and t.dtype == self.fp32:
                    items[i] = self.round(t, op)
            return type(out)(items) if isinstance(out, tuple) else items
        return out

    def round(self, t: Any, op: str, dtype: str | None = None, count: bool = True) -> Any:
        """`t` rounded to the AMP dtype and back, marked; its forward losses counted (`count`: not a
        parameter's, which is stored, not computed), and through a gradient hook the backward's at the same
        point (a parameter's gradient too)."""
        dtype = dtype or (self.policy.dtype if self.policy is not None else "float16")
        fmt = FORMATS[dtype]
        layer = self.layer()
        counting = self.counting and self.grad_enabled()   # training only: an evaluation is not counted
        if counting and count:
            over, under = lost_values(t.numpy(), fmt)
            if over or under:
                self.counts.add(layer, op, "overflow", over, self.step)
                self.counts.add(layer, op, "underflow", under, self.step)
        cast = self.patch.raw["cast"]
        r = cast(cast(t, self.dtypes[dtype]), self.fp32)
        setattr(r, LOW, dtype)
        if counting and not r.stop_gradient:
            r.register_hook(self.grad_counter(layer, op, fmt))
        return r

    def grad_counter(self, layer: str, op: str, fmt: Format) -> Callable[[Any], None]:
        def hook(grad: Any) -> None:
            over, under = lost_values(grad.numpy(), fmt)
            if over or under:
                self.counts.add(layer, op, "grad_overflow", over, self.step)
                self.counts.add(layer, op, "grad_underflow", under, self.step)
        return hook

    # ------------------------------------------------------------------ O2 parameters

    def low_params(self) -> list[Any]:
        return [p for p in (ref() for ref in self.params.values()) if p is not None]

    def mark_param(self, p: Any, dtype: str, layer: str) -> None:
        setattr(p, PARAM, dtype)
        self.params[id(p)] = weakref.ref(p)
        self.param_layer[id(p)] = layer
        self.store(p, dtype)

    def store(self, t: Any, dtype: str) -> Any:
        """Round a stored tensor in place (no graph): what casting it to `dtype` and back leaves."""
        paddle, cast = self.paddle, self.patch.raw["cast"]
        with paddle.no_grad():
            r = cast(cast(t, getattr(paddle, dtype)), self.fp32)
            paddle.assign(r, t)
        return r

    def round_grads(self, phase: str) -> None:
        """The low-precision parameters' gradients as the GPU stores them (unless master_grad)."""
        if self.master_grad:
            return
        for p in self.low_params():
            g = p._grad_ivar()
            if g is None:
                continue
            fmt = FORMATS[getattr(p, PARAM)]
            if self.counting and phase == "unscaled":
                over, under = lost_values(g.numpy(), fmt)
                layer = self.param_layer.get(id(p), OUTSIDE)
                self.counts.add(layer, "check_finite_and_unscale", "grad_overflow", over, self.step)
                self.counts.add(layer, "check_finite_and_unscale", "grad_underflow", under, self.step)
            self.store(g, fmt.name)

    def before_update(self) -> list[tuple[Any, Any]]:
        """Before the optimizer's update: the gradients stored low; without master weights, each low
        parameter's value kept to tell a lost update from an applied one."""
        self.round_grads("update")
        if self.master_weight:
            return []
        return [(p, p.numpy().copy()) for p in self.low_params()]

    def after_update(self, before: list[tuple[Any, Any]]) -> None:
        """Without master weights the updated value is stored low: an update that rounding undid is lost."""
        import numpy as np

        for p, old in before:
            new32 = p.numpy()
            stored = self.store(p, getattr(p, PARAM)).numpy()
            lost = int(np.count_nonzero((new32 != old) & (stored == old)))
            self.counts.add(self.param_layer.get(id(p), OUTSIDE), "optimizer", "lost_updates", lost, self.step)

    def end_step(self) -> None:
        self.step += 1

    def record(self) -> dict[str, Any]:
        """What the trial records (AmpInfo.emulation)."""
        return {"counting": self.counting, "steps": self.step - 1, "decorated": self.decorated,
                "master_weight": self.master_weight if self.decorated else None,
                "master_grad": self.master_grad if self.decorated else None,
                "low_params": len(self.low_params()),
                "op_calls": {op: {"low": lo, "float32": hi} for op, (lo, hi) in sorted(self.calls.items())},
                **self.counts.record()}


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/()\[\]-]")


def _safe_name(name: str) -> str:
    """A layer's name as every record and table shows it: its dotted path, other characters (a LayerDict key
    can hold any text) replaced, so markdown, terminals and the wire take it as is."""
    return _UNSAFE.sub("?", str(name))[:200]


def _dtype_name(dtype: Any) -> str:
    """'float16' for "float16", paddle.float16, DataType.FLOAT16 or numpy's float16 alike."""
    text = str(getattr(dtype, "name", None) or dtype).lower()
    return {"fp16": "float16", "bf16": "bfloat16", "uint16": "bfloat16"}.get(text, text.removeprefix("paddle."))


def _mark(out: Any, dtype: str, tensor: Any) -> Any:
    """Mark an exact op's floating outputs as holding `dtype` values (nothing rounded)."""
    for t in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(t, tensor):
            setattr(t, LOW, dtype)
    return out


def _float_slots(args: tuple, fp32: Any, tensor: Any) -> list[tuple[int, int | None]]:
    """Where the float32 tensors among the positional arguments are: (index, index in a list or None)."""
    slots: list[tuple[int, int | None]] = []
    for i, a in enumerate(args):
        if isinstance(a, tensor):
            if a.dtype == fp32:
                slots.append((i, None))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], tensor):
            slots.extend((i, j) for j, t in enumerate(a) if isinstance(t, tensor) and t.dtype == fp32)
    return slots


def _get(args: Any, slot: tuple[int, int | None]) -> Any:
    i, j = slot
    return args[i] if j is None else args[i][j]


def _set(args: list[Any], slot: tuple[int, int | None], value: Any) -> None:
    i, j = slot
    if j is None:
        args[i] = value
    else:
        inner = list(args[i])
        inner[j] = value
        args[i] = inner
