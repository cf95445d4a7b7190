"""Rules -> verdicts: is each AMP mode as accurate as FP32, faster, leaner, stable, and no worse
than the baseline?  Writes check.json (the contract in verdict.py) and sets the exit code.

Each rule returns one `RuleResult` with a status, an observed value, the threshold and one sentence
carrying the numbers.  The statistics live in stats.py; this module only decides which samples go
in and what the numbers mean.  When AMP did not really run (CPU), a mode is INCONCLUSIVE, never
PASS; the parity, speedup and memory numbers are still computed and marked informational.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE, Suite
from ampbench.judge import stats
from ampbench.judge.baseline import Baseline, CompactTrial, compact, device_slug, load_baseline, read_run
from ampbench.judge.verdict import CheckReport, ModeVerdict, RuleResult, combine, exit_code
from ampbench.report.fmt import bytes_h
from ampbench.results import ResultsError, Trial, trial_key

LOW_PRECISION = ("float16", "bfloat16", "fp16", "bf16")
CAST_OPS = ("cast", "cast_")  # a cast of a user's fp16 tensor is not evidence that AMP ran
RULES = ("completeness", "amp-active", "baseline-quality", "accuracy-parity", "speedup", "memory", "stability",
         "history-throughput", "history-metric", "history-memory")


@dataclass
class _Ctx:
    """Everything the rules of one mode look at."""

    suite: Suite
    mode: str
    plan: list[tuple[str, int]]
    trials: dict[tuple[str, int], Trial]
    baseline: Baseline | None
    baseline_note: str
    _compact: dict[str, list[CompactTrial]] = field(default_factory=dict)

    @property
    def th(self):  # noqa: ANN201 - Thresholds
        return self.suite.thresholds

    @property
    def metric(self) -> str:
        return self.suite.suite.metric

    @property
    def goal(self) -> str:
        return self.suite.suite.metric_goal

    @property
    def is_ref(self) -> bool:
        return self.mode == REFERENCE_MODE

    def seeds(self, mode: str) -> list[int]:
        return [s for m, s in self.plan if m == mode]

    def present(self, mode: str) -> list[Trial]:
        return [self.trials[(mode, s)] for s in self.seeds(mode) if (mode, s) in self.trials]

    def ok(self, mode: str) -> list[Trial]:
        return [t for t in self.present(mode) if t.status == "ok"]

    def compact(self, mode: str) -> list[CompactTrial]:
        if mode not in self._compact:
            self._compact[mode] = [compact(t, self.metric) for t in self.ok(mode)]
        return self._compact[mode]

    @property
    def amp_inactive(self) -> bool:
        ok = self.ok(self.mode)
        return not self.is_ref and bool(ok) and not all(t.amp.active for t in ok)

    def rule(self, rule: str, status: str, observed: Any, threshold: Any, message: str,
             trials: list[str] | None = None, informational: bool = False, **details: Any) -> RuleResult:
        if informational:
            status = "INCONCLUSIVE"
            message = f"Informational (AMP inactive): {message}"
        extra: dict[str, Any] = {"informational": informational}
        if details:
            extra["details"] = details
        return RuleResult(suite=self.suite.suite.name, mode=self.mode, rule=rule, status=status,  # type: ignore[arg-type]
                          observed=_plain(observed), threshold=_plain(threshold), message=message,
                          trials=trials or [], **extra)


def _plain(x: Any) -> Any:
    """JSON-friendly: numpy scalars -> floats, rounded to 6 significant digits."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return float(f"{x:.6g}") if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _g(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def _last_line(text: str | None) -> str:
    """The line that says what went wrong: the exception line of a traceback, or the runner's own
    sentence for a killed trial (which is followed by the log tail, not the cause)."""
    head = (text or "").split("--- last log lines ---")[0]
    lines = [ln.strip() for ln in head.strip().splitlines() if ln.strip()]
    return lines[-1][:160] if lines else "no error recorded"


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _all(count: int) -> str:
    return "the only trial" if count == 1 else f"all {count} trials"


def _finite(loss: float | None) -> bool:
    """The worker records a non-finite loss as null (JSON has no NaN), so None counts as non-finite."""
    return loss is not None and math.isfinite(loss)


def _diff_text(worse: float) -> str:
    return "no difference" if worse == 0 else f"{_g(abs(worse), 3)} {'worse' if worse > 0 else 'better'}"


def _mean(v: list[float]) -> float:
    return float(np.mean(v)) if v else float("nan")


# ---------------------------------------------------------------- rules


