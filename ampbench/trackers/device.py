"""One import for the rest of ampbench: device presence, capability and environment.

Every GPU-only call stays inside trackers/: the CUDA runtime and allocator in `cuda`, NVML in
`nvml`, AMP capability (from evidence) in `capability`, the fingerprint in `env`.
"""

from __future__ import annotations

from ampbench.core.names import device_slug
from ampbench.trackers.capability import (
    LowDtype,
    amp_works,
    amp_works_in_child,
    probe_all,
    summary,
    unsupported_reason,
)
from ampbench.trackers.cuda import has_gpu, has_gpu_cheap, select_device, synchronize, synchronizer
from ampbench.trackers.env import environment

__all__ = [
    "amp_support_summary",
    "amp_supported",
    "amp_supported_in_child",
    "amp_unsupported_reason",
    "device_slug",
    "environment",
    "has_gpu",
    "has_gpu_cheap",
    "select_device",
    "synchronize",
    "synchronizer",
]


def amp_supported(dtype: LowDtype, level: str = "O1") -> bool:
    """Whether auto_cast really produces `dtype` at `level` on the current device."""
    return amp_works(dtype, level)


def amp_supported_in_child(dtype: LowDtype, level: str = "O1") -> bool:
    """`amp_supported` asked of a short-lived child, so this process holds no CUDA context afterwards."""
    return amp_works_in_child(dtype, level)


def amp_support_summary() -> str:
    return summary(probe_all())


def amp_unsupported_reason(dtype: str) -> str:
    """Why Paddle turns `dtype` AMP off on this GPU ("" when it does not, or off a GPU)."""
    return unsupported_reason(dtype)
