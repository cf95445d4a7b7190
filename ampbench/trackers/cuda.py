"""The CUDA side of ampbench: the GPU-only Paddle calls (device, synchronisation, allocator, bus id).

On a CPU-only Paddle these functions return "no GPU" answers; the CUDA branches follow Paddle's
source (docs/gpu.md cites it) and run in CI only against a fake GPU layer (tests/fake_cuda.py):
no GPU is available to this project.
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from ampbench.trackers.nvml import cuda_ordinal, visible_entry

CUDA_DRIVER = "libcuda.so.1"   # the driver API: versioned, installed by the driver (also in containers)
DEVICE_NODES = "/dev/nvidia[0-9]*"
PROC_GPUS = "/proc/driver/nvidia/gpus/*"
NO_RESET_API = ("paddle {version} has no paddle.device.cuda.reset_max_memory_allocated/reserved (Paddle >= 3.0, "
                "PR #70032): the window's allocator peaks are not measured")


def has_gpu() -> bool:
    """True when Paddle is built with CUDA and sees at least one device."""
    return visible_gpu_count() > 0


def paddle_missing() -> str:
    """"" when Paddle imports in this interpreter, else why not (a GPU machine with only the driver, or a
    virtual environment without paddlepaddle-gpu): the device check and selftest say it in one line."""
    try:
        import paddle  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def visible_gpu_count() -> int:
    """The GPUs Paddle can use (honours CUDA_VISIBLE_DEVICES and MIG, unlike nvmlDeviceGetCount); 0
    without Paddle in this interpreter."""
    try:
        import paddle

        if not paddle.is_compiled_with_cuda():
            return 0
        return int(paddle.device.cuda.device_count())
    except Exception:  # a CUDA build on a machine without a driver raises here
        return 0


def visible_devices() -> list[str]:
    """The GPUs Paddle can use here (`visible_gpu_count`: CUDA_VISIBLE_DEVICES and MIG honoured), each
    as the CUDA_VISIBLE_DEVICES entry that gives a child process that device alone: this process's own
    entry (an index, a UUID, a MIG instance) or, with none set, the ordinal.  Without a GPU by the cheap
    test, [] and Paddle is not imported."""
    if not has_gpu_cheap():
        return []
    return [visible_entry(os.environ, i) or str(i) for i in range(visible_gpu_count())]


def has_gpu_cheap(environ: Mapping[str, str] | None = None) -> bool:
    """Profile selection before paddle is imported: nvidia-smi listing a GPU, else the driver's device
    nodes or /proc entries (a container with NVIDIA_DRIVER_CAPABILITIES=compute has no nvidia-smi)."""
    env = os.environ if environ is None else environ
    if env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1") or env.get("NVIDIA_VISIBLE_DEVICES") in ("void", "none"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False)
        if out.returncode == 0 and "GPU" in out.stdout:
            return True
    except (OSError, subprocess.SubprocessError):
        pass
    return bool(glob.glob(DEVICE_NODES) or glob.glob(PROC_GPUS))


def select_device() -> bool:
    """Train on the GPU when there is one: the CUDA ordinal FLAGS_selected_gpus names (set per rank by
    paddle.distributed.launch; 0 otherwise), named explicitly."""
    import paddle

    gpu = has_gpu()
    paddle.set_device(f"gpu:{cuda_ordinal(os.environ)}" if gpu else "cpu")
    return gpu


def synchronizer(gpu: bool) -> Callable[[], None] | None:
    """The call that waits for queued device work, chosen once (None on CPU, where kernels are synchronous)."""
    if not gpu:
        return None
    import paddle

    return paddle.device.synchronize


def synchronize() -> None:
    sync = synchronizer(has_gpu())
    if sync is not None:
        sync()


def cuda_bus_id(ordinal: int | None = None) -> str | None:
    """PCI bus id of a CUDA ordinal from the CUDA driver API (libcuda.so.1, versioned and installed with
    the driver; it honours CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, which NVML ignores). None when
    the driver library cannot be loaded or a call fails."""
    ordinal = cuda_ordinal(os.environ) if ordinal is None else ordinal
    try:
        lib = ctypes.CDLL(CUDA_DRIVER)
    except OSError:
        return None
    dev = ctypes.c_int(0)
    if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)) != 0:
        return None
    buf = ctypes.create_string_buffer(32)
    if lib.cuDeviceGetPCIBusId(buf, ctypes.c_int(32), dev) != 0:
        return None
    return buf.value.decode()


def cuda_uuid(ordinal: int | None = None) -> str | None:
    """The CUDA device's UUID ('xxxxxxxx-xxxx-...') from the driver API's cuDeviceGetUuid_v2, which
    under MIG names the instance (cuDeviceGetUuid names the whole GPU): how NVML finds a MIG
    instance when only NVIDIA_VISIBLE_DEVICES chose it. None when the driver does not answer."""
    ordinal = cuda_ordinal(os.environ) if ordinal is None else ordinal
    try:
        lib = ctypes.CDLL(CUDA_DRIVER)
        dev, raw = ctypes.c_int(0), ctypes.create_string_buffer(16)   # CUuuid: char bytes[16]
        if (lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)) != 0
                or lib.cuDeviceGetUuid_v2(raw, dev) != 0):
            return None
    except (OSError, AttributeError):   # no driver library, or one older than CUDA 11.4 (no _v2)
        return None
    h = raw.raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def compute_capability() -> tuple[int, int] | None:
    """(major, minor) of the current device, or None off a GPU."""
    import paddle

    try:
        major, minor = paddle.device.cuda.get_device_capability()
        return int(major), int(minor)
    except (RuntimeError, ValueError, OSError):   # no device behind a CUDA build
        return None


OLDEST_PADDLE = (2, 6)   # docs/gpu.md "Supported versions"


def unsupported_paddle(version: str | None = None) -> str:
    """Why this Paddle is refused on a GPU ("" when it is supported): below 2.6 the operator stats,
    op lists and GradScaler state ampbench reads are not what its evidence rests on."""
    v = version if version is not None else paddle_version()
    parts = [int(p) if p.isdigit() else 0 for p in v.split(".")[:2]] + [0, 0]
    if (parts[0], parts[1]) == (0, 0):  # a develop build reports 0.0.0: accepted, recorded in env
        return ""
    if (parts[0], parts[1]) < OLDEST_PADDLE:
        return (f"paddlepaddle-gpu {v} is not supported: ampbench needs Paddle >= 2.6 on a GPU "
                "(>= 3.0 for the allocator's window peaks); see docs/gpu.md")
    return ""


def paddle_version() -> str:
    import paddle

    return str(paddle.__version__)


def device_name() -> str:
    """The GPU's name as Paddle reports it ("" off a GPU)."""
    import paddle

    try:
        return str(paddle.device.cuda.get_device_name())
    except (RuntimeError, ValueError, OSError):   # no device behind a CUDA build
        return ""


