"""Trial and run records: the result-file contract (docs/results-format.md, schemas/ in the repo).

Each versioned document derives from `VersionedDoc` (its `schema` tag); `load_doc` checks it on every read.
One definition per derived figure: a trial's peak memory and per-step rates live here, so the
checker, the history and the report cannot disagree.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from ampbench.core.columns import Col
from ampbench.core.docs import VersionedDoc
from ampbench.core.store import trial_key
from ampbench.record.rates import global_batch, rates_from, steps_rate

TRIAL_SCHEMA = "ampbench.trial/1"
RUN_SCHEMA = "ampbench.run/1"
CHECK_SCHEMA = "ampbench.check/1"

# cancelled: the scheduler ended it, not the trial (a Slurm job cancelled or preempted: trial.slurm says which)
Status = Literal["ok", "oom", "diverged", "crashed", "timeout", "cancelled"]
Dtype = Literal["float32", "float16", "bfloat16"]
InactiveCode = Literal["", "device", "op-lists", "no-evidence"]
Level = Literal["O0", "O1", "O2"]
DecorateOrder = Literal["", "decorate-first", "data-parallel-first"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"  # names that become parts of file names


class _Open(BaseModel):
    # Readers tolerate fields added by later versions; writers always fill the known ones.
    model_config = ConfigDict(extra="allow")


class Env(_Open):
    paddle: str = ""
    paddle_commit: str = ""
    cuda: str = ""
    cudnn: str = ""
    device: str = ""
    device_name: str = ""
    driver: str = ""
    python: str = ""
    numpy: str = ""
    platform: str = ""
    cpu_count: int = 0
    git_sha: str = ""
    ampbench: str = ""
    # GPU only (NVML): power_limit_w, sm/mem max clocks, application clock, nvml_device (index, uuid, bus id)
    gpu: dict[str, Any] = {}


class EmulatedLayer(_Open):
    """One layer's losses in an emulated trial (trial/emulate/counts.py): values counted before rounding."""

    layer: str                  # its dotted name in the outermost model, "(model)" for that model itself
    type: str = ""              # its class (Linear, Conv2D)
    overflow: int = 0           # forward values rounded to inf (finite before)
    underflow: int = 0          # forward values flushed to zero (nonzero before)
    grad_overflow: int = 0      # gradient values rounded to inf where they flowed through a low-precision tensor
    grad_underflow: int = 0     # gradient values flushed to zero there
    lost_updates: int = 0       # O2 without master weights: parameter updates that rounding undid


class Emulation(_Open):
    """What an emulated trial's AMP did (`amp.emulated`): AMP's numerics reproduced in float32 kernels
    (docs/emulation.md), the ops Paddle's lists sent to the low dtype, and where values were lost."""

    counting: bool = True
    steps: int = 0
    decorated: bool = False                 # O2: parameters stored in the low dtype
    master_weight: bool | None = None
    master_grad: bool | None = None
    low_params: int = 0                     # parameters stored in the low dtype
    op_calls: dict[str, dict[str, int]] = {}   # op -> {"low": calls in the AMP dtype, "float32": calls}
    layers: list[EmulatedLayer] = []        # worst first
    totals: dict[str, int] = {}
    first_overflow: dict[str, Any] | None = None   # {step, phase, layer, op}
    layers_left_out: int = 0


