"""Which processes on the GPU are ampbench's own, so the poller never calls them foreign.

A trial's worker runs under an ampbench process (`run`, `tune`, `selftest`: named by AMPBENCH_PARENT,
core/protocol.py) that may itself hold a CUDA context, or have a short-lived helper child that does (a
capability probe).  NVML lists them on the trial's GPU like any other process; counted as foreign they
would make the speed rule withhold its verdict ("disturbed") for ampbench's own doing.  Ours are: the
ampbench process and its descendants that belong to no other trial (a process whose AMPBENCH_WORKER marker
is another trial's is a trial beside this one: that one does disturb).
What cannot be read (another user's process, one that ended) is not ours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import psutil

from ampbench.core.processes import WORKER_ENV
from ampbench.core.protocol import PARENT_ENV


class OwnProcesses:
    """`pid in own`: that pid is ampbench's own (not this trial's measured processes, not foreign)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        pid_text = env.get(PARENT_ENV, "").partition(":")[0]
        self.root = int(pid_text) if pid_text.isdigit() else os.getpid()
        self.marker = env.get(WORKER_ENV, "")
        self._seen: dict[int, bool] = {}

    def __contains__(self, pid: object) -> bool:
        if not isinstance(pid, int):
            return False
        if pid not in self._seen:   # asked once per pid: a pid seen on the GPU keeps its answer for the window
            self._seen[pid] = self._ours(pid)
        return self._seen[pid]

    def _ours(self, pid: int) -> bool:
        if pid in (self.root, os.getpid()):
            return True
        try:
            proc = psutil.Process(pid)
            if self.root not in {p.pid for p in proc.parents()}:
                return False
            marker = proc.environ().get(WORKER_ENV, "")
        except psutil.Error:
            return False
        return not marker or marker == self.marker
