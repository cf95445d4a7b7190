"""Everything that touches a GPU lives here, so the rest of ampbench runs and is tested on CPU.

On a CPU-only Paddle (the machines this project is developed and CI-tested on) these functions
return "no GPU" answers; the CUDA branches follow Paddle's documented `paddle.device.cuda` API and
NVML (nvidia-ml-py) and have not been executed here: no GPU is available to this project.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from ampbench.results import Env

PROJECT_DIR = Path(__file__).resolve().parent.parent


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


def amp_supported(dtype: str) -> bool:
    """Whether Paddle can really run low-precision kernels of `dtype` on the current device."""
    import paddle

    if dtype == "bfloat16":
        return bool(paddle.amp.is_bfloat16_supported())
    return bool(paddle.amp.is_float16_supported())


def amp_support_summary() -> str:
    fp16, bf16 = amp_supported("float16"), amp_supported("bfloat16")
    if not (fp16 or bf16):
        return "AMP inactive on this device: auto_cast, decorate and GradScaler are no-ops, every op runs in float32"
    return f"float16 {'yes' if fp16 else 'no'}, bfloat16 {'yes' if bf16 else 'no'}"


def synchronize() -> None:
    """Wait for queued device work; a no-op on CPU, where kernels run synchronously."""
    if has_gpu():
        import paddle

        paddle.device.synchronize()


class DeviceMemory:
    """Peak memory as the CUDA allocator sees it (allocated, reserved) and as the driver sees it."""

    def __init__(self) -> None:
        self.gpu = has_gpu()
        self._nvml: _NvmlPoller | None = None

    def reset(self) -> None:
        if not self.gpu:
            return
        import paddle

        for fn in ("reset_max_memory_allocated", "reset_max_memory_reserved"):
            f = getattr(paddle.device.cuda, fn, None)
            if f is not None:
                f()
        self._nvml = _NvmlPoller.start_if_available()

    def peaks(self) -> dict[str, int]:
        if not self.gpu:
            return {}
        import paddle

        out = {
            "peak_allocated_bytes": int(paddle.device.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(paddle.device.cuda.max_memory_reserved()),
        }
        if self._nvml is not None:
            out["device_used_bytes"] = self._nvml.stop()
        return out


class _NvmlPoller:
    """Polls this process's device memory through NVML (what nvidia-smi shows) from a thread."""

    def __init__(self, handle: Any, pynvml: Any) -> None:
        self.handle, self.pynvml = handle, pynvml
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @classmethod
    def start_if_available(cls) -> "_NvmlPoller | None":
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            idx = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0])
            poller = cls(pynvml.nvmlDeviceGetHandleByIndex(idx), pynvml)
        except Exception:
            return None
        poller._thread.start()
        return poller

    def _loop(self) -> None:
        pid = os.getpid()
        while not self._stop.wait(0.05):
            try:
                for p in self.pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                    if p.pid == pid and p.usedGpuMemory:
                        self.peak = max(self.peak, int(p.usedGpuMemory))
            except Exception:
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=1)
        return self.peak


def _driver_version() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return ""


def git_sha() -> str:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment() -> Env:
    """Fingerprint recorded in every trial and run: what produced these numbers."""
    import numpy
    import paddle

    import ampbench

    gpu = has_gpu()
    name = ""
    if gpu:
        try:
            name = str(paddle.device.cuda.get_device_name())
        except Exception:
            name = "cuda"
    else:
        name = platform.processor() or platform.machine()
    return Env(
        paddle=paddle.__version__,
        paddle_commit=str(getattr(paddle.version, "commit", ""))[:12],
        cuda=str(paddle.version.cuda()) if gpu else "",
        cudnn=str(paddle.version.cudnn()) if gpu else "",
        device="gpu" if gpu else "cpu",
        device_name=name,
        driver=_driver_version() if gpu else "",
        python=sys.version.split()[0],
        numpy=numpy.__version__,
        platform=platform.platform(),
        cpu_count=os.cpu_count() or 0,
        git_sha=git_sha(),
        ampbench=ampbench.__version__,
    )


def device_slug(env: Env) -> str:
    """A folder-safe name for the device, used for results/baselines/<slug>/."""
    base = "cpu" if env.device in ("", "cpu") else (env.device_name or env.device)
    slug = "".join(c.lower() if c.isalnum() else "-" for c in (base or "cpu")).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug or "cpu"
