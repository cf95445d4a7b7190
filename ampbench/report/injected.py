"""report.md's "AMP applied by ampbench" section: for each mode with `amp = "inject"`, what the start-up
hook applied (the models and optimizer, from the trial's `amp.injected`) and the few lines a user adds to
their own training loop to keep what that mode measured (Paddle's AMP guide's pattern: auto_cast around
the forward, decorate at O2, a GradScaler on the loss for float16). The mode's verdict is what they are worth.
"""

from __future__ import annotations

import re
from typing import Any

from ampbench.config.suite import ModeConfig, ScalerConfig
from ampbench.record.models import Trial
from ampbench.report.fmt import md_code, md_text
from ampbench.report.view import RunView, h

SCALER_KEYS = ("init_loss_scaling", "incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf",
               "use_dynamic_loss_scaling")
_NAME = re.compile(r"[^A-Za-z0-9_.]")


def _name(text: object) -> str:
    """A class or op name from the program or the suite, safe inside a code block."""
    return _NAME.sub("", str(text))[:80] or "?"


def _applied(trials: list[Trial]) -> dict[str, Any]:
    return next((a for t in trials for a in (t.amp.injected.get("applied") or []) if isinstance(a, dict)), {})


def keep_lines(mode: ModeConfig, applied: dict[str, Any]) -> list[str]:
    """The diff to the user's loop that keeps the injected mode (`model`, `optimizer`, `batch`, `loss` stand
    for the program's own names)."""
    models = ", ".join(_name(m) for m in applied.get("models") or ["model"])
    lists = "".join(f", custom_{k}_list={[_name(x) for x in getattr(mode, f'custom_{k}_list')]!r}"
                    for k in ("white", "black") if getattr(mode, f"custom_{k}_list"))
    lines = [f"# model(s) trained: {models}; optimizer: {_name(applied.get('optimizer', 'optimizer'))}"]
    if mode.scaler_wanted:
        args = ", ".join(f"{k}={getattr(mode.scaler, k)!r}" for k in SCALER_KEYS
                         if getattr(mode.scaler, k) != ScalerConfig.model_fields[k].default)
        lines.append(f"+ scaler = paddle.amp.GradScaler({args})")
    if mode.amp_level == "O2":
        lines.append(f"+ model, optimizer = paddle.amp.decorate(model, optimizer, level='O2', dtype={mode.dtype!r}"
                     + (", master_grad=True" if mode.master_grad else "") + ", save_dtype='float32')")
    lines += ["- out = model(batch)",
              f"+ with paddle.amp.auto_cast(level={mode.amp_level!r}, dtype={mode.dtype!r}{lists}):",
              "+     out = model(batch)"]
    if mode.scaler_wanted:
        lines += ["- loss.backward()", "- optimizer.step()",
                  "+ scaler.scale(loss).backward()", "+ scaler.step(optimizer)", "+ scaler.update()"]
    return lines


def injected_section(v: RunView, level: int) -> str:
    """One paragraph and one diff per injected mode ('' when the suite injects nothing)."""
    out = []
    for mode in (m for m in v.suite.modes if m.amp_by == "inject"):
        trials = [t for t in v.trials if t.mode == mode.name]
        if not trials:   # not run (`--mode` picked others): nothing was applied, nothing to say it was
            continue
        applied = _applied(trials)
        active = any(t.amp.active for t in trials)
        state = ("its ops ran in low precision" if active else
                 "AMP inactive: every recorded op ran in float32, so its figures are not an AMP measurement")
        errors = sorted({md_text(e, 200) for t in trials for e in t.amp.injected.get("errors") or []})
        said = f" The hook said: {'; '.join(errors)}." if errors else ""
        out.append(f"Mode {md_code(mode.name)}: ampbench's start-up hook applied {mode.amp_level} {mode.dtype} itself "
                   f"(`amp = \"inject\"`, the program unedited): {state}.{said} To keep it, add to your training "
                   "loop:\n\n```diff\n" + "\n".join(keep_lines(mode, applied)) + "\n```")
    return "\n\n".join([h(level, "AMP applied by ampbench"), *out]) if out else ""
