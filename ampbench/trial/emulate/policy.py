"""Which dtype an op runs in under AMP: Paddle's own rule, restated for the emulator.

The lists are Paddle's: `paddle.amp.auto_cast._update_list` merges the program's custom lists into
`paddle.amp.amp_lists`' defaults for the level and dtype (a custom white op leaves the black list and
the reverse), exactly as `amp_guard` does before it hands them to the tracer.  The decision per op is
the C++ one every eager op runs before its kernel (Paddle 3.x `paddle/fluid/imperative/amp_utils.h`,
`GetAmpDestDtype` and `GetPromoteType`; the generated forward passes it the op's legacy name,
`phi::TransToFluidOpName`, and skips it for in-place ops and `cast`):

- promote on (O1 always; O2 unless `use_promote=False`): a white op runs in the AMP dtype; a black op
  in float32; any other op in the AMP dtype unless one of its floating inputs is float32 (batch_norm,
  layer_norm and sync_batch_norm look at their input `x` only), at level OD in float32;
- promote off (O2 only): every op but the black ones in the AMP dtype.

Not restated: the device's own list of ops without a float16/bfloat16 kernel (`GetMutableUnsupportedOps`,
read from the GPU build's kernel registry; a CPU build cannot know it): such an op would run in float32
on the GPU and is emulated in the low dtype here.  docs/emulation.md lists this with the rest.

Standard library only (the lists come in as arguments): the hook loads this package by its path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Ops whose AMP cast touches the first input only (AmpAutoCast: "batch_norm", "layer_norm",
# "sync_batch_norm", "weight_only_linear" leave every input but `x` as it is), and whose promotion
# looks at `x` only (GetPromoteType).
X_ONLY = frozenset({"batch_norm", "layer_norm", "sync_batch_norm", "weight_only_linear"})
X_ONLY_PROMOTE = frozenset({"batch_norm", "layer_norm", "sync_batch_norm", "moving_average_abs_max_scale"})
# Eager ops Paddle generates without the AMP logic: `cast` (eager_gen.py: `is_inplaced or cast`).
NO_AMP = frozenset({"cast"})
# Ops whose output, given inputs the format represents, is itself exactly representable (they move, select
# or zero values: a view, a copy, max, relu): their output needs no rounding, only the marker.  An
# optimisation, not a rule of Paddle's: rounding them again would change no value.
EXACT = frozenset({
    "reshape2", "reshape", "transpose2", "transpose", "flatten_contiguous_range", "squeeze2", "unsqueeze2",
    "slice", "strided_slice", "concat", "split", "split_with_num", "stack", "unstack", "gather", "gather_nd",
    "index_select", "expand_v2", "expand_as_v2", "tile", "flip", "roll", "relu", "max_pool2d_with_index",
    "abs", "assign", "where", "elementwise_max", "elementwise_min", "sign", "contiguous", "view_shape",
    "as_strided", "take_along_axis", "masked_select", "repeat_interleave",
})
# What a CUDA build runs where the CPU build runs something else, so the GPU's decision is emulated:
# `paddle.nn.functional.linear` calls `_C_ops.linear_v2` (white-listed) on a CUDA build and `_C_ops.linear`
# (a composite of matmul and add, not listed) on a CPU build (python/paddle/nn/functional/common.py).
GPU_OP = {"linear": "linear_v2"}


@dataclass(frozen=True)
class Policy:
    """One auto_cast context's settings, with the effective lists in Paddle's legacy op names."""

    level: str                       # "O1", "O2" or "OD"
    dtype: str                       # "float16" or "bfloat16"
    white: frozenset[str] = field(default_factory=frozenset)
    black: frozenset[str] = field(default_factory=frozenset)
    use_promote: bool = True

    @property
    def promotes(self) -> bool:
        """Promotion is always on below O2 (GetAmpDestDtype reads use_promote only at O2)."""
        return self.level != "O2" or self.use_promote

    def low(self, op: str, inputs_low: list[bool]) -> bool:
        """Whether `op` runs in the AMP dtype, given whether each floating input is already low precision
        (for the x-only ops, pass the first input's flag only)."""
        if op in self.black:
            return False
        if not self.promotes:
            return True
        if op in self.white:
            return True
        if self.level == "OD":
            return False
        return all(inputs_low)


def legacy_name(phi_name: str, phi_to_legacy: dict[str, str]) -> str:
    """An eager op's name as Paddle's AMP lists spell it (phi `matmul` -> `matmul_v2`), the GPU's op first."""
    name = GPU_OP.get(phi_name, phi_name)
    return phi_to_legacy.get(name, name)