class AmpInfo(_Open):
    # the `Col` markers: the trial tables' columns (record/fields.py, docs/architecture.md "The field catalog")
    requested: Annotated[bool, Col("AMP requested", "flag", rank=70, shows=("csv",), csv="amp_requested")] = False
    active: Annotated[bool, Col("AMP active (recorded)", "flag", rank=72, shows=("csv",), csv="amp_active")] = False
    # emulated AMP (a mode's emulate = true): no low-precision kernel ran; `emulation` says what was emulated
    emulated: Annotated[bool, Col("AMP emulated", "flag", rank=73, shows=("csv",), csv="amp_emulated",
                                  csv_rank=100)] = False
    emulation: Emulation | None = None
    level: Annotated[Level, Col("AMP level", "text", rank=74, shows=("csv",), csv="amp_level")] = "O0"
    dtype: Annotated[Dtype, Col("AMP dtype", "text", rank=76, shows=("csv",), csv="amp_dtype")] = "float32"
    use_promote: bool = True
    white_list: list[str] = []
    black_list: list[str] = []
    default_lists_hash: str = ""
    # the lists Paddle's auto_cast really applied: its defaults for the dtype and level with the custom lists
    # merged in (`paddle.amp.auto_cast._update_list`); empty in files written before they were recorded
    effective_white_list: list[str] = []
    effective_black_list: list[str] = []
    unknown_op_names: list[str] = []
    op_calls: dict[str, dict[str, int]] = {}
    # a command trial's ops run inside the optimizer's step (update, regularizer, clipping), kept out of op_calls
    optimizer_op_calls: dict[str, dict[str, int]] = {}
    scaler: dict[str, Any] = {}
    scaler_enabled: bool = False   # as it stood after the first step (Paddle may turn it off there)
    scaler_built: bool = False     # a GradScaler was built (float16, or bfloat16 with scaler.enable = true)
    excluded_layers: list[str] = []  # O2: layer classes decorate kept FP32
    master_grad: bool = False      # O2: decorate(master_grad=True)
    # O2 with data parallel: whether paddle.amp.decorate ran before paddle.DataParallel wrapped the model
    # (Paddle's AMP guide asks for decorate first); "" when the trial did not use both
    decorate_order: DecorateOrder = ""
    # a command mode's amp = "inject": what ampbench's hook applied ({"by": "ampbench", "applied": [{optimizer,
    # models, level, dtype, decorated, scaler}], "errors"?}); {} when the program or the built-in loop applied AMP
    injected: dict[str, Any] = {}
    # a command program that applies AMP itself: what its own calls used, as the hook saw them ({"auto_cast":
    # {level, dtype, white, black, use_promote, effective_white, effective_black}, "grad_scaler": {"scaler": {...}},
    # "decorate": {level, dtype, master_weight, master_grad}}, each kind's first setting); the lists, scaler and
    # level above are then the program's; {} for the built-in loop, an injected mode, or a file before it was kept
    program: dict[str, Any] = {}
    evidence: str = ""
    inactive_reason: str = ""
    # why AMP was off, as a code the rules' advice reads (the text above is for people): "device" (the
    # device or its build cannot run this dtype's AMP), "op-lists" (it could, yet no op ran in low
    # precision), "no-evidence" (no op dtype counts to tell); "" when active or in a file
    # written before the code was
    inactive_code: InactiveCode = ""

    def dtype_calls(self) -> dict[str, dict[str, int]]:
        """Op calls by dtype: Paddle's op statistics, or for an emulated trial the emulator's decisions (its
        kernels all ran in float32; the dtype each call stood for is the evidence)."""
        e = self.emulation
        if not self.emulated or e is None:
            return self.op_calls
        return {op: {self.dtype: by.get("low", 0), "float32": by.get("float32", 0)} for op, by in e.op_calls.items()}


class StepRecord(_Open):
    step: int
    loss: float | None   # None: non-finite (JSON has no NaN), unless loss_seen is false
    loss_seen: bool = True   # false: this step's loss was not read (a command trial's hook reads it every
                             # workload.loss_every_steps-th step, or never saw a backward()); `loss` means nothing
    time_s: float
    loss_scale: float | None = None
    found_inf: bool = False
    samples: int = 0
    warmup: bool = False  # warm-up steps are recorded but excluded from throughput
    cpu_s: float | None = None  # process CPU time of the step (all threads): a lost CPU share shows here
    data_s: float | None = None  # time the step waited for its batches (the loader's next()): inside time_s


SAMPLES_PER_S = ("the median of the measured steps' per-step rates (a step's samples over its time; warm-up "
                 "steps and evaluations excluded): judge/measure.py's trial figure, robust to a stall")


