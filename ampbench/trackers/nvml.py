"""NVML (nvidia-ml-py, the `gpu` extra): the GPU this rank really uses, and what the driver sees on it.

Which device: `paddle.distributed.launch` gives each rank its card through `FLAGS_selected_gpus`,
an ordinal into the CUDA-visible list, and leaves `CUDA_VISIBLE_DEVICES` alone. The visible entry
may be an index (in CUDA's order: fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, while NVML
numbers GPUs in PCI order), a `GPU-<uuid>` or a `MIG-...` instance. So the device is matched by
PCI bus id as CUDA reports it, else by UUID, and by index only as the last, labelled resort.

What is read over the measured window (a polling thread, `Poller`): this process's memory when
NVML lists its PID (`nvml-process`); inside a container NVML lists host PIDs, so otherwise the
device-wide used memory (`nvml-device`). Also energy (the counter's difference), SM clocks,
throttle reasons, temperature, power, and the other processes on the GPU. Every NVML error is
recorded (function and message), never swallowed; nvmlShutdown is always called. A reading the
device does not offer (NVML_ERROR_NOT_SUPPORTED: energy before Volta, vGPU guests, some VMs) is
recorded apart, under `not_supported.<function>`: "not measured" on this device, not a failure.

The process listing calls the versioned NVML symbols itself, newest first: nvidia-ml-py 13's
unversioned `nvmlDeviceGetComputeRunningProcesses` calls `_v3` and turns a driver without it
(below R510, and 535.98, which removed it) into `NVMLLibraryMismatchError`, so no fallback could
catch it. Drivers 535.43 to 535.86 export `_v3` but fill it with a larger record than
nvidia-ml-py's (PIDs past the first are garbage): `_v2` is asked first there.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ampbench.trackers.own_processes import OwnProcesses

PROCESS, DEVICE = "nvml-process", "nvml-device"
POLL_S = 0.1  # 10 Hz: NVML calls release the GIL; the thread's Python work stays << 1% of a step
# nvmlClocksEventReasons bits (nvml.h), named as nvidia-smi names them.
THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                 0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
IGNORED_THROTTLE = {"gpu_idle", "applications_clocks_setting"}  # not slow-downs
PID_NOTE = "pid"   # Samples.errors key of "our PID is not listed": a note (containers), not a failure
NOT_SUPPORTED = "not_supported."   # Samples.errors key prefix of a reading this device does not offer
# The versioned process listings, newest first (nvidia-ml-py calls exactly the symbol in the name).
PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")
# Drivers whose _v3 writes nvmlProcessInfo_v3_t (with usedGpuCcProtectedMemory) under the v3 name
# (nvml.h of 535.43.02 to 535.86.05, NVIDIA/nvidia-settings history; nvitop PR #79 and #89).
V3_STRUCT_DRIVERS = ((535, 43), (535, 86))
# NVML return codes (nvml.h nvmlReturn_t), for wrappers that raise NVMLError(value)
NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND = 3, 6, 13
NVML_DEVICE_MIG_ENABLE = 1


def _code(exc: Exception) -> int | None:
    """The NVML return code an NVMLError carries (pynvml keeps it in `.value`); None for other errors."""
    v = getattr(exc, "value", None)
    return v if isinstance(v, int) else None


def _driver_version(nv: Any) -> str:
    """The driver's version, only to order the process listings ("" when NVML does not say: the default
    order then; Env records the version, and its absence, on its own)."""
    try:
        return _text(nv.nvmlSystemGetDriverVersion())
    except Exception:
        return ""


def process_calls(driver: str) -> tuple[str, ...]:
    """The process listings to try, in order, for this driver version ("" when unknown)."""
    parts = [int(p) if p.isdigit() else -1 for p in driver.split(".")[:2]] + [-1, -1]
    lo, hi = V3_STRUCT_DRIVERS
    return PROCESS_CALLS[::-1] if lo <= (parts[0], parts[1]) <= hi else PROCESS_CALLS


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def norm_bus_id(bus: str) -> str:
    """'00000000:3B:00.0' (NVML) and '0000:3b:00.0' (CUDA) -> '0000:3b:00.0'."""
    b = _text(bus).strip().lower()
    dom, _, rest = b.partition(":")
    return f"{int(dom, 16):04x}:{rest}" if rest and all(c in "0123456789abcdef" for c in dom) else b


def cuda_ordinal(environ: Mapping[str, str]) -> int:
    """The CUDA ordinal this process trains on: FLAGS_selected_gpus (set per rank by the launcher) or 0."""
    sel = (environ.get("FLAGS_selected_gpus") or "0").split(",")[0].strip()
    return int(sel) if sel.isdigit() else 0


def visible_entry(environ: Mapping[str, str], ordinal: int) -> str | None:
    """The CUDA_VISIBLE_DEVICES entry behind a CUDA ordinal (None when the variable is unset or 'all')."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None or cvd.strip() in ("", "all"):
        return None
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    return entries[ordinal] if ordinal < len(entries) else None


