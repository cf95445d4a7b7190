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
    # Each field's docstring is its description: in the JSON Schema and docs/reference/suite.md (core/field_docs.py).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

# numpy.random.RandomState (every workload's data order) takes seeds in [0, 2**32).
MAX_SEED = 2**32 - 1


class OptimizerConfig(_Strict):
    """The optimizer every mode trains with."""

    name: Literal["adam", "adamw", "sgd", "momentum"] = "adam"
    """The optimizer (paddle.optimizer.Adam, AdamW, SGD, Momentum)."""
    lr: float = Field(1e-3, gt=0)
    """Learning rate."""
    weight_decay: float = Field(0.0, ge=0)
    """Weight decay, as the optimizer's `weight_decay` argument (AdamW's decoupled; 0: none)."""
    momentum: float = Field(0.9, ge=0)
    """Momentum factor (`momentum` only)."""
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    """Learning-rate schedule over `train.steps`: constant, linear decay or cosine decay."""
    lr_warmup_steps: StrictInt = Field(0, ge=0)
    """Linear learning-rate warm-up steps (not ampbench's measurement warm-up, `train.warmup_steps`)."""
    grad_clip_norm: float | None = Field(None, gt=0)
    """Clip gradients to this global norm (paddle.nn.ClipGradByGlobalNorm); unset: no clipping."""


class TargetConfig(_Strict):
    """Time to target (MLPerf's time-to-train): first eval at which `metric` reaches `value`."""

    metric: str
    """The metric the target is on (one the workload reports)."""
    value: float
    """The value to reach (in the direction of the metric's goal)."""


class TrainConfig(_Strict):
    """How each trial trains and what it measures; the same for every mode unless a mode overrides it."""

    batch_size: StrictInt = Field(32, ge=1)
    """Micro-batch per device; samples per optimizer step = batch_size x grad_accum x ranks."""
    steps: StrictInt = Field(100, ge=1)
    """Optimizer steps per trial."""
    warmup_steps: StrictInt = Field(5, ge=0)
    """First steps excluded from throughput and memory (ampbench's measurement warm-up); below `steps`."""
    optimizer: OptimizerConfig = OptimizerConfig()
    """The optimizer and its learning-rate schedule."""
    grad_accum: StrictInt = Field(1, ge=1)
    """Micro-batches per optimizer step."""
    eval_every: StrictInt = Field(0, ge=0)
    """Evaluate every N steps (0: only at the end); needed for time to target."""
    target: TargetConfig | None = None
    """Time to target: record when the metric first reaches this value (MLPerf's time-to-train)."""
    timeout_s: float = Field(3600.0, gt=0)
    """Wall-time limit of one trial, seconds (then its status is `timeout`); not part of the config hash."""
    amp_stats_steps: StrictInt = Field(2, ge=1)
    """Steps over which op dtypes are counted (Paddle's operator stats), cut to end inside warm-up."""
    diverge_after: StrictInt = Field(10, ge=1)
    """Consecutive non-finite losses that end a trial as `diverged`."""

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

    enable: bool | None = None
    """Build a GradScaler: unset = one for float16, none for bfloat16; true = one for bfloat16 too; false =
    none."""
    init_loss_scaling: float = Field(65536.0, gt=0)
    """Initial loss scale."""
    incr_ratio: float = Field(2.0, gt=1)
    """Factor the scale grows by after `incr_every_n_steps` finite steps."""
    decr_ratio: float = Field(0.5, gt=0, lt=1)
    """Factor the scale shrinks by after `decr_every_n_nan_or_inf` steps with Inf/NaN gradients."""
    incr_every_n_steps: StrictInt = Field(2000, ge=1)
    """Finite steps in a row before the scale grows."""
    decr_every_n_nan_or_inf: StrictInt = Field(1, ge=1)
    """Steps with Inf/NaN gradients before the scale shrinks."""
    use_dynamic_loss_scaling: bool = True
    """Adjust the scale as above; false keeps `init_loss_scaling` fixed."""


def _is_paddle_layer_name(name: str) -> bool:
    """Checked by name pattern here (config must not import paddle); the worker resolves it."""
    return name.isidentifier() and name[:1].isupper()


