"""A fake CUDA layer for CPU CI: the real nvidia-ml-py over a stub driver library with several GPUs
(UUIDs, MIG instances, other processes; tests/fake_nvml.py) and fakes for the `paddle.device.cuda`
calls ampbench makes, so the worker's GPU branches execute for real on a machine without a GPU.
Numbers here are test fixtures, not measurements, and never reach a result file outside tests."""

from __future__ import annotations

import os
import types
from dataclasses import dataclass, field
from typing import Any

from tests.fake_nvml import GIB, FakeGpu, four_gpus, make_pynvml, mig_uuid

__all__ = ["GIB", "FakeGpu", "four_gpus", "make_pynvml"]   # the NVML half lives in tests/fake_nvml.py


@dataclass
class FakeCuda:
    """The allocator side of paddle.device.cuda; counts the synchronisations (core._device_synchronize)."""

    allocated: int = 900 * 2**20
    reserved: int = 1200 * 2**20
    syncs: int = 0
    resets: int = 0

    def install(self, monkeypatch: Any, bus_id: str | None, gpus: list[FakeGpu]) -> None:
        """set_device, synchronize and get_device_name are Paddle's own over the GPU build's places
        (`_gpu_build_places`), on the GPUs CUDA_VISIBLE_DEVICES leaves visible."""
        import paddle

        from ampbench.trackers import cuda

        monkeypatch.setattr(cuda, "has_gpu", lambda: True)
        monkeypatch.setattr(cuda, "cuda_bus_id", lambda ordinal=None: bus_id)
        env = {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES",) if k in os.environ}
        _gpu_build_places(monkeypatch, Machine("fake", gpus, gpu_name=gpus[0].name, env=env),
                          types.SimpleNamespace(place=None, synced=[], cuda=self))
        c = paddle.device.cuda
        monkeypatch.setattr(c, "reset_max_memory_allocated", self._reset)
        monkeypatch.setattr(c, "reset_max_memory_reserved", self._reset)
        monkeypatch.setattr(c, "max_memory_allocated", lambda *a: self.allocated)
        monkeypatch.setattr(c, "max_memory_reserved", lambda *a: self.reserved)
        monkeypatch.setattr(paddle.version, "cuda", lambda: "12.3")
        monkeypatch.setattr(paddle.version, "cudnn", lambda: "9.0.0")

    burst: dict[str, int] = field(default_factory=dict)   # a short-lived peak since the last reset (an eval)

    def _reset(self, *a: Any) -> None:
        self.resets += 1
        self.burst.clear()

    def spike(self, nbytes: int) -> None:
        """Something (an evaluation) briefly held `nbytes`: the allocator's peaks show it until a reset."""
        self.burst = {"allocated": nbytes, "reserved": nbytes + 2**20}

    def peak(self, kind: str) -> int:
        base = self.allocated if kind == "allocated" else self.reserved
        return max(base, self.burst.get(kind, 0))


# ---------------------------------------------------------------------------------------------
# Simulated machines: a fake of Paddle's *GPU build*, not of ampbench's expectations.
#
# What follows Paddle's own code (docs/gpu.md cites file:line):
# - `paddle.is_compiled_with_cuda()` is True, so Paddle's real `F.linear` takes its CUDA-build
#   branch and runs `linear_v2` (the op stats record it);
# - AMP decisions are Paddle's GPU-place branches, run with Paddle's own functions: auto_cast /
#   amp_guard and decorate call `_is_gpu_float16_supported` / `_is_gpu_bfloat16_supported`
#   (which read the machine's compute capability and CUDA version) and turn themselves off with
#   Paddle's warning below 7.0 / 8.0; decorate's O2 parameter dtypes are decided by Paddle's
#   `set_excluded_layers` + `need_keep_fp32`; GradScaler is Paddle's class, constructed as on a
#   GPU place, so its bf16 switch-off in `scale()` and its host read in `update()` are real;
# - the op dtype evidence: CPU kernels stay float32, so the fake attributes each op call made
#   inside an enabled auto_cast as the GPU tracer would (O1: Paddle's white list for the dtype
#   plus the custom white list, minus the custom black list; O2: every op but the black list and
#   casts) from Paddle's own `amp_lists`. Approximation: the tracer's promote rules for ops on
#   neither list are not imitated (they count as float32);
# - library errors use the status names of cuBLAS/cuDNN as Paddle reports them;
# - NVML is the real nvidia-ml-py over a stub libnvidia-ml (tests/fake_nvml.py cites each driver's
#   behaviour; `Machine.driver` names the profile).
# Parameters stay float32 during trials (CPU has no fp16 kernels for training): `cast_params=True`
# makes decorate really cast, for assertions on a decorated model without training it.
# ---------------------------------------------------------------------------------------------

import contextlib
import sys
import warnings

# The GPU build's defaults (paddle/common/flags.cc, PHI_DEFINE_EXPORTED_bool(<name>, false, ...) for each:
# gemm_use_half_precision_compute_type "default=false", cudnn_deterministic, cudnn_exhaustive_search,
# cudnn_batchnorm_spatial_persistent); the CPU build does not define them.
GPU_ONLY_FLAGS = {"FLAGS_cudnn_batchnorm_spatial_persistent": False, "FLAGS_gemm_use_half_precision_compute_type": False,
                  "FLAGS_cudnn_deterministic": False, "FLAGS_cudnn_exhaustive_search": False}


@dataclass
class Machine:
    """One simulated GPU machine."""

    name: str
    gpus: list[FakeGpu]
    gpu_name: str = "NVIDIA A100-SXM4-80GB"
    cc: tuple[int, int] = (8, 0)
    total: int = 80 * GIB
    cuda: str = "12.3"
    env: dict[str, str] = field(default_factory=dict)   # CUDA_VISIBLE_DEVICES, FLAGS_selected_gpus ...
    nvml: bool = True             # libnvidia-ml present (a container with NVIDIA_DRIVER_CAPABILITIES=compute: no)
    nvidia_smi: bool = True
    host_pids: bool = False       # container without --pid=host: NVML lists host PIDs, never ours
    paddle_version: str = "3.3.1"
    reset_api: bool = True        # paddle.device.cuda.reset_max_memory_* (Paddle >= 3.0)
    driver: str = "current"       # tests/fake_nvml.py DRIVERS: what libnvidia-ml exports and answers
    alloc_fail_rows: int | None = None   # cuBLAS cannot allocate its workspace above this many rows
    gpu_names: list[str] | None = None   # per visible ordinal, where the GPUs differ (else gpu_name for each)

    def visible(self) -> list[str]:
        """CUDA's devices: CUDA_VISIBLE_DEVICES, else what the container runtime exposed
        (NVIDIA_VISIBLE_DEVICES, nvidia-container-toolkit), else every GPU."""
        cvd = self.env.get("CUDA_VISIBLE_DEVICES", self.env.get("NVIDIA_VISIBLE_DEVICES"))
        if cvd is None or cvd == "all":
            return [g.uuid for g in self.gpus]
        return [e.strip() for e in cvd.split(",") if e.strip()]

    def bus_of(self, ordinal: int) -> str:
        """What the CUDA driver API reports for a visible ordinal (CUDA_VISIBLE_DEVICES applied)."""
        g = self._gpu_of(ordinal)
        dom, _, rest = g.bus_id.partition(":")
        return f"{int(dom, 16):04x}:{rest}".lower()

    def uuid_of(self, ordinal: int) -> str:
        """cuDeviceGetUuid_v2's answer: the MIG instance's UUID under MIG, else the GPU's."""
        entry = self.visible()[ordinal]
        g = self._gpu_of(ordinal)
        return next((m.uuid for m in g.mig if m.uuid == entry), g.uuid)

    def _gpu_of(self, ordinal: int) -> FakeGpu:
        entry = self.visible()[ordinal]
        for g in self.gpus:
            if entry in (g.uuid, str(g.index)) or any(m.uuid == entry for m in g.mig):
                return g
        raise IndexError(ordinal)


def a100_gpus(n: int = 1, own_on: int = 0) -> list[FakeGpu]:
    gpus = [FakeGpu(index=i, uuid=f"GPU-a100000{i}-0000-0000-0000-000000000000", bus_id=f"00000000:{0x07 + i:02X}:00.0",
                    name="NVIDIA A100-SXM4-80GB", used=(2 + i) * GIB) for i in range(n)]
    gpus[own_on].pids[os.getpid()] = 5 * GIB
    return gpus


def machines() -> dict[str, Machine]:
    """The simulated machines every GPU-path test runs against."""
    v100 = a100_gpus()
    for g in v100:
        g.name = "Tesla V100-SXM2-32GB"
    p100 = a100_gpus()
    for g in p100:
        g.name = "Tesla P100-PCIE-16GB"
    container = a100_gpus()
    container[0].pids = {31337: 5 * GIB}          # a host PID: ours is not listed
    subset = four_gpus(own_on=2)                  # CUDA_VISIBLE_DEVICES=2,3: Paddle sees two GPUs, NVML four
    subset[3].mig = []                            # whole GPUs: no MIG mode on GPU 3 here
    mig = four_gpus(own_on=3)
    for inst in mig[3].mig:
        inst.pids[os.getpid()] = 3 * GIB + 1       # this process on the MIG instance holds more than it reserved
    mig_ctr = four_gpus(own_on=3)                  # a container given one MIG device: NVML opens only that one
    for inst in mig_ctr[3].mig:
        inst.pids[os.getpid()] = 3 * GIB + 1
    mig_ctr[3].mig[0].visible = False
    return {
        "a100": Machine("a100", a100_gpus()),
        "v100": Machine("v100", v100, gpu_name="Tesla V100-SXM2-32GB", cc=(7, 0), total=32 * GIB),
        "p100": Machine("p100", p100, gpu_name="Tesla P100-PCIE-16GB", cc=(6, 0), total=16 * GIB, driver="pre-volta"),
        "container": Machine("container", container, host_pids=True),
        "subset": Machine("subset", subset, env={"CUDA_VISIBLE_DEVICES": "2,3"}),
        "mig": Machine("mig", mig, env={"CUDA_VISIBLE_DEVICES": mig_uuid(3, 1)}),
        "mig-container": Machine("mig-container", mig_ctr, env={"NVIDIA_VISIBLE_DEVICES": mig_uuid(3, 1)}),
        "no-nvml": Machine("no-nvml", a100_gpus(), nvml=False, nvidia_smi=False),
        "paddle26": Machine("paddle26", a100_gpus(), paddle_version="2.6.2", reset_api=False, cuda="12.0"),
        "old-driver": Machine("old-driver", a100_gpus(), driver="r470"),
        "driver-535.98": Machine("driver-535.98", a100_gpus(), driver="535.98"),
        "driver-535.54": Machine("driver-535.54", a100_gpus(), driver="535.54"),
        "vgpu": Machine("vgpu", a100_gpus(), gpu_name="NVIDIA A100-40C", driver="vgpu"),
    }


class FakeLibCuda:
    """libcuda.so.1's driver-API calls ampbench makes (cuInit, cuDeviceGet, cuDeviceGetPCIBusId,
    cuDeviceGetUuid_v2: the MIG instance's UUID under MIG, CUDA driver API reference)."""

    def __init__(self, machine: Machine) -> None:
        self.m = machine
        self.calls: list[str] = []

    def cuInit(self, flags: int) -> int:
        self.calls.append("cuInit")
        return 0

    def cuDeviceGet(self, ref: Any, ordinal: Any) -> int:
        i = ordinal.value
        if i >= len(self.m.visible()):
            return 101   # CUDA_ERROR_INVALID_DEVICE
        ref._obj.value = i
        return 0

    def cuDeviceGetPCIBusId(self, buf: Any, n: Any, dev: Any) -> int:
        buf.value = self.m.bus_of(dev.value).encode()
        return 0

    def cuDeviceGetUuid_v2(self, raw: Any, dev: Any) -> int:
        raw.raw = bytes.fromhex(self.m.uuid_of(dev.value).split("-", 1)[1].replace("-", ""))
        return 0


class FakeAmp:
    """Paddle's GPU-place AMP decisions over a CPU build (see the block comment above)."""

    def __init__(self, cast_params: bool = False) -> None:
        self.cast_params = cast_params
        self.frames: list[dict[str, Any]] = []
        self.adjust: dict[str, dict[str, int]] = {}
        self.collecting = False
        self.decorated: dict[str, str] = {}   # parameter name -> dtype decorate gave it (or would have)
        self.master_grad = False
        self.warnings: list[str] = []

    # -- auto_cast ---------------------------------------------------------------------------
    def install(self, monkeypatch: Any) -> None:
        import paddle
        from paddle.base import core

        ac = sys.modules["paddle.amp.auto_cast"]
        gs = sys.modules["paddle.amp.grad_scaler"]
        self._real_auto_cast = paddle.amp.auto_cast
        self._real_stats = core.get_low_precision_op_list
        self._real_enable = paddle.amp.debugging.enable_operator_stats_collection
        self._real_disable = paddle.amp.debugging.disable_operator_stats_collection
        self._ac = ac
        monkeypatch.setattr(paddle.amp, "auto_cast", self.auto_cast)
        monkeypatch.setattr(paddle.amp, "amp_guard", self.auto_cast)
        monkeypatch.setattr(paddle.amp, "decorate", self.decorate)
        monkeypatch.setattr(core, "get_low_precision_op_list", self.op_list)
        monkeypatch.setattr(paddle.amp.debugging, "enable_operator_stats_collection", self.enable_stats)
        monkeypatch.setattr(paddle.amp.debugging, "disable_operator_stats_collection", self.disable_stats)
        real_tracer = gs._dygraph_tracer
        monkeypatch.setattr(gs, "_dygraph_tracer", lambda: _GpuPlaceTracer(real_tracer()))

    def _supported(self, dtype: str) -> bool:
        return bool(self._ac._is_gpu_float16_supported() if dtype == "float16" else self._ac._is_gpu_bfloat16_supported())

    def _gate(self, enable: bool, dtype: str) -> bool:
        """amp_guard's GPU-place branch: below the capability Paddle warns and turns AMP off."""
        import paddle

        if enable and not self._supported(dtype):
            cc = paddle.device.cuda.get_device_capability()
            msg = (f"For {dtype}, amp only support NVIDIA GPU with Compute Capability "
                   f"{'7.0' if dtype == 'float16' else '8.0'} or higher, current GPU is: "
                   f"{paddle.device.cuda.get_device_name()}, with Compute Capability: {cc[0]}.{cc[1]}.")
            self.warnings.append(msg)
            warnings.warn(msg, stacklevel=3)
            return False
        return enable

    @contextlib.contextmanager
    def auto_cast(self, enable: bool = True, custom_white_list: Any = None, custom_black_list: Any = None,
                  level: str = "O1", dtype: str = "float16", use_promote: bool = True) -> Any:
        from paddle.amp import amp_lists

        on = self._gate(enable, dtype) and level in ("O1", "O2")
        white = set(amp_lists.white_list()[dtype]["O1"]) | set(custom_white_list or [])
        black = set(amp_lists.black_list()[dtype][level if level in ("O1", "O2") else "O1"]) | set(custom_black_list or [])
        white -= set(custom_black_list or [])
        black -= set(custom_white_list or [])
        frame = {"on": on, "level": level, "dtype": dtype, "white": white, "black": black,
                 "start": self._counts(), "children": {}}
        self.frames.append(frame)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="amp_guard can only be enabled on CUDAPlace")
                with self._real_auto_cast(enable=on, custom_white_list=custom_white_list,
                                          custom_black_list=custom_black_list, level=level, dtype=dtype,
                                          use_promote=use_promote):
                    yield
        finally:
            self.frames.pop()
            end = self._counts()
            total = _sub(end, frame["start"])
            own = _sub(total, frame["children"])
            if on:
                for op, c in own.items():
                    n = c.get("float32", 0)
                    low = (op in white) if level == "O1" else (op not in black and op not in ("cast", "cast_"))
                    if n and low:
                        a = self.adjust.setdefault(op, {})
                        a["float32"] = a.get("float32", 0) - n
                        a[dtype] = a.get(dtype, 0) + n
            if self.frames:
                parent = self.frames[-1]["children"]
                for op, c in total.items():
                    p = parent.setdefault(op, {})
                    for k, v in c.items():
                        p[k] = p.get(k, 0) + v

    # -- op stats ----------------------------------------------------------------------------
    def _counts(self) -> dict[str, dict[str, int]]:
        if not self.collecting:
            return {}
        return _parse(dict(self._real_stats()))

    def op_list(self) -> dict[str, str]:
        out = {}
        for op, c in _parse(dict(self._real_stats())).items():
            a = self.adjust.get(op, {})
            v = [c[k] + a.get(k, 0) for k in ("float16", "bfloat16", "float32", "other")]
            out[op] = ",".join(str(x) for x in v)
        return out

    def enable_stats(self) -> None:
        self.adjust.clear()
        self.collecting = True
        self._real_enable()

    def disable_stats(self) -> None:
        self.collecting = False
        self._real_disable()

    # -- decorate ----------------------------------------------------------------------------
    def decorate(self, models: Any, optimizers: Any = None, level: str = "O1", dtype: str = "float16",
                 master_weight: Any = None, save_dtype: Any = None, master_grad: bool = False,
                 excluded_layers: Any = None) -> Any:
        ac = self._ac
        if level == "O1" or not self._supported(dtype):   # decorate's GPU-place branch: unchanged, silently
            return models if optimizers is None else (models, optimizers)
        ms = models if isinstance(models, list) else [models]
        if self.cast_params:   # Paddle's own amp_initialize: excluded layers, norms kept, the rest cast
            ac.amp_initialize(models=ms, dtype=dtype, excluded_layers=excluded_layers)
        else:                  # the same decision, parameters left float32 (CPU kernels must train)
            ac.set_excluded_layers(ms, excluded_layers)
        for m in ms:
            for lname, layer in m.named_sublayers(include_self=True):
                keep = ac.need_keep_fp32(layer, dtype)
                for pname, param in layer.named_parameters(include_sublayers=False):
                    key = f"{lname}.{pname}" if lname else pname
                    self.decorated[key] = str(param.dtype).replace("paddle.", "") if self.cast_params else (
                        "float32" if keep else dtype)
        if optimizers is not None:
            for opt in optimizers if isinstance(optimizers, list) else [optimizers]:
                ac._set_multi_precision(opt, master_weight is not False)
        self.master_grad = bool(master_grad)
        return models if optimizers is None else (models, optimizers)


