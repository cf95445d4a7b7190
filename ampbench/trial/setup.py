"""Everything a trial needs before its first step: device, replicas, workload, model, optimizer, AMP.

The order matters and is Paddle's: the numerics checker is configured before seeding (it
re-seeds), the seed before the model is built, `paddle.amp.decorate` (O2) before DataParallel.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ampbench.record.models import AmpInfo

if TYPE_CHECKING:
    from ampbench.trial.context import TrialContext
    from ampbench.trial.numerics import NumericsHook
    from ampbench.trial.precision import Precision
    from ampbench.trial.replicas import Replicas


def seed_everything(seed: int) -> None:
    import numpy as np
    import paddle

    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)


@dataclass
class Parts:
    """The built pieces of one trial, handed from set-up to the step loop and the finish."""

    gpu: bool
    wl: Any
    model: Any
    optimizer: Any
    sched: Any
    prec: Precision
    replicas: Replicas
    numerics: NumericsHook
    amp: AmpInfo
    batches: Iterator[Any]


def set_up(tr: TrialContext) -> Parts:
    from ampbench.trackers import device
    from ampbench.trial.flags import apply_flags
    from ampbench.trial.numerics import NumericsHook
    from ampbench.trial.optimizer import build_optimizer
    from ampbench.trial.precision import Precision
    from ampbench.trial.replicas import Replicas

    gpu = device.select_device()
    if gpu:
        from ampbench.trackers.cuda import unsupported_paddle

        refused = unsupported_paddle()
        if refused:
            raise RuntimeError(refused)
    tr.trial.flags = apply_flags(tr.suite.flags, tr.mode.flags)  # Paddle FLAGS from [flags], recorded
    replicas = Replicas.from_env(tr.suite, tr.mode)  # data parallel: a no-op for one process
    replicas.init()
    tr.trial.world_size = replicas.world
    tr.record.env(device.environment())
    wl = _workload(tr, replicas)
    numerics = NumericsHook.for_trial(tr.mode.check_numerics, tr.spec.trial_path, rank=replicas.rank)
    tr.trial.numerics = numerics.record  # updated in place after every step
    if numerics.active:
        tr.trial.flags.update(flags_set_by_checker())
    seed_everything(tr.spec.seed)
    model = wl.build_model()
    optimizer, sched = build_optimizer(tr.suite.train.optimizer, model.parameters(), tr.steps_total)
    prec = Precision.build(tr.mode)
    if prec.unknown_names:   # said by the runner as the trial starts (it does not import paddle to know)
        tr.events.emit(event="unknown_ops", names=list(prec.unknown_names))
    model, optimizer = prec.prepare(model, optimizer)
    prec.check_model(model)
    model = replicas.wrap(model)
    model.train()
    amp = AmpInfo(**prec.describe())
    tr.record.amp(amp)
    if tr.mode.amp and tr.mode.level == "O2" and replicas.active:
        amp.decorate_order = "decorate-first"   # prec.prepare decorated above, replicas.wrap wrapped after it
    batches = replicas.shard(wl.train_batches(tr.spec.seed, tr.batch), wl)
    # Everything built so far lives for the whole trial: freeze it out of the garbage collector's
    # scans, so collections during the steps cost what they cost in a bare training script.
    gc.collect()
    gc.freeze()
    return Parts(gpu=gpu, wl=wl, model=model, optimizer=optimizer, sched=sched, prec=prec, replicas=replicas,
                 numerics=numerics, amp=amp, batches=batches)


def flags_set_by_checker() -> dict[str, Any]:
    """Paddle's TensorCheckerConfig sets FLAGS_cudnn_deterministic=True for the rest of the process on
    CUDA builds (its `_set_seed`): deterministic cuDNN kernels change speed, so the trial records it."""
    import paddle

    if not paddle.is_compiled_with_cuda():
        return {}
    name = "FLAGS_cudnn_deterministic"
    try:
        return {name: bool(paddle.get_flags([name])[name])}
    except (ValueError, RuntimeError, KeyError):
        return {name: None}


def _workload(tr: TrialContext, replicas: Replicas) -> Any:
    from ampbench.workloads import WorkloadContext, model_workload_class

    cls = model_workload_class(tr.suite.suite.workload)
    params = cls.Params.model_validate(tr.suite.workload)
    ctx = WorkloadContext(params=params, batch_size=tr.batch, steps=tr.steps_total, seed=tr.spec.seed,
                          cache_dir=Path(tr.spec.cache_dir), world_size=replicas.world, rank=replicas.rank)
    wl = cls(ctx)
    tr.events.emit(event="phase", phase="prepare")
    wl.prepare()
    tr.trial.workload_info = wl.describe()
    return wl