@dataclass
class NvmlDevice:
    """One resolved device: its handle (the MIG instance's for MIG) and the whole GPU's (`parent`)."""

    handle: Any
    parent: Any
    index: int | None
    uuid: str
    pci_bus_id: str
    name: str
    mig: bool
    matched_by: str   # pci_bus_id | uuid | mig_uuid | index | index-assumed

    def describe(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "pci_bus_id": self.pci_bus_id, "name": self.name,
                "mig": self.mig, "matched_by": self.matched_by}


def _device(nv: Any, handle: Any, matched_by: str, mig: bool = False) -> NvmlDevice:
    parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle) if mig else handle
    pci = nv.nvmlDeviceGetPciInfo(parent)
    index = None if mig else int(nv.nvmlDeviceGetIndex(handle))
    return NvmlDevice(handle=handle, parent=parent, index=index, uuid=_text(nv.nvmlDeviceGetUUID(handle)),
                      pci_bus_id=norm_bus_id(_text(getattr(pci, "busId", ""))), name=_text(nv.nvmlDeviceGetName(parent)),
                      mig=mig, matched_by=matched_by)


def uuid_hex(uuid: str | bytes | None) -> str:
    """'MIG-4f1e...-...' / 'GPU-...' / a bare UUID -> its 32 hex digits, lower case ("" if none)."""
    u = _text(uuid or "").strip().lower()
    for prefix in ("mig-", "gpu-"):
        u = u.removeprefix(prefix)
    return u.replace("-", "")


def _mig_enabled(nv: Any, h: Any) -> bool:
    try:
        return int(nv.nvmlDeviceGetMigMode(h)[0]) == NVML_DEVICE_MIG_ENABLE
    except Exception as exc:
        if _code(exc) in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND):   # before Ampere / R450
            return False
        raise


def _mig_instance(nv: Any, parent: Any, want: str, bus: str) -> NvmlDevice:
    """The MIG device of `parent` whose UUID is `want` (hex digits; "" when unknown)."""
    seen = []
    for i in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(parent))):
        try:
            h = nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
        except Exception as exc:
            if _code(exc) == NVML_ERROR_NOT_FOUND:   # no instance at this index (or not ours to open)
                continue
            raise
        seen.append(_text(nv.nvmlDeviceGetUUID(h)))
        if want and uuid_hex(seen[-1]) == want:
            return _device(nv, h, "mig_uuid", mig=True)
    raise LookupError(f"GPU {bus} is in MIG mode and none of its MIG devices {seen} is this process's "
                      f"({'UUID ' + want if want else 'its UUID unknown'}): set CUDA_VISIBLE_DEVICES=MIG-<uuid>")


def _wanted_mig(environ: Mapping[str, str], ordinal: int, cuda_uuid: str | None) -> str:
    """The MIG instance this CUDA device is, as hex digits: the CUDA device's own UUID, else (no
    CUDA_VISIBLE_DEVICES) the container runtime's NVIDIA_VISIBLE_DEVICES entry; "" when neither says."""
    if cuda_uuid:
        return uuid_hex(cuda_uuid)
    if "CUDA_VISIBLE_DEVICES" in environ:
        return ""
    nvd = visible_entry({"CUDA_VISIBLE_DEVICES": environ.get("NVIDIA_VISIBLE_DEVICES", "")}, ordinal)
    return uuid_hex(nvd) if nvd and nvd.startswith("MIG-") else ""


