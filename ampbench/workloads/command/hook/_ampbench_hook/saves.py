"""Checkpoint time inside a training step, handled as the hook handles an evaluation (issue 44).

A program that saves inside its loop (PaddleClas after each evaluation, PaddleRec at each epoch's end)
spends that time between two optimizer steps, so the hook's step clock would charge it to the next
step: PaddleClas's steps after a save measured 1.3-1.5x its own batch_cost. `paddle.save` (the one
function every Paddle checkpoint goes through, python/paddle/framework/io.py) is timed here, and the
time is subtracted from the step it falls in, as the time between Layer.eval() and Layer.train() is:
added to the hook's `eval_s` and its `evals` intervals (so NVML's energy window leaves it out too), and
reported as one "save" event each, so ampbench's record can say how many saves and how long. A save
inside an evaluation (between eval() and train()) is already left out and is not counted twice.
Installed by the hook (boot.install); imports nothing of ampbench.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def install(paddle: Any, st: Any) -> None:
    """Wrap paddle.save wherever Paddle exports it (paddle.save, paddle.framework.save, its module's)."""
    own = getattr(paddle, "save", None)
    if not callable(own):
        return
    depth = [0]

    def save(*args: Any, **kwargs: Any) -> Any:
        if depth[0] or st.eval_t0 is not None or st.step == 0:   # nested, inside an evaluation, or before training
            return own(*args, **kwargs)
        depth[0] = 1
        t0 = time.perf_counter()
        try:
            return own(*args, **kwargs)
        finally:
            t1 = time.perf_counter()
            depth[0] = 0
            st.eval_s += t1 - t0
            st.evals.append([t0, t1])
            st.emit(e="save", step=st.step + 1, s=t1 - t0)
    for owner in (paddle, getattr(paddle, "framework", None), sys.modules.get("paddle.framework.io")):
        if owner is not None and getattr(owner, "save", None) is own:
            st.patch(owner, "save", save)