class _GpuPlaceTracer:
    """The dygraph tracer as GradScaler's constructor sees it on a GPU: its place is a CUDAPlace."""

    def __init__(self, tracer: Any) -> None:
        self._t = tracer

    def __getattr__(self, k: str) -> Any:
        return getattr(self._t, k)

    @property
    def _expected_place(self) -> Any:
        return types.SimpleNamespace(is_gpu_place=lambda: True, is_xpu_place=lambda: False,
                                     is_custom_place=lambda: False, get_device_id=lambda: 0)


def _parse(raw: dict[str, str]) -> dict[str, dict[str, int]]:
    """Paddle's {op: "fp16,bf16,fp32,other"} call counts."""
    out = {}
    for op, text in raw.items():
        v = [int(x) for x in str(text).split(",")] + [0, 0, 0, 0]
        out[op] = dict(zip(("float16", "bfloat16", "float32", "other"), v[:4], strict=True))
    return out


def _sub(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out = {}
    for op, c in a.items():
        d = {k: v - b.get(op, {}).get(k, 0) for k, v in c.items()}
        if any(d.values()):
            out[op] = d
    return out


@dataclass
class Installed:
    machine: Machine
    nv: Any
    cuda: FakeCuda
    amp: FakeAmp
    libcuda: FakeLibCuda
    devices_asked: list[Any] = field(default_factory=list)   # device arguments of the allocator queries
    set_device: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)
    place: Any = None                                     # the expected place as the GPU build would hold it
    synced: list[int] = field(default_factory=list)       # device ids core._device_synchronize was given


