"""Trial and run records: the result-file contract (each field's docstring is its entry in the generated
docs/reference/record.md; versioning: docs/results-format.md; schemas/ in the repo).

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

# What AMP did in a trial is its own module, re-exported here with the other records
from ampbench.record.amp_info import (
    AmpInfo,
    DecorateOrder,
    Dtype,
    EmulatedLayer,
    Emulation,
    InactiveCode,
    Level,
)
from ampbench.record.open_model import OpenModel as _Open
from ampbench.record.rates import global_batch, rates_from, steps_rate

__all__ = ["CHECK_SCHEMA", "RUN_SCHEMA", "TRIAL_SCHEMA", "AmpInfo", "DecorateOrder", "Dtype", "EmulatedLayer",
           "Emulation", "Env", "EvalRecord", "InactiveCode", "Interference", "Level", "Memory", "PlanEntry", "RunInfo",
           "SlurmJob", "Status", "StepRecord", "Throughput", "Trial", "trial_key"]

TRIAL_SCHEMA = "ampbench.trial/1"
RUN_SCHEMA = "ampbench.run/1"
CHECK_SCHEMA = "ampbench.check/1"

# cancelled: the scheduler ended it, not the trial (a Slurm job cancelled or preempted: trial.slurm says which)
Status = Literal["ok", "oom", "diverged", "crashed", "timeout", "cancelled"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"  # names that become parts of file names




class Env(_Open):
    paddle: str = ""
    """Paddle's version."""
    paddle_commit: str = ""
    """The commit Paddle was built from."""
    cuda: str = ""
    """CUDA version Paddle was built with ("" on a CPU build)."""
    cudnn: str = ""
    """cuDNN version ("" on a CPU build)."""
    device: str = ""
    """The device the trial ran on: `gpu:0`, `cpu`."""
    device_name: str = ""
    """The GPU model; on CPU the processor model."""
    driver: str = ""
    """NVIDIA driver version."""
    python: str = ""
    """Python version."""
    numpy: str = ""
    """NumPy version."""
    platform: str = ""
    """Operating system and machine (platform.platform())."""
    cpu_count: int = 0
    """Logical CPUs of the machine."""
    git_sha: str = ""
    """The commit of the ampbench checkout, if any."""
    ampbench: str = ""
    """ampbench's version."""
    gpu: dict[str, Any] = {}
    """GPU only (NVML): power_limit_w, sm/mem max clocks, application clock, nvml_device (index, uuid, bus id)."""


class StepRecord(_Open):
    step: int
    """Optimizer step, 1-based."""
    loss: float | None
    """The step's loss; null when not finite (JSON has no NaN), or not read (`loss_seen` false)."""
    loss_seen: bool = True
    """False: this step's loss was not read (a command trial's hook reads it at steps 1, 1 + k, 1 + 2k, ...
    with k = `workload.loss_every_steps`, or never saw a backward()), so a null `loss` means nothing."""
    time_s: float
    """Wall time of the step, ending when the device finished the update (the loss and scaler are read after
    the clock stopped)."""
    loss_scale: float | None = None
    """The dynamic loss scale this step's gradients were unscaled with; null without a live scaler."""
    found_inf: bool = False
    """The scaler found Inf/NaN gradients: the step was skipped."""
    samples: int = 0
    """Samples in the step: all micro-batches and devices."""
    warmup: bool = False
    """A warm-up step: recorded, excluded from throughput and memory."""
    cpu_s: float | None = None
    """Process CPU time of the step, all threads (a lost CPU share shows here)."""
    data_s: float | None = None
    """Time the step waited for its batches (the loader's next()), inside `time_s`; built-in workloads."""


SAMPLES_PER_S = ("the median of the measured steps' per-step rates (a step's samples over its time; warm-up "
                 "steps and evaluations excluded): judge/measure.py's trial figure, robust to a stall")


class Throughput(_Open):
    samples_per_s: Annotated[float, Col("Samples/s", "rate", rank=40, shows=("md", "console", "csv", "export")),
                             Field(description=SAMPLES_PER_S)] = 0.0
    step_time_median_s: Annotated[float, Col("Step (median)", "ms", rank=50, shows=("md", "csv"))] = 0.0
    """Median wall time of the measured steps."""
    step_time_p90_s: Annotated[float, Col("Step (p90)", "ms", rank=52, shows=("csv",))] = 0.0
    """90th percentile of the measured steps' wall times."""
    measured_steps: Annotated[int, Col("Measured steps", "count", rank=54, shows=("csv",))] = 0
    """Steps after warm-up that the figures are over."""
    unit: str = "samples"
    """What a sample is: `samples`, or the workload's own unit."""
    extra_per_s: dict[str, float] = {}
    """Other units per second (e.g. tokens): their total over the measured steps' total time."""
    window_s: float | None = None
    """Wall time of the measured window (first measured step's start to last one's end, evaluations excluded):
    the per-step times must add up to nearly this (ampbench selftest checks it)."""


