"""Op-level facts both stacks share: one op output's summary in a Paddle numerics dump (`[PRECISION] ...`
line), recorded by the run side (trial.numerics) and compared by the analysis side (diagnose/), and the
ops that only cast."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

FP16_MAX = 65504.0  # float16's largest finite value: beyond it an FP16 output overflows
# Ops that only move data between dtypes: a float16 cast proves nothing about AMP (a workload may
# store labels as fp16). Paddle 2.x names the eager cast `transfer_dtype`.  Forward names in the legacy
# spelling: every op name is compared through `forward_op` (so `cast_`, `cast_grad` and PIR's `pd_op.cast`
# are casts too).  The one cast list of the trackers that count op calls and the judge that explains them.
CAST_OPS = frozenset({"cast", "transfer_dtype"})

# Paddle's phi (PIR) op names -> the legacy names its operator stats print in eager mode and its AMP lists
# use (`amp/amp_lists.py`: matmul_v2, lookup_table_v2, reduce_mean).  Under `paddle.jit.to_static` (PIR, the
# default in 3.x) the stats name ops `pd_op.<phi name>`.  This is every entry of Paddle 3.3.1's
# op_compat.yaml whose names differ, as shipped in `paddle/incubate/autograd/phi_ops_map.py` (`op_map`,
# legacy -> {"phi_name"}), inverted; tests/test_op_names.py checks it against the installed Paddle.  The
# core cannot import Paddle (the analysis side runs without it), hence a copy.  Names differ both ways:
# phi `matmul` is legacy `matmul_v2`, phi `legacy_matmul` legacy `matmul`; phi `mean` legacy `reduce_mean`.
PHI_TO_LEGACY: dict[str, str] = {
    "adadelta_": "adadelta", "adagrad_": "adagrad", "adam_": "adam", "adamax_": "adamax", "adamw_": "adamw",
    "add": "elementwise_add", "add_n": "sum", "all": "reduce_all", "amax": "reduce_amax", "amin": "reduce_amin",
    "any": "reduce_any", "arange": "range", "argmax": "arg_max", "argmin": "arg_min",
    "array_to_tensor": "tensor_array_to_tensor", "bicubic_interp": "bicubic_interp_v2",
    "bilinear": "bilinear_tensor_product", "bilinear_interp": "bilinear_interp_v2",
    "check_finite_and_unscale_": "check_finite_and_unscale", "crop": "crop_tensor",
    "cross_entropy_with_softmax": "softmax_with_cross_entropy", "det": "determinant", "diag": "diag_v2",
    "divide": "elementwise_div", "embedding": "lookup_table_v2", "expand": "expand_v2", "expand_as": "expand_as_v2",
    "exponential_": "exponential", "fetch": "fetch_v2", "fill": "fill_any", "flatten": "flatten_contiguous_range",
    "floor_divide": "elementwise_floordiv", "fmax": "elementwise_fmax", "fmin": "elementwise_fmin",
    "full": "fill_constant", "full_batch_size_like": "fill_constant_batch_size_like", "full_like": "fill_any_like",
    "fused_adam_": "fused_adam", "fused_bn_add_activation_": "fused_bn_add_activation",
    "gaussian": "gaussian_random", "generate_proposals": "generate_proposals_v2", "grid_sample": "grid_sampler",
    "hardshrink": "hard_shrink", "hardsigmoid": "hard_sigmoid", "hardswish": "hard_swish", "hardtanh": "brelu",
    "heaviside": "elementwise_heaviside", "hsigmoid_loss": "hierarchical_sigmoid", "isfinite": "isfinite_v2",
    "isinf": "isinf_v2", "isnan": "isnan_v2", "lamb_": "lamb", "lars_momentum_": "lars_momentum",
    "legacy_bilinear_interp": "bilinear_interp", "legacy_crop": "crop", "legacy_expand": "expand",
    "legacy_generate_proposals": "generate_proposals", "legacy_matmul": "matmul",
    "legacy_nearest_interp": "nearest_interp", "legacy_reshape": "reshape", "linear_interp": "linear_interp_v2",
    "matmul": "matmul_v2", "matmul_with_flatten": "mul", "max": "reduce_max", "maximum": "elementwise_max",
    "mean": "reduce_mean", "mean_all": "mean", "merged_momentum_": "merged_momentum", "min": "reduce_min",
    "minimum": "elementwise_min", "momentum_": "momentum", "multiply": "elementwise_mul",
    "nearest_interp": "nearest_interp_v2", "nonzero": "where_index", "numel": "size", "one_hot": "one_hot_v2",
    "prod": "reduce_prod", "reindex_graph": "graph_reindex", "remainder": "elementwise_mod", "reshape": "reshape2",
    "rmsprop_": "rmsprop", "send_u_recv": "graph_send_recv", "send_ue_recv": "graph_send_ue_recv",
    "send_uv": "graph_send_uv", "sgd_": "sgd", "share_data_": "share_data", "slogdet": "slogdeterminant",
    "squeeze": "squeeze2", "subtract": "elementwise_sub", "sum": "reduce_sum",
    "sync_calc_stream": "c_sync_calc_stream", "sync_comm_stream": "c_sync_comm_stream", "topk": "top_k_v2",
    "topk_v1": "top_k", "transpose": "transpose2", "trilinear_interp": "trilinear_interp_v2",
    "uniform": "uniform_random", "uniform_inplace": "uniform_random_inplace", "unsqueeze": "unsqueeze2",
    "update_loss_scaling_": "update_loss_scaling", "yolo_loss": "yolov3_loss",
}
_GRAD = re.compile(r"^(?P<base>.+?)(?P<grad>(?:_double|_triple)?(?:_grad)+)?$")


def canonical_op(name: str) -> str:
    """One spelling for an op name, Paddle's legacy one: a PIR name (`pd_op.matmul`, `pd_op.add_`,
    `pd_op.conv2d_grad`) loses its dialect prefix and takes the legacy name (`matmul_v2`, `elementwise_add_`,
    `conv2d_grad`); a name without a dialect (eager's stats, Paddle's lists, a suite's custom lists) is
    already legacy and stays as it is.  Every comparison of op names with a list goes through this."""
    dialect, dot, bare = name.rpartition(".")
    if not dot or not dialect or not bare:
        return name
    if bare in PHI_TO_LEGACY:
        return PHI_TO_LEGACY[bare]
    m = _GRAD.match(bare)
    base, grad = (m.group("base"), m.group("grad") or "") if m else (bare, "")
    inplace = "_" if base.endswith("_") and base[:-1] in PHI_TO_LEGACY else ""
    base = base[:-1] if inplace else base
    return PHI_TO_LEGACY.get(base, base) + inplace + grad


def forward_op(name: str) -> str:
    """The forward op a call belongs to, in its canonical name: an op list names forward ops, and an op's
    backward (`conv2d_grad`) and in-place form (`cast_`) run as the list decides for it."""
    m = _GRAD.match(canonical_op(name))
    base = m.group("base") if m else name
    return base[:-1] if base.endswith("_") and len(base) > 1 else base


def is_cast(name: str) -> bool:
    """A call that only changes a tensor's dtype (in any spelling): never evidence that AMP ran."""
    return forward_op(name) in CAST_OPS


def on_list(name: str, ops: Iterable[str]) -> bool:
    """Whether an op call (any spelling, forward or backward) is one of `ops` (an op list's names)."""
    return forward_op(name) in {forward_op(o) for o in ops}


def by_forward_op(calls: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Op calls per dtype summed under their forward op's canonical name (`pd_op.matmul`, `matmul_v2` and
    `matmul_v2_grad` all count as `matmul_v2`), for comparisons with op lists."""
    out: dict[str, dict[str, int]] = {}
    for op, by in calls.items():
        acc = out.setdefault(forward_op(op), {})
        for dtype, n in by.items():
            acc[dtype] = acc.get(dtype, 0) + int(n)
    return out


def json_float(x: float) -> float | str:
    """JSON has no inf/nan: keep them as the strings Paddle prints."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


@dataclass
class OpStat:
    """One line of a Paddle numerics dump: an op's output summary."""

    op: str
    dtype: str
    numel: int
    max: float
    min: float
    mean: float
    num_nan: int = 0
    num_inf: int = 0
    num_zero: int = 0
    error: bool = False  # Paddle marked it [ERROR]: the output holds NaN or Inf

    @property
    def phase(self) -> str:
        return "backward" if "_grad" in self.op else "forward"

    @property
    def magnitude(self) -> float:
        """max |x| as far as max/min tell (NaN when either is NaN)."""
        return max(abs(self.max), abs(self.min))

    @property
    def nonfinite(self) -> bool:
        return self.error or self.num_nan > 0 or self.num_inf > 0 or not (
            math.isfinite(self.max) and math.isfinite(self.min))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("max", "min", "mean"):
            d[k] = json_float(d[k])
        d["phase"] = self.phase
        return d
