"""Python values written as TOML text: for suites the importers write and the lines advice suggests.

One writer, so a line that advice prints and a suite an importer writes read back the same way.
Non-finite floats are refused: suite files must not hold inf or nan.
"""

from __future__ import annotations

import json
import math
from typing import Any


def toml_key(k: str) -> str:
    """A bare key where TOML allows one, else a quoted key."""
    return k if k and k.replace("_", "").replace("-", "").isalnum() else json.dumps(k, ensure_ascii=False)


def toml_value(v: Any) -> str:
    """A Python value as a TOML value (strings double-quoted, floats that stay floats)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{v} cannot be written to a suite (inf and nan are not allowed)")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(str(k))} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {type(v).__name__}")
