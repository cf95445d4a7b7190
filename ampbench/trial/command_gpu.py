"""NVML for a command trial on a GPU: polled by the worker (ampbench's own Python), never by the hook.

The start-up hook imports nothing beyond the standard library and the user's Paddle, so it has no
NVML; it only says, in each process's device event (at its first optimizer step, so a later
set_device counts), that the process trains on a GPU and which one (its CUDA_VISIBLE_DEVICES /
FLAGS_selected_gpus and the device's PCI bus id). The worker then polls
that device with the built-in workloads' `nvml.Poller`, matching the program's whole process tree
(the program and every descendant: paddle.distributed.launch ranks) instead of one pid, one poller
per distinct device. A process that reports `cpu` opens nothing: on CPU every NVML field stays null.

After the run, `fields` cuts the polled timelines to the measured window (from the hook's step
events, see trackers/energy_window.py) and gives the Memory fields the built-in workloads fill:
device_used_bytes (the maximum over devices), device_used_source, energy_j (summed over devices,
evaluations inside the window left out), nvml_device (the first device's), NVML errors as `nvml.*`
keys, and the Interference GPU fields (the first device's).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ampbench.core.processes import descendants
from ampbench.record import wire
from ampbench.trackers import energy_window, nvml
from ampbench.trial.command_record import Proc

CUDA_ENV = ("CUDA_VISIBLE_DEVICES", "FLAGS_selected_gpus", "CUDA_DEVICE_ORDER")
# the note a device without an energy counter leaves (NVML "Not Supported"): its null energy needs no other reason
NO_ENERGY = "nvml." + nvml.NOT_SUPPORTED + "nvmlDeviceGetTotalEnergyConsumption"


class TreePids:
    """The program's process tree (its root and every descendant), listed again at most once a second."""

    def __init__(self, root: int, every_s: float = 1.0) -> None:
        self.root, self.every_s = root, every_s
        self._pids: set[int] = {root}
        self._at = -float("inf")

    def __call__(self) -> set[int]:
        now = time.monotonic()
        if now - self._at >= self.every_s:
            self._pids = {self.root, *descendants(self.root)}
            self._at = now
        return self._pids


