"""The op lists of trials recorded before the effective lists were (issue 58.9), computed at analysis time.

A trial file written before `amp.effective_white_list` / `effective_black_list` existed holds only the custom
lists, so the why-not-faster census (judge/why_slow.py) would call every op on Paddle's default lists "on
neither list". Paddle's defaults for the trial's dtype and level are computed here, in the engine (above both
stacks: the analysis side never imports paddle, and judge/check_run.py gets this as its `complete` step), with the same merge the worker uses (trial/precision.effective_lists),
and only when the Paddle installed here is the one the trial recorded (the lists change between versions);
otherwise the trial is left as it is and the census says it is partial. The trial file is never rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version

from ampbench.record.models import Trial

PADDLE_DISTRIBUTIONS = ("paddlepaddle", "paddlepaddle-gpu")


def installed_paddle() -> str:
    """The installed Paddle's version, without importing it ("" when there is none)."""
    for name in PADDLE_DISTRIBUTIONS:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return ""


def complete_lists(trials: Iterable[Trial]) -> int:
    """Fill the effective lists of the AMP trials that lack them, in memory; returns how many were filled."""
    todo = [t for t in trials if t.amp.requested and not (t.amp.effective_white_list or t.amp.effective_black_list)]
    here = installed_paddle() if todo else ""
    todo = [t for t in todo if here and t.env.paddle == here]
    if not todo:
        return 0
    from ampbench.launch.process import keep_signal_handlers
    from ampbench.trial.precision import effective_lists

    with keep_signal_handlers():   # importing paddle installs its own SIGTERM handler
        for t in todo:
            lists = effective_lists(t.amp.dtype, t.amp.level, list(t.amp.white_list), list(t.amp.black_list))
            t.amp.effective_white_list, t.amp.effective_black_list = lists["white"], lists["black"]
    return len(todo)
