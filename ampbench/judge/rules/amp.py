"""amp-active and op-lists: did AMP really run in low precision, and did the custom op lists take effect?"""

from __future__ import annotations

from typing import Any

from ampbench.config import ModeConfig
from ampbench.core.opstat import by_forward_op, forward_op, is_cast
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.context import Ctx, Rule, all_of, amp_only
from ampbench.judge.rules.reasons import R
from ampbench.judge.rules.traits import Result, ResultName
from ampbench.record.models import Trial
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
AMP_ACTIVE_NAME = ResultName("amp-active")
OP_LISTS_NAME = ResultName("op-lists")

LOW_PRECISION = ("float16", "bfloat16", "fp16", "bf16")


def _op_counts(trials: list[Trial]) -> tuple[int, int]:
    low = total = 0
    for t in trials:
        for op, by_dtype in t.amp.op_calls.items():
            for dtype, n in by_dtype.items():
                total += int(n)
                low += int(n) if dtype in LOW_PRECISION and not is_cast(op) else 0  # a cast proves nothing
    return low, total


def rule_amp_active(c: Ctx) -> list[RuleResult]:
    """AMP must really have run in low precision (op dtype evidence); inactive is never PASS.

    observed = {"active": trials with AMP active, "trials": ok trials, "low_precision_share": share of
    recorded op calls in float16/bfloat16, or null}.
    """
    ts = c.ok(c.mode)
    mode = c.suite.mode(c.mode)
    threshold = {"active": len(ts), "level": mode.level, "dtype": mode.dtype}
    if not ts:
        return [c.rule(AMP_ACTIVE_NAME, "INCONCLUSIVE", None, threshold, "No completed trial to inspect for AMP activity.",
                       reasons=["no-trials"])]
    if all(t.amp.emulated for t in ts):
        return [_emulated(c, ts, threshold)]
    active = [t for t in ts if t.amp.active]
    low, total = _op_counts(ts)
    share = low / total if total else None
    ops = f"{low} of {total} recorded op calls ran in float16/bfloat16" if total else "no op dtype counts recorded"
    observed = {"active": len(active), "trials": len(ts), "low_precision_share": share}
    if len(active) == len(ts):
        return [c.rule(AMP_ACTIVE_NAME, "PASS", observed, threshold,
                       f"AMP {mode.level}/{mode.dtype} was active in {all_of(len(ts))} ({ops}).", reasons=["active"])]
    texts = sorted({t.amp.inactive_reason for t in ts if not t.amp.active and t.amp.inactive_reason})
    why = "; ".join(texts) or "no low-precision op calls"
    return [c.rule(AMP_ACTIVE_NAME, "INCONCLUSIVE", observed, threshold,
                   f"AMP inactive in {len(ts) - len(active)} of {len(ts)} trials: {why}; {ops}. Numerics stayed "
                   "FP32, so parity, speedup and memory cannot be judged here.",
                   trials=[t.key for t in ts if not t.amp.active],
                   reasons=sorted({inactive_code(t) for t in ts if not t.amp.active}))]


def _emulated(c: Ctx, ts: list[Trial], threshold: Any) -> RuleResult:
    """Every trial ran emulated AMP: PASS, saying so (the op calls the emulator sent to the low dtype)."""
    mode = c.suite.mode(c.mode)
    calls = _calls(ts)
    low = sum(n for by in calls.values() for dt, n in by.items() if dt in LOW_PRECISION)
    total = sum(n for by in calls.values() for n in by.values())
    observed = {"active": 0, "emulated": len(ts), "trials": len(ts),
                "low_precision_share": low / total if total else None}
    if not low:
        return c.rule(AMP_ACTIVE_NAME, "INCONCLUSIVE", observed, threshold,
                      f"emulate = true, yet no op ran in emulated {mode.dtype} ({total} op calls under an emulated "
                      "auto_cast): the program never entered auto_cast with AMP on, or ran its steps compiled "
                      "(paddle.jit.to_static), which emulation does not follow.", reasons=["no-evidence"])
    return c.rule(AMP_ACTIVE_NAME, "PASS", observed, threshold,
                  f"AMP {mode.level}/{mode.dtype} emulated in {all_of(len(ts))}: {low} of {total} op calls under "
                  f"auto_cast ran in emulated {mode.dtype} (float32 kernels, values rounded to {mode.dtype}, "
                  "Paddle's own lists and loss scaling). Numerics are judged; speed, memory and energy are not "
                  "measured under emulation.", reasons=["emulated"])


def inactive_code(t: Trial) -> str:
    """Why AMP was off in a trial, as the worker recorded it (`amp.inactive_code`); a file written before
    the code existed: "device" on a CPU (or unknown) device, else "op-lists"."""
    if t.amp.inactive_code:
        return t.amp.inactive_code
    device = (t.env.device or "").lower()
    return "device" if device in ("", "cpu") or device.startswith("cpu") else "op-lists"


def _calls(ts: list[Trial]) -> dict[str, dict[str, int]]:
    """Every trial's op calls under their forward op's canonical name (eager and PIR spellings agree)."""
    calls: dict[str, dict[str, int]] = {}
    for t in ts:
        for op, by in by_forward_op(t.amp.dtype_calls()).items():
            agg = calls.setdefault(op, {})
            for dt, n in by.items():
                agg[dt] = agg.get(dt, 0) + int(n)
    return calls