class ModeConfig(_Strict):
    """One precision mode: its AMP level, dtype, op lists and loss scaling."""

    # `amp` in the suite (the field is `amp_by`: `amp` is the property below); "inject": the hook's
    # workloads/command/hook/_ampbench_hook/inject.py
    model_config = ConfigDict(**_Strict.model_config, populate_by_name=True)
    amp_by: Literal["program", "inject"] = Field("program", alias="amp")
    """Who applies this mode's AMP: `program` (the program or the built-in loop) or `inject` (a `command`
    trial's start-up hook applies it through Paddle's own APIs, for a program without an AMP switch)."""
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """The mode's name (`fp32` is the reference every other mode is compared with)."""
    level: Literal["O0", "O1", "O2"] | None = None
    """AMP level: O1 (op lists) or O2 (parameters cast, FP32 master weights); O0 is FP32 (the `fp32` mode's)."""
    dtype: Literal["float16", "bfloat16"] = "float16"
    """The low-precision dtype."""
    custom_white_list: list[str] = []
    """Paddle op names run in the low dtype besides Paddle's defaults (matmul_v2, conv2d, ...)."""
    custom_black_list: list[str] = []
    """Paddle op names kept in float32 (e.g. lookup_table_v2 for embeddings)."""
    use_promote: bool = True
    """paddle.amp.auto_cast's use_promote: an op with any float32 input runs in float32 (O2)."""
    master_weight: bool | None = None
    """O2: keep FP32 master weights (paddle.amp.decorate); unset: Paddle's default."""
    master_grad: bool = False
    """O2 only: FP32 weight gradients (paddle.amp.decorate(master_grad=True))."""
    scaler: ScalerConfig = ScalerConfig()
    """The GradScaler's settings (loss scaling)."""
    batch_size: StrictInt | None = Field(None, ge=1)
    """This mode's micro-batch, over `train.batch_size` (e.g. the larger batch AMP lets fit)."""
    grad_accum: StrictInt | None = Field(None, ge=1)
    """This mode's micro-batches per step, over `train.grad_accum`."""
    check_numerics: bool = False
    """Record the first NaN/Inf op during the run (Paddle's tensor checker; slower)."""
    excluded_layers: list[str] = []
    """O2 only: paddle.nn layer classes decorate leaves in FP32, e.g. ["Embedding"]."""
    fp16_allreduce: bool = False
    """Data parallel: all-reduce gradients in float16 (float16 only)."""
    emulate: bool = False
    """Emulated AMP: the dtype's numerics reproduced in float32 kernels, on any device; its numerics are
    judged, its speed, memory and energy not measured (docs/emulation.md)."""
    flags: dict[str, Any] = {}
    """Paddle FLAGS for this mode only, over the suite's `[flags]`."""
    args: list[str] = []
    """`workload = "command"` only: what this mode adds to the program's argv."""
    env: dict[str, str] = {}
    """`workload = "command"` only: what this mode adds to the program's environment."""

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
    """What the rules hold each AMP mode to (docs/checks.md explains each test)."""

    metric_abs_tol: float = Field(0.01, ge=0)
    """Accuracy parity: how much worse AMP's mean metric may be than FP32's, in the metric's units (the
    margin, unless the seeds' spread times `metric_sigma_k` is larger)."""
    metric_sigma_k: float = Field(2.0, ge=0)
    """Accuracy parity: the margin in seed-to-seed standard deviations of the metric, where that exceeds
    `metric_abs_tol` (docs/checks.md)."""
    min_baseline_metric: float | None = None
    """Baseline quality: FP32's metric must reach this value for parity to mean anything (unset: only its loss
    must fall)."""
    min_speedup: float = Field(1.0, gt=0)
    """Speedup: AMP/FP32 samples/s must reach this ratio (1.3 = 30% faster)."""
    min_memory_reduction: float = Field(0.0, le=1)
    """Memory: 1 - AMP/FP32 peak memory must reach this (0.2 = 20% less)."""
    max_skipped_fraction: float = Field(0.02, ge=0, le=1)
    """Stability: the largest share of optimizer steps a trial may skip on Inf/NaN gradients."""
    loss_scale_floor: float = Field(1.0, ge=0)
    """Stability: a loss scale below this counts as collapsed."""
    collapse_halvings: StrictInt = Field(8, ge=2)
    """Stability: decreases of the loss scale without a recovery in between, after which the loss never
    falls again, that count as a collapse."""
    confidence: float = Field(0.95, gt=0.5, lt=1)
    """One-sided confidence a PASS needs, and the level of every interval shown."""
    history_min_change: float = Field(0.05, ge=0)
    """The smallest relative change the history rules report (0.05 = 5%); the speed rule's check of a
    disturbed measurement takes it as its tolerance."""
    history_withhold_disturbed: bool = True
    """History: withhold a verdict when the runs compared were measured under unlike load; false judges on the
    figures, the load only noted (for a program that mostly waits, on a runner shared by design)."""
    history_alpha: float = Field(0.01, gt=0, lt=0.5)
    """False-FAIL level of the history rules."""
    fail_alpha: float = Field(0.01, gt=0, lt=0.5)
    """False-FAIL level of speedup, memory and accuracy parity."""