def rule_completeness(c: _Ctx) -> RuleResult:
    """Every planned trial present and ok; seeds unique and the same as FP32's (a matched comparison)."""
    problems: list[tuple[str, str, str]] = []  # (status, text, trial)
    own, ref = c.seeds(c.mode), c.seeds(REFERENCE_MODE)
    keys = [(c.mode, s) for s in own] + ([] if c.is_ref else [(REFERENCE_MODE, s) for s in ref])
    for mode, seed in keys:
        name, t = trial_key(mode, seed), c.trials.get((mode, seed))
        if t is None:
            problems.append(("INCONCLUSIVE", f"{name} is missing (re-run with --resume)", name))
        elif t.status == "crashed":
            problems.append(("ERROR", f"{name} crashed: {_last_line(t.error)}", name))
        elif t.status != "ok" and mode == c.mode:
            problems.append(("FAIL", f"{name} ended '{t.status}': {_last_line(t.error)}", name))
        elif t.status != "ok":
            problems.append(("INCONCLUSIVE", f"reference {name} ended '{t.status}', so there is nothing to "
                             "compare against", name))
    if len(set(own)) != len(own):
        problems.append(("ERROR", f"seeds of {c.mode} repeat in the plan: {own}", ""))
    if not c.is_ref and sorted(own) != sorted(ref):
        problems.append(("ERROR", f"seeds differ: {c.mode} has {sorted(own)}, fp32 has {sorted(ref)}; "
                         "the comparison is not matched", ""))
    n_ok = sum(1 for k in keys if k in c.trials and c.trials[k].status == "ok")
    observed = f"{n_ok}/{len(keys)} ok"
    threshold = "all ok, seeds matched"
    if not problems:
        who = f"{_n(len(own), 'seed')} x {{{c.mode}{'' if c.is_ref else ', fp32'}}}"
        return c.rule("completeness", "PASS", observed, threshold,
                      f"All {_n(len(keys), 'planned trial')} ({who}) finished ok with matching seeds.")
    status = combine([p[0] for p in problems])
    return c.rule("completeness", status, observed, threshold, "; ".join(p[1] for p in problems) + ".",
                  trials=[p[2] for p in problems if p[2]])


def _op_counts(trials: list[Trial]) -> tuple[int, int]:
    low = total = 0
    for t in trials:
        for op, by_dtype in t.amp.op_calls.items():
            for dtype, n in by_dtype.items():
                total += int(n)
                low += int(n) if dtype in LOW_PRECISION and op not in CAST_OPS else 0
    return low, total


def rule_amp_active(c: _Ctx) -> RuleResult:
    """AMP must really have run in low precision (op dtype evidence); inactive is never PASS."""
    ts = c.ok(c.mode)
    mode = c.suite.mode(c.mode)
    threshold = f"{mode.level} {mode.dtype} ops recorded in every trial"
    if not ts:
        return c.rule("amp-active", "INCONCLUSIVE", None, threshold, "No completed trial to inspect for AMP activity.")
    active = [t for t in ts if t.amp.active]
    low, total = _op_counts(ts)
    share = low / total if total else None
    ops = f"{low} of {total} recorded op calls ran in float16/bfloat16" if total else "no op dtype counts recorded"
    observed = f"{len(active)}/{len(ts)} active"
    if len(active) == len(ts):
        return c.rule("amp-active", "PASS", observed, threshold,
                      f"AMP {mode.level}/{mode.dtype} was active in {_all(len(ts))} ({ops}).",
                      low_precision_share=share)
    reasons = sorted({t.amp.inactive_reason for t in ts if not t.amp.active and t.amp.inactive_reason})
    why = "; ".join(reasons) or "no low-precision op calls"
    return c.rule("amp-active", "INCONCLUSIVE", observed, threshold,
                  f"AMP inactive in {len(ts) - len(active)} of {len(ts)} trials: {why}; {ops}. Numerics stayed "
                  "FP32, so parity, speedup and memory cannot be judged here.",
                  trials=[t.key for t in ts if not t.amp.active], low_precision_share=share)


