"""The suite models: one workload, its training, the precision modes to compare, the thresholds.

Pydantic models with unknown keys forbidden, so a typo is an error, not a silent default.
`REFERENCE_MODE` (fp32) is defined here once: every other layer compares against it.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

# An integer setting: a boolean is not one (pydantic's lax mode reads `batch_size = true` as 1).
StrictInt = Annotated[int, Strict()]

REFERENCE_MODE = "fp32"
DEFAULT_PROFILE = "default"
# measured steps per trial the speed rule needs for a usable per-trial median (judge/measure.py);
# here so the run side can refuse a suite that could never reach it (a command suite with [workload.program])
MIN_MEASURED_STEPS = 10


class _Strict(BaseModel):
    # inf/nan would be written to run.json as null and silently drop a threshold: refused here.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

# numpy.random.RandomState (every workload's data order) takes seeds in [0, 2**32).
MAX_SEED = 2**32 - 1


class OptimizerConfig(_Strict):
    name: Literal["adam", "adamw", "sgd", "momentum"] = "adam"
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0)
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    lr_warmup_steps: StrictInt = Field(0, ge=0)
    grad_clip_norm: float | None = Field(None, gt=0)


class TargetConfig(_Strict):
    """Time to target (MLPerf's time-to-train): first eval at which `metric` reaches `value`."""

    metric: str
    value: float


class TrainConfig(_Strict):
    batch_size: StrictInt = Field(32, ge=1)
    steps: StrictInt = Field(100, ge=1)
    warmup_steps: StrictInt = Field(5, ge=0)
    optimizer: OptimizerConfig = OptimizerConfig()
    grad_accum: StrictInt = Field(1, ge=1)
    eval_every: StrictInt = Field(0, ge=0)
    target: TargetConfig | None = None
    timeout_s: float = Field(3600.0, gt=0)
    amp_stats_steps: StrictInt = Field(2, ge=1)
    diverge_after: StrictInt = Field(10, ge=1)  # consecutive non-finite losses that end a trial as diverged

    @model_validator(mode="after")
    def _warmup_below_steps(self) -> TrainConfig:
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be below steps ({self.steps}): these are "
                             "ampbench's measurement warm-up steps (not the learning-rate warm-up, "
                             "optimizer.lr_warmup_steps); for a short run set both, e.g. --set train.steps=5 "
                             "--set train.warmup_steps=1")
        return self

    def op_stats_steps(self, first: int = 1) -> int:
        """How many steps Paddle's operator stats count from step `first` (1 in the built-in loop, 2 in a
        command trial, whose hook leaves model building and step 1 out): `amp_stats_steps`, cut so the window
        ends inside warm-up, because its bookkeeping (the op-count reads around every optimizer step) would
        lengthen a measured step (issue 43).  At least one step: measured only where warm-up leaves none."""
        return max(1, min(self.amp_stats_steps, self.warmup_steps - first + 1))


class ScalerConfig(_Strict):
    """Every documented argument of paddle.amp.GradScaler."""

    # None (the default): a scaler for float16, none for bfloat16 (FP32's exponent range; Paddle turns
    # dynamic scaling off for it at the first scale()). true builds one for bf16 too; false never.
    enable: bool | None = None
    init_loss_scaling: float = Field(65536.0, gt=0)
    incr_ratio: float = Field(2.0, gt=1)
    decr_ratio: float = Field(0.5, gt=0, lt=1)
    incr_every_n_steps: StrictInt = Field(2000, ge=1)
    decr_every_n_nan_or_inf: StrictInt = Field(1, ge=1)
    use_dynamic_loss_scaling: bool = True


def _is_paddle_layer_name(name: str) -> bool:
    """Checked by name pattern here (config must not import paddle); the worker resolves it."""
    return name.isidentifier() and name[:1].isupper()


