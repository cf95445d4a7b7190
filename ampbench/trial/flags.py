"""Paddle FLAGS from the suite (`[flags]`, and a mode's own `flags` over them), set in the trial
process before the model is built, and returned as applied so the trial records them.

Why: AMP recipes come with flags (PaddleOCR sets FLAGS_max_inplace_grad_add, and on CUDA builds
FLAGS_cudnn_batchnorm_spatial_persistent, when AMP is on); a speed or memory number means little
without them. A flag Paddle refuses is an error on a CUDA build (a typo must not be dropped); on a
CPU build, which lacks the GPU flags, it is recorded as null and named in the trial log.
"""

from __future__ import annotations

import sys
from typing import Any


def merged_flags(suite_flags: dict[str, Any], mode_flags: dict[str, Any]) -> dict[str, Any]:
    """The suite's flags with the mode's on top."""
    return {**suite_flags, **mode_flags}


def apply_flags(suite_flags: dict[str, Any], mode_flags: dict[str, Any]) -> dict[str, Any]:
    """paddle.set_flags each merged flag; returns {name: value Paddle reports back, or None}."""
    flags = merged_flags(suite_flags, mode_flags)
    if not flags:
        return {}
    import paddle

    out: dict[str, Any] = {}
    for name, value in flags.items():
        try:
            paddle.set_flags({name: value})
        except (ValueError, RuntimeError) as e:
            if paddle.is_compiled_with_cuda():
                raise ValueError(f"suite flag {name} = {value!r} could not be applied: {e}") from e
            print(f"ampbench: flag {name} not available in this CPU build of Paddle; not applied", file=sys.stderr)
            out[name] = None
            continue
        out[name] = _plain(paddle.get_flags([name])[name])
    return out


def _plain(v: Any) -> Any:
    return v if isinstance(v, (bool, int, float, str)) else str(v)