class Memory(_Open):
    """Memory of a trial's measured window (trackers/memory.py); None = not measured, never 0.

    `rss_peak_bytes` is whole-process (imports and data preparation included), unlike the
    window-scoped allocator peaks; `device_used_source` says whether `device_used_bytes` is this
    process's memory as NVML lists it (`nvml-process`) or the whole device's (`nvml-device`).
    Energy is NVML's counter over the window (the whole GPU, also under MIG).
    """

    source: Annotated[Literal["cuda", "host", "none"],
                      Col("Memory source", "text", rank=60, shows=("csv",), csv="memory_source")] = "none"
    """Where the allocator peaks come from: `cuda` the CUDA allocator, `host` Paddle's host allocator on CPU,
    `none` not measured."""
    peak_allocated_bytes: Annotated[int | None, Col("Peak allocated", "bytes", rank=62, shows=("md", "csv"),
                                                    note="source")] = None
    """The allocator's peak allocated bytes over the measured window (reset at its start)."""
    peak_reserved_bytes: Annotated[int | None, Col("Peak reserved", "bytes", rank=65, shows=("csv",))] = None
    """The allocator's peak reserved bytes over the measured window."""
    rss_peak_bytes: Annotated[int | None, Col("Peak RSS", "bytes", rank=66, shows=("csv",))] = Field(
        None, description="whole-process peak RSS (ru_maxrss), not window-scoped")
    device_used_bytes: int | None = None
    """Device memory as the driver (NVML) sees it over the window: this process's, or the device's
    (`device_used_source`)."""
    device_used_source: Literal["nvml-process", "nvml-device"] | None = None
    """`nvml-process`: this process's memory as NVML lists it; `nvml-device`: the whole device's (e.g. in a
    container)."""
    nvml_device: dict[str, Any] | None = None
    """Which NVML device was read and how it was matched to the rank's (index, UUID, MIG instance, PCI bus
    id)."""
    energy_j: float | None = None
    """NVML's energy counter over the measured window (the whole GPU, also under MIG), summed over ranks."""
    energy_j_per_sample: float | None = None
    """`energy_j` over the measured steps' samples."""
    errors: dict[str, str] = {}
    """Why a figure is null or what it rests on: `nvml.<function>` an NVML call that failed;
    `nvml.not_supported.<function>` a reading this device does not offer (not measured, not wrong);
    `nvml.pid` this process not in NVML's list (a container: device-wide memory recorded)."""
    notes: dict[str, str] = {}
    """What a figure includes that its name does not say (`evaluations`: a GPU window with mid-run
    evaluations, whose reserved and NVML peaks still hold what they left cached)."""
    per_rank: list[dict[str, Any]] = []
    """Data parallel: every rank's figures (the fields above are the maxima over ranks)."""


class Interference(_Open):
    """Evidence that something else competed for the machine while a trial was measured.

    The checker uses it to tell "the code got slower" from "the measurement was disturbed".
    """

    cpu_share: float | None = None
    """Process CPU seconds / wall seconds over the measured window."""
    others_cpu: float | None = None
    """CPU cores other processes and the hypervisor's steal time used in that window (/proc/stat; Linux)."""
    foreign_processes: list[int] = []
    """PIDs of other processes seen on the GPU (NVML)."""
    sm_clock_mhz_median: float | None = None
    """Median SM clock over the measured window (NVML)."""
    sm_clock_max_mhz: float | None = None
    """The GPU's maximum SM clock."""
    throttle_reasons: list[str] = []
    """NVML clock throttle reasons seen during the window."""
    temperature_c_max: float | None = None
    """Highest GPU temperature during the window."""
    power_w_median: float | None = None
    """Median GPU power draw during the window."""
    gpu_busy_pct: float | None = None
    """NVML utilization.gpu over the window, mean %: the share of time a kernel ran (under 50%: the device
    waits on the host, Paddle #42436); null off a GPU and under MIG (NVML does not report it there)."""
    cpu_affinity: list[int] = []
    """Where it ran (trackers.placement, this and the four below): the CPU set the trial was allowed."""
    cpus_seen: list[int] = []
    """CPUs the trial's threads were last on, at the window's start and end."""
    main_cpu: int | None = None
    """The main thread's CPU at the window's start."""
    main_cpus: list[int] = []
    """The main thread's CPU at the window's start and end."""
    numa_nodes: list[int] = []
    """NUMA nodes of those CPUs."""
    devices: list[str] = []
    """`run --devices`: the CUDA_VISIBLE_DEVICES entries the worker was pinned to ([]: not pinned)."""