def rule_op_lists(c: _Ctx) -> RuleResult | None:
    """The suite's custom white/black lists really took effect (op dtype evidence), e.g. embeddings
    black-listed as lookup_table_v2 ran in float32. Only for modes that set custom lists."""
    mode = c.suite.mode(c.mode)
    if not (mode.custom_white_list or mode.custom_black_list):
        return None
    ts = c.ok(c.mode)
    threshold = "black-listed ops: 0 low-precision calls; white-listed ops: some"
    unknown = sorted({n for t in ts for n in t.amp.unknown_op_names})
    if unknown:
        return c.rule("op-lists", "INCONCLUSIVE", f"unknown: {', '.join(unknown)}", threshold,
                      f"Custom op list names {', '.join(unknown)} that Paddle does not know; Paddle ignores them "
                      "silently (e.g. embedding is lookup_table_v2), so the list cannot have taken effect.",
                      trials=[t.key for t in ts if t.amp.unknown_op_names])
    calls: dict[str, dict[str, int]] = {}
    for t in ts:
        for op, by in t.amp.op_calls.items():
            agg = calls.setdefault(op, {})
            for dt, n in by.items():
                agg[dt] = agg.get(dt, 0) + int(n)
    low = {op: sum(v for k, v in by.items() if k in LOW_PRECISION) for op, by in calls.items()}
    leaked = [op for op in mode.custom_black_list if low.get(op, 0) > 0]
    missed = [op for op in mode.custom_white_list if op in calls and low.get(op, 0) == 0]
    unseen = [op for op in mode.custom_white_list + mode.custom_black_list if op not in calls]
    note = f" Not called in the recorded steps: {', '.join(unseen)}." if unseen else ""
    if c.amp_inactive:
        return c.rule("op-lists", "INCONCLUSIVE", "AMP inactive", threshold,
                      "every op ran in float32 on this device, so the custom lists cannot be verified here."
                      + note, informational=True)
    if leaked or missed:
        parts = ([f"black-listed {', '.join(leaked)} ran in low precision"] if leaked else []) + \
                ([f"white-listed {', '.join(missed)} never ran in low precision"] if missed else [])
        return c.rule("op-lists", "FAIL", "; ".join(parts), threshold,
                      f"The custom op lists did not take effect: {'; '.join(parts)}.{note}")
    return c.rule("op-lists", "PASS", "as configured", threshold,
                  f"Black-listed ops stayed float32 and white-listed ops ran in low precision.{note}")


def rule_baseline_quality(c: _Ctx) -> tuple[RuleResult, str | None]:
    """Parity means nothing if FP32 learned nothing: its loss must fall, its metric reach the floor.

    Returns the result and, when FP32 is not good enough, the reason parity must cite.
    """
    ref = c.ok(REFERENCE_MODE)
    floor = c.th.min_baseline_metric
    threshold = {"min_baseline_metric": floor, "fp32_loss": "falls"}
    if not ref:
        return c.rule("baseline-quality", "INCONCLUSIVE", None, threshold, "No ok fp32 trial."), "no ok fp32 trial"
    problems = []
    falls = [(t, *stats.loss_fell([s.loss for s in t.steps])) for t in ref]
    flat = [(t, a, b) for t, fell, a, b in falls if not fell]
    if flat:
        problems.append("FP32 loss did not fall in " + ", ".join(
            f"{t.key} ({_g(a)} -> {_g(b)})" for t, a, b in flat))
    vals = [t.metrics[c.metric] for t in ref if c.metric in t.metrics and math.isfinite(t.metrics[c.metric])]
    mean = _mean(vals)
    if floor is not None:
        if not vals:
            problems.append(f"FP32 metric {c.metric!r} not recorded, so min_baseline_metric {floor} cannot be checked")
        elif c.goal == "max" and mean < floor:
            problems.append(f"FP32 mean {c.metric} {_g(mean)} is below min_baseline_metric {_g(floor)}")
        elif c.goal == "min" and mean > floor:
            problems.append(f"FP32 mean {c.metric} {_g(mean)} is above min_baseline_metric {_g(floor)} (lower is better)")
    observed = {"fp32_mean": mean if vals else None, "loss_fell": f"{len(ref) - len(flat)}/{len(ref)}"}
    if problems:
        why = "; ".join(problems)
        return c.rule("baseline-quality", "INCONCLUSIVE", observed, threshold,
                      why + ": FP32 itself did not learn enough for parity to mean anything.",
                      trials=[t.key for t, _, _ in flat]), why
    floor_txt = f", mean {c.metric} {_g(mean)} meets min_baseline_metric {_g(floor)}" if floor is not None else \
        " (no min_baseline_metric set)"
    return c.rule("baseline-quality", "PASS", observed, threshold,
                  f"FP32 loss fell in {_all(len(ref))}{floor_txt}."), None


def _metric_values(trials: list[Trial], metric: str) -> tuple[list[float], list[str], list[str]]:
    vals, missing, bad = [], [], []
    for t in trials:
        v = t.metrics.get(metric)
        if v is None:
            missing.append(t.key)
        elif not math.isfinite(v):
            bad.append(t.key)
        else:
            vals.append(float(v))
    return vals, missing, bad


