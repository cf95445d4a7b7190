"""The reason codes a rule's result carries in `details.reasons`: an enumerated type, and which rule emits which.

A result's advice (the next steps, report.md's "Try" lines) is rendered from these codes, never from its
message, so a code is a contract between a rule and its advice, check.json's readers and docs/checks.md.
`Ctx.rule` refuses a code a registered rule does not declare here (a typo would otherwise silently
drop the advice that reads it), and docs/checks.md's table is `reason_table()` (tests/test_reason_codes.py).
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
    SLOW_STEPS_UNDECIDED = "slow-steps-undecided"
    OPEN_REGRESSION = "open-regression"
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
# every device result (traits `device`): an emulated mode's is not measured (judge/rules/emulated.py)
NOT_EMULATED = (R.EMULATED, "not measured under emulation")
# (result names, ((code, what it says or ""), ...)): docs/checks.md's table, row by row
ROWS: tuple[tuple[tuple[str, ...], tuple[tuple[Reason, str], ...]], ...] = (
    (("amp-compared",), ((R.NOT_PLANNED, "the suite has AMP modes, the run planned none"), (R.NONE_DEFINED, ""))),
    (("completeness",), ((R.COMPLETE, ""), (R.MISSING, ""), (R.CRASHED, ""),
                         (R.OOM, "a trial's end state"), (R.DIVERGED, ""), (R.TIMEOUT, ""), (R.CANCELLED, ""),
                         (R.REFERENCE_OOM, "FP32's trial ended so"), (R.REFERENCE_DIVERGED, ""),
                         (R.REFERENCE_CRASHED, ""), (R.REFERENCE_TIMEOUT, ""), (R.REFERENCE_CANCELLED, ""),
                         (R.SEEDS_REPEAT, ""), (R.SEEDS_DIFFER, ""))),
    (("amp-active",), ((R.ACTIVE, ""), (R.NO_TRIALS, ""),
                       (R.DEVICE, "inactive: each trial's `amp.inactive_code`"), (R.OP_LISTS, ""),
                       (R.NO_EVIDENCE, ""), (R.EMULATED, "AMP's numerics emulated in float32 kernels"))),
    (("op-lists",), ((R.APPLIED, ""), (R.LEAKED, ""), (R.MISSED, ""), (R.UNKNOWN_OPS, ""), (R.AMP_INACTIVE, ""))),
    (("baseline-quality",), ((R.LEARNED, ""), (R.NO_FP32, ""), (R.LOSS_FLAT, ""), (R.BELOW_FLOOR, ""))),
    (("accuracy-parity", "history-metric"), (
        (R.NONINFERIOR, ""), (R.WORSE, ""), (R.UNDECIDED, ""), (R.ERROR, ""),
        (R.SEED_SD_UNKNOWN, "one seed a side: the margin is `metric_abs_tol`"), (R.METRIC_MISSING, ""),
        (R.AMP_NONFINITE, ""), (R.BASELINE_QUALITY, "not judged: FP32 did not learn"))),
    (("speedup",), ((R.SHOWN, ""), (R.BELOW, ""), (R.UNDECIDED, ""), (R.ERROR, ""), (R.SHORT_TRIALS, ""),
                    (R.FEW_SEEDS, ""), (R.DISTURBED, ""),
                    (R.CLUSTERED, "the measured causes are in `why_not_faster`"), *PAIRS, NOT_EMULATED)),
    (("memory",), ((R.REDUCED, ""), (R.NOT_REDUCED, ""), (R.HOST_MEMORY, "not device memory"),
                   (R.BATCH_DIFFERS, ""), (R.NOT_RECORDED, ""), (R.SOURCES_DIFFER, ""), *PAIRS, NOT_EMULATED)),
    (("energy",), ((R.NO_MORE, ""), (R.MORE, ""), (R.UNDECIDED, ""), (R.NOT_MEASURED, ""), (R.FEW_SEEDS, ""),
                   *PAIRS, NOT_EMULATED)),
    (("time-to-target",), ((R.REACHED, ""), (R.MISSED, "FP32 reached it"), (R.BOTH_MISSED, ""), (R.NO_EVALS, ""),
                          NOT_EMULATED)),
    (("stability",), ((R.STABLE, ""), (R.NONFINITE, ""), (R.SKIPPED, ""), (R.COLLAPSE, ""), (R.NO_STEPS, ""))),
    (("history-throughput",), (
        (R.NO_SLOWDOWN, ""), (R.SLOWDOWN, ""), (R.UNDECIDED, ""), (R.ERROR, ""), (R.TYPICAL_STEPS_SLOWER, ""),
        (R.SLOW_STEPS, "the trimmed mean FAILed it"), (R.SLOW_STEPS_UNDECIDED, "the trimmed mean held a PASS back"),
        (R.OPEN_REGRESSION, "a regression not yet accepted is still open"), (R.SHORT_TRIALS, ""), (R.FEW_SEEDS, ""), (R.FEW_RUNS, ""), (R.NO_BASELINE_TRIALS, ""),
        (R.DISTURBED, ""), (R.CLUSTERED, ""), NOT_EMULATED)),
    (("history-memory",), ((R.WITHIN, ""), (R.GREW, ""), NOT_EMULATED)),
)
DECLARED: dict[str, frozenset[str]] = {name: frozenset(code.value for code, _ in codes)
                                       for names, codes in ROWS for name in names}


def checked(rule: str, codes: list[str]) -> list[str]:
    """A result's codes as plain strings, each a `Reason` its rule declares in ROWS (a result name not in
    ROWS, a rule still being written, is not checked: tests/test_reason_codes.py holds the registry to it)."""
    out = [c.value if isinstance(c, Reason) else str(c) for c in codes]
    allowed = DECLARED.get(rule)
    stray = [c for c in out if allowed is not None and c not in allowed]
    if stray:
        raise ValueError(f"rule {rule!r} emitted reason code(s) {stray} it does not declare in judge/rules/reasons.py")
    return out


def reason_table() -> str:
    """docs/checks.md's reason-code table, rendered from ROWS."""
    lines = ["| rule | codes |", "|---|---|"]
    for names, codes in ROWS:
        cells = ", ".join(f"`{c.value}`" + (f" ({note})" if note else "") for c, note in codes)
        lines.append(f"| {', '.join(names)} | {cells} |")
    return "\n".join(lines)
