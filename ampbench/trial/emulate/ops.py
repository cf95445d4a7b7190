"""Every eager op a Python program can call, seen by the emulator before its kernel runs.

Paddle's Python APIs reach their kernels through `paddle._C_ops.<name>` (looked up at call time), through
names some Paddle modules bound at import (`from paddle._C_ops import matmul`), and through the Tensor
operators Paddle implements in C++ (`x + y`, `x @ w`: eager_math_op_patch.cc).  `OpPatch` replaces all
three by wrappers that hand the call to the emulator while an emulated auto_cast is open, and restores
them on `undo()`.  Ops a C++ composite calls internally are not seen (their inputs and outputs are, at
the composite's boundary), nor ops of a program that bound a raw op itself; docs/emulation.md says so.

Standard library only at import (Paddle comes in as an argument): the hook loads this package by path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

# Tensor operators implemented in C++: (the op a tensor operand runs, the op a Python scalar operand runs)
# (paddle/fluid/pybind/eager_math_op_patch.cc: a scalar operand goes through `scale`, `pow` for **).
# Comparisons are left out: they return bool and their inputs' rounding is not emulated.
DUNDERS: dict[str, tuple[str, str]] = {
    "__add__": ("add", "scale"), "__radd__": ("add", "scale"),
    "__sub__": ("subtract", "scale"), "__rsub__": ("subtract", "scale"),
    "__mul__": ("multiply", "scale"), "__rmul__": ("multiply", "scale"),
    "__div__": ("divide", "scale"), "__truediv__": ("divide", "scale"),
    "__rdiv__": ("divide", "divide"), "__rtruediv__": ("divide", "divide"),
    "__floordiv__": ("floor_divide", "floor_divide"), "__rfloordiv__": ("floor_divide", "floor_divide"),
    "__pow__": ("elementwise_pow", "pow"), "__rpow__": ("elementwise_pow", "elementwise_pow"),
    "__mod__": ("remainder", "remainder"), "__rmod__": ("remainder", "remainder"),
    "__matmul__": ("matmul", "matmul"), "__rmatmul__": ("matmul", "matmul"),
}

_ABSENT = object()
Call = Callable[[Callable[..., Any], str, tuple, dict], Any]   # (raw op, phi name, args, kwargs) -> result


class OpPatch:
    """The wrappers around Paddle's eager ops; `call` is the emulator's entry, `active()` whether it wants
    the call at all (a cheap test: outside an emulated auto_cast every op runs as Paddle's own)."""

    def __init__(self, paddle: Any, call: Call, active: Callable[[], bool], installed: Callable[[], bool]) -> None:
        self.paddle, self.call, self.active, self.installed = paddle, call, active, installed
        self.undone: list[tuple[Any, str, Any]] = []
        self.raw: dict[str, Callable[..., Any]] = {}

    def wrap(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        call, active = self.call, self.active
        if name == "cast":   # a program's own cast to or from the AMP dtype is emulated wherever it runs
            active = self.installed

        def op(*args: Any, **kwargs: Any) -> Any:
            if not active():
                return fn(*args, **kwargs)
            return call(fn, name, args, kwargs)
        op.__name__ = name
        op._ampbench_emulated = fn   # type: ignore[attr-defined]  # the raw op, for a second install to find
        return op

    def wrap_dunder(self, fn: Callable[..., Any], names: tuple[str, str]) -> Callable[..., Any]:
        call, active, tensor = self.call, self.active, self.paddle.Tensor
        with_tensor, with_scalar = names

        def op(a: Any, b: Any) -> Any:
            if not active():
                return fn(a, b)
            return call(fn, with_tensor if isinstance(b, tensor) else with_scalar, (a, b), {})
        op._ampbench_emulated = fn   # type: ignore[attr-defined]  # a marker on our wrapper: the raw op
        return op

    def set(self, owner: Any, name: str, new: Any) -> None:
        self.undone.append((owner, name, getattr(owner, name, _ABSENT)))
        setattr(owner, name, new)

    def install(self) -> None:
        """Wrap every eager op where Python code finds it."""
        from paddle.base import core

        wrapped: dict[int, Any] = {}
        for ops in (core.eager.ops, core.pir.ops):   # paddle._C_ops holds pir.ops' (they run eager too)
            for name in dir(ops):
                fn = getattr(ops, name)
                if name.startswith("__") or not callable(fn) or hasattr(fn, "_ampbench_emulated"):
                    continue
                self.raw.setdefault(name, fn)
                wrapped[id(fn)] = self.wrap(fn, name)
        for mod_name, mod in list(sys.modules.items()):
            if mod is None or not (mod_name == "paddle" or mod_name.startswith("paddle.")):
                continue
            for attr, value in list(vars(mod).items()):
                new = wrapped.get(id(value))
                if new is not None:
                    self.set(mod, attr, new)
        tensor = self.paddle.Tensor
        for attr, names in DUNDERS.items():
            fn = vars(tensor).get(attr)
            if fn is not None and not hasattr(fn, "_ampbench_emulated"):
                self.set(tensor, attr, self.wrap_dunder(fn, names))

    def undo(self) -> None:
        for owner, name, old in reversed(self.undone):
            if old is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self.undone.clear()
