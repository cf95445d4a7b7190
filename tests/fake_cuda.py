"""A fake CUDA layer for CPU CI: a `pynvml` module with several GPUs (UUIDs, MIG instances, other
processes) and fakes for the `paddle.device.cuda` calls ampbench makes, so the worker's GPU
branches execute for real on a machine without a GPU. Numbers here are test fixtures, not
measurements, and never reach a result file outside tests."""

from __future__ import annotations

import os
import types
from dataclasses import dataclass, field
from typing import Any

GIB = 2**30


class NVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    index: int
    uuid: str
    bus_id: str                     # NVML's format: 00000000:3B:00.0
    name: str = "Fake A100-SXM4-40GB"
    used: int = 3 * GIB
    pids: dict[int, int] = field(default_factory=dict)   # pid -> usedGpuMemory
    mig: list[FakeGpu] = field(default_factory=list)
    parent: FakeGpu | None = None
    energy_mj: float = 1_000_000.0


def make_pynvml(gpus: list[FakeGpu], fail: set[str] | None = None, init_error: bool = False) -> types.ModuleType:
    """A module with the pynvml functions ampbench calls; names in `fail` raise NVMLError."""
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.calls = {"init": 0, "shutdown": 0}
    by_uuid = {g.uuid: g for g in gpus} | {m.uuid: m for g in gpus for m in g.mig}

    def fn(name: str, impl: Any) -> None:
        def wrapped(*a: Any) -> Any:
            if name in (fail or set()):
                raise NVMLError(f"{name}: Not Supported")
            return impl(*a)
        setattr(nv, name, wrapped)

    def init() -> None:
        if init_error:
            raise NVMLError("Driver Not Loaded")
        nv.calls["init"] += 1

    def energy(g: FakeGpu) -> float:
        g.energy_mj += 5_000.0       # 5 J per read: a window always spends some
        return g.energy_mj

    fn("nvmlInit", init)
    fn("nvmlShutdown", lambda: nv.calls.__setitem__("shutdown", nv.calls["shutdown"] + 1))
    fn("nvmlDeviceGetCount", lambda: len(gpus))
    fn("nvmlDeviceGetHandleByIndex", lambda i: gpus[i])
    fn("nvmlDeviceGetHandleByUUID", lambda u: by_uuid[u.decode() if isinstance(u, bytes) else u])
    fn("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", lambda h: h.parent)
    fn("nvmlDeviceGetPciInfo", lambda h: types.SimpleNamespace(busId=h.bus_id.encode()))
    fn("nvmlDeviceGetIndex", lambda h: h.index)
    fn("nvmlDeviceGetUUID", lambda h: h.uuid)
    fn("nvmlDeviceGetName", lambda h: h.name.encode())
    fn("nvmlDeviceGetComputeRunningProcesses",
       lambda h: [types.SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in h.pids.items()])
    fn("nvmlDeviceGetMemoryInfo", lambda h: types.SimpleNamespace(used=h.used, total=40 * GIB))
    fn("nvmlDeviceGetClockInfo", lambda h, kind: 1410 if kind == nv.NVML_CLOCK_SM else 1215)
    fn("nvmlDeviceGetPowerUsage", lambda h: 250_000)
    fn("nvmlDeviceGetTemperature", lambda h, kind: 61)
    fn("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: 0x1 | 0x4)   # idle (ignored) + sw power cap
    fn("nvmlDeviceGetTotalEnergyConsumption", energy)
    fn("nvmlSystemGetDriverVersion", lambda: b"550.54.15")
    fn("nvmlDeviceGetPowerManagementLimit", lambda h: 400_000)
    fn("nvmlDeviceGetMaxClockInfo", lambda h, kind: 1410 if kind == nv.NVML_CLOCK_SM else 1215)
    fn("nvmlDeviceGetApplicationsClock", lambda h, kind: 1095)
    return nv


def four_gpus(own_on: int, foreign_pid: int = 999_999) -> list[FakeGpu]:
    """GPUs 0-3 in NVML (PCI) order; this process runs on `own_on`; a foreign process on every GPU;
    GPU 3 is split into two MIG instances."""
    gpus = [FakeGpu(index=i, uuid=f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd", bus_id=f"00000000:{0x1B + i:02X}:00.0",
                    used=(3 + i) * GIB, pids={foreign_pid: GIB}) for i in range(4)]
    gpus[own_on].pids[os.getpid()] = 2 * GIB + own_on
    g3 = gpus[3]
    g3.mig = [FakeGpu(index=-1, uuid=f"MIG-3-{k}", bus_id=g3.bus_id, used=(1 + k) * GIB, parent=g3,
                      pids={os.getpid(): GIB + k} if own_on == 3 else {}) for k in range(2)]
    return gpus


@dataclass
class FakeCuda:
    """Fakes for paddle.device.cuda / paddle.device.synchronize; counts the synchronisations."""

    allocated: int = 900 * 2**20
    reserved: int = 1200 * 2**20
    syncs: int = 0
    resets: int = 0

    def install(self, monkeypatch: Any, bus_id: str | None) -> None:
        import paddle

        from ampbench.trackers import cuda

        real_set_device = paddle.set_device
        monkeypatch.setattr(cuda, "has_gpu", lambda: True)
        monkeypatch.setattr(cuda, "cuda_bus_id", lambda ordinal=None: bus_id)
        monkeypatch.setattr(paddle, "set_device", lambda d: real_set_device("cpu"))
        monkeypatch.setattr(paddle.device, "synchronize", self._sync)
        c = paddle.device.cuda
        monkeypatch.setattr(c, "reset_max_memory_allocated", self._reset)
        monkeypatch.setattr(c, "reset_max_memory_reserved", self._reset)
        monkeypatch.setattr(c, "max_memory_allocated", lambda *a: self.allocated)
        monkeypatch.setattr(c, "max_memory_reserved", lambda *a: self.reserved)
        monkeypatch.setattr(c, "get_device_name", lambda *a: "Fake A100-SXM4-40GB")
        monkeypatch.setattr(paddle.version, "cuda", lambda: "12.3")
        monkeypatch.setattr(paddle.version, "cudnn", lambda: "9.0.0")

    def _sync(self, *a: Any) -> None:
        self.syncs += 1

    def _reset(self, *a: Any) -> None:
        self.resets += 1
