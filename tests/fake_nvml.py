"""The NVIDIA driver's NVML library as a stub, under the REAL nvidia-ml-py (tests only).

`make_pynvml(gpus, driver)` returns a fresh copy of the installed `pynvml` module (nvidia-ml-py,
pinned in the `test` extra, the `gpu` extra's major version) whose `CDLL("libnvidia-ml.so.1")`
returns a `StubNvmlLib` instead of the driver's library. Everything above the C symbols is
NVIDIA's own Python: the versioned symbol each wrapper asks for, `throwOnVersionMismatch`, the
size-then-fill protocol of the process listing, the ctypes structures, the error classes. So a
fake driver that lacks a symbol fails exactly as a real one does.

Each stubbed behaviour names its source:
  [API]   NVML API reference (docs.nvidia.com/deploy/nvml-api, the comments of nvml.h)
  [H<ver>] nvml.h as shipped with that driver (NVIDIA/nvidia-settings history of src/nvml.h, as
          summarised in nvitop PR #79 and #89: 510.39 added the _v3 process listings; 535.43 to
          535.86 filled them with nvmlProcessInfo_v3_t, 32 bytes with usedGpuCcProtectedMemory,
          without a version bump; 535.98 removed them again)
  [ML]    nvidia-ml-py 13's pynvml.py (the wrapper that calls the symbol)
  [VGPU]  NVIDIA vGPU Management SDK guide, "Monitoring from a guest VM": properties that do not
          apply to a vGPU are reported as not supported
  [CTK]   NVIDIA container toolkit: NVIDIA_VISIBLE_DEVICES=MIG-<uuid> exposes that MIG device only
  [PER]   NVIDIA "Driver Persistence" (docs.nvidia.com/deploy/driver-persistence): without persistence mode
          the driver tears the GPU state down when its last client exits and initialises it again when a
          client (nvmlInit included) opens it, which takes on the order of a second or more
Numbers here are fixtures, never measurements, and never reach a result file outside tests.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
import sys
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

GIB = 2**30
# nvmlReturn_t [API]
SUCCESS, NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, INSUFFICIENT_SIZE = 0, 3, 4, 6, 7
DRIVER_NOT_LOADED, FUNCTION_NOT_FOUND, GPU_IS_LOST = 9, 13, 15
V3 = "nvmlDeviceGetComputeRunningProcesses_v3"
ENERGY = "nvmlDeviceGetTotalEnergyConsumption"


@dataclass
class FakeGpu:
    """One physical GPU (or, with `parent`, one MIG device) as the driver knows it."""

    index: int
    uuid: str
    bus_id: str                     # NVML's format: 00000000:3B:00.0
    name: str = "Fake A100-SXM4-40GB"
    used: int = 3 * GIB             # memory held beside the listed processes' (driver, other contexts)
    pids: dict[int, int] = field(default_factory=dict)   # pid -> usedGpuMemory (PIDs as the driver sees them)
    mig: list[FakeGpu] = field(default_factory=list)
    parent: FakeGpu | None = None
    energy_mj: float = 1_000_000.0  # the counter at `t0`; it grows at `power_w` with real time
    power_w: float = 250.0
    busy_pct: int = 35              # utilization.gpu the driver reports (a fixture) [API]
    visible: bool = True            # a MIG device this container may open [CTK]
    t0: float = field(default_factory=time.monotonic)

    def energy_now(self) -> int:
        """[API] nvmlDeviceGetTotalEnergyConsumption: mJ since the driver was loaded, monotonic."""
        return int(self.energy_mj + self.power_w * (time.monotonic() - self.t0) * 1000.0)


@dataclass(frozen=True)
class Driver:
    """What one driver's libnvidia-ml exports and how it answers."""

    version: str = "580.95.05"
    missing: frozenset[str] = frozenset()        # symbols this library does not export
    process_record: int = 24                     # bytes per record _v3 writes (32 on 535.43-535.86) [H535.43]
    not_supported: frozenset[str] = frozenset()  # symbols answering NVML_ERROR_NOT_SUPPORTED for every device
    errors: tuple[tuple[str, int], ...] = ()     # (symbol, return code) for every call of the symbol
    init_error: int = SUCCESS                    # what nvmlInitWithFlags returns
    virtualization: int = 0                      # NVML_GPU_VIRTUALIZATION_MODE_* [API]
    privileged: bool = False                     # root: aggregate queries on a MIG-enabled GPU allowed [API]
    init_delay_s: float = 0.0                    # nvmlInitWithFlags initialising the driver first [PER]


