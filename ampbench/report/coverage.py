"""Op precision coverage: which forward ops ran in float16/bfloat16, per AMP mode.

The low-precision share counts forward compute ops only.  Optimizer updates (`adam_`, `momentum_`...),
loss-scaling bookkeeping and fills (`full_`, `fill_constant`...) always run in float32 by design and
would dilute the share, so they get their own line instead of hiding in the denominator.
"""

from __future__ import annotations

from typing import Any

from ampbench.core.opstat import forward_op, on_list
from ampbench.record.models import Trial
from ampbench.report import fmt
from ampbench.report.fmt import DASH, md_code, md_table, md_text
from ampbench.report.view import RunView, h
from ampbench.results.history import ModeSummary

MAX_OP_ROWS = 40
DTYPES = ("float16", "bfloat16", "float32", "other")
_OPTIMIZERS = ("adam", "adamw", "adamax", "adagrad", "adadelta", "rmsprop", "sgd", "momentum", "lamb", "lars_momentum",
               "merged_adam", "merged_momentum", "fused_adam", "ftrl", "decayed_adagrad")
OPTIMIZER_OPS = frozenset([*_OPTIMIZERS, *(f"{o}_" for o in _OPTIMIZERS),
                           "check_finite_and_unscale", "check_finite_and_unscale_", "update_loss_scaling",
                           "update_loss_scaling_"])
FILL_OPS = frozenset(["full", "full_", "full_like", "full_int_array", "full_with_tensor", "fill", "fill_",
                      "fill_constant", "fill_any_like", "fill_any", "zeros", "zeros_like", "ones", "ones_like",
                      "assign_value", "assign_value_", "uniform", "uniform_", "gaussian", "gaussian_"])


def op_kind(op: str) -> str:
    """'optimizer', 'fill' or 'forward' (compute ops AMP can move to low precision)."""
    if op in OPTIMIZER_OPS:
        return "optimizer"
    if op in FILL_OPS:
        return "fill"
    return "forward"


def low(c: dict[str, int]) -> int:
    return c.get("float16", 0) + c.get("bfloat16", 0)


def share_text(calls: dict[str, dict[str, int]]) -> tuple[int, int, str]:
    n_all = sum(sum(c.get(d, 0) for d in DTYPES) for c in calls.values())
    n_low = sum(low(c) for c in calls.values())
    return n_low, n_all, fmt.pct(n_low / n_all, signed=False) if n_all else DASH


def coverage(v: RunView, level: int) -> str:
    out = [h(level, "Op precision coverage")]
    amp_modes = [m for m in v.summary.modes.values() if m.amp_requested]
    if not amp_modes:
        out.append("No AMP mode in this run.")
        return "\n\n".join(out)
    out.append("Forward op calls per dtype, counted by Paddle's operator statistics over the first "
               "training steps of one trial per mode; the low-precision share counts forward ops only "
               "(optimizer and fill ops are listed apart). *white* / *black*: the op is on the mode's "
               "custom list.")
    for m in amp_modes:
        out.append(h(level + 1, f"{md_code(m.mode)} ({md_text(m.level)}, {md_text(m.dtype)})"))
        t = _pick_trial(v, m)
        if t is not None:
            out.append(_mode_coverage(v, t))
    return "\n\n".join(out)


def _pick_trial(v: RunView, m: ModeSummary) -> Trial | None:
    ts = [t for t in v.trials if t.mode == m.mode]
    return next((t for t in ts if t.status == "ok" and t.amp.op_calls), None) or \
        next((t for t in ts if t.amp.op_calls), ts[0] if ts else None)


def _lists(v: RunView, t: Trial) -> tuple[list[str], list[str]]:
    try:
        cfg = v.suite.mode(t.mode)
        extra_w, extra_b = cfg.custom_white_list, cfg.custom_black_list
    except KeyError:
        extra_w, extra_b = [], []
    white = list(dict.fromkeys([*t.amp.white_list, *extra_w]))
    black = list(dict.fromkeys([*t.amp.black_list, *extra_b]))
    return white, black


