"""What the AMP calls a program makes used (issue 58.8): each distinct `paddle.amp.auto_cast` (amp_guard) setting
with the op lists Paddle's auto_cast then applies, and each `paddle.amp.GradScaler`'s settings, sent as
"amp_order" events (record/wire.py). A program that applies AMP itself (PaddleSeg's train loop builds
GradScaler(init_loss_scaling=1024) and white-lists elementwise_add) is then recorded with what it used, not the
suite's defaults; under `amp = "inject"` the calls are the hook's own (inject.py), with the mode's custom lists.

The effective lists are the program's own Paddle's (`paddle.amp.auto_cast._update_list`, the merge amp_guard
applies: a custom white op leaves the black list and the reverse), so the worker's Paddle, maybe another
version, never stands in for them. amp_guard is entered every step by most loops: the wrapper compares the
call's arguments with the last call's and does nothing else when they are the same.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from .state import State

MAX_SETTINGS = 16   # distinct settings of one kind reported (a program that varies them every step stops here)
SCALER_ARGS = ("init_loss_scaling", "incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf",
               "use_dynamic_loss_scaling")


def _ops(names: Any) -> list[str]:
    return sorted(str(n) for n in names or ())


def install(st: State, paddle: Any) -> None:
    """Wrap amp_guard (auto_cast calls it; so does paddle.amp.amp_guard) and AmpScaler.__init__ (GradScaler's
    calls it with every argument resolved): recorded only when enabled, each distinct setting once."""
    module = sys.modules.get("paddle.amp.auto_cast")
    guard = getattr(module, "amp_guard", None)
    seen: list[dict] = []
    if callable(guard):
        sig = inspect.signature(guard)
        last: list[Any] = [None]

        def amp_guard(*args: Any, **kwargs: Any) -> Any:
            key = (args, kwargs)
            if key != last[0]:
                last[0] = key
                _auto_cast(st, module, sig, args, kwargs, seen)
            return guard(*args, **kwargs)
        st.patch(module, "amp_guard", amp_guard)
        if getattr(paddle.amp, "amp_guard", None) is guard:
            st.patch(paddle.amp, "amp_guard", amp_guard)
    scaler_cls = paddle.amp.grad_scaler.AmpScaler
    init = vars(scaler_cls)["__init__"]
    init_sig = inspect.signature(init)

    def scaler_init(this: Any, *args: Any, **kwargs: Any) -> None:
        init(this, *args, **kwargs)
        try:
            got = init_sig.bind(this, *args, **kwargs)
            got.apply_defaults()
            a = got.arguments
            if a.get("enable") and len(seen) < 2 * MAX_SETTINGS:
                ev = {"e": "amp_order", "call": "grad_scaler",
                      "scaler": {k: float(a[k]) for k in SCALER_ARGS if isinstance(a.get(k), (int, float))}}
                if ev not in seen:
                    seen.append(ev)
                    st.emit(**ev)
        except Exception as exc:   # never break the program: it runs on, its scaler unrecorded
            st.emit(e="error", where="grad_scaler", error=f"{type(exc).__name__}: {exc}"[:300])
    st.patch(scaler_cls, "__init__", scaler_init)


def _auto_cast(st: State, module: Any, sig: Any, args: tuple, kwargs: dict, seen: list[dict]) -> None:
    """One new amp_guard setting: its arguments and the lists Paddle merges them into, once."""
    try:
        got = sig.bind(*args, **kwargs)
        got.apply_defaults()
        a = got.arguments
        if not a.get("enable") or len(seen) >= 2 * MAX_SETTINGS:
            return
        level, dtype = str(a.get("level")), str(a.get("dtype"))
        ev: dict = {"e": "amp_order", "call": "auto_cast", "level": level, "dtype": dtype,
                    "white": _ops(a.get("custom_white_list")), "black": _ops(a.get("custom_black_list")),
                    "use_promote": bool(a.get("use_promote"))}
        if ev in seen:
            return
        seen.append(dict(ev))
        white, black = module._update_list(a.get("custom_white_list"), a.get("custom_black_list"), level, dtype)
        ev.update(effective_white=_ops(white), effective_black=_ops(black))
    except Exception as exc:   # never break the program: Paddle's own call below raises what it would
        st.emit(e="error", where="auto_cast", error=f"{type(exc).__name__}: {exc}"[:300])
        return
    st.emit(**ev)