def install_machine(monkeypatch: Any, machine: Machine, tmp_path: Any, cast_params: bool = False) -> Installed:
    """Make this process look like `machine` running Paddle's GPU build (tests only)."""
    import ctypes
    import subprocess

    import paddle

    from ampbench.trackers import cuda as tcuda

    for k in ("FLAGS_selected_gpus", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(k, raising=False)
    for k, v in machine.env.items():
        monkeypatch.setenv(k, v)
    if machine.host_pids:
        for g in machine.gpus:
            g.pids.pop(os.getpid(), None)
    nv = make_pynvml(machine.gpus, machine.driver, library=machine.nvml)
    monkeypatch.setitem(sys.modules, "pynvml", nv)

    lib = FakeLibCuda(machine)
    real_cdll = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: lib if name == "libcuda.so.1" else real_cdll(name, *a, **k))
    real_run = subprocess.run

    def run(cmd: Any, *a: Any, **k: Any) -> Any:
        if isinstance(cmd, list) and cmd and cmd[0] == "nvidia-smi":
            if not machine.nvidia_smi:
                raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")
            return types.SimpleNamespace(returncode=0, stdout="\n".join(
                f"GPU {g.index}: {g.name} (UUID: {g.uuid})" for g in machine.gpus), stderr="")
        return real_run(cmd, *a, **k)

    monkeypatch.setattr(subprocess, "run", run)
    nodes = tmp_path / "dev"
    nodes.mkdir(exist_ok=True)
    for g in machine.gpus:
        (nodes / f"nvidia{g.index}").write_text("")
    monkeypatch.setattr(tcuda, "DEVICE_NODES", str(nodes / "nvidia[0-9]*"), raising=False)
    monkeypatch.setattr(tcuda, "PROC_GPUS", str(tmp_path / "no-proc" / "*"), raising=False)

    fc = FakeCuda()
    inst = Installed(machine=machine, nv=nv, cuda=fc, amp=FakeAmp(cast_params=cast_params), libcuda=lib)
    real_set_device = paddle.set_device   # Paddle's own, run over the GPU build's places (`_gpu_build_places`)

    def set_device(d: str) -> Any:
        inst.set_device.append(d)
        return real_set_device(d)

    monkeypatch.setattr(paddle, "is_compiled_with_cuda", lambda: True)
    from paddle.base import core as _core  # paddle.seed then seeds one CUDA generator per device: none here

    monkeypatch.setattr(_core, "get_cuda_device_count", lambda: 0, raising=False)
    _gpu_build_places(monkeypatch, machine, inst)
    monkeypatch.setattr(paddle, "set_device", set_device)
    monkeypatch.setattr(paddle, "__version__", machine.paddle_version)
    c = paddle.device.cuda
    monkeypatch.setattr(c, "device_count", lambda: len(machine.visible()))
    if machine.reset_api:
        monkeypatch.setattr(c, "reset_max_memory_allocated", lambda *a: (inst.devices_asked.append(a), fc._reset()))
        monkeypatch.setattr(c, "reset_max_memory_reserved", lambda *a: (inst.devices_asked.append(a), fc._reset()))
    else:
        monkeypatch.delattr(c, "reset_max_memory_allocated", raising=False)
        monkeypatch.delattr(c, "reset_max_memory_reserved", raising=False)
    monkeypatch.setattr(c, "max_memory_allocated", lambda *a: (inst.devices_asked.append(a), fc.peak("allocated"))[1])
    monkeypatch.setattr(c, "max_memory_reserved", lambda *a: (inst.devices_asked.append(a), fc.peak("reserved"))[1])
    monkeypatch.setattr(paddle.version, "cuda", lambda: machine.cuda)
    monkeypatch.setattr(paddle.version, "cudnn", lambda: "9.0.0")

    real_set, real_get = paddle.set_flags, paddle.get_flags

    def set_flags(d: dict[str, Any]) -> None:
        rest = {}
        for k, v in d.items():
            if k in GPU_ONLY_FLAGS:
                inst.flags[k] = type(GPU_ONLY_FLAGS[k])(v)
            else:
                rest[k] = v
        if rest:
            real_set(rest)

    def get_flags(names: Any) -> dict[str, Any]:
        names = [names] if isinstance(names, str) else list(names)
        out = {k: inst.flags.get(k, GPU_ONLY_FLAGS[k]) for k in names if k in GPU_ONLY_FLAGS}
        rest = [k for k in names if k not in GPU_ONLY_FLAGS]
        if rest:
            out.update(real_get(rest))
        return out

    monkeypatch.setattr(paddle, "set_flags", set_flags)
    monkeypatch.setattr(paddle, "get_flags", get_flags)
    if machine.alloc_fail_rows is not None:
        from paddle import _C_ops

        real_linear = _C_ops.linear_v2

        def linear_v2(x: Any, w: Any, b: Any, *a: Any) -> Any:
            if x.shape[0] > machine.alloc_fail_rows:
                raise OSError("(External) CUBLAS error(3). \n  [Hint: 'CUBLAS_STATUS_ALLOC_FAILED'. Resource "
                              "allocation failed inside the cuBLAS library. ] (at ../paddle/phi/kernels/funcs/"
                              "blas/blas_impl.cu.h)")
            return real_linear(x, w, b, *a)

        monkeypatch.setattr(_C_ops, "linear_v2", linear_v2)
    dbg = sys.modules["paddle.amp.debugging"]   # TensorCheckerConfig asks core.is_compiled_with_cuda()
    monkeypatch.setattr(dbg, "core", _CudaBuildCore(dbg.core))
    inst.amp.install(monkeypatch)
    return inst


