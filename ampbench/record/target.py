"""Time to target (MLPerf's time-to-train): when a held-out metric first reached a value.

Pure bookkeeping over the eval records a trial already holds, so it can be recomputed from a
trial JSON for any target (e.g. by the report) and tested without training anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from ampbench.record.models import EvalRecord

Goal = Literal["max", "min"]


def reached(current: float, value: float, goal: Goal) -> bool:
    """`max`: at or above the target; `min`: at or below. NaN never reaches."""
    if not math.isfinite(current):
        return False
    if goal == "max":
        return current >= value
    if goal == "min":
        return current <= value
    raise ValueError(f"goal must be 'max' or 'min', got {goal!r}")


def first_reach(evals: Sequence[EvalRecord], metric: str, value: float, goal: Goal) -> dict[str, Any]:
    """The first eval (by step) whose `metric` reaches `value`.

    Returns the trial's `time_to_target` record: {"metric", "value", "goal", "reached", "step",
    "wall_s", "best", "evals"}; step and wall_s are None when the target was never reached,
    and `best` is the best value seen (None without evals), so a miss says by how much.
    An eval that lacks the metric is an error naming the metrics it has: a typo in
    `train.target.metric` should not read as "never reached".
    """
    if goal not in ("max", "min"):
        raise ValueError(f"goal must be 'max' or 'min', got {goal!r}")
    out: dict[str, Any] = {
        "metric": metric, "value": float(value), "goal": goal, "reached": False,
        "step": None, "wall_s": None, "best": None, "evals": len(evals),
    }
    best: float | None = None
    for ev in sorted(evals, key=lambda e: e.step):
        if metric not in ev.metrics:
            have = ", ".join(sorted(ev.metrics)) or "none"
            raise ValueError(f"target metric {metric!r} is not among the eval metrics at step {ev.step} ({have})")
        cur = float(ev.metrics[metric])
        if math.isfinite(cur) and (best is None or (cur > best if goal == "max" else cur < best)):
            best = cur
        if not out["reached"] and reached(cur, value, goal):
            out.update(reached=True, step=ev.step, wall_s=float(ev.wall_s))
    out["best"] = best
    return out
