"""The environment fingerprint recorded in every trial and run: what produced these numbers."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

from ampbench.record.models import Env

PROJECT_DIR = Path(__file__).resolve().parent.parent


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The processor model ('AMD EPYC 7B13'), not just the architecture platform.processor() gives."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_sha() -> str:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _gpu_fields() -> dict[str, object]:
    """GPU name (Paddle), driver, power limit and clocks (NVML) of the device this process uses."""
    import paddle

    from ampbench.trackers import nvml
    from ampbench.trackers.cuda import cuda_bus_id, cuda_uuid

    try:
        name = str(paddle.device.cuda.get_device_name())
    except Exception:
        name = "cuda"
    session = nvml.Session(cuda_bus_id=cuda_bus_id(), cuda_uuid=cuda_uuid()).open()
    try:
        info = session.static_info()
    finally:
        session.close()
    return {"device_name": name, "cuda": str(paddle.version.cuda()), "cudnn": str(paddle.version.cudnn()),
            "driver": str(info.pop("driver", "") or ""), "gpu": info, **({"nvml_error": session.error}
                                                                       if session.error else {})}


def environment() -> Env:
    import numpy
    import paddle

    import ampbench
    from ampbench.trackers.cuda import has_gpu

    gpu = has_gpu()
    fields = _gpu_fields() if gpu else {"device_name": cpu_model()}
    return Env(
        paddle=paddle.__version__,
        paddle_commit=str(getattr(paddle.version, "commit", ""))[:12],
        device="gpu" if gpu else "cpu",
        python=sys.version.split()[0],
        numpy=numpy.__version__,
        platform=platform.platform(),
        cpu_count=os.cpu_count() or 0,
        git_sha=git_sha(),
        ampbench=ampbench.__version__,
        **fields,
    )