class _CudaBuildCore:
    """paddle.base.core as a CUDA build answers `is_compiled_with_cuda` (everything else delegated)."""

    def __init__(self, core: Any) -> None:
        self._core = core

    def __getattr__(self, k: str) -> Any:
        return getattr(self._core, k)

    @staticmethod
    def is_compiled_with_cuda() -> bool:
        return True


# ---------------------------------------------------------------------------------------------
# Places, device names and synchronisation: Paddle's own Python (paddle/device/__init__.py and
# paddle/device/cuda/__init__.py of paddle 3.3.1, the installed wheel's files) runs unchanged; only
# what the CPU build lacks is stood in for, as the GPU build provides it:
# - `core.CUDAPlace(n)`: the CPU build refuses it (paddle/fluid/pybind/place.cc:443-451, "Cannot use
#   GPU because you have installed CPU version PaddlePaddle"); `CudaPlace` holds the id;
# - the expected place: base/framework.py:815-827 `_current_expected_place_` starts a CUDA build
#   at CUDAPlace(_cuda_ids()[0]) (FLAGS_selected_gpus' first id, else 0, :898-904) and
#   set_device (device/__init__.py:595-624) stores `_convert_to_place(device)` with
#   `framework._set_expected_place`; here the store is kept for Paddle's Python and the kernels
#   are put on CPU (the only place this build can run them);
# - `core._device_synchronize(id)`: what device/__init__.py:1826-1827 `synchronize` calls for a
#   CUDAPlace; for any other place that function raises TypeError (:1834-1839), Paddle's own code;
# - `core.get_device_properties(id)`: device/cuda/__init__.py:596-667 passes the id (-1 for None:
#   the current device, the expected place's here); `get_device_name` (:670) and
#   `get_device_capability` (:699) read name/major/minor from it. An id outside the visible GPUs
#   raises the C++ enforce's InvalidArgument (paddle/phi/backends/gpu/cuda/cuda_info.cc,
#   PADDLE_ENFORCE_LT(id, GetGPUDeviceCount(), "Device id must be less than GPU count, ...")).
# ---------------------------------------------------------------------------------------------


