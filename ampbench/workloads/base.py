"""The one small interface between the harness and a model family.

The runner and worker know nothing of OCR, BERT, ResNet or CTR: they call these methods only.
A workload module must not import paddle at module level (config validation imports the
registry and must stay instant); import it inside the methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Iterator, TypeVar

from pydantic import BaseModel, ConfigDict


class WorkloadParams(BaseModel):
    """Base for a workload's `[workload]` table: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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


class Workload(ABC, Generic[P]):
    """Subclass as `Workload[MyParams]`, set `name` and `Params`, register in workloads/__init__.py
    or via an entry point. Generic over its params, so `self.params` has the workload's own type."""

    name: ClassVar[str]
    Params: ClassVar[type[WorkloadParams]] = WorkloadParams
    params: P
    # name -> "max" or "min": which direction is better for each metric evaluate() returns.
    metric_goals: ClassVar[dict[str, str]] = {}
    # True when train_batches already yields only this rank's share (ctx.rank / ctx.world_size);
    # otherwise data-parallel runs give rank r every world_size-th batch of the same stream.
    shards_by_rank: ClassVar[bool] = False

    def __init__(self, ctx: WorkloadContext):
        self.ctx = ctx
        self.params = ctx.params  # type: ignore[assignment]  # validated as cls.Params by the config layer

    @classmethod
    def validate_suite(cls, params: WorkloadParams, suite_file: str) -> None:
        """Up-front checks when the suite loads (e.g. data files exist), so a problem is found
        before any trial starts; raise ConfigError naming the file and key. Default: none."""

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

    def describe(self) -> dict[str, Any]:
        """Extra facts for the trial record (dataset sizes, majority rate, oracle metric...)."""
        return {}
