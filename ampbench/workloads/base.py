"""The one small interface between the harness and a model family.

The runner and worker know nothing of OCR, BERT, ResNet or CTR: they call these methods only.
A workload module must not import paddle at module level (config validation imports the
registry and must stay instant); import it inside the methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ampbench.config.suite import Suite


class WorkloadParams(BaseModel):
    """Base for a workload's `[workload]` table: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


@dataclass
class Batch:
    """What train_batches yields: model inputs plus how many samples (and e.g. tokens) it holds."""

    inputs: Any
    samples: int
    counts: dict[str, int] = field(default_factory=dict)  # extra throughput units, e.g. {"tokens": 812}


@dataclass
class WorkloadContext:
    """What the worker hands a workload: its params, the effective train config, a cache folder."""

    params: WorkloadParams
    batch_size: int
    steps: int
    seed: int
    cache_dir: Path
    world_size: int = 1
    rank: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def shuffled_indices(n: int, batch_size: int, seed: int) -> Iterator[Any]:
    """Endless index batches over n rows, reshuffled each epoch from RandomState(seed) (drop last):
    the same seed gives the same order in every mode, which matched trials rely on."""
    import numpy as np

    if batch_size > n:
        raise ValueError(f"batch_size {batch_size} exceeds the {n} training rows")
    rng = np.random.RandomState(seed)
    while True:
        order = rng.permutation(n)
        for i in range(0, n - batch_size + 1, batch_size):
            yield order[i: i + batch_size]


P = TypeVar("P", bound=WorkloadParams)


class WorkloadBase(ABC, Generic[P]):
    """What every workload declares, whichever way its trials run: its name, params, metrics and up-front
    checks (what the registry and config validation see).  Two kinds: a `Workload` trains a model inside
    ampbench's worker; a `ProgramWorkload` is a program the worker runs and measures (`runs_program`)."""

    name: ClassVar[str]
    Params: ClassVar[type[WorkloadParams]] = WorkloadParams
    params: P
    # name -> "max" or "min": which direction is better for each metric evaluate() returns.
    metric_goals: ClassVar[dict[str, str]] = {}
    # True when train_batches already yields only this rank's share (ctx.rank / ctx.world_size);
    # otherwise data-parallel runs give rank r every world_size-th batch of the same stream.
    shards_by_rank: ClassVar[bool] = False
    # True for a workload whose modes carry `args` / `env` for a program it runs (the command workload)
    accepts_mode_args: ClassVar[bool] = False
    # True for a ProgramWorkload: the worker runs the user's program (trial/command.py), not a model loop
    runs_program: ClassVar[bool] = False

    @classmethod
    def train_rows(cls, params: Any) -> int | None:
        """Training rows when known without loading data (None: unknown); a larger batch is refused up front."""
        return None

    @classmethod
    def check_suite(cls, params: Any, suite: Suite) -> list[tuple[str, str]]:
        """Problems a run would only hit after training, found before any run folder exists, as
        (key, reason) pairs. Override to add a workload's own checks (extend super()'s list)."""
        problems: list[tuple[str, str]] = []
        known = sorted(cls.metric_goals)
        named = [("suite.metric", suite.suite.metric)]
        if suite.train.target is not None:
            named.append(("train.target.metric", suite.train.target.metric))
        for key, metric in named:
            if known and metric not in cls.metric_goals:
                problems.append((key, f"workload {cls.name!r} reports no metric {metric!r}; it reports: "
                                      f"{', '.join(known)}"))
        for m in suite.modes:
            if (m.args or m.env) and not cls.accepts_mode_args:
                problems.append((f"modes ({m.name}).args", f"args/env are for workload = \"command\" "
                                 f"(a program ampbench runs); workload {cls.name!r} has none"))
            if m.amp_by == "inject" and not cls.accepts_mode_args:
                problems.append((f"modes ({m.name}).amp", f"amp = \"inject\" is for workload = \"command\" (a "
                                 f"program without an AMP switch); workload {cls.name!r} applies AMP itself"))
        rows = cls.train_rows(params)
        for m in suite.modes:
            if rows is not None and suite.batch_size(m) > rows:
                key = f"modes ({m.name}).batch_size" if m.batch_size else "train.batch_size"
                problems.append((key, f"batch size {suite.batch_size(m)} is larger than the {rows} training rows"))
        return problems

    def __init__(self, ctx: WorkloadContext):
        self.ctx = ctx
        self.params = ctx.params  # type: ignore[assignment]  # validated as cls.Params by the config layer

    def describe(self) -> dict[str, Any]:
        """Extra facts for the trial record (dataset sizes, majority rate, oracle metric...)."""
        return {}


class Workload(WorkloadBase[P]):
    """A model family trained in ampbench's worker.  Subclass as `Workload[MyParams]`, set `name` and
    `Params`, register in workloads/__init__.py or via an entry point. Generic over its params, so
    `self.params` has the workload's own type."""

    def prepare(self) -> None:
        """Build or load cached data (not timed). Called once before build_model."""

    @abstractmethod
    def build_model(self) -> Any:
        """A paddle.nn.Layer; the worker seeds paddle before calling, so init is seed-determined."""

    @abstractmethod
    def train_batches(self, seed: int, batch_size: int) -> Iterator[Batch]:
        """An endless iterator; same seed -> same order in every mode (use numpy RandomState(seed))."""

    @abstractmethod
    def loss(self, model: Any, batch: Batch) -> Any:
        """Forward pass and loss (a scalar paddle Tensor); runs under the mode's auto_cast."""

    @abstractmethod
    def evaluate(self, model: Any) -> dict[str, float]:
        """Held-out metrics in FP32 eval mode; must include the suite's primary metric."""


class ProgramWorkload(WorkloadBase[P]):
    """The user's own training program, run per mode and seed and measured from outside its code: nothing
    trains in ampbench's process, so there is no model, batch, loss or evaluation to implement."""

    runs_program: ClassVar[bool] = True


BUNDLED_MARK = "_ampbench_bundled"
WB = TypeVar("WB", bound=type)


def bundled(cls: WB) -> WB:
    """Marks the workload a bundled module holds (ampbench/workloads/NAME.py or NAME/workload.py): the
    registry finds it by the module's NAME, so a new bundled workload is its module, edited nowhere else."""
    setattr(cls, BUNDLED_MARK, cls.__module__)
    return cls
