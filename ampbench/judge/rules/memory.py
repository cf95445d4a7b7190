"""memory: 1 - AMP peak / FP32 peak >= min_memory_reduction, from the same memory source."""

from __future__ import annotations

from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE, ModeConfig, Thresholds
from ampbench.core.units import bytes_h
from ampbench.judge import inference, stats
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.context import Ctx, Rule, amp_only, batch_note, one_seed_note
from ampbench.judge.rules.reasons import NOT_EMULATED, PAIRS, R
from ampbench.judge.rules.traits import FigureInterval, Result, ResultName
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult, Status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
MEMORY_NAME = ResultName("memory")

SOURCE_TEXT = {"cuda": "CUDA allocator peak (max_memory_allocated)", "host": "host allocator peak (CPU)",
               "rss": "process peak RSS"}


def _decide(c: Ctx, amp: list[float], ref: list[float], need: float) -> tuple[Status, str]:
    """(status, how): peaks that vary between seeds are judged like the other rules, PASS at `confidence`,
    FAIL at 1 - fail_alpha on the log ratio of the trials' peaks (two seeds per side suffice); identical
    peaks (the usual case: the allocator's peak is deterministic for a fixed batch) and a single seed
    compare the medians."""
    red = 1 - float(np.median(amp)) / float(np.median(ref))
    point: Status = "PASS" if red >= need else "FAIL"
    if min(len(amp), len(ref)) < inference.MIN_TRIALS or (len(set(amp)) == 1 and len(set(ref)) == 1):
        return point, "medians"
    pc, fc = c.levels()
    # a peak depends on the seeded program and the allocator, not on which CPU the process ran: seeded floor
    b = inference.log_ratio_bounds(amp, ref, c.th.confidence, fail_confidence=fc, pass_confidence=pc,
                                   min_fail_trials=inference.fail_floor(placement=False))
    # reduction = 1 - ratio: PASS when even the upper bound of the ratio leaves `need`; FAIL when even its
    # FAIL-level lower bound does not
    if 1 - b.upper >= need:
        return "PASS", f"upper bound of AMP/FP32 {b.upper:.4f} at {pc:.4g}"
    if 1 - b.fail_lower < need:
        return "FAIL", f"lower bound of AMP/FP32 {b.fail_lower:.4f} at {fc:.4g}"
    return "INCONCLUSIVE", (f"peaks vary between seeds: the reduction's bounds {1 - b.upper:.1%} to "
                            f"{1 - b.fail_lower:.1%} straddle it")


def rule_memory(c: Ctx) -> list[RuleResult]:
    """Peak memory is close to deterministic for a fixed batch, so medians over seeds are compared
    directly (one seed is enough, and the message says it rests on one); peaks that vary between two or
    more seeds per side are judged with bounds (_decide).  observed = the reduction."""
    need = c.th.min_memory_reduction
    amp, ref = c.compact(c.mode), c.compact(REFERENCE_MODE)
    sources = {t.memory_source for t in amp + ref}
    if not amp or not ref or "none" in sources or any(t.peak_bytes <= 0 for t in amp + ref):
        return [c.rule(MEMORY_NAME, "INCONCLUSIVE", None, need, "Peak memory not recorded for every trial.",
                       informational=c.amp_inactive, reasons=["not-recorded"])]
    if len(sources) > 1:
        return [c.rule(MEMORY_NAME, "INCONCLUSIVE", None, need,
                       f"Peak memory comes from different sources ({', '.join(sorted(sources))}); not comparable.",
                       reasons=["sources-differ"], sources=sorted(sources))]
    src = sources.pop()
    amp_peak = float(np.median([t.peak_bytes for t in amp]))
    ref_peak = float(np.median([t.peak_bytes for t in ref]))
    red = 1 - amp_peak / ref_peak
    status, how = _decide(c, [float(t.peak_bytes) for t in amp], [float(t.peak_bytes) for t in ref], need)
    ok = red >= need
    msg = (f"{SOURCE_TEXT.get(src, src)}: AMP {bytes_h(amp_peak)} vs FP32 {bytes_h(ref_peak)} "
           f"(median over seeds), reduction {red:.1%} {'>=' if ok else '<'} min_memory_reduction {need:.0%}")
    msg += "." if how == "medians" else f" ({how})."
    if src != "cuda":
        msg += " This is not device memory" + ("; AMP is inactive anyway, so no reduction is expected." if
                                               c.amp_inactive else ".")
    msg += one_seed_note(len(ref), len(amp))
    note = batch_note(c)
    codes = ["reduced" if ok else "not-reduced"] + ([] if src == "cuda" else ["host-memory"])
    details: dict[str, Any] = {"source": src, "amp_peak_bytes": amp_peak, "fp32_peak_bytes": ref_peak,
                               "reasons": codes, **_reduction_interval(c, amp, ref, red)}
    if note and not c.amp_inactive:
        # A mode that runs a larger batch (the seed's "AMP lets batch 32 fit") is not meant to save memory
        # against FP32's smaller batch: report the numbers, do not judge them.
        return [c.rule(MEMORY_NAME, "PASS", red, need, "Not judged, batch sizes differ:" + note + " " + msg,
                       judged=False, **{**details, "reasons": ["batch-differs", *codes]})]
    return [c.rule(MEMORY_NAME, status, red, need, msg + note, informational=c.amp_inactive, **details)]