# The driver profiles the GPU-path tests run against (docs/gpu.md, "Supported matrix").
DRIVERS = {
    "current": Driver(),                                                  # R580: _v3 with the v2 record [H580]
    "r470": Driver("470.256.02", missing=frozenset({V3})),                # before 510.39: no _v3 [H510]
    "535.54": Driver("535.54.03", process_record=32),                     # _v3 writes the 32-byte record [H535.43]
    "535.98": Driver("535.98", missing=frozenset({V3})),                  # _v3 removed again [H535.98]
    "pre-volta": Driver(not_supported=frozenset({ENERGY})),               # [API] energy: Volta or newer
    "vgpu": Driver("580.95.05", virtualization=2,                         # NVML_GPU_VIRTUALIZATION_MODE_VGPU
                   not_supported=frozenset({ENERGY, "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature",
                                            "nvmlDeviceGetPowerManagementLimit"})),   # [VGPU]
}


def _out(arg: Any) -> Any:
    """The ctypes object behind an output argument (pynvml passes byref(x))."""
    return getattr(arg, "_obj", arg)


def _addr(handle: Any) -> int:
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)


class StubNvmlLib:
    """libnvidia-ml.so.1's C symbols as pynvml calls them: ctypes arguments in, an nvmlReturn_t out.
    Handles are opaque pointers [API]; here their value is a key into `self.handles`."""

    def __init__(self, gpus: list[FakeGpu], driver: Driver) -> None:
        self.gpus, self.driver = gpus, driver
        self.calls: Counter[str] = Counter()
        self.handles: dict[int, FakeGpu] = {}
        for g in gpus:
            self.handles[0x1000 * (len(self.handles) + 1)] = g
            for m in g.mig:
                self.handles[0x1000 * (len(self.handles) + 1)] = m

    def __getattr__(self, name: str) -> Any:
        """[ML] _nvmlGetFunctionPointer: getattr on the library; AttributeError -> FunctionNotFound."""
        impl = getattr(type(self), "_" + name, None)
        if impl is None or name in self.driver.missing:
            raise AttributeError(name)

        def symbol(*args: Any) -> int:
            self.calls[name] += 1
            if name in self.driver.not_supported:
                return NOT_SUPPORTED
            for sym, code in self.driver.errors:
                if sym == name:
                    return code
            return int(impl(self, *args))
        return symbol

    # -- helpers --------------------------------------------------------------------------------
    def _gpu(self, handle: Any) -> FakeGpu:
        return self.handles[_addr(handle)]

    def _set_handle(self, out: Any, g: FakeGpu) -> int:
        key = next(k for k, v in self.handles.items() if v is g)
        ctypes.c_void_p.from_address(ctypes.addressof(_out(out))).value = key
        return SUCCESS

    @staticmethod
    def _string(buf: Any, text: str) -> int:
        buf.value = text.encode()
        return SUCCESS

    def _aggregate_denied(self, g: FakeGpu) -> bool:
        """[API] "In MIG mode, if device handle is provided, the API returns aggregate information,
        only if the caller has appropriate privileges" (memory info, process listings)."""
        return bool(g.mig) and not self.driver.privileged

    # -- the symbols ----------------------------------------------------------------------------
    def _nvmlInitWithFlags(self, flags: Any) -> int:
        time.sleep(self.driver.init_delay_s)
        return self.driver.init_error

    def _nvmlShutdown(self) -> int:
        return SUCCESS

    @staticmethod
    def _nvmlErrorString(code: Any) -> bytes:
        return b"Unknown Error"

    def _nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        return self._string(buf, self.driver.version)

    def _nvmlDeviceGetCount_v2(self, count: Any) -> int:
        _out(count).value = len(self.gpus)     # [API] physical GPUs; MIG devices are not counted
        return SUCCESS

    def _nvmlDeviceGetHandleByIndex_v2(self, index: Any, out: Any) -> int:
        i = index.value
        return self._set_handle(out, self.gpus[i]) if 0 <= i < len(self.gpus) else 2   # INVALID_ARGUMENT

    def _nvmlDeviceGetHandleByUUID(self, uuid: Any, out: Any) -> int:
        want = uuid.value.decode()
        for g in self.handles.values():
            if g.uuid == want and g.visible:
                return self._set_handle(out, g)
        return NOT_FOUND

    def _nvmlDeviceGetPciInfo_v3(self, handle: Any, info: Any) -> int:
        g = self._gpu(handle)
        bus = (g.parent or g).bus_id
        pci = _out(info)
        pci.busId = bus.encode()
        pci.busIdLegacy = bus.encode()[:16]
        dom, b, rest = bus.split(":")
        pci.domain, pci.bus, pci.device = int(dom, 16), int(b, 16), int(rest.split(".")[0], 16)
        return SUCCESS

    def _nvmlDeviceGetIndex(self, handle: Any, out: Any) -> int:
        _out(out).value = self._gpu(handle).index
        return SUCCESS

    def _nvmlDeviceGetUUID(self, handle: Any, buf: Any, size: Any) -> int:
        return self._string(buf, self._gpu(handle).uuid)

    def _nvmlDeviceGetName(self, handle: Any, buf: Any, size: Any) -> int:
        return self._string(buf, self._gpu(handle).name)

    def _nvmlDeviceGetMigMode(self, handle: Any, current: Any, pending: Any) -> int:
        g = self._gpu(handle)
        _out(current).value = _out(pending).value = 1 if g.mig else 0
        return SUCCESS

    def _nvmlDeviceGetMaxMigDeviceCount(self, handle: Any, count: Any) -> int:
        _out(count).value = 7 if self._gpu(handle).mig else 0    # A100: up to 7 instances
        return SUCCESS

    def _nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: Any, out: Any) -> int:
        mig = self._gpu(handle).mig
        i = index.value
        if i >= len(mig) or not mig[i].visible:
            return NOT_FOUND            # [API] "If no valid MIG device was found at index"
        return self._set_handle(out, mig[i])

    def _nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Any, out: Any) -> int:
        g = self._gpu(handle)
        return self._set_handle(out, g.parent) if g.parent else 2   # INVALID_ARGUMENT: not a MIG handle

    def _processes(self, handle: Any, count: Any, infos: Any, record: int) -> int:
        """[API] size-then-fill: *infoCount too small -> INSUFFICIENT_SIZE with the count needed."""
        g = self._gpu(handle)
        if self._aggregate_denied(g):
            return NO_PERMISSION
        n = _out(count)
        procs = list(g.pids.items())
        if infos is None or n.value < len(procs):
            n.value = len(procs)
            return INSUFFICIENT_SIZE if procs else SUCCESS
        gi = g.parent.mig.index(g) + 1 if g.parent else 0xFFFFFFFF   # NVML_VALUE_NOT_AVAILABLE off MIG
        raw = b"".join(struct.pack("<IxxxxQII", pid, mem, gi, 0) + b"\0" * (record - 24) for pid, mem in procs)
        ctypes.memmove(ctypes.addressof(infos), raw, len(raw))
        n.value = len(procs)
        return SUCCESS

    def _nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any, count: Any, infos: Any) -> int:
        return self._processes(handle, count, infos, self.driver.process_record)

    def _nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any, count: Any, infos: Any) -> int:
        return self._processes(handle, count, infos, 24)

    def _nvmlDeviceGetMemoryInfo(self, handle: Any, out: Any) -> int:
        g = self._gpu(handle)
        if self._aggregate_denied(g):
            return NO_PERMISSION
        m = _out(out)   # [API] used: "the sum of memory allocated by all active channels on the device"
        m.total, m.used = 40 * GIB, g.used + sum(g.pids.values())
        m.free = m.total - m.used
        return SUCCESS

    def _nvmlDeviceGetTotalEnergyConsumption(self, handle: Any, out: Any) -> int:
        _out(out).value = self._gpu(handle).energy_now()
        return SUCCESS

    def _nvmlDeviceGetClockInfo(self, handle: Any, kind: Any, out: Any) -> int:
        _out(out).value = 1410 if kind.value == 1 else 1215    # NVML_CLOCK_SM = 1
        return SUCCESS

    _nvmlDeviceGetMaxClockInfo = _nvmlDeviceGetClockInfo

    def _nvmlDeviceGetApplicationsClock(self, handle: Any, kind: Any, out: Any) -> int:
        _out(out).value = 1095
        return SUCCESS

    def _nvmlDeviceGetPowerUsage(self, handle: Any, out: Any) -> int:
        _out(out).value = int(self._gpu(handle).power_w * 1000)   # milliwatts [API]
        return SUCCESS

    def _nvmlDeviceGetPowerManagementLimit(self, handle: Any, out: Any) -> int:
        _out(out).value = 400_000
        return SUCCESS

    def _nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, out: Any) -> int:
        _out(out).value = 61
        return SUCCESS

    def _nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any, out: Any) -> int:
        _out(out).value = 0x1 | 0x4      # GPU idle (ignored) + SW power cap
        return SUCCESS

    def _nvmlDeviceGetUtilizationRates(self, handle: Any, out: Any) -> int:
        """[API] nvmlDeviceGetUtilizationRates fills nvmlUtilization_t {gpu, memory}: the percent of time over
        the past sample period (1/6 s to 1 s by product) during which one or more kernels ran, and during
        which device memory was read or written; "On MIG-enabled GPUs, querying device utilization rates is
        not currently supported" (NVML_ERROR_NOT_SUPPORTED)."""
        g = self._gpu(handle)
        if g.parent is not None or g.mig:
            return NOT_SUPPORTED
        util = _out(out)
        util.gpu, util.memory = g.busy_pct, g.busy_pct // 2
        return SUCCESS

    def _nvmlDeviceGetVirtualizationMode(self, handle: Any, out: Any) -> int:
        _out(out).value = self.driver.virtualization
        return SUCCESS