def _margin_text(m: stats.Margin, c: _Ctx) -> str:
    if m.sd is None:
        return (f"margin {_g(m.value)} = metric_abs_tol alone (one FP32 seed: seed-to-seed noise unknown; "
                "add seeds for a noise-aware margin)")
    return (f"margin {_g(m.value)} = max(metric_abs_tol {_g(c.th.metric_abs_tol)}, {_g(c.th.metric_sigma_k)} x "
            f"FP32 seed sd {_g(m.sd)} over {m.n} seeds)")


def rule_accuracy_parity(c: _Ctx, quality_problem: str | None) -> RuleResult:
    """AMP's mean metric no worse than FP32's by more than the parity margin."""
    ref_vals, ref_missing, ref_bad = _metric_values(c.ok(REFERENCE_MODE), c.metric)
    amp_vals, amp_missing, amp_bad = _metric_values(c.ok(c.mode), c.metric)
    if amp_bad:
        return c.rule("accuracy-parity", "FAIL", None, None,
                      f"AMP metric {c.metric!r} is not finite in {', '.join(amp_bad)}.", trials=amp_bad)
    if ref_missing or amp_missing or ref_bad or not ref_vals or not amp_vals:
        which = ref_missing + amp_missing + ref_bad
        why = f"metric {c.metric!r} missing or not finite in {', '.join(which)}" if which else "no ok trials to compare"
        return c.rule("accuracy-parity", "INCONCLUSIVE", None, None, f"Cannot compare accuracy: {why}.", trials=which)
    margin = stats.parity_margin(ref_vals, c.th.metric_abs_tol, c.th.metric_sigma_k)
    amp_mean, ref_mean = _mean(amp_vals), _mean(ref_vals)
    worse = stats.worse_by(amp_mean, ref_mean, c.goal)
    direction = "lower is better" if c.goal == "min" else "higher is better"
    head = (f"AMP mean {c.metric} {_g(amp_mean)} vs FP32 {_g(ref_mean)} ({len(amp_vals)} vs {_n(len(ref_vals), 'seed')}, "
            f"{direction}): ")
    rel = _diff_text(worse)
    details = dict(amp_mean=amp_mean, fp32_mean=ref_mean, fp32_sd=margin.sd, margin_source=margin.source,
                   amp_values=amp_vals, fp32_values=ref_vals)
    if worse > margin.value:
        status, msg = "FAIL", f"{head}{rel}, beyond the {_margin_text(margin, c)}."
    elif -worse > margin.value:
        status, msg = "PASS", (f"{head}{rel}, beyond the {_margin_text(margin, c)}; not a regression, "
                               "but the numerics differ from FP32 more than expected.")
    else:
        status, msg = "PASS", f"{head}{rel}, within the {_margin_text(margin, c)}."
    if c.amp_inactive:
        return c.rule("accuracy-parity", status, worse, margin.value, msg, informational=True, **details)
    if quality_problem:
        return c.rule("accuracy-parity", "INCONCLUSIVE", worse, margin.value,
                      f"Not judged ({quality_problem}). {msg}", **details)
    return c.rule("accuracy-parity", status, worse, margin.value, msg, **details)


def _batch_note(c: _Ctx) -> str:
    amp_b = {t.batch_size for t in c.ok(c.mode)}
    ref_b = {t.batch_size for t in c.ok(REFERENCE_MODE)}
    if amp_b and ref_b and amp_b != ref_b:
        return f" AMP batch {sorted(amp_b)} vs FP32 {sorted(ref_b)}."
    return ""


def rule_speedup(c: _Ctx) -> RuleResult:
    """Lower bound of a bootstrap CI of median(AMP samples/s) / median(FP32 samples/s) >= min_speedup."""
    amp = [r for r in (t.rates() for t in c.compact(c.mode)) if len(r)]
    ref = [r for r in (t.rates() for t in c.compact(REFERENCE_MODE)) if len(r)]
    need = c.th.min_speedup
    if not amp or not ref:
        return c.rule("speedup", "INCONCLUSIVE", None, need, "No measured (non-warm-up) steps to compare.",
                      informational=c.amp_inactive)
    ci = stats.bootstrap_median_ratio(amp, ref, c.th.confidence, c.th.bootstrap_resamples,
                                      seed=stats.stable_seed(c.suite.suite.name, c.mode, "speedup"))
    ok = ci.low >= need
    n_amp, n_ref = sum(map(len, amp)), sum(map(len, ref))
    msg = (f"AMP {_g(stats.pooled_median(amp))} vs FP32 {_g(stats.pooled_median(ref))} samples/s (median per step, "
           f"{n_amp} vs {n_ref} measured steps): speedup {ci.estimate:.3f}, {c.th.confidence:.0%} CI "
           f"[{ci.low:.3f}, {ci.high:.3f}]; lower bound {'>=' if ok else '<'} min_speedup {_g(need)}")
    if not ok and ci.high >= need:
        msg += " (not demonstrated: the interval straddles the threshold; more steps or seeds narrow it)"
    msg += "." + _batch_note(c)
    return c.rule("speedup", "PASS" if ok else "FAIL", ci.low, need, msg, informational=c.amp_inactive,
                  estimate=ci.estimate, ci_low=ci.low, ci_high=ci.high, confidence=ci.confidence,
                  resamples=ci.resamples)