class CudaPlace:
    """A CUDAPlace as the GPU build constructs it (see the block comment above)."""

    def __init__(self, dev_id: int) -> None:
        self._id = int(dev_id)

    def get_device_id(self) -> int:
        return self._id

    def is_gpu_place(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CudaPlace) and other._id == self._id

    def __hash__(self) -> int:
        return hash(("gpu", self._id))

    def __repr__(self) -> str:
        return f"Place(gpu:{self._id})"


class _Over:
    """A module as the GPU build's would answer: the names given here, everything else its own."""

    def __init__(self, base: Any, **answers: Any) -> None:
        self._base = base
        self.__dict__.update(answers)

    def __getattr__(self, k: str) -> Any:
        return getattr(self._base, k)


def _gpu_build_places(monkeypatch: Any, machine: Machine, inst: Installed) -> None:
    import paddle
    import paddle.framework as pframework
    from paddle.base import core, framework

    dev_mod, cuda_mod = sys.modules["paddle.device"], sys.modules["paddle.device.cuda"]
    count = len(machine.visible())
    selected = [int(x) for x in os.environ.get("FLAGS_selected_gpus", "").split(",") if x.strip()]
    inst.place = CudaPlace((selected or [0])[0]) if count else core.CPUPlace()

    def expected() -> Any:
        return inst.place

    def set_expected(place: Any) -> None:
        inst.place = place
        framework._set_expected_place(core.CPUPlace())

    def check(i: int) -> int:
        if not 0 <= i < count:
            raise ValueError(f"(InvalidArgument) Device id must be less than GPU count, but received id is: {i}. "
                             f"GPU count is: {count}.")
        return i

    def properties(device_id: int) -> Any:
        i = check(inst.place.get_device_id() if device_id == -1 and isinstance(inst.place, CudaPlace) else device_id)
        name = machine.gpu_names[i] if machine.gpu_names else machine.gpu_name
        return types.SimpleNamespace(name=name, major=machine.cc[0], minor=machine.cc[1], total_memory=machine.total,
                                     multi_processor_count=108)

    def device_synchronize(i: int) -> None:
        inst.synced.append(check(i))
        inst.cuda.syncs += 1

    gpu_core = _Over(core, is_compiled_with_cuda=lambda: True, CUDAPlace=CudaPlace, get_device_properties=properties,
                     _device_synchronize=device_synchronize, get_cuda_current_device_id=lambda: expected().get_device_id())
    gpu_framework = _Over(framework, _current_expected_place_=expected, _set_expected_place=set_expected)
    # set_device("gpu") asks ParallelEnv().dev_id, which a CUDA build sets from FLAGS_selected_gpus' first id
    # (default "0"; distributed/parallel.py:759-761) and a CPU build leaves unset
    env = types.SimpleNamespace(dev_id=int((os.environ.get("FLAGS_selected_gpus") or "0").split(",")[0]))
    gpu_paddle = _Over(paddle, framework=_Over(pframework, _current_expected_place_=expected), CUDAPlace=CudaPlace,
                       is_compiled_with_cuda=lambda: True,
                       distributed=_Over(paddle.distributed, ParallelEnv=lambda: env))
    # the names Paddle's functions read at call time: their globals (paddle.device is a module subclass
    # whose functions keep the original namespace, so that dict is the one to answer from)
    for space, names in ((dev_mod.synchronize.__globals__, {"core": gpu_core, "framework": gpu_framework,
                                                            "paddle": gpu_paddle}),
                         (cuda_mod.get_device_properties.__globals__, {"core": gpu_core})):
        for name, value in names.items():
            monkeypatch.setitem(space, name, value)
