"""Multi-process data parallel trials, through Paddle's own launcher.

A suite with `[distributed] nproc_per_node * nnodes > 1` runs each trial as
`python -m paddle.distributed.launch ... python -m ampbench.trial.worker SPEC`; every rank runs the
same worker, wrapped in `paddle.DataParallel`.  Only rank 0 talks to the runner and writes the
trial file; every rank reports peak memory and a weight digest to rank 0 at the end, so the
trial records memory per rank and proves the replicas stayed identical.

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

Failures: each rank that raises writes `rank<r>.failure.json` in the launcher's log folder;
the runner turns the earliest one (or the rank the launcher names) into the trial's error,
with that rank's log tail.  Nothing here imports paddle at module level.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.config import ConfigError, DistributedConfig, ModeConfig, Suite

RANK_DIR_ENV = "AMPBENCH_RANK_DIR"        # the launcher's --log_dir, where ranks leave failure notes
FAULT_RANK_ENV = "AMPBENCH_FAULT_RANK"    # inject AMPBENCH_FAULT / spec.fault on this rank only
COMPRESSED = "ampbench-fp16-compressed"
DATA_PARALLEL = "paddle.DataParallel"
# Measured on paddlepaddle 3.3.1 CPU: all_reduce of a float16 tensor over gloo returns inf.
GLOO_FP16_NOTE = ("gloo (CPU) cannot sum float16 in Paddle 3.3.1: gradients were rounded to float16 and summed "
                  "in float32; the precision effect is real, the bandwidth saving is not")


# ---------------------------------------------------------------- launch (runner side)


def world_size_of(cfg: DistributedConfig) -> int:
    return cfg.nproc_per_node * cfg.nnodes


def is_multi_process(cfg: DistributedConfig) -> bool:
    return world_size_of(cfg) > 1


def launch_command(cfg: DistributedConfig, worker_cmd: list[str], log_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The launcher command around `worker_cmd` (which starts with the Python executable, so
    the launcher runs it as given instead of as a script path) plus the env it needs."""
    if cfg.nnodes > 1 and not (cfg.master or cfg.ips):
        raise ConfigError("suite", "distributed.master",
                          f"nnodes = {cfg.nnodes} needs `master = \"HOST:PORT\"` (or `ips`) so the nodes can meet")
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(cfg.nproc_per_node),
           "--log_dir", str(log_dir)]
    if cfg.nnodes > 1:
        cmd += ["--nnodes", str(cfg.nnodes)]
    if cfg.master:
        cmd += ["--master", cfg.master]
    if cfg.ips:
        cmd += ["--ips", cfg.ips]
    env = {"PYTHONUNBUFFERED": "1", RANK_DIR_ENV: str(log_dir)}  # events reach the runner as they happen
    if cfg.backend != "auto":
        env["PADDLE_DISTRI_BACKEND"] = cfg.backend
    return cmd + list(worker_cmd), env


def kill_tree(pid: int, grace_s: float = 3.0) -> None:
    """SIGTERM then SIGKILL the launcher and every descendant (ranks run in sessions of their own)."""
    from ampbench.launch.process import kill_tree as _kill_tree

    _kill_tree(pid, grace_s)


# ---------------------------------------------------------------- failures (runner side)


@dataclass
class RankFailure:
    rank: int
    status: str          # a Trial status: crashed, oom, ...
    message: str         # one-paragraph error for the trial (which rank, why, which log)
    log_tail: str = ""   # the last lines of that log (the trial's `log_tail`)


_FAILED_RE = re.compile(r"Container rank (\d+) status failed .*? code (-?\d+)")


def rank_failure(log_dir: Path, launcher_log: Path, returncode: int | None, world: int,
                 tail_lines: int = 30) -> RankFailure | None:
    """Why a data-parallel trial failed, or None if the launcher exited 0.

    The earliest failure note a rank wrote wins (a crash on one rank makes the others fail in
    their next collective); a rank that died without a note (segfault, os._exit, kill) is
    named by the launcher's "Container rank R status failed ... code C" line.
    """
    if returncode == 0:
        return None
    notes = []
    for p in sorted(Path(log_dir).glob("rank*.failure.json")):
        with contextlib.suppress(OSError, ValueError):
            notes.append(json.loads(p.read_text()))
    named = _FAILED_RE.search(_read(launcher_log))
    if notes:
        first = min(notes, key=lambda n: n.get("time", 0.0))
        rank, status, why = int(first["rank"]), str(first.get("status", "crashed")), str(first.get("error", ""))
        why_line = _last_line(why)
    elif named:
        rank, code = int(named.group(1)), int(named.group(2))
        status = "oom" if code in (-signal.SIGKILL, 128 + signal.SIGKILL) else "crashed"
        why_line = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
    else:
        rank, status = -1, "crashed"
        why_line = f"the launcher exited with code {returncode}"
    head = (f"rank {rank} of {world} failed: {why_line}" if rank >= 0
            else f"data-parallel trial failed: {why_line}")
    if rank >= 0 and "TimeoutException" in _read(Path(log_dir) / f"workerlog.{rank}"):
        head += (f" (a collective timed out: another rank stopped answering, hung or dead; "
                 f"see the other workerlog.* in {log_dir})")
    tail = _tail(Path(log_dir) / f"workerlog.{rank}", tail_lines) if rank >= 0 else _tail(launcher_log, tail_lines)
    where = f"rank {rank} log {Path(log_dir) / f'workerlog.{rank}'}" if rank >= 0 else f"launcher log {launcher_log}"
    return RankFailure(rank=rank, status=status, message=f"{head}\n(log: {where})", log_tail=tail)


