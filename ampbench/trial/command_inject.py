"""A command mode's `amp = "inject"`: the settings the start-up hook applies, and what it reported back.

The hook (workloads/command/hook/_ampbench_hook/inject.py) cannot import ampbench, so the mode reaches it as
JSON in protocol.HOOK_INJECT_ENV; it answers with "inject" events (the models and optimizer AMP was
applied to, or the program's own AMP that made it refuse), which become `Trial.amp.injected` and, for a
refusal, the trial's one-line error. `keep_lines` is the diff a user applies to keep the mode.
"""

from __future__ import annotations

import json
from typing import Any

from ampbench.config.suite import ModeConfig
from ampbench.core import protocol
from ampbench.record import wire
from ampbench.record.models import AmpInfo

INJECT_ENV = protocol.HOOK_INJECT_ENV   # read by the hook's _ampbench_hook/inject.py
SCALER_KEYS = ("init_loss_scaling", "incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf",
               "use_dynamic_loss_scaling")
APPLIED = ("optimizer", "models", "level", "dtype", "decorated", "scaler", "scaler_enabled")   # an inject event's


def inject_settings(mode: ModeConfig) -> str:
    """The mode's AMP as the hook applies it (Paddle's own argument names)."""
    scaler = {k: getattr(mode.scaler, k) for k in SCALER_KEYS} if mode.scaler_wanted else None
    return json.dumps({"level": mode.amp_level, "dtype": mode.dtype, "custom_white_list": mode.custom_white_list,
                       "custom_black_list": mode.custom_black_list, "use_promote": mode.use_promote,
                       "master_weight": mode.master_weight, "master_grad": mode.master_grad,
                       "excluded_layers": mode.excluded_layers, "scaler": scaler})


def injected_record(mode: ModeConfig, events: list[wire.InjectEvent]) -> dict[str, Any]:
    """`Trial.amp.injected`: what the hook applied (per optimizer it adopted), or why nothing ({} for a
    mode whose AMP the program applies)."""
    if mode.amp_by != "inject":
        return {}
    applied = [{k: getattr(ev, k) for k in APPLIED if getattr(ev, k) is not None}
               for ev in events if not ev.error and not ev.refused][:8]
    errors = sorted({ev.error for ev in events if ev.error})[:4]
    record: dict[str, Any] = {"by": "ampbench", "applied": applied}
    if errors:
        record["errors"] = errors
    if not events:
        record["errors"] = ["the hook never reported applying AMP (no optimizer was built after `import paddle`?)"]
    return record


def injected_into(amp: AmpInfo, mode: ModeConfig, events: list[wire.InjectEvent]) -> None:
    """The trial's AMP record for an injected mode: what was applied, and an inactive reason that does not
    send the user to args that do not exist (ampbench applied the AMP; the device or the op lists kept it off)."""
    amp.injected = injected_record(mode, events)
    if amp.injected and amp.inactive_reason:
        amp.inactive_reason = amp.inactive_reason.replace(
            "on a GPU check the mode's args really turn AMP on",
            "ampbench applied it (amp = \"inject\"): on a GPU check amp.injected names the model you train")


def refusal(events: list[wire.InjectEvent]) -> str | None:
    """The hook's one line when the program already applies AMP itself (it then ended the program)."""
    for ev in events:
        if ev.refused is not None:
            return f"amp = \"inject\" refused: {ev.refused[:400]}"
    return None