class Throughput(_Open):
    samples_per_s: Annotated[float, Col("Samples/s", "rate", rank=40, shows=("md", "console", "csv", "export")),
                             Field(description=SAMPLES_PER_S)] = 0.0
    step_time_median_s: Annotated[float, Col("Step (median)", "ms", rank=50, shows=("md", "csv"))] = 0.0
    step_time_p90_s: Annotated[float, Col("Step (p90)", "ms", rank=52, shows=("csv",))] = 0.0
    measured_steps: Annotated[int, Col("Measured steps", "count", rank=54, shows=("csv",))] = 0
    unit: str = "samples"
    extra_per_s: dict[str, float] = {}
    # Wall time of the measured window (first measured step's start to last one's end, evaluations
    # excluded): the per-step times must add up to nearly this (ampbench selftest checks it).
    window_s: float | None = None


class Memory(_Open):
    """Memory of a trial's measured window (trackers/memory.py); None = not measured, never 0.

    `rss_peak_bytes` is whole-process (imports and data preparation included), unlike the
    window-scoped allocator peaks; `device_used_source` says whether `device_used_bytes` is this
    process's memory as NVML lists it (`nvml-process`) or the whole device's (`nvml-device`).
    Energy is NVML's counter over the window (the whole GPU, also under MIG).
    """

    source: Annotated[Literal["cuda", "host", "none"],
                      Col("Memory source", "text", rank=60, shows=("csv",), csv="memory_source")] = "none"
    peak_allocated_bytes: Annotated[int | None, Col("Peak allocated", "bytes", rank=62, shows=("md", "csv"),
                                                    note="source")] = None
    peak_reserved_bytes: Annotated[int | None, Col("Peak reserved", "bytes", rank=65, shows=("csv",))] = None
    rss_peak_bytes: Annotated[int | None, Col("Peak RSS", "bytes", rank=66, shows=("csv",))] = Field(
        None, description="whole-process peak RSS (ru_maxrss), not window-scoped")
    device_used_bytes: int | None = None
    device_used_source: Literal["nvml-process", "nvml-device"] | None = None
    nvml_device: dict[str, Any] | None = None
    energy_j: float | None = None
    energy_j_per_sample: float | None = None
    errors: dict[str, str] = {}        # source -> error text: a missing figure says why
    notes: dict[str, str] = {}         # what a figure includes that its name does not say (EVALS_CACHED_NOTE)
    per_rank: list[dict[str, Any]] = []  # data parallel: every rank's figures (the fields above are maxima)


class Interference(_Open):
    """Evidence that something else competed for the machine while a trial was measured.

    The checker uses it to tell "the code got slower" from "the measurement was disturbed".
    """

    cpu_share: float | None = None  # process CPU seconds / wall seconds over the measured window
    others_cpu: float | None = None  # CPU cores other processes (and steal) used in that window (Linux)
    foreign_processes: list[int] = []  # PIDs of other processes seen on the GPU (NVML)
    sm_clock_mhz_median: float | None = None
    sm_clock_max_mhz: float | None = None
    throttle_reasons: list[str] = []
    temperature_c_max: float | None = None
    power_w_median: float | None = None
    # NVML utilization.gpu over the window, mean %: the share of time a kernel ran (under 50%: the device
    # waits on the host, Paddle #42436); None off a GPU and under MIG (NVML does not report it there)
    gpu_busy_pct: float | None = None
    # where it ran (trackers.placement): the CPU set allowed, CPUs its threads were seen on, the main
    # thread's CPU at the window's start and end, their NUMA nodes
    cpu_affinity: list[int] = []
    cpus_seen: list[int] = []
    main_cpu: int | None = None
    main_cpus: list[int] = []
    numa_nodes: list[int] = []
    # run --devices: the CUDA_VISIBLE_DEVICES entries the worker was pinned to ([]: not pinned)
    devices: list[str] = []


