"""Units: byte sizes parsed and shown one way everywhere (pydantic's ByteSize), and plain numbers.

A check message, a report table and a plot axis all print a byte count through `bytes_h`, so the
judge and the report can never disagree on how 15 GiB looks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import ByteSize, TypeAdapter, ValidationError

from ampbench.core.errors import ConfigError

if TYPE_CHECKING:
    from typing_extensions import TypeIs

DASH = "—"  # shown for a value that does not exist (not the same as zero)

_KIB, _MIB, _GIB, _TIB = 1024, 1024**2, 1024**3, 1024**4


def _missing(x: float | None) -> TypeIs[None]:
    """None or NaN: shown as a dash (the type narrows to None, which is what matters to a caller that
    goes on only when it is False: then `x` is a real number)."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: float | None, digits: int = 3) -> str:
    """`digits` significant digits, thousands separated, no scientific notation in the usual range."""
    if _missing(x):
        return DASH
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= 15 or mag < -4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def metric(x: float | None, fraction: bool) -> str:
    """A metric value: in percent for an accuracy-like (fraction) metric, else 4 significant digits."""
    if _missing(x):
        return DASH
    return f"{100 * x:.2f}%" if fraction else num(x, 4)


def seconds(s: float | None) -> str:
    """12.3 s, 4 min 05 s, 2 h 03 min."""
    if _missing(s):
        return DASH
    s = float(s)
    if s < 60:
        return f"{num(s, 3)} s"
    if s < 3600:
        m, r = divmod(round(s), 60)
        return f"{m} min {r:02d} s"
    h, r = divmod(round(s), 3600)
    return f"{h} h {r // 60:02d} min"


def ratio(x: float | None) -> str:
    """Speedup-style ratio: 1.82x."""
    if _missing(x):
        return DASH
    return f"{x:.2f}x"


def ratio_ci(lo: float | None, hi: float | None) -> str:
    if _missing(lo) or _missing(hi):
        return ""
    return f"[{lo:.2f}, {hi:.2f}]"


def pct(x: float | None, signed: bool = True, decimals: int = 1) -> str:
    """A fraction as a percentage: -0.447 -> '-44.7%'."""
    if _missing(x):
        return DASH
    v = round(100 * x, decimals) + 0.0  # no "-0.0%"
    return f"{v:+.{decimals}f}%" if signed and v != 0 else f"{v:.{decimals}f}%"


def pt(delta: float | None, decimals: int = 1) -> str:
    """A difference of two fractions in percentage points: 0.003 -> '+0.3 pt'."""
    if _missing(delta):
        return DASH
    return f"{100 * delta:+.{decimals}f} pt"


def metric_delta(delta: float | None, fraction: bool) -> str:
    if _missing(delta):
        return DASH
    if fraction:
        return pt(delta, 2)
    return ("+" if delta >= 0 else "") + num(delta, 3)


def metric_pm(mean: float | None, std: float | None, fraction: bool) -> str:
    """'80.12% ± 0.31' (std in points for fractions); a single seed has no spread to show."""
    if _missing(mean):
        return DASH
    if _missing(std):
        return metric(mean, fraction)
    spread = f"{100 * std:.2f}" if fraction else num(std, 2)
    return f"{metric(mean, fraction)} ± {spread}"


def bytes_h(n: float | None) -> str:
    """Binary units with three significant digits: 15.0 GiB, 812 MiB, 4.00 KiB; 0 or None -> dash."""
    if _missing(n) or not n:
        return DASH
    n = float(n)
    for unit, size in (("TiB", _TIB), ("GiB", _GIB), ("MiB", _MIB), ("KiB", _KIB)):
        if abs(n) >= size:
            return f"{num(n / size)} {unit}"
    return f"{int(n)} B"


def bytes_unit(values: list[float]) -> tuple[str, float]:
    """One unit for a whole axis: the largest unit under which the biggest value is >= 1."""
    top = max((abs(v) for v in values if not _missing(v)), default=0.0)
    for unit, size in (("TiB", _TIB), ("GiB", _GIB), ("MiB", _MIB), ("KiB", _KIB)):
        if top >= size:
            return unit, float(size)
    return "B", 1.0


_BYTES = TypeAdapter(ByteSize)


def parse_bytes(text: str, key: str = "--memory-limit") -> int:
    """`6GiB`, `512MiB`, `8GB` -> bytes (ByteSize's units: KiB/MiB/GiB binary, KB/MB/GB decimal);
    ConfigError naming the key for anything else, zero and absurd sizes included."""
    try:
        value = int(_BYTES.validate_python(text.strip()))
    except ValidationError:
        raise ConfigError(key, text, "expected a size such as 6GiB or 512MiB") from None
    if not 0 < value < 2**63:
        raise ConfigError(key, text, "must be a positive, finite size")
    return value