class DistributedConfig(_Strict):
    """Data-parallel training: every trial runs on this many processes."""

    nproc_per_node: StrictInt = Field(1, ge=1)
    """Data-parallel processes per node (paddle.distributed.launch); 1: one process."""
    nnodes: StrictInt = Field(1, ge=1)
    """Nodes of a multi-node trial (needs `master`)."""
    ips: str | None = None
    """The nodes' addresses, comma-separated (paddle.distributed.launch --ips)."""
    master: str | None = None
    """HOST:PORT of the rendezvous of a multi-node trial."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Collective backend: `auto` leaves it to paddle.distributed.launch; `gloo` or `nccl` set PADDLE_DISTRI_BACKEND."""

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def multi_process(self) -> bool:
        """N ranks under paddle.distributed.launch rather than one worker process."""
        return self.world_size > 1


class SuiteMeta(_Strict):
    """The suite: its name, workload, primary metric and seeds."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """The suite's name: run folders land in results/runs/NAME/."""
    workload: str
    """The workload: a bundled one (toy, resnet, dbnet, bert, ctr), `command` (your own program) or a
    registered plug-in."""
    metric: str
    """The primary metric (one the workload reports): accuracy parity judges it."""
    metric_goal: Literal["max", "min"] = "max"
    """Whether higher (`max`) or lower (`min`) is better."""
    seeds: list[StrictInt] = Field([0], min_length=1)
    """Seeds, one matched FP32/AMP pair of trials each (0 .. 2**32-1, unique)."""
    description: str = ""
    """What the suite is for, shown in the report; not part of the config hash."""
    notes: list[str] = []
    """What `ampbench import` decided (modes, data, keys not honoured): report.md shows them; not in the hash."""
    pairs: Literal["same-node", "any-node", "any"] = "same-node"
    """Which pairs the paired rules judge: `same-node` a seed's FP32 and AMP measured on one node and not at
    once on one device; `any-node` also on two nodes; `any` however they ran. Not in the hash."""
    judges: Literal["all", "numerics"] = "all"
    """What the verdicts count: `all` rules, or `numerics` alone (parity, stability, loss scale, the metric's
    history): speed, memory, energy and time to target are shown, not counted. Not in the hash."""

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

    source: str = Field(min_length=1)
    """Who claims it, cited in the report (title, URL, section)."""
    scenario: str = ""
    """What the source measured, in its words."""
    hardware: str = ""
    """Where the source measured it, as it says."""
    mode: str = Field(min_length=1)
    """The mode the claim is judged on."""
    figure: ClaimFigure
    """The figure claimed (the table in docs/claims.md)."""
    value: float | None = None
    """The claimed value, within `tolerance` (or give a bound instead)."""
    tolerance: float | None = Field(None, ge=0)
    """Allowed deviation from `value`: relative for speedup and time_to_train (0.15 = +-15%), in the figure's
    units otherwise."""
    at_least: float | None = None
    """A lower bound on the figure (alone or with `at_most`: a range)."""
    at_most: float | None = None
    """An upper bound on the figure."""

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
    """What the suite is and how its runs are judged."""
    workload: dict[str, Any] = {}
    """The workload's own settings, validated by its model (unknown keys are errors; see the workload's page)."""
    train: TrainConfig = TrainConfig()
    """Training: batch, steps, optimizer, evaluation, limits."""
    modes: list[ModeConfig] = Field(min_length=1)
    """The precision modes to compare; one must be `fp32`, the reference (level O0)."""
    thresholds: Thresholds = Thresholds()
    """What each rule holds a mode to (docs/reference/rules.md lists which rule reads which key)."""
    distributed: DistributedConfig = DistributedConfig()
    """Data-parallel training under paddle.distributed.launch."""
    flags: dict[str, Any] = {}
    """Paddle FLAGS (paddle.set_flags) applied in every trial, recorded as `trial.flags`; names start with
    FLAGS_."""
    claims: list[ClaimConfig] = []
    """Published claims judged against every run (docs/claims.md); never part of a verdict."""

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
