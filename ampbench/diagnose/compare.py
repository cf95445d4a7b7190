"""Comparing an FP32 and an AMP op dump: which outputs went wrong, and which ops a custom list could move.

Pure functions of the parsed dumps (`trial.numerics.read_dump`), so every rule is testable without
a GPU: ops are matched per step by (op type, k-th call of that type), as Paddle's compare tool does.
"""

from __future__ import annotations

import math

from ampbench.config import ModeConfig
from ampbench.core.opstat import FP16_MAX, OpStat, json_float
from ampbench.results.diagnosis_file import Finding, Kind, Tolerances

# Ops that are bookkeeping, not numerics a custom list could move: never suggested for black-listing.
NOT_LISTABLE = {"cast", "full", "full_like", "set_value", "set_value_", "assign", "share_data", "check_finite_and_unscale",
                "update_loss_scaling", "reshape", "transpose", "squeeze", "unsqueeze", "flatten", "slice", "concat"}
LOW_DTYPES = ("fp16", "bf16", "float16", "bfloat16")


def _scaled(st: OpStat, scale: float) -> OpStat:
    """AMP backward outputs carry the loss scale; divide it out before comparing with FP32."""
    if scale == 1.0 or st.phase != "backward":
        return st
    return OpStat(op=st.op, dtype=st.dtype, numel=st.numel, max=st.max / scale, min=st.min / scale,
                  mean=st.mean / scale, num_nan=st.num_nan, num_inf=st.num_inf, num_zero=st.num_zero, error=st.error)


def classify(ref: OpStat | None, amp: OpStat, fp16: bool, tol: Tolerances) -> tuple[Kind | None, float | None]:
    """What, if anything, is wrong with one op output of the AMP run given the matching FP32 one."""
    if amp.nonfinite:
        return ("fp32-nonfinite" if ref is not None and ref.nonfinite else "amp-nonfinite"), None
    if ref is None:
        return None, None
    if ref.nonfinite:
        return "fp32-nonfinite", None
    if fp16 and amp.phase == "forward" and ref.magnitude > FP16_MAX:
        return "fp16-range", None
    mag = ref.magnitude
    rel = max(abs(a - b) for a, b in ((amp.max, ref.max), (amp.min, ref.min), (amp.mean, ref.mean))) / mag \
        if mag > 0 else (0.0 if amp.magnitude == 0 else math.inf)
    low = amp.dtype in LOW_DTYPES
    if low and amp.numel == ref.numel and amp.num_zero - ref.num_zero > max(1, tol.zero_frac * amp.numel):
        return "underflow", rel
    if rel > tol.rtol:
        return "diverged", rel
    return None, rel


def _finding(index: int, step: int, st: OpStat, partner: OpStat | None, kind: Kind, rel: float | None) -> Finding:
    return Finding(
        index=index, step=step, phase=st.phase, op=st.op, kind=kind, numel=st.numel,
        fp32_dtype=partner.dtype if partner else None, amp_dtype=st.dtype,
        fp32_max_abs=json_float(partner.magnitude) if partner else None, amp_max_abs=json_float(st.magnitude),
        fp32_mean=json_float(partner.mean) if partner else None, amp_mean=json_float(st.mean),
        fp32_nan_inf=(partner.num_nan, partner.num_inf) if partner else None,
        amp_nan_inf=(st.num_nan, st.num_inf),
        rel_diff=rel if rel is not None and math.isfinite(rel) else None,
    )


def compare_dumps(
    ref: list[tuple[int, OpStat]],
    amp: list[tuple[int, OpStat]],
    fp16: bool,
    scales: dict[int, float] | None = None,
    tol: Tolerances | None = None,
) -> tuple[list[Finding], int]:
    """Every flagged AMP op output in execution order, and how many outputs had an FP32 partner.

    Ops are matched per step by (op type, k-th call of that type), as Paddle's compare tool does;
    AMP-only ops (casts) have no partner and are flagged only when non-finite.
    """
    tol = tol or Tolerances()
    ref_by: dict[tuple[int, str, int], OpStat] = {}
    seen: dict[tuple[int, str], int] = {}
    for step, st in ref:
        k = seen.get((step, st.op), 0)
        seen[(step, st.op)] = k + 1
        ref_by[(step, st.op, k)] = st
    seen.clear()
    out: list[Finding] = []
    matched = 0
    for i, (step, raw) in enumerate(amp, start=1):
        k = seen.get((step, raw.op), 0)
        seen[(step, raw.op)] = k + 1
        partner = ref_by.get((step, raw.op, k))
        matched += partner is not None
        st = _scaled(raw, (scales or {}).get(step) or 1.0)
        kind, rel = classify(partner, st, fp16, tol)
        if kind is not None:
            out.append(_finding(i, step, st, partner, kind, rel))
    return out, matched


def condense(findings: list[Finding]) -> list[Finding]:
    """First occurrence of each (op, phase, finding), in execution order, with how often it recurs."""
    firsts: dict[tuple[str, str, str], Finding] = {}
    for f in findings:
        key = (f.op, f.phase, f.kind)
        if key in firsts:
            firsts[key].count += 1
        else:
            firsts[key] = f.model_copy()
    return list(firsts.values())


# ---------------------------------------------------------------- op names for custom lists


def legacy_op_names() -> dict[str, str]:
    """Phi kernel name (what dumps print: `add`, `matmul`) -> the legacy name custom lists take."""
    from paddle.base import core

    out: dict[str, str] = {}
    for name in core.get_all_op_names():
        try:
            phi = core._get_phi_kernel_name(name)  # type: ignore[attr-defined]  # pybind function missing from paddle's stubs
        except Exception:  # noqa: BLE001, S112 - some legacy ops have no phi kernel
            continue
        if phi and phi != name:
            out.setdefault(phi, name)
    return out


def black_list_candidates(findings: list[Finding], mode: ModeConfig, *, known: set[str], paddle_black: set[str],
                          limit: int = 5) -> tuple[list[str], list[str]]:
    """Forward ops worth black-listing (legacy names Paddle knows), and those Paddle already black-lists.

    FP32-path NaN/Inf is not an AMP problem, so those ops are not candidates.  `known` (Paddle's op
    names) and `paddle_black` (its default black list for the mode) come from the run side's
    trial.precision, passed in by the caller: the analysis side does not import the run side.
    """
    legacy = legacy_op_names()
    default_black = paddle_black | set(mode.custom_black_list)
    new: list[str] = []
    already: list[str] = []
    for f in findings:
        if f.phase != "forward" or f.kind == "fp32-nonfinite":
            continue
        if f.kind == "fp16-range" and mode.dtype != "float16":
            continue
        base = f.op.rstrip("_")  # in-place variants (relu_) share the list entry of their op
        name = legacy.get(base, base)
        if name in NOT_LISTABLE or name not in known:
            continue
        target = already if name in default_black else new
        if name not in target:
            target.append(name)
        if len(new) >= limit:
            break
    return new, already
