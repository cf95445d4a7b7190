"""Whether AMP really runs low-precision kernels on this device: evidence, not Paddle's flags.

On a CPU-only Paddle 3.3.1 `paddle.amp.is_bfloat16_supported()` answers True, yet `auto_cast`
(O1 and O2) leaves every op in float32. So a capability is claimed only when a tiny matmul and
conv2d under `auto_cast(dtype, level)` really ran in that dtype on the current device: their
output dtypes or Paddle's operator stats (the kernel dtype each call ran with) say so.

On a GPU, Paddle itself turns `auto_cast` and `decorate` off (a warning, then FP32) below compute
capability 7.0 for float16 and below 8.0 (or CUDA < 11) for bfloat16 (paddle/amp/auto_cast.py,
`_is_gpu_float16_supported` / `_is_gpu_bfloat16_supported`): `unsupported_reason` names that rule,
so a V100's bf16 or a P100's fp16 reads "not supported here", not "AMP broken".
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Literal

LowDtype = Literal["float16", "bfloat16"]
DTYPES: tuple[LowDtype, ...] = ("float16", "bfloat16")
LEVELS = ("O1", "O2")
PROBE_TIMEOUT_S = 180.0   # a child probe: Paddle's import and CUDA initialisation, a few seconds on a GPU
_CHILD_PROBE = ("import sys; from ampbench.trackers.capability import amp_works; "
                "print('@@probe', 'works' if amp_works(sys.argv[1], sys.argv[2]) else 'no', flush=True)")


@dataclass(frozen=True)
class Capability:
    """What one auto_cast probe produced."""

    dtype: str
    level: str
    matmul: str = ""      # output dtype of the probe's matmul ("" when the probe raised)
    conv2d: str = ""
    error: str = ""

    low_calls: int = 0    # low-precision calls of the probe's ops in Paddle's operator stats
    unsupported: str = ""  # Paddle's own rule turned this dtype off on this GPU (why)

    @property
    def works(self) -> bool:
        return not self.unsupported and (self.dtype in (self.matmul, self.conv2d) or self.low_calls > 0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "works": self.works}


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("paddle.", "")


def unsupported_reason(dtype: str) -> str:
    """Why Paddle's GPU build turns `dtype` AMP off on this device ("" when it does not, or off a GPU).

    Paddle's own checks decide (paddle.amp.auto_cast's `_is_gpu_float16_supported` /
    `_is_gpu_bfloat16_supported`); the rule they implement is spelled out in the message."""
    from ampbench.trackers.cuda import compute_capability, has_gpu

    if not has_gpu():
        return ""
    import paddle

    cc = compute_capability()
    mod = sys.modules.get("paddle.amp.auto_cast")
    check = getattr(mod, "_is_gpu_float16_supported" if dtype == "float16" else "_is_gpu_bfloat16_supported", None)
    try:
        ok = bool(check()) if check is not None else _rule(dtype, cc, str(paddle.version.cuda()))
    except (RuntimeError, ValueError, AttributeError, TypeError):   # a Paddle whose helper differs
        ok = _rule(dtype, cc, str(paddle.version.cuda()))
    if ok:
        return ""
    cc_text = f"{cc[0]}.{cc[1]}" if cc else "unknown"
    need = "7.0" if dtype == "float16" else "8.0 and CUDA >= 11"
    return (f"{dtype} AMP is not supported on this GPU: compute capability {cc_text}, Paddle needs {need} "
            "(auto_cast/decorate turn themselves off with a warning)")


def _rule(dtype: str, cc: tuple[int, int] | None, cuda: str) -> bool:
    if cc is None:
        return False
    if dtype == "float16":
        return cc[0] >= 7
    major = cuda.split(".")[0]
    return cc[0] >= 8 and major.isdigit() and int(major) >= 11


def probe(dtype: LowDtype, level: str = "O1") -> Capability:
    """Run a matmul and a conv2d under auto_cast and report the dtypes they ran in."""
    import paddle

    from ampbench.trackers.opstats import collect_op_dtypes

    lv: Literal["O1", "O2"] = "O2" if level == "O2" else "O1"  # OD casts a subset of O1's ops: O1 decides
    reason = unsupported_reason(dtype)
    try:
        x, w = paddle.ones([8, 8]), paddle.ones([8, 8])
        img, k = paddle.ones([1, 2, 8, 8]), paddle.ones([2, 2, 3, 3])
        with warnings.catch_warnings():  # "amp_guard ... makes no effect" on CPU: the answer says so
            warnings.simplefilter("ignore")
            with collect_op_dtypes() as counts, paddle.amp.auto_cast(enable=True, level=lv, dtype=dtype):
                mm = paddle.matmul(x, w)
                cv = paddle.nn.functional.conv2d(img, k)
        low = sum(c.get(dtype, 0) for op, c in counts.items() if op in ("matmul_v2", "matmul", "conv2d"))
        return Capability(dtype=dtype, level=lv, matmul=_dtype_name(mm), conv2d=_dtype_name(cv), low_calls=low,
                          unsupported=reason)
    except Exception as exc:  # a device without kernels for this dtype may raise instead
        return Capability(dtype=dtype, level=lv, error=f"{type(exc).__name__}: {exc}"[:300], unsupported=reason)


def amp_works_in_child(dtype: LowDtype, level: str = "O1", timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """`amp_works` in a short-lived child process: the probe's Paddle import and CUDA context end with the
    child, so the caller never holds one (tune, whose rung trials run on this GPU next and would list it as
    another process).  The child dies with ampbench (core/processes.py guarded); one that fails, or runs
    past `timeout_s` (killed), answers False: a capability is claimed only on evidence."""
    from ampbench.core.processes import guarded

    try:
        out = subprocess.run(guarded([sys.executable, "-c", _CHILD_PROBE, dtype, level]), capture_output=True,
                             text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    answer = [ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith("@@probe ")]
    return out.returncode == 0 and answer == ["works"]


def probe_all() -> list[Capability]:
    return [probe(d, lv) for d in DTYPES for lv in LEVELS]


def amp_works(dtype: LowDtype, level: str = "O1") -> bool:
    """True when auto_cast at this dtype and level really produces low-precision outputs here."""
    return probe(dtype, level).works


def summary(caps: list[Capability]) -> str:
    """One line for `ampbench env`: float16 yes/no, bfloat16 yes/no, and why when no."""
    parts = []
    for d in DTYPES:
        ok = [c.level for c in caps if c.dtype == d and c.works]
        parts.append(f"{d} {'yes (' + ', '.join(ok) + ')' if ok else 'no'}")
    line = ", ".join(parts)
    if not any(c.works for c in caps):
        line += " - auto_cast matmul/conv2d stayed float32 at O1 and O2: AMP is a no-op on this device"
    return line