class SlurmJob(_Open):
    """The Slurm job a trial ran as (`run --launcher slurm`, or a run inside an allocation): where it
    ran, as the worker saw it, and the end state Slurm gave it when ampbench had to record a failure."""

    job_id: str
    """The Slurm job id (an array task as Slurm names it, `123_4`)."""
    node: str = ""
    """SLURMD_NODENAME of the worker (rank 0 of a multi-node trial)."""
    nodes: str = ""
    """SLURM_JOB_NODELIST: every node of the job."""
    partition: str = ""
    """The job's partition."""
    gpus: str = ""
    """SLURM_JOB_GPUS: the GPU indices Slurm gave the job on that node ("": none)."""
    state: str = ""
    """Slurm's job state when ampbench recorded a failure (FAILED, CANCELLED, TIMEOUT, ...)."""
    exit_code: str = ""
    """Slurm's ExitCode, "code:signal"."""
    reason: str = ""
    """Slurm's Reason at the end."""


class EvalRecord(_Open):
    step: int
    """The step after which it evaluated."""
    wall_s: float
    """Seconds since training started."""
    metrics: dict[str, float]
    """Metric name -> value."""


class Trial(VersionedDoc):
    SCHEMA: ClassVar[str] = TRIAL_SCHEMA
    schema_: str = Field(TRIAL_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.trial/1`."""
    # the `Col` markers: the trial tables' columns (record/fields.py, docs/architecture.md "The field catalog")
    suite: Annotated[str, Col("Suite", "text", rank=5, shows=("csv",))]
    """The suite's name."""
    workload: str
    """The workload that trained."""
    mode: Annotated[str, Col("Mode", "code", rank=10, shows=("console", "csv"))]
    """The precision mode."""
    seed: Annotated[int, Col("Seed", "count", rank=12, shows=("console", "csv"))]
    """The seed; the file is `<mode>__seed<seed>.json`."""
    profile: Annotated[str, Col("Profile", "text", rank=14, shows=("csv",))] = "default"
    """The profile applied (`default`: the base)."""
    status: Annotated[Status, Col("Status", "status", rank=20)]
    """How the trial ended: `ok`, `oom`, `diverged` (loss non-finite for `diverge_after` steps), `crashed`,
    `timeout`, `cancelled` (the scheduler ended it)."""
    error: str | None = None
    """Why it did not end `ok` (the exception or the runner's sentence); null when ok."""
    log_tail: str | None = None
    """Last lines of the worker's log when the runner recorded the failure."""
    config: dict[str, Any] = {}
    """The effective suite the worker ran (as in run.json)."""
    config_hash: str = ""
    """Hash of the effective config; a run's trials and its baselines must match it."""
    env: Env = Env()
    """The environment the worker ran in."""
    amp: AmpInfo = AmpInfo()
    """What AMP did."""
    steps: list[StepRecord] = []
    """One record per optimizer step."""
    throughput: Throughput = Throughput()
    """Over the measured (non-warm-up) steps."""
    memory: Memory = Memory()
    """Peak memory over the measured window."""
    metrics: dict[str, float] = {}
    """Final evaluation metrics, name -> value (the suite's `metric` among them)."""
    evals: list[EvalRecord] = []
    """Mid-run evaluations (`eval_every > 0`)."""
    time_to_target: dict[str, Any] | None = None
    """With `train.target`: {metric, value, goal, reached, step, wall_s, best, evals}; `step`/`wall_s` null
    when never reached."""
    skipped_steps: Annotated[int, Col("Skipped", "count", rank=80, shows=("md", "csv"))] = 0
    """Optimizer steps skipped because the scaler found Inf/NaN gradients."""
    nonfinite_losses: Annotated[int, Col("Non-finite losses", "count", rank=82, shows=("csv",))] = 0
    """Steps whose loss was NaN/Inf."""
    wall_s: Annotated[float, Col("Wall time", "seconds", rank=86, shows=("md", "csv"))] = 0.0
    """The worker's whole life: setup, training, evaluation."""
    batch_size: Annotated[int, Col("Batch", "size", rank=30, shows=("md", "csv"))] = 0
    """Micro-batch per device."""
    grad_accum: int = 1
    """Micro-batches per optimizer step."""
    world_size: int = 1
    """Data-parallel processes (1: one device)."""
    numerics: dict[str, Any] | None = None
    """With `check_numerics` or a diagnose re-run: {level, dump_dir, steps_checked, first_bad,
    first_bad_forward, bad_steps, bad_ops, lines_per_step, note}."""
    flags: dict[str, Any] = {}
    """Paddle FLAGS applied in the trial (the suite's `[flags]` and the mode's), name -> value."""
    interference: Interference | None = None
    """What else used the machine during the measured window."""
    workload_info: dict[str, Any] = {}
    """Facts the workload reports (Workload.describe(): dataset sizes, majority rate, oracle metric), free-form;
    a `command` trial keeps `argv`, `output_dir`, `log_lines_dropped`, `log_bytes_dropped`, `throughput_check`
    (the program's own rate against the record's), `left_out` (evaluations and saves inside the measured
    steps), `warning` and `leftover_processes` (docs/command.md)."""
    slurm: SlurmJob | None = None
    """The Slurm job it ran as (`run --launcher slurm`, docs/cluster.md)."""
    # where and when the worker ran, as it saw it: the paired rules refuse a seed's FP32 and AMP measured
    # on different nodes or at once on one device (judge/rules/pairs.py); ""/None in older files
    host: str = ""
    """The worker's host name (socket.gethostname(); rank 0 of a multi-process trial): the paired rules
    refuse a seed's FP32 and AMP measured on two nodes or at once on one device; "" in older files."""
    started_unix: float | None = None
    """Wall clock (time.time(), s since the epoch) when the worker began it."""
    ended_unix: float | None = None
    """Wall clock (s since the epoch) when the worker ended it, training and evaluation done."""
    shape_audit: dict[str, Any] = {}
    """Tensor Core shape audit at the first step (trackers/shapes.py): `multiple` (8), `batch_size`,
    `batch_ok`, `layers` (Linear/conv layers audited), `odd_count` and `odd` (the first 50: `layer`, `type`,
    `dims`, `odd_dims`: dimensions not multiples of 8); `{multiple, absent}`, `absent` saying why, when the
    layers could not be listed."""

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
    """The mode."""
    seed: StrictInt = Field(ge=0)
    """The seed."""

    @property
    def key(self) -> str:
        return trial_key(self.mode, self.seed)


class RunInfo(VersionedDoc):
    SCHEMA: ClassVar[str] = RUN_SCHEMA
    schema_: str = Field(RUN_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.run/1`."""
    suite: str
    """The suite's name (`[suite] name`)."""
    suite_file: str
    """The suite file as given on the command line (or the bundled suite's path)."""
    profile: str
    """The profile applied (`default`: the base)."""
    run_id: str = Field(pattern=NAME_PATTERN)
    """The run folder's name."""
    config_hash: str
    """`sha256:...` of the effective config; trials and baselines must match it."""
    plan: list[PlanEntry] = Field(min_length=1)
    """The planned trials in execution order (seed-major)."""
    config: dict[str, Any]
    """The effective suite after profile and `--set`, as a suite document (typed by the store:
    results.OpenRun.suite)."""
    env: Env = Env()
    """The environment of the process that started the run."""
    started: str = ""
    """UTC timestamp (ISO 8601) of the start."""
    finished: str | None = None
    """UTC timestamp of the end; null while running or after an interrupt."""
    sequential: dict[str, Any] | None = None
    """`run --until-decided`: {"looks": [seeds per mode at each check], "max_seeds": N, "pass_spending",
    "fail_spending"} (judge.sequential.Design); `check` decides at the last look's levels."""
    affinity: list[int] | None = None
    """`run --affinity`: the CPU set every trial of the run was pinned to."""
    devices: list[str] | None = None
    """`run --devices`: the pool trials ran on side by side (CUDA_VISIBLE_DEVICES entries; ["cpu"]: no GPU,
    one slot)."""
    overrides: list[str] = []
    """The `--set KEY=VALUE` overrides the run was started with."""
    kind: Literal["run", "probe"] = "run"
    """`run`, or `probe` for a probe's folder (its plan: each probed mode at the first seed; it holds
    attempts, not planned trials)."""
    launcher: dict[str, Any] | None = None
    """The launcher the trials went through, {"kind": "local"} or a kind and its options (engine/launcher.py):
    --resume goes on with it; absent in earlier files (their slurm.json, if any, says Slurm)."""

    def planned(self) -> list[tuple[str, int]]:
        return [(p.mode, p.seed) for p in self.plan]


