"""The CUDA side of ampbench: the GPU-only Paddle calls (device, synchronisation, allocator, bus id).

On a CPU-only Paddle these functions return "no GPU" answers; the CUDA branches follow Paddle's
documented `paddle.device.cuda` API and run in CI only against a fake CUDA layer
(tests/test_fake_gpu.py): no GPU is available to this project.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Callable
from typing import Any

from ampbench.trackers.nvml import cuda_ordinal

CUDART_NAMES = ("libcudart.so", "libcudart.so.12", "libcudart.so.11.0")


def has_gpu() -> bool:
    """True when Paddle is built with CUDA and sees at least one device."""
    import paddle

    try:
        return bool(paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0)
    except Exception:  # a CUDA build on a machine without a driver raises here
        return False


def has_gpu_cheap() -> bool:
    """Profile selection before paddle is imported: nvidia-smi listing a GPU, or CUDA_VISIBLE_DEVICES."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        return out.returncode == 0 and "GPU" in out.stdout
    except (OSError, subprocess.SubprocessError):
        return False


def select_device() -> bool:
    """Train on the GPU when there is one (a launched rank gets its card from FLAGS_selected_gpus)."""
    import paddle

    gpu = has_gpu()
    paddle.set_device("gpu" if gpu else "cpu")
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
    """PCI bus id of a CUDA ordinal as the CUDA runtime reports it (honours CUDA_VISIBLE_DEVICES and
    CUDA_DEVICE_ORDER, which NVML ignores); None when libcudart cannot be loaded."""
    ordinal = cuda_ordinal(os.environ) if ordinal is None else ordinal
    for name in CUDART_NAMES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        buf = ctypes.create_string_buffer(32)
        if lib.cudaDeviceGetPCIBusId(buf, ctypes.c_int(32), ctypes.c_int(ordinal)) == 0:
            return buf.value.decode()
        return None
    return None


def allocator_reset() -> None:
    """Start a window for the CUDA allocator's peaks."""
    import paddle

    paddle.device.cuda.reset_max_memory_allocated()
    paddle.device.cuda.reset_max_memory_reserved()


def allocator_peaks() -> dict[str, Any]:
    import paddle

    return {"peak_allocated_bytes": int(paddle.device.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(paddle.device.cuda.max_memory_reserved())}
