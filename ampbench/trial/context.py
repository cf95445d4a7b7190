"""What every part of a trial shares: the spec, the validated suite and mode, the trial record
being filled, and the private event channel to the runner."""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Protocol

from ampbench.config import ModeConfig, Suite
from ampbench.core.protocol import EVENT_PREFIX
from ampbench.record.assemble import TrialAssembler
from ampbench.record.models import Trial
from ampbench.trackers import placement, scheduler
from ampbench.trial.spec import TrialSpec


class TextSink(Protocol):
    """Where event lines go: the worker's stdout, or the in-process launcher's relay."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class Events:
    """The worker's private line channel to the runner; step events arrive in batches (trial/loop.py)."""

    def __init__(self, stream: TextSink | None):
        self.stream = stream
        self._pending: list[str] = []

    def emit(self, **data: Any) -> None:
        if self.stream is not None:
            self._pending.append(EVENT_PREFIX + json.dumps(data) + "\n")
            self.flush()

    def queue(self, **data: Any) -> None:
        """An event sent with the next `emit` or `flush`."""
        if self.stream is not None:
            self._pending.append(EVENT_PREFIX + json.dumps(data) + "\n")

    def flush(self) -> None:
        if self.stream is not None and self._pending:
            self.stream.write("".join(self._pending))
            self.stream.flush()
            self._pending.clear()


class TrialContext:
    """Holds the state of one trial so a failure can still be recorded with what was done."""

    def __init__(self, spec: TrialSpec, events: Events):
        self.spec, self.events = spec, events
        self.t_start = time.perf_counter()
        self.suite: Suite = spec.suite
        self.mode: ModeConfig = self.suite.mode(spec.mode)
        self.batch = spec.batch_size or self.suite.batch_size(self.mode)
        self.accum = self.suite.grad_accum(self.mode)
        self.steps_total = spec.steps or self.suite.train.steps
        self.trial = Trial(
            suite=self.suite.suite.name, workload=self.suite.suite.workload, mode=self.mode.name, seed=spec.seed,
            profile=spec.profile, status="crashed", config=self._effective_config(), config_hash=spec.config_hash,
            batch_size=self.batch, grad_accum=self.accum,
        )
        self.record = TrialAssembler(self.trial)  # the steps are fed to it; its finish() sets derived fields
        if placement.devices():  # run --devices pinned this worker: recorded even when the trial fails
            self.record.interference({"devices": placement.devices()})
        self.trial.slurm = scheduler.slurm_job()  # run --launcher slurm: the job, node and GPUs it ran on
        self.trial.host, self.trial.started_unix = socket.gethostname(), time.time()   # where and when

    def stop_clock(self) -> None:
        """The trial's end: its wall time and the wall clock it ended at (the pairing check reads both)."""
        self.trial.wall_s = time.perf_counter() - self.t_start
        self.trial.ended_unix = time.time()

    def _effective_config(self) -> dict[str, Any]:
        cfg = self.suite.model_dump(mode="json")
        cfg["mode"] = self.mode.model_dump(mode="json")
        cfg["effective"] = {"batch_size": self.batch, "grad_accum": self.accum, "steps": self.steps_total}
        return cfg
