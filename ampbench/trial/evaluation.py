"""Evaluation during and after training, and the time-to-target it feeds."""

from __future__ import annotations

from typing import Any

from ampbench.record.models import EvalRecord
from ampbench.record.target import first_reach
from ampbench.trial.context import TrialContext
from ampbench.trial.setup import Parts


def evaluate(tr: TrialContext, p: Parts, step: int, train_wall: float, final: bool = False) -> dict[str, float]:
    tr.events.emit(event="phase", phase="evaluate", step=step)
    model = p.model
    model.eval()
    try:
        with p.prec.autocast():
            metrics = {k: float(v) for k, v in p.wl.evaluate(model).items()}
    finally:
        model.train()
    if tr.suite.train.eval_every or not final:
        tr.trial.evals.append(EvalRecord(step=step, wall_s=train_wall, metrics=metrics))
    tr.events.emit(event="eval", step=step, metrics=metrics)
    return metrics


def time_to_target(tr: TrialContext, wl: Any) -> None:
    target = tr.suite.train.target
    if target is None:
        return
    goal = wl.metric_goals.get(target.metric, "max")
    tr.trial.time_to_target = first_reach(tr.trial.evals, target.metric, target.value, goal)