class ModeConfig(_Strict):
    # `amp` in the suite (the field is `amp_by`: `amp` is the property below): "inject" asks a command
    # trial's start-up hook to apply this mode's AMP itself, through Paddle's own APIs, to a program that
    # has no AMP switch (workloads/command/hook/_ampbench_hook/inject.py); "program": the program or the
    # built-in loop applies it
    model_config = ConfigDict(**_Strict.model_config, populate_by_name=True)
    amp_by: Literal["program", "inject"] = Field("program", alias="amp")
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    level: Literal["O0", "O1", "O2"] | None = None
    dtype: Literal["float16", "bfloat16"] = "float16"
    custom_white_list: list[str] = []
    custom_black_list: list[str] = []
    use_promote: bool = True
    master_weight: bool | None = None
    master_grad: bool = False   # O2 only: FP32 weight gradients (paddle.amp.decorate(master_grad=True))
    scaler: ScalerConfig = ScalerConfig()
    batch_size: StrictInt | None = Field(None, ge=1)
    grad_accum: StrictInt | None = Field(None, ge=1)
    check_numerics: bool = False
    # O2 only: paddle.nn layer classes decorate() leaves in FP32, e.g. ["Embedding"] keeps tables FP32
    excluded_layers: list[str] = []
    fp16_allreduce: bool = False
    # emulated AMP (trial/emulate): the AMP dtype's numerics reproduced in float32 kernels, on any device;
    # its numerics are judged, its speed, memory and energy are not measured (docs/emulation.md)
    emulate: bool = False
    flags: dict[str, Any] = {}  # Paddle FLAGS for this mode only, over the suite's [flags]
    # workload = "command" only: what this mode adds to the program's argv and environment
    args: list[str] = []
    env: dict[str, str] = {}

    @model_validator(mode="after")
    def _level(self) -> ModeConfig:
        if self.level is None:
            if self.name != REFERENCE_MODE:
                raise ValueError(f"mode {self.name!r} needs a level (O1 or O2; O0 is FP32)")
            object.__setattr__(self, "level", "O0")
        if self.name == REFERENCE_MODE and self.level != "O0":
            raise ValueError("the 'fp32' mode is the reference and must have level O0")
        if self.amp_by == "inject" and self.level == "O0":
            raise ValueError(f"mode {self.name!r}: amp = \"inject\" needs level O1 or O2 (the AMP to apply)")
        if self.master_grad and self.level != "O2":
            raise ValueError("master_grad only applies to level O2 (paddle.amp.decorate)")
        if self.fp16_allreduce and self.dtype == "bfloat16":
            raise ValueError("fp16_allreduce casts gradients to float16 unscaled, which bfloat16's range does not "
                             "survive: drop it (at O2 DataParallel all-reduces bfloat16 gradients in bfloat16)")
        if self.emulate and self.level == "O0":
            raise ValueError(f"mode {self.name!r}: emulate = true needs level O1 or O2 (the AMP to emulate)")
        if self.emulate and self.fp16_allreduce:
            raise ValueError(f"mode {self.name!r}: emulate = true runs one process: drop fp16_allreduce")
        if self.excluded_layers and self.level != "O2":
            raise ValueError("excluded_layers only applies to level O2 (paddle.amp.decorate)")
        bad = [n for n in self.excluded_layers if not _is_paddle_layer_name(n)]
        if bad:
            raise ValueError(f"excluded_layers: {', '.join(bad)} is not a paddle.nn layer class name "
                             "(e.g. Embedding, LayerNorm, BatchNorm2D)")
        return self

    @property
    def amp(self) -> bool:
        return self.level != "O0"

    @property
    def scaler_wanted(self) -> bool:
        """Whether this mode builds a paddle.amp.GradScaler (see ScalerConfig.enable)."""
        if not self.amp or self.scaler.enable is False:
            return False
        return self.scaler.enable is True or self.dtype == "float16"

    @property
    def amp_level(self) -> Literal["O0", "O1", "O2"]:
        """`level` once validated: never None (the fp32 mode without one is O0, set by `_level`)."""
        return self.level or "O0"


