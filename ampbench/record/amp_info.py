"""What AMP did in a trial (`Trial.amp`): the mode's settings as applied, the op dtype evidence, the loss
scaler, and for an emulated mode what the emulation counted.  Split from record/models.py (which re-exports
it) only to keep each module short; each field's docstring is its description (docs/reference/record.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ampbench.core.columns import Col
from ampbench.record.open_model import OpenModel as _Open

Dtype = Literal["float32", "float16", "bfloat16"]
InactiveCode = Literal["", "device", "op-lists", "no-evidence"]
Level = Literal["O0", "O1", "O2"]
DecorateOrder = Literal["", "decorate-first", "data-parallel-first"]


class EmulatedLayer(_Open):
    """One layer's losses in an emulated trial (trial/emulate/counts.py): values counted before rounding."""

    layer: str
    """Its dotted name in the outermost model, "(model)" for that model itself."""
    type: str = ""
    """Its class (Linear, Conv2D)."""
    overflow: int = 0
    """Forward values rounded to inf (finite before)."""
    underflow: int = 0
    """Forward values flushed to zero (nonzero before)."""
    grad_overflow: int = 0
    """Gradient values rounded to inf where they flowed through a low-precision tensor."""
    grad_underflow: int = 0
    """Gradient values flushed to zero there."""
    lost_updates: int = 0
    """O2 without master weights: parameter updates that rounding undid."""


class Emulation(_Open):
    """What an emulated trial's AMP did (`amp.emulated`): AMP's numerics reproduced in float32 kernels
    (docs/emulation.md), the ops Paddle's lists sent to the low dtype, and where values were lost."""

    counting: bool = True
    """The emulator counted where values were lost (`layers`, `totals`)."""
    steps: int = 0
    """Training steps the emulation recorded."""
    decorated: bool = False
    """O2: parameters stored in the low dtype."""
    master_weight: bool | None = None
    """O2: FP32 master weights kept."""
    master_grad: bool | None = None
    """O2: FP32 weight gradients."""
    low_params: int = 0
    """Parameters stored in the low dtype."""
    op_calls: dict[str, dict[str, int]] = {}
    """The emulator's decision for each op call under auto_cast: op -> {"low": calls in the AMP dtype,
    "float32": calls}."""
    layers: list[EmulatedLayer] = []
    """Per layer, worst first."""
    totals: dict[str, int] = {}
    """Overflow, underflow and lost-update counts summed over the layers."""
    first_overflow: dict[str, Any] | None = None
    """Where values first overflowed: {step, phase, layer, op}, or null."""
    layers_left_out: int = 0
    """Layers past the record's 2000, not listed in `layers`."""


class AmpInfo(_Open):
    # the `Col` markers: the trial tables' columns (record/fields.py, docs/architecture.md "The field catalog")
    requested: Annotated[bool, Col("AMP requested", "flag", rank=70, shows=("csv",), csv="amp_requested")] = False
    """The mode asks for AMP (level O1 or O2)."""
    active: Annotated[bool, Col("AMP active (recorded)", "flag", rank=72, shows=("csv",), csv="amp_active")] = False
    """Some op really ran in float16/bfloat16: the only evidence that counts."""
    emulated: Annotated[bool, Col("AMP emulated", "flag", rank=73, shows=("csv",), csv="amp_emulated",
                                  csv_rank=100)] = False
    """Emulated AMP (a mode's emulate = true): no low-precision kernel ran; `emulation` says what was
    emulated."""
    emulation: Emulation | None = None
    """What the emulation did; null unless emulated."""
    level: Annotated[Level, Col("AMP level", "text", rank=74, shows=("csv",), csv="amp_level")] = "O0"
    """The AMP level the trial ran (O0: FP32)."""
    dtype: Annotated[Dtype, Col("AMP dtype", "text", rank=76, shows=("csv",), csv="amp_dtype")] = "float32"
    """The low-precision dtype (float32 for FP32)."""
    use_promote: bool = True
    """auto_cast's use_promote as applied."""
    white_list: list[str] = []
    """The mode's custom white list."""
    black_list: list[str] = []
    """The mode's custom black list."""
    default_lists_hash: str = ""
    """Hash of Paddle's default op lists, so a changed Paddle is visible."""
    effective_white_list: list[str] = []
    """The lists Paddle's auto_cast really applied: its defaults for the dtype and level with the custom lists
    merged in (`paddle.amp.auto_cast._update_list`); empty in files written before they were recorded."""
    effective_black_list: list[str] = []
    """The black list auto_cast really applied (as `effective_white_list`)."""
    unknown_op_names: list[str] = []
    """Custom-list names Paddle does not know (it ignores them silently)."""
    op_calls: dict[str, dict[str, int]] = {}
    """Op -> dtype -> calls over the first `amp_stats_steps` steps (cut to end inside warm-up; a command
    trial's from step 2)."""
    optimizer_op_calls: dict[str, dict[str, int]] = {}
    """A command trial's ops run inside the optimizer's step (update, regularizer, clipping), kept out of
    op_calls."""
    scaler: dict[str, Any] = {}
    """The mode's scaler settings."""
    scaler_enabled: bool = False
    """Paddle kept the GradScaler on, as it stood after the first step (Paddle may turn it off in the
    first scale())."""
    scaler_built: bool = False
    """A GradScaler was built (float16, or bfloat16 with `scaler.enable = true`)."""
    excluded_layers: list[str] = []
    """O2: layer classes decorate kept FP32."""
    master_grad: bool = False
    """O2: decorate(master_grad=True)."""
    decorate_order: DecorateOrder = ""
    """O2 with data parallel: whether paddle.amp.decorate ran before paddle.DataParallel wrapped the model
    (Paddle's AMP guide asks for decorate first); "" when the trial did not use both."""
    injected: dict[str, Any] = {}
    """A command mode's amp = "inject": what ampbench's hook applied ({"by": "ampbench", "applied":
    [{optimizer, models, level, dtype, decorated, scaler}], "errors"?}); {} when the program or the
    built-in loop applied AMP."""
    program: dict[str, Any] = {}
    """A command program that applies AMP itself: what its own calls used, as the hook saw them ({"auto_cast":
    {level, dtype, white, black, use_promote, effective_white, effective_black}, "grad_scaler": {"scaler":
    {...}}, "decorate": {level, dtype, master_weight, master_grad}}, each kind's first setting); the lists,
    scaler and level above are then the program's; {} for the built-in loop, an injected mode, or a file
    before it was kept."""
    evidence: str = ""
    """How `active` was decided."""
    inactive_reason: str = ""
    """Why AMP was off, in words (e.g. CPU, or the compute capability Paddle requires)."""
    inactive_code: InactiveCode = ""
    """Why AMP was off, as a code the rules' advice reads (the text above is for people): "device" (the device
    or its build cannot run this dtype's AMP), "op-lists" (it could, yet no op ran in low precision),
    "no-evidence" (no op dtype counts to tell); "" when active or in a file written before the code was."""

    def dtype_calls(self) -> dict[str, dict[str, int]]:
        """Op calls by dtype: Paddle's op statistics, or for an emulated trial the emulator's decisions (its
        kernels all ran in float32; the dtype each call stood for is the evidence)."""
        e = self.emulation
        if not self.emulated or e is None:
            return self.op_calls
        return {op: {self.dtype: by.get("low", 0), "float32": by.get("float32", 0)} for op, by in e.op_calls.items()}