def _read(p: Path) -> str:
    try:
        return Path(p).read_text(errors="replace")
    except OSError:
        return ""


def _tail(p: Path, lines: int) -> str:
    return "\n".join(_read(p).splitlines()[-lines:])


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no error text"


# ---------------------------------------------------------------- inside a rank (worker side)


def env_rank() -> int:
    return int(os.environ.get("PADDLE_TRAINER_ID", "0") or 0)


def env_world_size() -> int:
    return int(os.environ.get("PADDLE_TRAINERS_NUM", "1") or 1)


def is_rank_zero() -> bool:
    """Rank 0 of a launched job, or any plain single process."""
    return env_rank() == 0


def writes_trial(suite: dict[str, Any]) -> bool:
    """Whether this worker reports to the runner and writes the trial: rank 0 of a data-parallel
    trial, or any single-process trial (whatever PADDLE_* variables an outer job left set)."""
    cfg = DistributedConfig.model_validate(suite.get("distributed") or {})
    return not is_multi_process(cfg) or env_rank() == 0


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
        expected = world_size_of(cfg)
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

    def finish(self, trial: Any, model: Any) -> None:
        """Gather every rank's peak memory and weight digest; rank 0 records them."""
        if not self.active:
            return
        import paddle.distributed as dist

        mine = {"rank": self.rank, "memory": trial.memory.model_dump(mode="json"), "digest": weight_digest(model)}
        gathered: list[Any] = []
        dist.all_gather_object(gathered, mine)
        gathered.sort(key=lambda g: g["rank"])
        mem = trial.memory
        for key in ("peak_allocated_bytes", "peak_reserved_bytes", "rss_peak_bytes", "device_used_bytes"):
            setattr(mem, key, max(int(g["memory"].get(key, 0) or 0) for g in gathered))
        mem.per_rank = [{"rank": g["rank"], **{k: g["memory"].get(k, 0) for k in
                         ("peak_allocated_bytes", "peak_reserved_bytes", "rss_peak_bytes", "device_used_bytes")}}
                        for g in gathered]
        digests = [g["digest"] for g in gathered]
        trial.world_size = self.world
        trial.distributed = {
            **self.describe(), "per_device_batch": trial.batch_size,
            "global_batch": trial.batch_size * max(1, trial.grad_accum) * self.world,
            "weight_digests": digests, "replicas_in_sync": len(set(digests)) == 1,
        }
        if len(set(digests)) > 1 and trial.status == "ok":
            trial.status = "crashed"
            trial.error = ("ranks finished with different weights (digests " + ", ".join(digests) + "): gradients "
                           "were not all-reduced; the workload's loss() must call model(...) itself")

    def describe(self) -> dict[str, Any]:
        return {"world_size": self.world, "nproc_per_node": self.nproc_per_node, "nnodes": self.nnodes,
                "backend": self.backend, "launcher": "paddle.distributed.launch", "allreduce": self.path,
                "fp16_allreduce": self.fp16_allreduce, "comm_dtypes": dict(self.comm_dtypes),
                **({"note": GLOO_FP16_NOTE} if self.fp16_allreduce and self.wire != "float16" else {})}


def _every_nth(it: Iterator[Any], start: int, step: int) -> Iterator[Any]:
    for i, item in enumerate(it):
        if i % step == start:
            yield item


def weight_digest(model: Any) -> str:
    """sha256 of every parameter's bytes, in state-dict order: equal only for identical weights."""
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.numpy().tobytes())
    return h.hexdigest()[:16]


def apply_failure(trial_path: Path, failure: RankFailure) -> Any:
    """Rank 0's trial file, re-labelled with the failure of the rank that broke the trial (rank 0's
    own error, if it had one, is kept below).  None if the file cannot be read."""
    from ampbench.results import ResultsError, atomic_write_json, load_trial

    try:
        trial = load_trial(trial_path)
    except ResultsError:
        return None
    own = trial.error if trial.status != "ok" and failure.rank != 0 else None
    trial.status = failure.status
    trial.error = failure.message + (f"\n--- rank 0 error ---\n{own[-2000:]}" if own else "")
    trial.log_tail = failure.log_tail or None
    atomic_write_json(Path(trial_path), trial.to_json())
    return trial
