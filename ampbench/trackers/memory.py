"""Memory over the measured window, from the best source this device has, plus NVML's energy.

Sources: on a GPU the CUDA allocator's peaks (allocated, reserved; reset when the window opens)
and NVML's view of the driver (`nvml.Poller`: this process's memory, else device-wide used memory,
`device_used_source` says which); on CPU Paddle's host allocator peak. `None` means "not
measured", never 0. `rss_peak_bytes` is whole-process (ru_maxrss: imports and data preparation
included), unlike the window-scoped figures beside it.

Mid-run evaluations are not training: `pause()` / `resume()` around one keep its allocator peak
(the peaks are read before it and reset after it), its NVML samples and its energy out of the
window, as its time is kept out of `window_s`.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field
from typing import Any

from ampbench.record.models import Memory
from ampbench.trackers import cuda, nvml

# Memory.notes["evaluations"]: a peak reset cannot release what an evaluation left in Paddle's cache
EVALS_CACHED_NOTE = ("peak_reserved_bytes and device_used_bytes include what the {n} mid-run evaluation(s) left "
                     "cached in Paddle's allocator (a peak reset cannot release it); peak_allocated_bytes, which "
                     "the memory rule compares, leaves them out")


def rss_peak_bytes() -> int:
    """Peak resident set of this whole process since it started (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@dataclass
class MemoryTracker:
    """Opens the window with `start()`, closes it with `stop()`; never raises for a missing source."""

    gpu: bool = False
    _host_stat: bool = False
    _session: nvml.Session | None = None
    _poller: nvml.Poller | None = None
    errors: dict[str, str] = field(default_factory=dict)
    window: dict[str, Any] = field(default_factory=dict)   # the NVML window's result (energy, interference)
    _peaks: dict[str, int] = field(default_factory=dict)   # allocator peaks of the window's earlier parts
    _can_reset: bool = False
    _evals: int = 0   # mid-run evaluations inside the window (EVALS_CACHED_NOTE)

    def start(self) -> None:
        if self.gpu:
            self._start_gpu()
            return
        try:
            from paddle.base import core

            core.host_memory_stat_reset_peak_value("Allocated", 0)
            self._host_stat = True
        except Exception as exc:
            self.errors["host_memory_stat"] = f"{type(exc).__name__}: {exc}"[:200]

    def _start_gpu(self) -> None:
        self._sync()
        self._reset_allocator()
        self._session = nvml.Session(os.environ, cuda.cuda_bus_id(), cuda.cuda_uuid()).open()
        if self._session.error:
            self.errors["nvml"] = self._session.error
        if self._session.dev is not None:
            self._poller = nvml.Poller(self._session.nv, self._session.dev).start()

    @staticmethod
    def _sync() -> None:
        sync = cuda.synchronizer(True)
        if sync is not None:
            sync()

    def _reset_allocator(self) -> None:
        try:
            reason = cuda.allocator_reset()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"[:200]
        self._can_reset = reason is None
        if reason:
            self.errors["allocator"] = reason

    def _keep_peaks(self) -> None:
        """Fold the allocator's peaks so far into `_peaks` (max per field)."""
        if not self._can_reset:
            return
        try:
            for k, v in cuda.allocator_peaks().items():
                self._peaks[k] = max(self._peaks.get(k, 0), v)
        except Exception as exc:
            self.errors.setdefault("allocator", f"{type(exc).__name__}: {exc}"[:200])

    def pause(self) -> None:
        """Before a mid-run evaluation: keep the training peaks, stop NVML sampling and energy."""
        if not self.gpu:
            return
        self._sync()
        self._keep_peaks()
        self._evals += 1
        if self._poller is not None:
            self._poller.pause()

    def resume(self) -> None:
        """After it: reset the allocator's peaks (the evaluation's are dropped), sample again."""
        if not self.gpu:
            return
        self._sync()
        if self._can_reset:
            self._reset_allocator()
        if self._poller is not None:
            self._poller.resume()

    def stop(self) -> Memory:
        rss = rss_peak_bytes()
        if self.gpu:
            return self._stop_gpu(rss)
        if self._host_stat:
            from paddle.base import core

            peak = int(core.host_memory_stat_peak_value("Allocated", 0))
            return Memory(source="host", peak_allocated_bytes=peak, rss_peak_bytes=rss, errors=dict(self.errors))
        return Memory(source="none", rss_peak_bytes=rss, errors=dict(self.errors))

    def _stop_gpu(self, rss: int) -> Memory:
        self._sync()
        fields: dict[str, Any] = {}
        if self._can_reset:   # else the peaks would span the whole process: not measured (null)
            self._keep_peaks()
            fields.update(self._peaks)
        if self._poller is not None:
            self.window = self._poller.stop()
            self.errors.update({f"nvml.{k}": v for k, v in self.window.get("nvml_errors", {}).items()})
            fields.update({k: self.window.get(k) for k in ("device_used_bytes", "device_used_source", "energy_j",
                                                           "nvml_device")})
        if self._session is not None:
            self._session.close()
        notes = {"evaluations": EVALS_CACHED_NOTE.format(n=self._evals)} if self._evals else {}
        return Memory(source="cuda", rss_peak_bytes=rss, errors=dict(self.errors), notes=notes, **fields)