_SPEC = importlib.util.find_spec("pynvml")


def make_pynvml(gpus: list[FakeGpu], driver: Driver | str = "current", library: bool = True) -> types.ModuleType:
    """A fresh copy of the real nvidia-ml-py module whose driver library is a `StubNvmlLib` over
    `gpus` (`library=False`: no libnvidia-ml at all, as in a container without the utility
    capability). The stub is `module.nvmlLib` once nvmlInit ran, and `module.stub` always."""
    if _SPEC is None or _SPEC.loader is None:
        raise ModuleNotFoundError("nvidia-ml-py is not installed: pip install -e '.[test]'")
    drv = DRIVERS[driver] if isinstance(driver, str) else driver
    stub = StubNvmlLib(gpus, drv)
    nv = importlib.util.module_from_spec(_SPEC)
    saved = sys.modules.get("pynvml")
    sys.modules["pynvml"] = nv   # its error classes are generated onto sys.modules[__name__] [ML]
    try:
        _SPEC.loader.exec_module(nv)
    finally:
        if saved is not None:
            sys.modules["pynvml"] = saved
        else:
            del sys.modules["pynvml"]

    def cdll(name: str, *a: Any, **k: Any) -> Any:
        if name == "libnvidia-ml.so.1" and library:
            return stub
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    nv.CDLL = cdll   # [ML] _LoadNvmlLibrary: CDLL("libnvidia-ml.so.1") on Linux
    nv.stub = stub
    return nv


def four_gpus(own_on: int, foreign_pid: int = 999_999) -> list[FakeGpu]:
    """GPUs 0-3 in NVML (PCI) order; this process runs on `own_on`; a foreign process on every GPU;
    GPU 3 is split into two MIG instances."""
    gpus = [FakeGpu(index=i, uuid=f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd", bus_id=f"00000000:{0x1B + i:02X}:00.0",
                    used=(3 + i) * GIB, pids={foreign_pid: GIB}) for i in range(4)]
    gpus[own_on].pids[os.getpid()] = 2 * GIB + own_on
    g3 = gpus[3]
    g3.pids = {}     # a MIG-enabled GPU runs its processes in its instances
    g3.mig = [FakeGpu(index=-1, uuid=mig_uuid(3, k), bus_id=g3.bus_id, used=(1 + k) * GIB, parent=g3,
                      pids={os.getpid(): GIB + k} if own_on == 3 else {}) for k in range(2)]
    return gpus


def mig_uuid(gpu: int, k: int) -> str:
    """A MIG device UUID in the R470+ format, 'MIG-' and 32 hex digits [API]."""
    return f"MIG-{gpu:08x}-{k:04x}-4000-8000-00000000abcd"
