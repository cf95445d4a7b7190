"""The reason codes a rule's result carries in `details.reasons`: an enumerated type, and which rule emits which.

A result's advice (the next steps, report.md's "Try" lines) is rendered from these codes, never from its
message, so a code is a contract between a rule and its advice, check.json's readers and docs/checks.md.
Each result declares the codes it emits on its rule's `Result` (`reasons`, judge/rules/traits.py): a new rule
declares them in its own module.  `Rule.run` refuses a code a result does not declare (a typo would otherwise
silently drop the advice that reads it), and docs/checks.md's table is `registry.reason_codes_table()`
(tests/test_reason_codes.py).
"""

from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    """Every reason code; a trial's end state (`oom`, ... every `Status` but ok) and `reference-<state>` too."""

    # amp-compared
    NOT_PLANNED = "not-planned"
    NONE_DEFINED = "none-defined"
    # completeness
    COMPLETE = "complete"
    MISSING = "missing"
    CRASHED = "crashed"
    OOM = "oom"
    DIVERGED = "diverged"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    REFERENCE_OOM = "reference-oom"
    REFERENCE_DIVERGED = "reference-diverged"
    REFERENCE_CRASHED = "reference-crashed"
    REFERENCE_TIMEOUT = "reference-timeout"
    REFERENCE_CANCELLED = "reference-cancelled"
    SEEDS_REPEAT = "seeds-repeat"
    SEEDS_DIFFER = "seeds-differ"
    # amp-active (the inactive ones are the trials' `amp.inactive_code`)
    ACTIVE = "active"
    NO_TRIALS = "no-trials"
    DEVICE = "device"
    OP_LISTS = "op-lists"
    NO_EVIDENCE = "no-evidence"
    # op-lists
    APPLIED = "applied"
    LEAKED = "leaked"
    MISSED = "missed"
    UNKNOWN_OPS = "unknown-ops"
    AMP_INACTIVE = "amp-inactive"
    # baseline-quality
    LEARNED = "learned"
    NO_FP32 = "no-fp32"
    LOSS_FLAT = "loss-flat"
    BELOW_FLOOR = "below-floor"
    # accuracy-parity, history-metric
    NONINFERIOR = "noninferior"
    WORSE = "worse"
    RUN_EFFECT_UNKNOWN = "run-effect-unknown"
    UNDECIDED = "undecided"
    SEED_SD_UNKNOWN = "seed-sd-unknown"
    METRIC_MISSING = "metric-missing"
    AMP_NONFINITE = "amp-nonfinite"
    BASELINE_QUALITY = "baseline-quality"
    ERROR = "error"
    # speedup
    SHOWN = "shown"
    BELOW = "below"
    SHORT_TRIALS = "short-trials"
    FEW_SEEDS = "few-seeds"
    DISTURBED = "disturbed"
    CLUSTERED = "clustered"
    # memory
    REDUCED = "reduced"
    NOT_REDUCED = "not-reduced"
    HOST_MEMORY = "host-memory"
    BATCH_DIFFERS = "batch-differs"
    NOT_RECORDED = "not-recorded"
    SOURCES_DIFFER = "sources-differ"
    # energy
    NO_MORE = "no-more"
    MORE = "more"
    NOT_MEASURED = "not-measured"
    # time-to-target
    REACHED = "reached"
    BOTH_MISSED = "both-missed"
    NO_EVALS = "no-evals"
    # stability
    STABLE = "stable"
    NONFINITE = "nonfinite"
    SKIPPED = "skipped"
    COLLAPSE = "collapse"
    NO_STEPS = "no-steps"
    # history-throughput, history-memory
    NO_SLOWDOWN = "no-slowdown"
    SLOWDOWN = "slowdown"
    TYPICAL_STEPS_SLOWER = "typical-steps-slower"
    SLOW_STEPS = "slow-steps"
    SLOW_STEPS_UNCONFIRMED = "slow-steps-unconfirmed"
    PENDING = "pending"
    AMP_FP32_RATIO = "amp-fp32-ratio"
    BELOW_REFERENCE = "below-reference"
    FEW_RUNS = "few-runs"
    NO_BASELINE_TRIALS = "no-baseline-trials"
    WITHIN = "within"
    GREW = "grew"
    # emulated AMP (judge/rules/emulated.py): amp-active's, and the device results' "not measured"
    EMULATED = "emulated"
    # speedup, memory, energy: a seed's arms not measured in place (judge/rules/pairs.py)
    DIFFERENT_NODES = "different-nodes"
    OVERLAPPED = "overlapped"


R = Reason
# held back from PASS/FAIL unless `[suite] pairs` accepts it (judge/rules/pairs.py)
PAIRS = ((R.DIFFERENT_NODES, "a seed's FP32 and AMP ran on two nodes"),
         (R.OVERLAPPED, "at the same time on one device"))
# every device result (traits `device`) declares it: an emulated mode's is not measured (judge/rules/emulated.py)
NOT_EMULATED = (R.EMULATED, "not measured under emulation")
# A result's codes, each with what it says (or ""): declared on the rule's `Result` (judge/rules/traits.py)
Codes = tuple[tuple[Reason, str], ...]


def plain(codes: list[str]) -> list[str]:
    """A result's codes as the plain strings check.json holds."""
    return [c.value if isinstance(c, Reason) else str(c) for c in codes]


def stray(rule: str, codes: list[str], declared: Codes) -> None:
    """Refuse a code the result's rule does not declare (a typo would silently drop the advice that reads it);
    a result that declares none, a rule still being written, is not checked (tests/test_reason_codes.py holds
    every registered result to declaring its codes)."""
    allowed = {c.value for c, _ in declared}
    bad = [c for c in codes if declared and c not in allowed]
    if bad:
        raise ValueError(f"rule {rule!r} emitted reason code(s) {bad} it does not declare (its Result's `reasons`)")


def reason_table(rows: list[tuple[list[str], Codes]]) -> str:
    """docs/checks.md's reason-code table: (result names, their codes) a row."""
    lines = ["| rule | codes |", "|---|---|"]
    for names, codes in rows:
        cells = ", ".join(f"`{c.value}`" + (f" ({note})" if note else "") for c, note in codes)
        lines.append(f"| {', '.join(names)} | {cells} |")
    return "\n".join(lines)