_SOURCE_TEXT = {"cuda": "CUDA allocator peak (max_memory_allocated)", "host": "host allocator peak (CPU)",
                "rss": "process peak RSS"}


def rule_memory(c: _Ctx) -> RuleResult:
    """1 - AMP peak / FP32 peak >= min_memory_reduction, from the same memory source."""
    need = c.th.min_memory_reduction
    amp, ref = c.compact(c.mode), c.compact(REFERENCE_MODE)
    sources = {t.memory_source for t in amp + ref}
    if not amp or not ref or "none" in sources or any(t.peak_bytes <= 0 for t in amp + ref):
        return c.rule("memory", "INCONCLUSIVE", None, need, "Peak memory not recorded for every trial.",
                      informational=c.amp_inactive)
    if len(sources) > 1:
        return c.rule("memory", "INCONCLUSIVE", None, need,
                      f"Peak memory comes from different sources ({', '.join(sorted(sources))}); not comparable.")
    src = sources.pop()
    amp_peak = float(np.median([t.peak_bytes for t in amp]))
    ref_peak = float(np.median([t.peak_bytes for t in ref]))
    red = 1 - amp_peak / ref_peak
    ok = red >= need
    msg = (f"{_SOURCE_TEXT.get(src, src)}: AMP {bytes_h(amp_peak)} vs FP32 {bytes_h(ref_peak)} "
           f"(median over seeds), reduction {red:.1%} {'>=' if ok else '<'} min_memory_reduction {need:.0%}.")
    if src != "cuda":
        msg += " This is not device memory" + ("; AMP is inactive anyway, so no reduction is expected." if
                                               c.amp_inactive else ".")
    note = _batch_note(c)
    if note and not c.amp_inactive:
        # A mode that runs a larger batch (the seed's "AMP lets batch 32 fit") is not meant to save memory
        # against FP32's smaller batch: report the numbers, do not judge them.
        return c.rule("memory", "PASS", red, need, "Not judged, batch sizes differ:" + note + " " + msg,
                      source=src, amp_peak_bytes=amp_peak, fp32_peak_bytes=ref_peak, judged=False)
    msg += note
    return c.rule("memory", "PASS" if ok else "FAIL", red, need, msg, informational=c.amp_inactive,
                  source=src, amp_peak_bytes=amp_peak, fp32_peak_bytes=ref_peak)


def rule_stability(c: _Ctx) -> RuleResult:
    """No non-finite loss, few skipped (found_inf) steps, no loss-scale collapse."""
    th = c.th
    threshold = {"nonfinite_losses": 0, "max_skipped_fraction": th.max_skipped_fraction,
                 "loss_scale_floor": th.loss_scale_floor, "collapse_halvings": th.collapse_halvings}
    ts = [t for t in c.present(c.mode) if t.steps]
    if not ts:
        return c.rule("stability", "INCONCLUSIVE", None, threshold, "No step records to inspect.")
    problems, names = [], []
    nonfinite_total, worst_frac, worst_key, first_collapse = 0, 0.0, "", None
    scale_seen = False
    for t in ts:
        bad_steps = [s.step for s in t.steps if not _finite(s.loss)]
        nonfinite = max(t.nonfinite_losses, len(bad_steps))
        skipped = max(t.skipped_steps, sum(1 for s in t.steps if s.found_inf))
        frac = skipped / len(t.steps)
        nonfinite_total += nonfinite
        if frac >= worst_frac:
            worst_frac, worst_key = frac, t.key
        if nonfinite:
            first = bad_steps[0] if bad_steps else None
            problems.append(f"{t.key}: {nonfinite} non-finite loss(es)" + (f", first at step {first}" if first else ""))
            names.append(t.key)
        if frac > th.max_skipped_fraction:
            problems.append(f"{t.key}: {skipped} of {len(t.steps)} steps skipped (found_inf), {frac:.1%} > "
                            f"{th.max_skipped_fraction:.1%}")
            names.append(t.key)
        scales = [s.loss_scale for s in t.steps]
        scale_seen |= any(x is not None for x in scales)
        col = stats.find_scale_collapse([s.step for s in t.steps], scales, [s.loss for s in t.steps],
                                        th.loss_scale_floor, th.collapse_halvings)
        if col:
            why = (f"fell below loss_scale_floor {_g(th.loss_scale_floor)} (to {_g(col.scale)}) at step "
                   f"{col.detected_step}" if col.kind == "floor" else
                   f"halved {col.halvings} times without recovering (to {_g(col.scale)} by step {col.detected_step}) "
                   "while the loss stopped falling")
            problems.append(f"{t.key}: loss-scale collapse began at step {col.began_step}: scale {why}")
            names.append(t.key)
            if first_collapse is None or col.began_step < first_collapse:
                first_collapse = col.began_step
    observed = {"nonfinite_losses": nonfinite_total, "max_skipped_fraction": worst_frac,
                "collapse_began_step": first_collapse}
    scale_txt = "" if scale_seen else " No loss scale was recorded (scaler off or inactive)."
    if problems:
        return c.rule("stability", "FAIL", observed, threshold, "; ".join(problems) + "." + scale_txt,
                      trials=sorted(set(names)))
    return c.rule("stability", "PASS", observed, threshold,
                  f"{_n(len(ts), 'trial')}: no non-finite loss, at most {worst_frac:.1%} of steps skipped "
                  f"({worst_key}; limit {th.max_skipped_fraction:.1%}), no loss-scale collapse." + scale_txt)