class Thresholds(_Strict):
    metric_abs_tol: float = Field(0.01, ge=0)
    metric_sigma_k: float = Field(2.0, ge=0)
    min_baseline_metric: float | None = None
    min_speedup: float = Field(1.0, gt=0)
    min_memory_reduction: float = Field(0.0, le=1)
    max_skipped_fraction: float = Field(0.02, ge=0, le=1)
    loss_scale_floor: float = Field(1.0, ge=0)
    collapse_halvings: StrictInt = Field(8, ge=2)
    confidence: float = Field(0.95, gt=0.5, lt=1)
    history_min_change: float = Field(0.05, ge=0)
    # false: a history comparison whose runs were measured under unlike load is judged on its figures, the load
    # evidence only noted, not withheld (judge.interference.unlike): for a program that mostly waits (a test
    # program that sleeps) on a runner shared by design; the evidence cannot tell such a program from a starved one
    history_withhold_disturbed: bool = True
    history_alpha: float = Field(0.01, gt=0, lt=0.5)  # false-FAIL level of the history rules
    fail_alpha: float = Field(0.01, gt=0, lt=0.5)  # false-FAIL level of speedup, memory and parity


class DistributedConfig(_Strict):
    nproc_per_node: StrictInt = Field(1, ge=1)
    nnodes: StrictInt = Field(1, ge=1)
    ips: str | None = None
    master: str | None = None
    backend: Literal["auto", "gloo", "nccl"] = "auto"

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def multi_process(self) -> bool:
        """N ranks under paddle.distributed.launch rather than one worker process."""
        return self.world_size > 1


class SuiteMeta(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    workload: str
    metric: str
    metric_goal: Literal["max", "min"] = "max"
    seeds: list[StrictInt] = Field([0], min_length=1)
    description: str = ""
    # What `ampbench import` decided (modes, data, keys not honoured): report.md shows them
    notes: list[str] = []
    # which pairs the paired rules judge (judge/rules/pairs.py): "same-node" a seed's FP32 and AMP measured
    # on one node and not at once on one device; "any-node" also on two nodes; "any" however they ran
    pairs: Literal["same-node", "any-node", "any"] = "same-node"
    # what the verdicts judge: "all" rules, or "numerics" alone (parity, stability, loss scale, history of
    # the metric): speed, memory, energy and time to target are then shown but not counted, so an emulated
    # mode can PASS, as "PASS (emulated)" (docs/emulation.md)
    judges: Literal["all", "numerics"] = "all"

    @field_validator("seeds")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds must be unique, got {v}")
        bad = [s for s in v if not 0 <= s <= MAX_SEED]
        if bad:
            raise ValueError(f"seed {bad[0]} is out of range: seeds must be in 0..{MAX_SEED} (numpy's RandomState)")
        return v


ClaimFigure = Literal["speedup", "memory", "metric_delta", "time_to_train", "max_batch"]
# A claim's `tolerance` is relative to its value for these ratios (1.8x +- 15%), in the figure's own units otherwise
RELATIVE_TOLERANCE: tuple[ClaimFigure, ...] = ("speedup", "time_to_train")
CLAIM_FIGURES: dict[ClaimFigure, str] = {   # docs/claims.md's table is rendered from this
    "speedup": "AMP/FP32 samples/s (the speed rule's ratio and interval); 1.8 = 1.8x faster",
    "memory": "peak memory reduction, 1 - AMP/FP32 (the memory rule's figure); 0.4 = -40%",
    "metric_delta": "AMP's mean primary metric minus FP32's, in the metric's units (the outcome table's Δ)",
    "time_to_train": "AMP/FP32 wall time to the suite's [train] target (the time-to-target rule's ratio); "
                     "1.5 h / 4 h = 0.375",
    "max_batch": "the mode's largest batch that fits (`ampbench probe`'s probe.json); fp32 may be named",
}


class ClaimConfig(_Strict):
    """A published claim about AMP (an article, a release note, a blog post), judged against a run of this suite:
    confirmed when the figure's interval lies within what it claims, refuted when it lies outside, not
    decidable when it straddles it (judge/rules/claims.py).  A claim never changes a mode's verdict."""

    source: str = Field(min_length=1)   # who claims it, cited in the report (title, URL, section)
    scenario: str = ""                  # what the source measured, in its words
    hardware: str = ""                  # where the source measured it, as it says
    mode: str = Field(min_length=1)     # the mode it is judged on
    figure: ClaimFigure
    value: float | None = None          # the claimed value, within `tolerance` ...
    tolerance: float | None = Field(None, ge=0)
    at_least: float | None = None       # ... or a bound (both: a range)
    at_most: float | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ClaimConfig:
        bound = self.at_least is not None or self.at_most is not None
        if (self.value is None) == (not bound):
            raise ValueError("a claim is a `value` with its `tolerance`, or a bound (`at_least`, `at_most`): give one")
        if self.value is not None and self.tolerance is None:
            raise ValueError("a claimed `value` needs its `tolerance` (relative for speedup and time_to_train: "
                             "0.15 = +-15%; in the figure's units otherwise)")
        if bound and self.tolerance is not None:
            raise ValueError("`tolerance` goes with `value`; a bound (`at_least`, `at_most`) is its own tolerance")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"at_least {self.at_least:g} is above at_most {self.at_most:g}")
        if self.mode == REFERENCE_MODE and self.figure != "max_batch":
            raise ValueError(f"a {self.figure} claim compares an AMP mode with fp32: name the AMP mode")
        if self.figure in RELATIVE_TOLERANCE and self.tolerance is not None and self.tolerance >= 1:
            raise ValueError(f"tolerance {self.tolerance:g} is relative for {self.figure} (0.15 = +-15%): below 1")
        return self

    def band(self) -> tuple[float, float]:
        """What the claim allows, [low, high] (inf for an open side)."""
        if self.value is None:
            return (-math.inf if self.at_least is None else self.at_least,
                    math.inf if self.at_most is None else self.at_most)
        tol = self.tolerance or 0.0
        if self.figure in RELATIVE_TOLERANCE:
            return self.value * (1 - tol), self.value * (1 + tol)
        return self.value - tol, self.value + tol