def has_allocator_reset() -> bool:
    import paddle

    c = paddle.device.cuda
    return hasattr(c, "reset_max_memory_allocated") and hasattr(c, "reset_max_memory_reserved")


def allocator_reset(ordinal: int | None = None) -> str | None:
    """Start a window for the CUDA allocator's peaks on this process's device; the reason when the
    installed Paddle cannot (2.x has no reset API), else None."""
    import paddle

    if not has_allocator_reset():
        return NO_RESET_API.format(version=paddle.__version__)
    dev = cuda_ordinal(os.environ) if ordinal is None else ordinal
    paddle.device.cuda.reset_max_memory_allocated(dev)
    paddle.device.cuda.reset_max_memory_reserved(dev)
    return None


def allocator_peaks(ordinal: int | None = None) -> dict[str, Any]:
    """Peak allocated/reserved bytes since the last reset, of this process's device (named explicitly:
    a None device means the CUDA runtime's current device, which need not be FLAGS_selected_gpus')."""
    import paddle

    dev = cuda_ordinal(os.environ) if ordinal is None else ordinal
    return {"peak_allocated_bytes": int(paddle.device.cuda.max_memory_allocated(dev)),
            "peak_reserved_bytes": int(paddle.device.cuda.max_memory_reserved(dev))}