class ProgramGpu:
    """Pollers over the GPUs the program's processes report, opened as their device events arrive."""

    def __init__(self, root_pid: int, pids: Callable[[], Collection[int]] | None = None) -> None:
        self.root = root_pid
        self.pids: Callable[[], Collection[int]] = pids or TreePids(root_pid)
        self.session: nvml.Session | None = None
        self.pollers: dict[str, nvml.Poller] = {}     # device uuid -> its poller
        self.results: dict[str, dict[str, Any]] = {}  # device uuid -> Poller.stop()
        self.errors: dict[str, str] = {}
        self._seen: set[int] = set()

    def see(self, procs: Iterable[Proc]) -> None:
        """Start polling the device of every process whose device event (its first step) says it trains
        on a GPU."""
        for p in procs:
            if p.pid in self._seen or p.device is None:
                continue
            self._seen.add(p.pid)
            if p.device.device == "gpu":
                self._watch(p.device)

    def _watch(self, device: wire.DeviceEvent) -> None:
        raw = device.cuda_env or {}
        env = {k: raw[k] for k in CUDA_ENV if k in raw}
        if "NVIDIA_VISIBLE_DEVICES" in os.environ:   # the container's choice (a MIG instance), the program's too
            env["NVIDIA_VISIBLE_DEVICES"] = os.environ["NVIDIA_VISIBLE_DEVICES"]
        bus = device.pci_bus_id
        # the CUDA device's own UUID (a MIG instance's): how a MIG instance picked by index is found
        uuid = device.cuda_uuid
        if self.session is None:
            self.session = nvml.Session(env, bus, uuid).open()
            if self.session.error:
                self.errors["nvml"] = self.session.error
        nv = self.session.nv
        if nv is None:
            return
        try:
            dev = nvml.resolve(nv, env, bus, uuid)
        except Exception as exc:  # noqa: BLE001  recorded: the other devices (and the trial) go on
            self.errors.setdefault("nvml", f"NVML device not resolved: {type(exc).__name__}: {exc}"[:300])
            return
        if dev.uuid not in self.pollers:
            self.pollers[dev.uuid] = nvml.Poller(nv, dev, pid=self.root, pids=self.pids, timeline=True).start()

    def stop(self) -> None:
        """Stop every poller (right after the program ended) and shut NVML down; safe to call twice."""
        for uuid, poller in self.pollers.items():
            if uuid not in self.results:
                self.results[uuid] = poller.stop()
        if self.session is not None:
            self.session.close()

    def fields(self, window: tuple[float, float] | None, gaps: list[tuple[float, float]]) -> dict[str, Any]:
        """Memory fields, `errors` (nvml.* keys) and `interference` of the measured window; {} off a GPU."""
        self.stop()
        errors = dict(self.errors)
        if not self.results:
            return {"errors": errors} if errors else {}
        used, sources, energy = [], set(), []
        for uuid, res in self.results.items():
            errors.update({f"nvml.{k}": v for k, v in res.get("nvml_errors", {}).items()})
            peak, source, joules = _in_window(self.pollers[uuid], res, window, gaps)
            if peak is not None:
                used.append(peak)
                sources.add(source)
            energy.append(joules)
        if window is None:
            errors["nvml.window"] = "no measured step: NVML's figures have no window"
        elif any(e is None for e in energy) and not any(k.startswith(NO_ENERGY) for k in errors):
            errors.setdefault("nvml.window", "the NVML samples do not cover the measured window: energy not measured")
        first = next(iter(self.results.values()))
        return {"device_used_bytes": max(used) if used else None,
                "device_used_source": (nvml.PROCESS if sources == {nvml.PROCESS} else nvml.DEVICE) if used else None,
                "energy_j": float(sum(e for e in energy if e is not None)) if energy and None not in energy else None,
                "nvml_device": first.get("nvml_device"), "errors": errors,
                "interference": {**dict(first.get("interference") or {}), "gpu_busy_pct": _busy(self, window, gaps)}}


def _busy(gpu: ProgramGpu, window: tuple[float, float] | None, gaps: list[tuple[float, float]]) -> float | None:
    """The first device's NVML utilisation over the measured window (the evaluations inside it left out)."""
    poller = next(iter(gpu.pollers.values()), None)
    return poller.busy_pct(window, gaps) if poller is not None and window is not None else None


def _in_window(poller: nvml.Poller, res: dict[str, Any], window: tuple[float, float] | None,
               gaps: list[tuple[float, float]]) -> tuple[int | None, str | None, float | None]:
    """(peak bytes, its source, joules) of one device over the window; the whole run's peak when no
    sample fell inside a window shorter than the polling interval."""
    if window is None:
        return None, None, None
    timeline = poller.s.timeline
    own, dev = energy_window.window_peaks(timeline, *window)
    if own is None and dev is None:
        own, dev = poller.s.process_peak, poller.s.device_peak
    peak, source = (own, nvml.PROCESS) if own else (dev, nvml.DEVICE)
    return peak, source if peak is not None else None, energy_window.window_energy_j(timeline, *window, gaps)


def measured_window(steps: list[wire.StepEvent], warmup: int) -> tuple[tuple[float, float] | None,
                                                                       list[tuple[float, float]]]:
    """The hook's measured steps -> ((first step's start, last step's end), evaluations inside) in
    perf_counter time; (None, []) when no measured step carries its time."""
    timed = [ev for ev in steps if ev.step > warmup and ev.at is not None]
    if not timed:
        return None, []
    first = timed[0]
    start = float(first.at or 0.0) - first.t - (first.eval_s or 0.0)
    gaps = [(x[0], x[1]) for ev in timed for x in ev.evals or []]
    return (start, float(timed[-1].at or 0.0)), gaps
