"""The in-process launcher: the same spec in, the same Trial out, without a child process.

For tests and debugging (a breakpoint in a workload, a profiler around one trial): the trial runs
in this interpreter, so its memory figures include whatever this process already holds, and a
crash or a hang is this process's. Use `launch.launcher.launch` for measurements.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ampbench.core.docs import load_doc
from ampbench.core.protocol import EVENT_PREFIX
from ampbench.record.models import Trial
from ampbench.trial.context import Events
from ampbench.trial.spec import TrialSpec
from ampbench.trial.worker import run_trial


class _Relay(io.TextIOBase):
    """An event stream that hands each event line to `on_event` as it is written."""

    def __init__(self, on_event: Callable[[dict[str, Any]], None] | None):
        self.on_event = on_event

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if self.on_event is not None and line.startswith(EVENT_PREFIX):
                self.on_event(json.loads(line[len(EVENT_PREFIX):]))
        return len(text)


def launch_in_process(spec: TrialSpec, on_event: Callable[[dict[str, Any]], None] | None = None) -> Trial:
    """Run one trial here; the trial file is written to spec.trial_path as the worker would."""
    if spec.suite.distributed.multi_process:
        raise ValueError("a data-parallel trial needs its ranks: use launch.launcher.launch")
    Path(spec.trial_path).parent.mkdir(parents=True, exist_ok=True)
    run_trial(spec, Events(_Relay(on_event)))
    return load_doc(spec.trial_path, Trial, "trial file")
