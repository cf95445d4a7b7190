"""One rank's side of a data-parallel trial (the launcher's side is launch/distributed.py).

Data: rank r takes batches r, r+W, r+2W... of the workload's seeded stream (unless the workload
declares `shards_by_rank = True` and shards itself from `ctx.rank`/`ctx.world_size`), so one
optimizer step sees W consecutive batches: the same data a single process sees with
`grad_accum = W`, in every mode.

FP16 gradient all-reduce: Paddle's `DistributedStrategy.fp16_allreduce` is applied by a
static-graph meta-optimizer (FP16AllReduceOptimizer); in dynamic graph mode, which ampbench
uses, fleet skips meta-optimizers and `DataParallel` all-reduces each gradient in its own dtype
(float16 for O2-cast parameters, float32 otherwise).  A mode with `fp16_allreduce = true`
therefore gets ampbench's explicit compression: gradients are cast to float16, summed in one
fused all-reduce before the (scaled) optimizer step, and cast back; the trial records which
path and which dtypes were communicated.

Memory: every rank measures its own window (its own device through NVML) and rank 0 records
them all in `memory.per_rank`; the trial's figures are the maxima over ranks (energy: the sum).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.config import DistributedConfig, ModeConfig, Suite
from ampbench.core.protocol import FAULT_RANK_ENV, RANK_DIR_ENV
from ampbench.record.assemble import RankMemory, TrialAssembler, merge_ranks
from ampbench.record.models import Memory

COMPRESSED = "ampbench-fp16-compressed"
DATA_PARALLEL = "paddle.DataParallel"
# Measured on paddlepaddle 3.3.1 CPU: all_reduce of a float16 tensor over gloo returns inf.
GLOO_FP16_NOTE = ("gloo (CPU) cannot sum float16 in Paddle 3.3.1: gradients were rounded to float16 and summed "
                  "in float32; the precision effect is real, the bandwidth saving is not")
def env_rank() -> int:
    return int(os.environ.get("PADDLE_TRAINER_ID", "0") or 0)


def env_world_size() -> int:
    return int(os.environ.get("PADDLE_TRAINERS_NUM", "1") or 1)


def writes_trial(suite: dict[str, Any]) -> bool:
    """Whether this worker reports to the runner and writes the trial: rank 0 of a data-parallel
    trial, or any single-process trial (whatever PADDLE_* variables an outer job left set)."""
    cfg = DistributedConfig.model_validate(suite.get("distributed") or {})
    return not cfg.multi_process or env_rank() == 0


def fault_applies() -> bool:
    """An injected fault hits every rank unless AMPBENCH_FAULT_RANK names one."""
    only = os.environ.get(FAULT_RANK_ENV, "").strip()
    return not only or int(only) == env_rank()


def write_failure_note(status: str, error: str) -> None:
    """Called by a failing rank: leaves its status and traceback for the runner."""
    d = os.environ.get(RANK_DIR_ENV)
    if not d or env_world_size() <= 1:
        return
    note = {"rank": env_rank(), "time": time.time(), "status": status, "error": error[-4000:]}
    with contextlib.suppress(OSError):
        Path(d).mkdir(parents=True, exist_ok=True)
        tmp = Path(d) / f".rank{env_rank()}.failure.tmp"
        tmp.write_text(json.dumps(note))
        tmp.replace(Path(d) / f"rank{env_rank()}.failure.json")


def _dp_class() -> Any:
    import paddle

    class _DataParallel(paddle.DataParallel):
        """paddle.DataParallel that lets workloads reach the wrapped model's attributes."""

        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._layers, name)

    return _DataParallel