def _reduction_interval(c: Ctx, amp: list, ref: list, red: float) -> dict[str, Any]:
    """The reduction's two-sided interval for a claim about it (details `reduction_low/high`): from the trials'
    peaks where they vary between seeds (1 - the ratio's interval), else the point (a peak is deterministic for a
    fixed program and batch, the memory rule's own premise)."""
    d = stats.difference([float(t.peak_bytes) for t in amp], [float(t.peak_bytes) for t in ref],
                         c.th.confidence, log=True)
    if d is None or d.sd == 0:
        return {"reduction_low": red, "reduction_high": red}
    return {"reduction_low": 1 - d.high, "reduction_high": 1 - d.low, "log_sd": d.sd}


def memory_interval(r: RuleResult, th: Thresholds) -> FigureInterval | None:
    """The reduction (observed) and its interval (details), when peaks were recorded for every trial."""
    d = r.details
    if not isinstance(r.observed, (int, float)) or not all(isinstance(d.get(k), (int, float))
                                                           for k in ("reduction_low", "reduction_high")):
        return None
    sd = d.get("log_sd")
    return FigureInterval(float(r.observed), float(d["reduction_low"]), float(d["reduction_high"]),
                          sd=float(sd) if isinstance(sd, (int, float)) else 0.0)


def _memory(m: ModeConfig, reasons: set[str]) -> list[str]:
    out = []
    if "host-memory" in reasons:
        out.append("This peak is host memory, not GPU memory: judge memory on a GPU run.")
    if m.level == "O1":
        out.append(f"O1 keeps weights and most activations in float32; O2 stores them in {m.dtype}: "
                   f"{kit.toml_line('level', 'O2')}.")
    elif m.master_weight is not False:
        out.append("O2 keeps a float32 master copy of the weights (and Adam keeps float32 moments); without it the "
                   f"weights take half the memory, at some accuracy risk: {kit.toml_line('master_weight', False)}.")
    return out


def advise_memory(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """O2's low-precision storage; dropping the master weights."""
    return [kit.INACTIVE] if r.informational else _memory(m, kit.reasons(r))


MEMORY = Rule("memory", rule_memory, amp_only, advice=advise_memory,
              results=(Result(MEMORY_NAME, tune="speed", bisect="in-run", figure="memory_reduction", device=True, reasons=(
                  (R.REDUCED, ""), (R.NOT_REDUCED, ""), (R.HOST_MEMORY, "not device memory"), (R.BATCH_DIFFERS, ""),
                  (R.NOT_RECORDED, ""), (R.SOURCES_DIFFER, ""), *PAIRS, NOT_EMULATED),
                  interval=memory_interval),))