class SlurmJob(_Open):
    """The Slurm job a trial ran as (`run --launcher slurm`, or a run inside an allocation): where it
    ran, as the worker saw it, and the end state Slurm gave it when ampbench had to record a failure."""

    job_id: str
    node: str = ""        # SLURMD_NODENAME of the worker (rank 0 of a multi-node trial)
    nodes: str = ""       # SLURM_JOB_NODELIST: every node of the job
    partition: str = ""
    gpus: str = ""        # SLURM_JOB_GPUS: the GPU indices Slurm gave the job on that node ("" none)
    state: str = ""       # Slurm's job state when ampbench recorded a failure (FAILED, CANCELLED, TIMEOUT...)
    exit_code: str = ""   # Slurm's ExitCode, "code:signal"
    reason: str = ""      # Slurm's Reason at the end


class EvalRecord(_Open):
    step: int
    wall_s: float
    metrics: dict[str, float]


class Trial(VersionedDoc):
    SCHEMA: ClassVar[str] = TRIAL_SCHEMA
    schema_: str = Field(TRIAL_SCHEMA, alias="schema")
    # the `Col` markers: the trial tables' columns (record/fields.py, docs/architecture.md "The field catalog")
    suite: Annotated[str, Col("Suite", "text", rank=5, shows=("csv",))]
    workload: str
    mode: Annotated[str, Col("Mode", "code", rank=10, shows=("console", "csv"))]
    seed: Annotated[int, Col("Seed", "count", rank=12, shows=("console", "csv"))]
    profile: Annotated[str, Col("Profile", "text", rank=14, shows=("csv",))] = "default"
    status: Annotated[Status, Col("Status", "status", rank=20)]
    error: str | None = None
    log_tail: str | None = None  # last lines of the worker's log when the runner recorded the failure
    config: dict[str, Any] = {}
    config_hash: str = ""
    env: Env = Env()
    amp: AmpInfo = AmpInfo()
    steps: list[StepRecord] = []
    throughput: Throughput = Throughput()
    memory: Memory = Memory()
    metrics: dict[str, float] = {}
    evals: list[EvalRecord] = []
    time_to_target: dict[str, Any] | None = None
    skipped_steps: Annotated[int, Col("Skipped", "count", rank=80, shows=("md", "csv"))] = 0
    nonfinite_losses: Annotated[int, Col("Non-finite losses", "count", rank=82, shows=("csv",))] = 0
    wall_s: Annotated[float, Col("Wall time", "seconds", rank=86, shows=("md", "csv"))] = 0.0
    batch_size: Annotated[int, Col("Batch", "size", rank=30, shows=("md", "csv"))] = 0
    grad_accum: int = 1
    world_size: int = 1
    numerics: dict[str, Any] | None = None
    flags: dict[str, Any] = {}  # Paddle FLAGS applied in the trial (suite [flags] + the mode's)
    interference: Interference | None = None
    workload_info: dict[str, Any] = {}  # facts the workload reports (Workload.describe()), free-form
    slurm: SlurmJob | None = None  # the Slurm job it ran as (run --launcher slurm)
    # where and when the worker ran, as it saw it: the paired rules refuse a seed's FP32 and AMP measured
    # on different nodes or at once on one device (judge/rules/pairs.py); ""/None in older files
    host: str = ""                      # socket.gethostname() of the worker (rank 0 of a multi-process trial)
    started_unix: float | None = None   # wall clock (time.time(), s since the epoch) when the worker began it
    ended_unix: float | None = None     # and when it ended, training and evaluation done
    # Tensor Core shape audit at the first step (trackers/shapes.py): GEMM dims and batch not multiples of 8
    shape_audit: dict[str, Any] = {}

    @property
    def key(self) -> str:
        return trial_key(self.mode, self.seed)

    def peak_memory(self) -> tuple[int, str]:
        """(bytes, source) a mode is judged on: the allocator's peak (CUDA or host), else peak RSS."""
        m = self.memory
        if m.source in ("cuda", "host") and (m.peak_allocated_bytes or 0) > 0:
            return int(m.peak_allocated_bytes or 0), m.source
        rss = m.rss_peak_bytes or 0
        if rss > 0:
            return int(rss), "rss"
        return 0, "none"

    def measured_steps(self) -> list[StepRecord]:
        return [s for s in self.steps if not s.warmup]

    def global_batch(self) -> int:
        """Samples of one optimizer step over every rank (`global_batch` of this trial's settings)."""
        return global_batch(self.batch_size, self.grad_accum, self.world_size)

    def step_samples(self) -> list[int]:
        """Samples of each measured step; a step that did not record them counts the global batch."""
        fallback = self.global_batch()
        return [int(s.samples or fallback) for s in self.measured_steps()]

    def step_rates(self) -> np.ndarray:
        """Samples per second of each measured step (warm-up and zero-time steps excluded)."""
        return rates_from([s.time_s for s in self.measured_steps()], self.step_samples())

    def mean_rate(self) -> float:
        """Samples over time of the measured steps: what a program's own throughput line (an interval's
        samples over its wall time) measures, unlike the median per-step rate ampbench judges speed by
        (a slow first step per epoch, e.g. a DataLoader starting its iterator, moves the mean only).
        Only the command workload's cross-check of the program's own log reads it."""
        return steps_rate(self.measured_steps())

    def measured_samples(self) -> int:
        """Samples the measured steps recorded: what energy per sample divides by."""
        return sum(s.samples for s in self.measured_steps())

    def cpu_share(self) -> float | None:
        """Process CPU seconds per wall second over the measured steps (None when not recorded)."""
        steps = [s for s in self.measured_steps() if s.cpu_s is not None and s.time_s > 0]
        wall = sum(s.time_s for s in steps)
        return sum(s.cpu_s or 0.0 for s in steps) / wall if steps and wall > 0 else None

    def data_wait_share(self) -> float | None:
        """Share of the measured steps' wall time spent waiting for the next batch (None when not recorded):
        above half, the loader bounds the step and no precision setting can make it faster."""
        steps = [s for s in self.measured_steps() if s.data_s is not None and s.time_s > 0]
        wall = sum(s.time_s for s in steps)
        return sum(s.data_s or 0.0 for s in steps) / wall if steps and wall > 0 else None