def _facts(t: Trial, white: list[str], black: list[str]) -> list[str]:
    facts = []
    if white or black:
        facts.append("Custom white list: " + (", ".join(md_code(x) for x in white) or "none")
                     + "; custom black list: " + (", ".join(md_code(x) for x in black) or "none") + ".")
    else:
        facts.append("No custom op lists: Paddle's default lists for this level and dtype.")
    unknown = list(dict.fromkeys(t.amp.unknown_op_names))
    if unknown:
        facts.append("**Unknown op names** (Paddle ignores them silently; use legacy names such as "
                     "`lookup_table_v2`, `matmul_v2`): " + ", ".join(md_code(x) for x in unknown) + ".")
    return facts


def _mode_coverage(v: RunView, t: Trial) -> str:
    white, black = _lists(v, t)
    facts = _facts(t, white, black)
    calls = t.amp.dtype_calls()
    if not calls:
        facts.append("No op statistics were recorded for this mode.")
        return " ".join(facts)
    fwd = {op: c for op, c in calls.items() if op_kind(op) == "forward"}
    n_low, n_all, share = share_text(fwd)
    facts.append(f"{n_low} of {n_all} forward op calls ({share}) ran in low precision (trial {md_code(t.key)}"
                 + (f"; {md_text(t.amp.evidence)}" if t.amp.evidence else "") + ").")
    if t.amp.emulated:
        facts.append(f"AMP was **emulated**: the counts are the emulator's decisions by Paddle's lists; every "
                     f"kernel ran in float32, its low-precision inputs and outputs rounded to {md_text(t.amp.dtype)}.")
    elif not t.amp.active:
        facts.append("AMP was **inactive**: every op ran in float32.")
    out = [" ".join(facts), _op_table(fwd, white, black)]
    rest = _bookkeeping_line(calls) + _in_optimizer_line(t.amp.optimizer_op_calls)
    extra = []
    if len(fwd) > MAX_OP_ROWS:
        extra.append(f"{len(fwd) - MAX_OP_ROWS} more forward ops not shown (see the trial file).")
    if rest:
        extra.append(rest)
    unknown = set(t.amp.unknown_op_names)
    seen = {forward_op(op) for op in calls}   # eager and PIR spellings alike
    moved = [x for x in [*white, *black] if forward_op(x) not in seen and x not in unknown]
    if moved:
        extra.append(f"Listed but not called in the recorded steps: {', '.join(md_code(x) for x in moved)}.")
    if extra:
        out.append(" ".join(extra))
    return "\n\n".join(out)


def _op_table(calls: dict[str, dict[str, int]], white: list[str], black: list[str]) -> str:
    ordered = sorted(calls.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    rows = []
    for op, c in ordered[:MAX_OP_ROWS]:
        n = sum(c.values())
        tag = ", ".join(x for x, lst in (("white", white), ("black", black)) if on_list(op, lst))
        rows.append([md_code(op), *(str(c.get(d, 0)) for d in DTYPES),
                     fmt.pct(low(c) / n, signed=False, decimals=0) if n else DASH, tag or " "])
    return md_table(["Op", "fp16", "bf16", "fp32", "other", "low-precision share", "custom list"], rows,
                    ["l", "r", "r", "r", "r", "r", "l"])


def _bookkeeping_line(calls: dict[str, dict[str, Any]]) -> str:
    """Optimizer and fill ops, apart from the forward share (they run in float32 by design)."""
    parts = []
    for kind, label in (("optimizer", "Optimizer and loss-scaling ops"), ("fill", "Fill ops")):
        ops = {op: c for op, c in calls.items() if op_kind(op) == kind}
        if ops:
            n_low, n_all, _ = share_text(ops)
            names = ", ".join(f"{md_code(op)} {sum(c.values())}" for op, c in sorted(ops.items()))
            parts.append(f"{label} (not in the share): {names} call(s), {n_low} of {n_all} in low precision.")
    return " ".join(parts)


def _in_optimizer_line(calls: dict[str, dict[str, int]]) -> str:
    """A command trial's ops run inside the optimizer's step (update, regularizer such as L2Decay's
    `scale`, clipping): counted apart by the hook, never in the forward share."""
    if not calls:
        return ""
    n_low, n_all, _ = share_text(calls)
    names = ", ".join(f"{md_code(op)} {sum(c.values())}" for op, c in sorted(calls.items(), key=lambda kv: -sum(kv[1].values()))[:12])
    return (f" Inside the optimizer's step (update, regularizer, clipping; not in the share): {names} call(s), "
            f"{n_low} of {n_all} in low precision.")