def rule_op_lists(c: Ctx) -> list[RuleResult]:
    """The suite's custom white/black lists really took effect (op dtype evidence), e.g. embeddings
    black-listed as lookup_table_v2 ran in float32.  Only for modes that set custom lists.

    observed = {"unknown": op names Paddle does not know, "leaked": black-listed ops seen in low
    precision, "missed": white-listed ops never seen in low precision}.
    """
    mode = c.suite.mode(c.mode)
    ts = c.ok(c.mode)
    threshold = {"leaked": 0, "missed": 0, "unknown": 0}
    unknown = sorted({n for t in ts for n in t.amp.unknown_op_names})
    if unknown:
        return [c.rule(OP_LISTS_NAME, "INCONCLUSIVE", {"unknown": unknown, "leaked": [], "missed": []}, threshold,
                       f"Custom op list names {', '.join(unknown)} that Paddle does not know; Paddle ignores them "
                       "silently (e.g. embedding is lookup_table_v2), so the list cannot have taken effect.",
                       trials=[t.key for t in ts if t.amp.unknown_op_names], reasons=["unknown-ops"])]
    leaked, missed, unseen = _list_evidence(mode, _calls(ts))
    note = f" Not called in the recorded steps: {', '.join(unseen)}." if unseen else ""
    observed = {"unknown": [], "leaked": leaked, "missed": missed}
    if c.amp_inactive:
        return [c.rule(OP_LISTS_NAME, "INCONCLUSIVE", observed, threshold,
                       "every op ran in float32 on this device, so the custom lists cannot be verified here."
                       + note, informational=True, reasons=["amp-inactive"])]
    if leaked or missed:
        return [_lists_failed(c, leaked, missed, note, observed, threshold)]
    return [c.rule(OP_LISTS_NAME, "PASS", observed, threshold,
                   f"Black-listed ops stayed float32 and white-listed ops ran in low precision.{note}",
                   reasons=["applied"])]


def _list_evidence(mode: ModeConfig, calls: dict[str, dict[str, int]]) -> tuple[list[str], list[str], list[str]]:
    """(leaked, missed, unseen) of the mode's custom lists against the recorded op calls, by forward op:
    black-listed ops that ran in low precision, white-listed ops that ran but never in low precision, and
    listed ops never called at all (no evidence either way: named in the message, never a failure)."""
    low = {op: sum(v for k, v in by.items() if k in LOW_PRECISION) for op, by in calls.items()}
    leaked = [op for op in mode.custom_black_list if low.get(forward_op(op), 0) > 0]
    missed = [op for op in mode.custom_white_list if forward_op(op) in calls and low.get(forward_op(op), 0) == 0]
    unseen = [op for op in mode.custom_white_list + mode.custom_black_list if forward_op(op) not in calls]
    return leaked, missed, unseen


def _lists_failed(c: Ctx, leaked: list[str], missed: list[str], note: str, observed: dict[str, list[str]],
                  threshold: dict[str, int]) -> RuleResult:
    """The FAIL of lists that did not take effect, naming each leaked and each missed op (a reason code
    for each kind present, so the advice can tell them apart)."""
    parts = ([f"black-listed {', '.join(leaked)} ran in low precision"] if leaked else []) + \
            ([f"white-listed {', '.join(missed)} never ran in low precision"] if missed else [])
    return c.rule(OP_LISTS_NAME, "FAIL", observed, threshold,
                  f"The custom op lists did not take effect: {'; '.join(parts)}.{note}",
                  reasons=(["leaked"] if leaked else []) + (["missed"] if missed else []))


def _has_lists(c: Ctx) -> bool:
    """An AMP mode that sets custom_white_list or custom_black_list."""
    if c.is_ref:
        return False
    mode = c.suite.mode(c.mode)
    return bool(mode.custom_white_list or mode.custom_black_list)


def _amp_active(m: ModeConfig, reasons: set[str]) -> list[str]:
    out = []
    if "device" in reasons:
        out.append("AMP cannot run on this device (Paddle's auto_cast is a no-op without a CUDA/XPU device): run the "
                   "suite on a GPU; no suite change activates it here.")
    if m.dtype == "bfloat16":
        out.append("bfloat16 kernels need compute capability 8.0+; on older GPUs use float16 with loss scaling: "
                   f"{kit.toml_line('dtype', 'float16')}.")
    if m.custom_black_list and ("op-lists" in reasons or not out):
        out.append("Paddle ran no op in low precision: check that `custom_black_list` does not hold the matmul/conv "
                   f"ops (current: {kit.toml_list(m.custom_black_list)}); e.g. {kit.toml_line('custom_black_list', [])}.")
    return out


def advise_amp_active(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """What to try when AMP did not really run (device, dtype, op lists), from the trials' inactive codes."""
    return _amp_active(m, kit.reasons(r))


AMP_ACTIVE = Rule("amp-active", rule_amp_active, amp_only, advice=advise_amp_active,
                  results=(Result(AMP_ACTIVE_NAME, tune="inactive", outcome="cause", reasons=(
                      (R.ACTIVE, ""), (R.NO_TRIALS, ""), (R.DEVICE, "inactive: each trial's `amp.inactive_code`"),
                      (R.OP_LISTS, ""), (R.NO_EVIDENCE, ""), (R.EMULATED, "AMP's numerics emulated in float32 kernels"))),))
OP_LISTS = Rule("op-lists", rule_op_lists, _has_lists, results=(Result(OP_LISTS_NAME, reasons=(
    (R.APPLIED, ""), (R.LEAKED, ""), (R.MISSED, ""), (R.UNKNOWN_OPS, ""), (R.AMP_INACTIVE, ""))),))