class PlanEntry(BaseModel):
    """One planned trial: a mode and a seed (a tampered run.json cannot smuggle a path in)."""

    model_config = ConfigDict(extra="forbid")
    mode: str = Field(pattern=NAME_PATTERN)
    seed: StrictInt = Field(ge=0)

    @property
    def key(self) -> str:
        return trial_key(self.mode, self.seed)


class RunInfo(VersionedDoc):
    SCHEMA: ClassVar[str] = RUN_SCHEMA
    schema_: str = Field(RUN_SCHEMA, alias="schema")
    suite: str
    suite_file: str
    profile: str
    run_id: str = Field(pattern=NAME_PATTERN)
    config_hash: str
    plan: list[PlanEntry] = Field(min_length=1)
    config: dict[str, Any]  # the effective suite: typed by the store (results.OpenRun.suite)
    env: Env = Env()
    started: str = ""
    finished: str | None = None
    # run --until-decided: {"looks": [seeds per arm at each check], "max_seeds": N, ...} (judge.sequential.Design)
    sequential: dict[str, Any] | None = None
    affinity: list[int] | None = None  # run --affinity: the CPU set every trial of the run was pinned to
    # run --devices: the pool trials ran on side by side (CUDA_VISIBLE_DEVICES entries; ["cpu"]: no GPU, one slot)
    devices: list[str] | None = None
    overrides: list[str] = []  # the --set KEY=VALUE overrides the run was started with
    kind: Literal["run", "probe"] = "run"  # a probe's folder holds attempts, not planned trials
    # the launcher the trials went through, {"kind": "local"} or a kind and its options (engine/launcher.py):
    # --resume goes on with it; absent in earlier files (their slurm.json, if any, says Slurm)
    launcher: dict[str, Any] | None = None

    def planned(self) -> list[tuple[str, int]]:
        return [(p.mode, p.seed) for p in self.plan]


