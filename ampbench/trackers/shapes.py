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
# A convolution reading the input image (1 grey, 3 RGB, 4 RGBA channels: the "stem") is judged apart: its
# input channels are the data's, which no user pads in an NCHW model, and the library, not the user, pads
# them for its Tensor Core kernels (NVIDIA's convolution performance guide singles out the first layer's
# 3 channels).  Its output channels are still audited, so the advice names a layer the user can change.
STEM_CHANNELS = 4
MAX_FINDINGS = 50  # a huge model lists its first 50 odd layers (the count says how many in all)


def _dims(layer: Any) -> tuple[str, list[int]] | None:
    """(kind, [in, out]) of a layer whose weight is a GEMM operand, else None."""
    from paddle import nn

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


def layer_dims(model: Any) -> list[tuple[str, str, list[int]]]:
    """(name, kind, [in, out]) of each matmul/conv layer of the model (the command hook reads the same)."""
    out = []
    for name, layer in model.named_sublayers(include_self=True):
        found = _dims(layer)
        if found is not None:
            out.append((name or type(layer).__name__, found[0], found[1]))
    return out


def audit(model: Any, batch_size: int) -> dict[str, Any]:
    """The audit of a model the trial holds (the built-in loop, at its first step); a model whose Layers
    nest deeper than Python's recursion limit (Paddle walks them recursively) has none, and says so."""
    try:
        return audit_dims(layer_dims(model), batch_size)
    except RecursionError:
        return absent("RecursionError: maximum recursion depth exceeded")


def absent(why: str) -> dict[str, Any]:
    """No audit, and why (`absent`): never an empty audit that reads as "nothing odd". A RecursionError is
    named for what it means: Layers nested deeper than Python's recursion limit."""
    if "RecursionError" in why:
        why += " (the model's Layers nest deeper than Python's recursion limit, and Paddle lists them recursively)"
    return {"multiple": MULTIPLE, "absent": why}


def audit_dims(layers: list[tuple[str, str, list[int]]], batch_size: int, total: int | None = None) -> dict[str, Any]:
    """{"multiple": 8, "batch_size", "batch_ok", "layers": audited count, "odd": [{"layer", "type", "dims",
    "odd_dims"}, ...] (at most MAX_FINDINGS), "odd_count", "stem": convolutions reading the image, whose
    input channels are not judged (STEM_CHANNELS)}.  `total`: the layers a command program has, when
    its hook listed only the first of them (the odd count is then of the listed ones)."""
    odd: list[dict[str, Any]] = []
    stem: list[dict[str, Any]] = []
    count = 0
    for name, kind, dims in layers:
        judged = dims
        if kind.startswith("Conv") and dims and dims[0] <= STEM_CHANNELS and dims[0] % MULTIPLE:
            stem.append({"layer": name, "type": kind, "dims": dims})
            judged = dims[1:]   # the image's channels apart; the layer's own output channels still count
        bad = [d for d in judged if d % MULTIPLE]
        if bad:
            count += 1
            if len(odd) < MAX_FINDINGS:
                odd.append({"layer": name, "type": kind, "dims": dims, "odd_dims": bad})
    return {"multiple": MULTIPLE, "batch_size": batch_size, "batch_ok": batch_size % MULTIPLE == 0,
            "layers": max(len(layers), total or 0), "odd": odd, "odd_count": count, "stem": stem[:MAX_FINDINGS]}