# ---------------------------------------------------------------- history (against a baseline)


def rule_history(c: _Ctx) -> list[RuleResult]:
    """Throughput, metric and peak memory of this mode against the same mode in the baseline."""
    b = c.baseline
    assert b is not None
    note = c.baseline_note
    base = b.trials(c.mode)
    if not base:
        return [c.rule("history-throughput", "INCONCLUSIVE", None, None,
                       f"{note}The baseline has no ok trial of mode {c.mode}.")]
    cur = c.compact(c.mode)
    out = [_history_throughput(c, cur, base, note), _history_metric(c, cur, base, note)]
    mem = _history_memory(c, cur, base, note)
    if mem:
        out.append(mem)
    return out


def _history_throughput(c: _Ctx, cur: list[CompactTrial], base: list[CompactTrial], note: str) -> RuleResult:
    th = c.th
    threshold = {"min_change": th.history_min_change, "alpha": th.history_alpha}
    now = [r for r in (t.rates() for t in cur) if len(r)]
    then = [r for r in (t.rates() for t in base) if len(r)]
    if not now or not then:
        return c.rule("history-throughput", "INCONCLUSIVE", None, threshold, f"{note}No measured steps to compare.")
    sh = stats.throughput_shift(now, then, th.history_min_change, th.history_alpha)
    ci = stats.bootstrap_median_ratio(now, then, th.confidence, th.bootstrap_resamples,
                                      seed=stats.stable_seed(c.suite.suite.name, c.mode, "history"))
    change = sh.ratio - 1
    head = (f"{note}{c.mode} throughput {_g(stats.pooled_median(now))} vs baseline {_g(stats.pooled_median(then))} "
            f"samples/s: {change:+.1%} ({th.confidence:.0%} CI {ci.low - 1:+.1%} to {ci.high - 1:+.1%}), "
            f"Mann-Whitney p = {sh.p_value:.2g}")
    if sh.regression:
        status, tail = "FAIL", f"; a significant slowdown (p < {th.history_alpha:g}) larger than {th.history_min_change:.0%}."
    elif sh.improvement:
        status, tail = "PASS", f"; a significant speed-up larger than {th.history_min_change:.0%}."
    else:
        why = "not significant" if not sh.significant else f"within {th.history_min_change:.0%}"
        status, tail = "PASS", f"; not flagged ({why})."
    return c.rule("history-throughput", status, change, threshold, head + tail,
                  ratio=sh.ratio, p_value=sh.p_value, ci_low=ci.low, ci_high=ci.high)


