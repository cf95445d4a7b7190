"""The optimizer and LR schedule a suite's [train.optimizer] table asks for."""

from __future__ import annotations

from typing import Any

from ampbench.config import OptimizerConfig


def build_optimizer(cfg: OptimizerConfig, parameters: Any, total_steps: int) -> tuple[Any, Any]:
    """Optimizer plus LR scheduler (None for a constant rate); the scheduler steps once per update."""
    import paddle

    lr: Any = cfg.lr
    sched: paddle.optimizer.lr.LRScheduler | None = None
    if cfg.schedule == "linear":
        sched = paddle.optimizer.lr.PolynomialDecay(cfg.lr, decay_steps=max(1, total_steps), end_lr=0.0, power=1.0)
    elif cfg.schedule == "cosine":
        sched = paddle.optimizer.lr.CosineAnnealingDecay(cfg.lr, T_max=max(1, total_steps))
    if cfg.lr_warmup_steps:
        sched = paddle.optimizer.lr.LinearWarmup(sched if sched is not None else cfg.lr,
                                                 warmup_steps=cfg.lr_warmup_steps, start_lr=0.0, end_lr=cfg.lr)
    if sched is not None:
        lr = sched
    clip = paddle.nn.ClipGradByGlobalNorm(cfg.grad_clip_norm) if cfg.grad_clip_norm else None
    common = {"learning_rate": lr, "parameters": parameters, "grad_clip": clip}
    if cfg.name == "adam":
        opt = paddle.optimizer.Adam(weight_decay=cfg.weight_decay or None, **common)
    elif cfg.name == "adamw":
        opt = paddle.optimizer.AdamW(weight_decay=cfg.weight_decay, **common)
    elif cfg.name == "momentum":
        opt = paddle.optimizer.Momentum(momentum=cfg.momentum, weight_decay=cfg.weight_decay or None, **common)
    else:
        opt = paddle.optimizer.SGD(weight_decay=cfg.weight_decay or None, **common)
    return opt, sched
