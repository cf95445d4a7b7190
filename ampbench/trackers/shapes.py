"""Tensor Core shape audit: the matmul/conv dimensions and the batch that are not multiples of 8.

Why: FP16/BF16 Tensor Core kernels need the GEMM dimensions (a Linear's in/out features, a conv's
in/out channels, the batch) to be multiples of 8; otherwise cuBLAS/cuDNN pad or fall back to slower
kernels and AMP gains little (NVIDIA's "Mixed precision training" guide, "Tensor Core shape
constraints"; Paddle's AMP guide asks the same).  Read from the model's layers at the first step,
so what is audited is the model that trained, whatever workload built it.
"""

from __future__ import annotations

from typing import Any

MULTIPLE = 8
MAX_FINDINGS = 50  # a huge model lists its first 50 odd layers (the count says how many in all)


def _dims(layer: Any) -> tuple[str, list[int]] | None:
    """(kind, [in, out]) of a layer whose weight is a GEMM operand, else None."""
    import paddle.nn as nn

    w = getattr(layer, "weight", None)
    if w is None or len(w.shape) < 2:
        return None
    shape = [int(d) for d in w.shape]
    if isinstance(layer, nn.Linear):
        return "Linear", shape[:2]  # Paddle's Linear weight is [in_features, out_features]
    conv = getattr(nn.layer.conv, "_ConvNd", None)
    if conv is not None and isinstance(layer, conv):  # _ConvNd keeps the channels as given (conv.py)
        return type(layer).__name__, [int(layer._in_channels), int(layer._out_channels)]
    return None


def audit(model: Any, batch_size: int) -> dict[str, Any]:
    """{"multiple": 8, "batch_size", "batch_ok", "layers": audited count, "odd": [{"layer", "type", "dims",
    "odd_dims"}, ...] (at most MAX_FINDINGS), "odd_count"}."""
    odd: list[dict[str, Any]] = []
    count = audited = 0
    for name, layer in model.named_sublayers(include_self=True):
        found = _dims(layer)
        if found is None:
            continue
        audited += 1
        kind, dims = found
        bad = [d for d in dims if d % MULTIPLE]
        if bad:
            count += 1
            if len(odd) < MAX_FINDINGS:
                odd.append({"layer": name or type(layer).__name__, "type": kind, "dims": dims, "odd_dims": bad})
    return {"multiple": MULTIPLE, "batch_size": batch_size, "batch_ok": batch_size % MULTIPLE == 0,
            "layers": audited, "odd": odd, "odd_count": count}