def resolve(nv: Any, environ: Mapping[str, str], cuda_bus_id: str | None,
            cuda_uuid: str | None = None) -> NvmlDevice:
    """The NVML device behind this process's CUDA device (see the module docstring for the order).
    `cuda_uuid` is the CUDA device's own UUID (cuDeviceGetUuid_v2: a MIG instance's under MIG)."""
    ordinal = cuda_ordinal(environ)
    entry = visible_entry(environ, ordinal)
    if entry and entry.startswith("MIG-"):
        return _device(nv, nv.nvmlDeviceGetHandleByUUID(entry.encode()), "mig_uuid", mig=True)
    if cuda_bus_id:
        want = norm_bus_id(cuda_bus_id)
        for i in range(int(nv.nvmlDeviceGetCount())):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            if norm_bus_id(_text(nv.nvmlDeviceGetPciInfo(h).busId)) == want:
                if _mig_enabled(nv, h):
                    return _mig_instance(nv, h, _wanted_mig(environ, ordinal, cuda_uuid), want)
                return _device(nv, h, "pci_bus_id")
    if entry and entry.startswith("GPU-"):
        return _device(nv, nv.nvmlDeviceGetHandleByUUID(entry.encode()), "uuid")
    index = int(entry) if entry and entry.isdigit() else ordinal
    sure = environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or int(nv.nvmlDeviceGetCount()) == 1
    return _device(nv, nv.nvmlDeviceGetHandleByIndex(index), "index" if sure else "index-assumed")


@dataclass
class Samples:
    """What the poller saw; reduced to the trial's fields by `Poller.stop`."""

    process_peak: int | None = None
    device_peak: int | None = None
    foreign: set[int] = field(default_factory=set)
    own_pid_seen: bool = False
    sm_clock: list[float] = field(default_factory=list)
    power_w: list[float] = field(default_factory=list)
    temperature: list[float] = field(default_factory=list)
    throttle: set[str] = field(default_factory=set)
    busy: list[tuple[float, float]] = field(default_factory=list)   # (perf_counter time, utilization.gpu %)
    errors: dict[str, str] = field(default_factory=dict)
    # with `timeline`: (perf_counter time, energy counter mJ, own processes' memory, device used) per sample
    timeline: list[tuple[float, float | None, int | None, int | None]] = field(default_factory=list)