@dataclass
class Replicas:
    """One rank's view of a data-parallel trial; every method is a no-op for a single process."""

    rank: int = 0
    world: int = 1
    nproc_per_node: int = 1
    nnodes: int = 1
    backend: str = "auto"
    fp16_allreduce: bool = False
    wire: str = "float16"       # dtype the compressed path sends (float32 on gloo, see GLOO_FP16_NOTE)
    path: str = ""
    comm_dtypes: dict[str, int] = field(default_factory=dict)
    _params: list[Any] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.world > 1

    @classmethod
    def from_env(cls, suite: Suite, mode: ModeConfig) -> Replicas:
        cfg = suite.distributed
        expected = cfg.world_size
        if expected <= 1:
            return cls()
        world = env_world_size()
        if world != expected:
            raise RuntimeError(
                f"the suite asks for {expected} processes ([distributed] nproc_per_node x nnodes) but this worker "
                f"runs as one of {world}: start trials with `ampbench run`, which uses paddle.distributed.launch")
        return cls(rank=env_rank(), world=world, nproc_per_node=cfg.nproc_per_node, nnodes=cfg.nnodes,
                   backend=cfg.backend, fp16_allreduce=mode.fp16_allreduce)

    def init(self) -> None:
        if self.active:
            import paddle.distributed as dist

            dist.init_parallel_env()
            if self.fp16_allreduce and "gloo" in str(dist.get_backend()).lower():
                self.wire = "float32"

    def wrap(self, model: Any) -> Any:
        """After paddle.amp.decorate (O2 casts parameters first, as Paddle's docs order it)."""
        if not self.active:
            return model
        import paddle.distributed as dist

        self._params = [p for p in model.parameters() if not p.stop_gradient]
        for p in self._params:
            dt = str(p.dtype).replace("paddle.", "")
            if self.fp16_allreduce:
                dt = "float16" if self.wire == "float16" else "float16-rounded float32"
            self.comm_dtypes[dt] = self.comm_dtypes.get(dt, 0) + int(p.size)
        if self.fp16_allreduce:
            self.path = COMPRESSED
            for p in model.parameters():  # what DataParallel's constructor would do
                dist.broadcast(p, src=0)
            return model
        self.path = DATA_PARALLEL
        return _dp_class()(model)

    def shard(self, batches: Iterator[Any], workload: Any) -> Iterator[Any]:
        if not self.active or getattr(workload, "shards_by_rank", False):
            return batches
        return _every_nth(batches, self.rank, self.world)

    @contextlib.contextmanager
    def micro_batch(self, model: Any, index: int, count: int) -> Iterator[None]:
        """Around a micro-batch's forward: DataParallel syncs gradients only on the last one."""
        if self.active and self.path == DATA_PARALLEL and index < count - 1:
            with model.no_sync():
                yield
        else:
            yield

    def sync_grads(self) -> None:
        """Before the optimizer step: the fused float16 all-reduce of the compressed path."""
        if not (self.active and self.path == COMPRESSED):
            return
        import paddle
        import paddle.distributed as dist

        if not self._params:
            return
        # Every rank sends a buffer of the same layout (zeros where a parameter got no gradient
        # here), so the collective always matches; such a parameter is then left as it is, and the
        # weight digests at the end show it if the replicas drifted apart.
        flat = paddle.concat([(p.grad if p.grad is not None else paddle.zeros(p.shape, p.dtype))
                              .astype("float16").flatten() for p in self._params])
        if self.wire != "float16":  # gloo: round to float16, sum in float32 (see GLOO_FP16_NOTE)
            flat = flat.astype("float32")
        dist.all_reduce(flat)
        flat = flat.astype("float32") / float(self.world)
        offset = 0
        for p in self._params:
            n = int(p.size)
            if p.grad is not None:
                p.grad.set_value(flat[offset: offset + n].reshape(p.grad.shape).astype(p.grad.dtype))
            offset += n

    def reduce_step(self, loss_sum: float, samples: int, counts: dict[str, int]) -> tuple[float, int, dict[str, int]]:
        """The step's loss averaged over ranks and its samples summed: one small all-reduce,
        so every rank sees the same (possibly non-finite) loss and stops at the same step."""
        if not self.active:
            return loss_sum, samples, counts
        import paddle
        import paddle.distributed as dist

        keys = sorted(counts)
        t = paddle.to_tensor([loss_sum, float(samples), *[float(counts[k]) for k in keys]], dtype="float64")
        dist.all_reduce(t)
        v = t.numpy().tolist()
        return v[0] / self.world, round(v[1]), {k: round(x) for k, x in zip(keys, v[2:], strict=True)}

    def finish(self, record: TrialAssembler, model: Any) -> None:
        """Gather every rank's peak memory and digests; rank 0 records them. Only the trainable
        parameters must agree: DataParallel all-reduces their gradients every step, while buffers
        (BatchNorm's running mean and variance) are broadcast once at construction
        (paddle/distributed/parallel.py, sync_params_buffers) and then follow each rank's own shard."""
        if not self.active:
            return
        import paddle.distributed as dist

        trial: Any = record.trial   # `distributed` is an extra field of the open Trial model
        mine = {"rank": self.rank, "memory": trial.memory.model_dump(mode="json"), "digest": weight_digest(model),
                "buffers": buffer_digest(model), "host": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                "step_s": [s.time_s for s in trial.steps]}
        gathered: list[Any] = []
        dist.all_gather_object(gathered, mine)
        gathered.sort(key=lambda g: g["rank"])
        merge_ranks(trial.memory, [RankMemory(g["rank"], Memory.model_validate(g["memory"])) for g in gathered])
        digests = [g["digest"] for g in gathered]
        buffers = [g["buffers"] for g in gathered]
        trial.world_size = self.world
        trial.distributed = {
            **self.describe(), "per_device_batch": trial.batch_size,
            "global_batch": trial.global_batch(),
            "weight_digests": digests, "replicas_in_sync": len(set(digests)) == 1,
            "buffer_digests": buffers, "buffers_in_sync": None if not any(buffers) else len(set(buffers)) == 1,
            # every rank's own step times and host (rank 0's steps are the trial's): a slow node shows here
            "per_rank": [{"rank": g["rank"], "host": g.get("host", ""), "step_s": g.get("step_s", [])} for g in gathered],
        }
        if len(set(digests)) > 1 and trial.status == "ok":
            record.outcome("crashed", "ranks finished with different trainable parameters (digests " +
                           ", ".join(digests) + "): gradients were not all-reduced; the workload's loss() must "
                           "call model(...) itself")

    def describe(self) -> dict[str, Any]:
        return {"world_size": self.world, "nproc_per_node": self.nproc_per_node, "nnodes": self.nnodes,
                "backend": self.backend, "launcher": "paddle.distributed.launch", "allreduce": self.path,
                "fp16_allreduce": self.fp16_allreduce, "comm_dtypes": dict(self.comm_dtypes),
                **({"note": GLOO_FP16_NOTE} if self.fp16_allreduce and self.wire != "float16" else {})}


def _every_nth(it: Iterator[Any], start: int, step: int) -> Iterator[Any]:
    for i, item in enumerate(it):
        if i % step == start:
            yield item


def _trainable(model: Any) -> dict[int, str]:
    """id -> name of the parameters DataParallel keeps equal: those with a gradient (not stop_gradient)."""
    return {id(p): name for name, p in model.named_parameters() if not p.stop_gradient}


def weight_digest(model: Any) -> str:
    """sha256 of every trainable parameter's bytes, in state-dict order: equal only for identical weights."""
    trainable = _trainable(model)
    return _digest((k, v) for k, v in model.state_dict().items() if id(v) in trainable)


def buffer_digest(model: Any) -> str:
    """sha256 of the rest of the state dict (buffers and frozen parameters: BatchNorm's running
    statistics, which each rank updates from its own shard); "" for a model without any."""
    trainable = _trainable(model)
    rest = [(k, v) for k, v in model.state_dict().items() if id(v) not in trainable]
    return _digest(rest) if rest else ""


def _digest(items: Any) -> str:
    h = hashlib.sha256()
    for name, p in items:
        h.update(name.encode())
        h.update(p.numpy().tobytes())
    return h.hexdigest()[:16]