def _history_metric(c: _Ctx, cur: list[CompactTrial], base: list[CompactTrial], note: str) -> RuleResult:
    now = [t.metric for t in cur if t.metric is not None and math.isfinite(t.metric)]
    then = [t.metric for t in base if t.metric is not None and math.isfinite(t.metric)]
    if not now or not then:
        return c.rule("history-metric", "INCONCLUSIVE", None, None,
                      f"{note}Metric {c.metric!r} missing here or in the baseline.")
    # Same parity margin as accuracy-parity, with FP32's seed noise pooled over this run and the baseline.
    ref_now = [t.metric for t in c.compact(REFERENCE_MODE) if t.metric is not None and math.isfinite(t.metric)]
    ref_then = [t.metric for t in c.baseline.trials(REFERENCE_MODE)  # type: ignore[union-attr]
                if t.metric is not None and math.isfinite(t.metric)]
    sd, _ = stats.pooled_sd([ref_now, ref_then])
    margin = stats.margin_from_sd(sd, len(ref_now) + len(ref_then), c.th.metric_abs_tol, c.th.metric_sigma_k)
    worse = stats.worse_by(_mean(now), _mean(then), c.goal)
    msg = (f"{note}{c.mode} mean {c.metric} {_g(_mean(now))} vs baseline {_g(_mean(then))}: "
           f"{_diff_text(worse)}, "
           f"{'beyond' if worse > margin.value else 'within'} the {_margin_text(margin, c)}.")
    return c.rule("history-metric", "FAIL" if worse > margin.value else "PASS", worse, margin.value, msg,
                  current_mean=_mean(now), baseline_mean=_mean(then))


def _history_memory(c: _Ctx, cur: list[CompactTrial], base: list[CompactTrial], note: str) -> RuleResult | None:
    now = [t.peak_bytes for t in cur if t.peak_bytes > 0]
    then = [t.peak_bytes for t in base if t.peak_bytes > 0]
    src_now, src_then = {t.memory_source for t in cur}, {t.memory_source for t in base}
    if not now or not then or src_now != src_then or len(src_now) != 1:
        return None
    grow = float(np.median(now)) / float(np.median(then)) - 1
    lim = c.th.history_min_change
    msg = (f"{note}{c.mode} peak memory ({_SOURCE_TEXT.get(next(iter(src_now)), 'peak')}) "
           f"{bytes_h(float(np.median(now)))} vs baseline {bytes_h(float(np.median(then)))}: {grow:+.1%} "
           f"({'above' if grow > lim else 'within'} the {lim:.0%} allowed growth).")
    return c.rule("history-memory", "FAIL" if grow > lim else "PASS", grow, lim, msg)


# ---------------------------------------------------------------- putting it together


def _mismatches(suite: Suite, trials: list[Trial], b: Baseline) -> list[str]:
    ok = [t for t in trials if t.status == "ok"] or trials
    cur = {
        "suite": suite.suite.name,
        "config_hash": next((t.config_hash for t in ok if t.config_hash), "") or suite.config_hash(),
        "device": device_slug(ok[0].env) if ok else "unknown",
    }
    then = {"suite": b.suite, "config_hash": b.config_hash, "device": b.device}
    return [f"{k} {then[k]!r} (baseline) vs {cur[k]!r} (this run)" for k in cur if then[k] and then[k] != cur[k]]


def judge_mode(c: _Ctx) -> ModeVerdict:
    rules = [rule_completeness(c)]
    if not c.is_ref:
        rules.append(rule_amp_active(c))
        lists = rule_op_lists(c)
        if lists is not None:
            rules.append(lists)
        quality, problem = rule_baseline_quality(c)
        rules += [quality, rule_accuracy_parity(c, problem), rule_speedup(c), rule_memory(c)]
    rules.append(rule_stability(c))
    if c.baseline is not None:
        rules += rule_history(c)
    verdict = combine([r.status for r in rules])
    if verdict == "PASS" and c.amp_inactive:  # belt and braces: inactive AMP is never PASS
        verdict = "INCONCLUSIVE"
    return ModeVerdict(suite=c.suite.suite.name, mode=c.mode, verdict=verdict, rules=rules)


def check_trials(
    suite: Suite,
    trials: list[Trial],
    plan: list[tuple[str, int]],
    baseline: Baseline | None = None,
    allow_mismatch: bool = False,
) -> list[ModeVerdict]:
    """Judge every planned mode (fp32 too: its own completeness, stability and history)."""
    plan = [(str(m), int(s)) for m, s in plan]
    names = [m.name for m in suite.modes]
    unknown = sorted({m for m, _ in plan} - set(names))
    if unknown:
        raise ResultsError(f"run.json: plan names mode(s) {unknown} that the suite config does not define")
    note = ""
    if baseline is not None:
        diffs = _mismatches(suite, trials, baseline)
        if diffs and not allow_mismatch:
            raise ResultsError(f"{baseline.path or 'baseline'}: not comparable: different {'; '.join(diffs)}. "
                               "Compare runs of the same suite, config and device, or pass --allow-mismatch")
        if diffs:
            note = f"[baseline mismatch allowed: {'; '.join(diffs)}] "
    by_key = {(t.mode, t.seed): t for t in trials}
    planned_modes = [m for m in names if any(pm == m for pm, _ in plan)]
    return [judge_mode(_Ctx(suite, m, plan, by_key, baseline, note)) for m in planned_modes]


