"""Step timing of a trial.

Timing policy (the same for every mode, scaler or not): a measured step starts before its first
batch is fetched and ends when its optimizer update (and LR-scheduler step) has finished on the
device: `stop()` waits for the device (`paddle.device.synchronize()` on a GPU; nothing on CPU,
where kernels run synchronously) before reading `time.perf_counter`. The first and last measured
steps are timed like every other: the window opens with a device sync before the first one, and
the last one's update is waited for. Bookkeeping between steps (records, events) is outside.

The throughput summary is computed from the stored per-step records by the trial's assembler
(record/assemble.py `throughput`), the same for the built-in loop and a program under the hook.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class StepClock:
    """perf_counter around a step; `sync` (chosen once per trial) waits for the device before stopping.

    Also the process CPU time of the step (`cpu_s` after `stop()`): CPU time well below the wall
    time on CPU means the step waited for a core (a loaded machine), not for work.
    """

    __slots__ = ("_c0", "_sync", "_t0", "cpu_s")

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self._sync = sync
        self._t0 = self._c0 = self.cpu_s = 0.0

    def start(self) -> None:
        self._c0 = time.process_time()
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        if self._sync is not None:
            self._sync()
        dt = time.perf_counter() - self._t0
        self.cpu_s = time.process_time() - self._c0
        return dt