class Suite(_Strict):
    """A fully merged, validated suite (one profile applied)."""

    suite: SuiteMeta
    workload: dict[str, Any] = {}
    train: TrainConfig = TrainConfig()
    modes: list[ModeConfig] = Field(min_length=1)
    thresholds: Thresholds = Thresholds()
    distributed: DistributedConfig = DistributedConfig()
    flags: dict[str, Any] = {}  # Paddle FLAGS (paddle.set_flags) applied in every trial
    claims: list[ClaimConfig] = []  # published claims judged against the run (never its verdict)

    @model_validator(mode="after")
    def _modes(self) -> Suite:
        names = [m.name for m in self.modes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate mode names: {', '.join(dup)}")
        if REFERENCE_MODE not in names:
            raise ValueError(f"no '{REFERENCE_MODE}' mode to compare against (modes: {', '.join(names)})")
        bad = [k for flags in [self.flags, *(m.flags for m in self.modes)] for k in flags if not k.startswith("FLAGS_")]
        if bad:
            raise ValueError(f"flags: {', '.join(bad)}: Paddle flag names start with FLAGS_")
        emulated = [m.name for m in self.modes if m.emulate]
        if emulated and self.distributed.multi_process:
            raise ValueError(f"modes {', '.join(emulated)}: emulate = true runs one process; "
                             "set distributed.nproc_per_node = 1 and nnodes = 1")
        return self


    def mode(self, name: str) -> ModeConfig:
        for m in self.modes:
            if m.name == name:
                return m
        raise KeyError(f"unknown mode {name!r}; suite modes: {', '.join(m.name for m in self.modes)}")

    def batch_size(self, mode: ModeConfig) -> int:
        return mode.batch_size or self.train.batch_size

    def grad_accum(self, mode: ModeConfig) -> int:
        return mode.grad_accum or self.train.grad_accum

    def config_hash(self) -> str:
        """Hash of everything that defines the experiment (not the seeds list, not timeouts)."""
        data = self.model_dump(mode="json")
        data["suite"].pop("seeds", None)
        data["suite"].pop("description", None)
        data["suite"].pop("notes", None)
        data["suite"].pop("pairs", None)   # how the pairs are judged, not the experiment
        data["suite"].pop("judges", None)  # which rules count, not the experiment
        data.pop("claims", None)           # what others claim of it, not the experiment
        data["train"].pop("timeout_s", None)
        for m in data["modes"]:   # a suite written before `amp` existed keeps its hash
            if m.get("amp_by") == "program":
                del m["amp_by"]
            if m.get("emulate") is False:   # likewise a suite written before `emulate` existed
                del m["emulate"]
        blob = json.dumps(data, sort_keys=True).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]