def check_run(run_dir: Path, baseline: Path | None = None, strict: bool = False,
              allow_mismatch: bool = False) -> CheckReport:
    """Load a run folder, judge it, write check.json next to the trials, return the report."""
    run_dir = Path(run_dir)
    info, suite, trials = read_run(run_dir)
    where = run_dir / "run.json"
    try:
        plan = [(str(p["mode"]), int(p["seed"])) for p in info.plan]
    except (KeyError, TypeError, ValueError):
        raise ResultsError(f"{where}: plan entries must be {{\"mode\": ..., \"seed\": ...}}") from None
    if not plan:
        raise ResultsError(f"{where}: the plan is empty; nothing to check")
    unknown = sorted({m for m, _ in plan} - {m.name for m in suite.modes})
    if unknown:
        raise ResultsError(f"{where}: plan names mode(s) {unknown} that its config does not define")
    base = None
    if baseline is not None:
        ok = [t for t in trials if t.status == "ok"]
        base = load_baseline(Path(baseline), suite=info.suite, device=device_slug(ok[0].env) if ok else None)
    verdicts = check_trials(suite, trials, plan, baseline=base, allow_mismatch=allow_mismatch)
    notes = []
    if any(r.rule == "amp-active" and r.status != "PASS" for v in verdicts for r in v.rules):
        notes.append("AMP inactive on this device: parity, speedup and memory are informational, not claims.")
    if any(r.message.startswith("[baseline mismatch") for v in verdicts for r in v.rules):
        notes.append("Baseline from a different suite/config/device, compared anyway (--allow-mismatch).")
    report = CheckReport(
        suite=info.suite, run_dir=str(run_dir), profile=info.profile, config_hash=info.config_hash, strict=strict,
        baseline=str(base.path) if base is not None else None, verdicts=verdicts,
        exit_code=exit_code([v.verdict for v in verdicts], strict=strict), notes=notes,
    )
    try:
        report.write(run_dir / "check.json")
    except ResultsError as e:  # a read-only run folder is judged and printed all the same
        report.notes.append(f"check.json not written: {e}")
    return report


# ---------------------------------------------------------------- terminal


_STYLE = {"PASS": "green", "FAIL": "bold red", "INCONCLUSIVE": "yellow", "ERROR": "bold magenta"}


_ABBREV = {"nonfinite_losses": "nonfinite", "max_skipped_fraction": "skipped", "collapse_began_step": "collapse@",
           "loss_scale_floor": "floor", "collapse_halvings": "halvings", "min_baseline_metric": "min",
           "fp32_loss": "loss", "fp32_mean": "fp32", "loss_fell": "loss fell", "min_change": "change",
           "alpha": "alpha"}


def _short(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return _g(x)
    if isinstance(x, dict):
        return ", ".join(f"{_ABBREV.get(k, k)} {_short(v)}" for k, v in x.items() if v is not None)
    return str(x)


def print_check(report: CheckReport, console: Any) -> None:
    """A rich table (mode, rule, status, observed, threshold, message) and the overall line.

    On narrow terminals (< 120 columns) observed/threshold are left out: the message carries them.
    """
    from rich.markup import escape
    from rich.table import Table

    wide = console.width >= 120
    table = Table(title=escape(f"ampbench check: {report.suite} ({report.profile})"), expand=True)
    table.add_column("mode", no_wrap=wide, overflow="fold")
    table.add_column("rule", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("observed", ratio=1, overflow="fold")
        table.add_column("threshold", ratio=1, overflow="fold")
    table.add_column("message", ratio=4, min_width=30)
    informational = False
    for v in report.verdicts:
        for i, r in enumerate(v.rules):
            info = bool(getattr(r, "informational", False))
            informational |= info
            label = f"[{_STYLE[r.status]}]{r.status}[/]" + ("*" if info else "")
            cells = [escape(v.mode) if i == 0 else "", escape(r.rule), label]
            if wide:
                cells += [escape(_short(r.observed)), escape(_short(r.threshold))]
            table.add_row(*cells, escape(r.message))
        table.add_section()
    console.print(table)
    if informational:
        console.print("* informational: computed and shown, but not judged (AMP inactive)", highlight=False)
    for n in report.notes:
        console.print(f"note: {escape(n)}", highlight=False)
    parts = ", ".join(f"{escape(v.mode)} [{_STYLE[v.verdict]}]{v.verdict}[/]" for v in report.verdicts)
    console.print(f"{escape(report.suite)}: {parts} -> exit {report.exit_code}"
                  + (" (--strict)" if report.strict else ""), highlight=False)