class Poller:
    """Samples the resolved device from a thread between `start()` and `stop()`.

    `pids` (a callable, asked at every sample) widens "this process" to a set: a command trial's
    program and every process it started (paddle.distributed.launch ranks), whose memory on this GPU
    is summed per sample. `timeline` keeps every sample with its time, so a window known only
    afterwards (the hook's measured steps) gets its own energy and peak (trackers/energy_window.py).
    """

    def __init__(self, nv: Any, dev: NvmlDevice, pid: int | None = None, interval_s: float = POLL_S,
                 pids: Callable[[], Collection[int]] | None = None, timeline: bool = False) -> None:
        self.nv, self.dev, self.pid, self.interval_s = nv, dev, pid or os.getpid(), interval_s
        self._pids, self.timeline = pids, timeline
        self._ampbench = OwnProcesses()
        self._busy_from = float("-inf")   # busy samples after this perf_counter time are the window's
        self.s = Samples()
        self._energy0: float | None = None
        self._paused_mj = 0.0            # energy spent while paused (mid-run evaluations), subtracted
        self._pause_mj: float | None = None
        self._paused = threading.Event()
        self._procs_calls: tuple[str, ...] = PROCESS_CALLS
        self._procs_call = PROCESS_CALLS[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ampbench-nvml", daemon=True)

    def _call(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # recorded per NVML function; the other readings go on
            self._record(name, exc)
            return None

    def _record(self, name: str, exc: Exception) -> None:
        if _code(exc) == NVML_ERROR_NOT_SUPPORTED:
            self.s.errors.setdefault(NOT_SUPPORTED + name, f"not measured: this device does not offer it "
                                                           f"({type(exc).__name__}: {exc})"[:200])
        else:
            self.s.errors.setdefault(name, f"{type(exc).__name__}: {exc}"[:200])

    def start(self) -> Poller:
        self._procs_calls = process_calls(_driver_version(self.nv))
        self._procs_call = self._procs_calls[0]
        self._energy0 = self._energy_mj()
        self.sample()
        # NVML's utilization.gpu covers its past sample period (1/6 s to 1 s, [API]): the reading taken here
        # describes the time before the window, so busy_pct leaves it out
        self._busy_from = time.perf_counter()
        self._thread.start()
        return self

    def _energy_mj(self) -> float | None:
        v = self._call("nvmlDeviceGetTotalEnergyConsumption",
                       lambda: self.nv.nvmlDeviceGetTotalEnergyConsumption(self.dev.parent))
        return float(v) if v is not None else None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._paused.is_set():
                self.sample()

    def pause(self) -> None:
        """Stop sampling and counting energy (a mid-run evaluation is not part of the window)."""
        self._paused.set()
        self._pause_mj = self._energy_mj()

    def resume(self) -> None:
        e = self._energy_mj()
        if e is not None and self._pause_mj is not None:
            self._paused_mj += e - self._pause_mj
        self._pause_mj = None
        self._paused.clear()

    def _processes(self) -> Any:
        """The process listing through the first versioned symbol this driver exports (kept once found)."""
        nv, h = self.nv, self.dev.handle
        later = self._procs_calls[self._procs_calls.index(self._procs_call) + 1:]
        try:
            return getattr(nv, self._procs_call)(h)
        except Exception as exc:
            if _code(exc) == NVML_ERROR_FUNCTION_NOT_FOUND and later:
                self._procs_call = later[0]   # this driver lacks the symbol: the next older one, for good
                return self._processes()
            self._record(self._procs_call, exc)
            return None

    def _own_memory(self, procs: Any) -> int | None:
        """This process's memory (or the pid set's, summed) in NVML's list; other pids are foreign."""
        s = self.s
        own = set(self._pids()) if self._pids is not None else {self.pid}
        mine: int | None = None
        for proc in procs or []:
            if int(proc.pid) in own:
                s.own_pid_seen = True
                if proc.usedGpuMemory:
                    mine = (mine or 0) + int(proc.usedGpuMemory)
            elif int(proc.pid) not in self._ampbench:   # ampbench's own (the tune process, a probe) never foreign
                s.foreign.add(int(proc.pid))
        if mine:
            s.process_peak = max(s.process_peak or 0, mine)
        return mine

    def sample(self) -> None:
        nv, p, s = self.nv, self.dev.parent, self.s
        h = self.dev.handle
        mine = self._own_memory(self._processes())
        mem = self._call("nvmlDeviceGetMemoryInfo", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        if mem is not None:
            s.device_peak = max(s.device_peak or 0, int(mem.used))
        if self.timeline:
            used = int(mem.used) if mem is not None else None
            s.timeline.append((time.perf_counter(), self._energy_mj(), mine, used))
        for name, fn, out, scale in (
            ("nvmlDeviceGetClockInfo", lambda: nv.nvmlDeviceGetClockInfo(p, nv.NVML_CLOCK_SM), s.sm_clock, 1.0),
            ("nvmlDeviceGetPowerUsage", lambda: nv.nvmlDeviceGetPowerUsage(p), s.power_w, 1e-3),
            ("nvmlDeviceGetTemperature", lambda: nv.nvmlDeviceGetTemperature(p, nv.NVML_TEMPERATURE_GPU),
             s.temperature, 1.0),
        ):
            v = self._call(name, fn)
            if v is not None:
                out.append(float(v) * scale)
        if not self.dev.mig:   # [API] utilization rates are not supported on MIG-enabled GPUs
            util = self._call("nvmlDeviceGetUtilizationRates", lambda: nv.nvmlDeviceGetUtilizationRates(p))
            if util is not None:
                s.busy.append((time.perf_counter(), float(util.gpu)))
        bits = self._call("nvmlDeviceGetCurrentClocksThrottleReasons",
                          lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(p))
        if bits:
            s.throttle |= {n for b, n in THROTTLE_BITS.items() if int(bits) & b and n not in IGNORED_THROTTLE}

    def stop(self) -> dict[str, Any]:
        """Memory fields of the window (bytes or None), energy in joules, interference and errors."""
        self._stop.set()
        self._thread.join(timeout=2)
        self.sample()
        e1 = self._energy_mj()
        s = self.s
        used, source = (s.process_peak, PROCESS) if s.process_peak else (s.device_peak, DEVICE)
        if not s.own_pid_seen and used is not None:
            s.errors.setdefault(PID_NOTE, f"pid {self.pid} not in NVML's process list (PID namespace?): "
                                       "device-wide used memory recorded")
        energy = ((e1 - self._energy0 - self._paused_mj) / 1000.0
                  if e1 is not None and self._energy0 is not None else None)
        return {"processes_call": self._procs_call,
                "device_used_bytes": used, "device_used_source": source if used is not None else None,
                "energy_j": energy, "nvml_device": self.dev.describe(), "nvml_errors": dict(s.errors),
                "interference": self.interference_sample()}

    def busy_pct(self, window: tuple[float, float] | None = None,
                 gaps: Collection[tuple[float, float]] = ()) -> float | None:
        """NVML's utilization.gpu (the share of time a kernel ran, issue 35) averaged over the samples in the
        window (perf_counter times; None: every sample) outside the gaps (evaluations); None without any."""
        inside = [v for t, v in self.s.busy if t > self._busy_from and (window is None or window[0] <= t <= window[1])
                  and not any(a <= t <= b for a, b in gaps)]
        return statistics.fmean(inside) if inside else None

    def interference_sample(self) -> dict[str, Any]:
        """The GPU fields of results.models.Interference (SHARED_FIELDS.md)."""
        s = self.s
        foreign = sorted(s.foreign) if s.own_pid_seen or len(s.foreign) > 1 else []
        return {"foreign_processes": foreign,
                "sm_clock_mhz_median": statistics.median(s.sm_clock) if s.sm_clock else None,
                "sm_clock_max_mhz": max(s.sm_clock) if s.sm_clock else None,
                "throttle_reasons": sorted(s.throttle),
                "temperature_c_max": max(s.temperature) if s.temperature else None,
                "power_w_median": statistics.median(s.power_w) if s.power_w else None,
                "gpu_busy_pct": self.busy_pct()}


def interference_sample(window: dict[str, Any] | None) -> dict[str, Any]:
    """The Interference GPU fields of a finished window (empty when NVML did not run)."""
    return dict((window or {}).get("interference") or {})


class Session:
    """nvmlInit .. nvmlShutdown around one use, with the device of this process resolved."""

    def __init__(self, environ: Mapping[str, str] | None = None, cuda_bus_id: str | None = None,
                 cuda_uuid: str | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.cuda_bus_id, self.cuda_uuid = cuda_bus_id, cuda_uuid
        self.nv: Any = None
        self.dev: NvmlDevice | None = None
        self.error = ""

    def open(self) -> Session:
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self.nv = pynvml
        except Exception as exc:
            self.error = f"NVML unavailable: {type(exc).__name__}: {exc}"[:300]
            return self
        try:
            self.dev = resolve(self.nv, self.environ, self.cuda_bus_id, self.cuda_uuid)
        except Exception as exc:
            self.error = f"NVML device not resolved: {type(exc).__name__}: {exc}"[:300]
        return self

    def close(self) -> None:
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except Exception as exc:
                self.error = self.error or f"nvmlShutdown: {exc}"
            self.nv = None

    def static_info(self) -> dict[str, Any]:
        """Driver, power limit and clocks for Env (empty values where NVML cannot say)."""
        if self.nv is None:
            return {}
        nv, out = self.nv, {}

        def parent() -> Any:
            if self.dev is None:
                raise LookupError("no NVML device resolved")
            return self.dev.parent

        for key, fn in (("driver", lambda: _text(nv.nvmlSystemGetDriverVersion())),
                        ("power_limit_w", lambda: nv.nvmlDeviceGetPowerManagementLimit(parent()) / 1000.0),
                        ("sm_clock_max_mhz", lambda: int(nv.nvmlDeviceGetMaxClockInfo(parent(), nv.NVML_CLOCK_SM))),
                        ("mem_clock_max_mhz", lambda: int(nv.nvmlDeviceGetMaxClockInfo(parent(), nv.NVML_CLOCK_MEM))),
                        ("sm_clock_app_mhz", lambda: int(nv.nvmlDeviceGetApplicationsClock(parent(), nv.NVML_CLOCK_SM)))):
            try:
                out[key] = fn()
            except Exception:
                out[key] = None
        if self.dev is not None:
            out["nvml_device"] = self.dev.describe()
        return out
