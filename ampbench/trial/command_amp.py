"""What a command trial's AMP calls used, as the start-up hook saw them (issue 58.5 and 58.8).

The hook reports each distinct `paddle.amp.auto_cast` setting with the op lists the program's own Paddle merges
it into, each `GradScaler`'s settings and each O2 `decorate`'s (workloads/command/hook/_ampbench_hook/ampcalls.py,
"amp_order" events). A program that applies AMP itself (PaddleSeg's train loop: GradScaler(init_loss_scaling=1024),
auto_cast(custom_white_list={"elementwise_add", ...}, custom_black_list={"bilinear_interp_v2"})) is recorded with
those, in `amp.program` and in the fields the built-in loop fills (`scaler`, `white_list`, `black_list`, the
effective lists), so the why-not-faster census and the advice judge what ran, not the suite's defaults. Under
`amp = "inject"` the calls are the hook's own, with the mode's custom lists: recorded as the lists, never as the
program's. With no auto_cast seen, the mode's custom lists merged by this interpreter's Paddle stand in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_args

from ampbench.config.suite import ModeConfig
from ampbench.record import wire
from ampbench.record.models import AmpInfo, Dtype, Level
from ampbench.trial.precision import effective_lists

INT_SCALER_ARGS = ("incr_every_n_steps", "decr_every_n_nan_or_inf")
# What each kind of call used, as its "amp_order" event carries it (record/wire.py AmpOrderEvent); a decorate's
# master_weight is kept when None too (Paddle's default for its level)
SETTINGS: dict[str, tuple[str, ...]] = {
    "auto_cast": ("level", "dtype", "white", "black", "use_promote", "effective_white", "effective_black"),
    "grad_scaler": ("scaler",),
    "decorate": ("level", "dtype", "master_weight", "master_grad"),
}
KEPT_WHEN_NONE = ("master_weight",)


def seen_calls(events: Iterable[wire.AmpOrderEvent]) -> dict[str, dict[str, Any]]:
    """The first setting of each kind among `events` (the lead process's first: every rank makes the same calls);
    a decorate event of an older hook (no settings: no dtype) is left out."""
    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        call = ev.call
        if call in SETTINGS and call not in out and (call != "decorate" or ev.dtype is not None):
            out[call] = {k: v for k in SETTINGS[call] if (v := getattr(ev, k)) is not None or k in KEPT_WHEN_NONE}
    return out


def _scaler(raw: dict[str, Any]) -> dict[str, Any]:
    """A GradScaler's settings as the suite's `scaler` table holds them (the hook sends numbers)."""
    out: dict[str, Any] = {"enable": True}
    for k, v in raw.items():
        out[k] = bool(v) if k == "use_dynamic_loss_scaling" else int(v) if k in INT_SCALER_ARGS else float(v)
    return out


def record_calls(amp: AmpInfo, mode: ModeConfig, calls: dict[str, dict[str, Any]]) -> None:
    """The calls into the AMP settings the trial's assembler then records (see the module docstring)."""
    cast = calls.get("auto_cast")
    if cast is not None:
        amp.white_list, amp.black_list = list(cast.get("white", [])), list(cast.get("black", []))
        amp.use_promote = bool(cast.get("use_promote", True))
        if "effective_white" in cast:
            amp.effective_white_list = list(cast["effective_white"])
            amp.effective_black_list = list(cast.get("effective_black", []))
        if cast.get("level") in get_args(Level) and cast.get("dtype") in get_args(Dtype):
            amp.level, amp.dtype = cast["level"], cast["dtype"]
    elif amp.requested:   # no auto_cast seen: the mode's own lists, merged by this interpreter's Paddle
        amp.white_list, amp.black_list = list(mode.custom_white_list), list(mode.custom_black_list)
        lists = effective_lists(amp.dtype, amp.level, amp.white_list, amp.black_list)
        amp.effective_white_list, amp.effective_black_list = lists["white"], lists["black"]
    if mode.amp_by == "inject" or not calls:
        return
    amp.program = calls
    if "grad_scaler" in calls:
        amp.scaler = _scaler(calls["grad_scaler"].get("scaler", {}))
    decorate = calls.get("decorate")
    if decorate is not None:
        amp.master_grad = bool(decorate.get("master_grad", False))
