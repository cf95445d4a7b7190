"""Whether AMP really runs low-precision kernels on this device: evidence, not Paddle's flags.

On a CPU-only Paddle 3.3.1 `paddle.amp.is_bfloat16_supported()` answers True, yet `auto_cast`
(O1 and O2) leaves every op in float32. So a capability is claimed only when a tiny matmul and
conv2d under `auto_cast(dtype, level)` really return that dtype on the current device.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any, Literal

LowDtype = Literal["float16", "bfloat16"]
DTYPES: tuple[LowDtype, ...] = ("float16", "bfloat16")
LEVELS = ("O1", "O2")


@dataclass(frozen=True)
class Capability:
    """What one auto_cast probe produced."""

    dtype: str
    level: str
    matmul: str = ""      # output dtype of the probe's matmul ("" when the probe raised)
    conv2d: str = ""
    error: str = ""

    @property
    def works(self) -> bool:
        return self.dtype in (self.matmul, self.conv2d)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "works": self.works}


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("paddle.", "")


def probe(dtype: LowDtype, level: str = "O1") -> Capability:
    """Run a matmul and a conv2d under auto_cast and report the dtypes they produced."""
    import paddle

    lv: Literal["O1", "O2"] = "O2" if level == "O2" else "O1"  # OD casts a subset of O1's ops: O1 decides
    try:
        x, w = paddle.ones([8, 8]), paddle.ones([8, 8])
        img, k = paddle.ones([1, 2, 8, 8]), paddle.ones([2, 2, 3, 3])
        with warnings.catch_warnings():  # "amp_guard ... makes no effect" on CPU: the answer says so
            warnings.simplefilter("ignore")
            with paddle.amp.auto_cast(enable=True, level=lv, dtype=dtype):
                mm = paddle.matmul(x, w)
                cv = paddle.nn.functional.conv2d(img, k)
        return Capability(dtype=dtype, level=lv, matmul=_dtype_name(mm), conv2d=_dtype_name(cv))
    except Exception as exc:  # a device without kernels for this dtype may raise instead
        return Capability(dtype=dtype, level=lv, error=f"{type(exc).__name__}: {exc}"[:300])


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
