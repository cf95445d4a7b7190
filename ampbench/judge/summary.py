"""A run summarised per mode (the history line, the report's summary table, the dashboard).

Every throughput figure comes from judge/measure.py's one definition, so the console, summary.csv,
`ampbench summary`, check.json, report.md/html, the history and the dashboard show the same
samples/s for a mode. The speedup interval is the speed rule's own (check.json) when the run was
checked, else the same trial-level log-ratio interval computed here.
"""

from __future__ import annotations

import math

import numpy as np

from ampbench.config import REFERENCE_MODE, Suite
from ampbench.judge import inference, measure
from ampbench.judge.rules import registry
from ampbench.record import fields
from ampbench.record.models import RunInfo, Trial
from ampbench.results.baselines import node_of
from ampbench.results.history import (
    MAX_HIST_BINS,
    NOT_CHECKED,
    ModeSummary,
    RunSummary,
    StepTimeHist,
    TrialPoint,
)
from ampbench.results.verdicts import CheckReport, SpeedupDetails, combine


def _mode_summary(mode: str, ts: list[Trial], metric: str, confidence: float) -> tuple[ModeSummary, measure.ModeStats]:
    """One mode's own figures (throughput with its interval, peak memory, metric)."""
    ok = [t for t in ts if t.status == "ok"]
    first = ts[0]
    s = ModeSummary(
        mode=mode, amp_requested=first.amp.requested, amp_active=any(t.amp.active for t in ok or ts),
        amp_emulated=any(t.amp.emulated for t in ok or ts),
        level=first.amp.level, dtype=first.amp.dtype, batch_size=first.batch_size, trials=len(ts),
        ok=len(ok), unit=first.throughput.unit or "samples",
    )
    for t in ts:
        s.statuses[t.status] = s.statuses.get(t.status, 0) + 1
    ms = measure.mode_stats([t.step_rates() for t in ok], confidence)
    s.samples_per_s, s.samples_per_s_ci = ms.samples_per_s, ms.interval
    _add_peak(s, ok)
    _add_metric(s, ok, metric)
    s.skipped_steps = sum(t.skipped_steps for t in ok)
    s.total_steps = sum(len(t.steps) for t in ok)
    s.per_trial = [trial_point(t, metric) for t in ok]
    s.step_time_hist = step_time_hist([st.time_s for t in ok for st in t.measured_steps()])
    s.floor_samples_per_s = measure.run_floor([p.floor_samples_per_s for p in s.per_trial if p.floor_samples_per_s])
    return s, ms


def _add_peak(s: ModeSummary, ok: list[Trial]) -> None:
    """The mode's peak memory: the largest over its ok trials that recorded one, with the first such
    trial's source (cuda or host); left unset when none did, never reported as zero."""
    peaks = [t.peak_memory() for t in ok if t.peak_memory()[0]]
    if peaks:
        s.peak_bytes = max(p for p, _ in peaks)
        s.memory_source = peaks[0][1]


def _add_metric(s: ModeSummary, ok: list[Trial], metric: str) -> None:
    """Mean, seed sd (none for a single value) and count of the metric over the ok trials with a finite
    value; left unset when no trial has one, so a missing metric never reads as a mean of nothing."""
    vals = [t.metrics[metric] for t in ok if metric in t.metrics and math.isfinite(t.metrics[metric])]
    if vals:
        s.metric_mean = float(np.mean(vals))
        s.metric_std = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
        s.metric_n = len(vals)


def step_time_hist(times: list[float]) -> StepTimeHist | None:
    """The measured step times in at most MAX_HIST_BINS equal bins (numpy's Freedman-Diaconis width, or
    fewer bins when that would give more): the step-time histogram of a mode, as pytest-benchmark's
    --benchmark-histogram draws its rounds.  None when fewer than 2 steps or all times equal."""
    x = np.array([v for v in times if math.isfinite(v) and v > 0], dtype=float)
    if len(x) < 2 or float(x.min()) == float(x.max()):
        return None
    edges = np.histogram_bin_edges(x, bins="fd")
    if len(edges) - 1 > MAX_HIST_BINS:
        edges = np.histogram_bin_edges(x, bins=MAX_HIST_BINS)
    counts, edges = np.histogram(x, bins=edges)
    return StepTimeHist(lo_s=float(edges[0]), width_s=float(edges[1] - edges[0]), counts=[int(c) for c in counts])


def trial_point(t: Trial, metric: str) -> TrialPoint:
    """An ok trial's figures for the history line: the speed rule's per-trial median (trials with fewer
    than MIN_STEPS measured steps have none, as the rule leaves them out), metric, peak, CPU evidence."""
    value = t.metrics.get(metric)
    inf = t.interference
    share = inf.cpu_share if inf is not None and inf.cpu_share else t.cpu_share()
    peak = t.peak_memory()[0]
    rates = t.step_rates()
    return TrialPoint(
        seed=t.seed, samples_per_s=measure.judged_rate(rates), floor_samples_per_s=measure.judged_floor(rates),
        trimmed_samples_per_s=measure.judged_trimmed(rates),
        metric=float(value) if value is not None and math.isfinite(value) else None, peak_bytes=peak or None,
        cpu_share=share, others_cpu=inf.others_cpu if inf is not None else None, cpu_count=t.env.cpu_count,
        node=node_of(t),
        **{c.csv_name: c.value(t) for c in fields.columns("history")})  # the catalog's (record/fields.py)


def _relative(out: dict[str, ModeSummary], stats: dict[str, measure.ModeStats],
              checker: dict[str, SpeedupDetails], confidence: float) -> None:
    """Speedup, memory reduction and metric delta of each mode against fp32 (in place)."""
    ref = out.get(REFERENCE_MODE)
    if ref is None:
        return
    for mode, s in out.items():
        if mode == REFERENCE_MODE:
            continue
        if s.metric_mean is not None and ref.metric_mean is not None:
            s.metric_delta = s.metric_mean - ref.metric_mean
        if s.amp_emulated:   # emulated AMP: its steps' time and memory are the emulation's, not AMP's
            continue
        s.speedup = measure.speedup(stats[mode], stats[REFERENCE_MODE])
        if mode in checker:  # the checker's own interval: report and check.json agree
            d = checker[mode]
            s.speedup_ci = (d.ci_low, d.ci_high)
        elif s.speedup and min(len(stats[mode].per_trial), len(stats[REFERENCE_MODE].per_trial)) >= 2:
            b = inference.log_ratio_bounds(stats[mode].per_trial, stats[REFERENCE_MODE].per_trial, confidence)
            s.speedup_ci = (b.low, b.high)
        if s.peak_bytes and ref.peak_bytes and s.memory_source == ref.memory_source:
            s.memory_reduction = 1.0 - s.peak_bytes / ref.peak_bytes


def summarize_modes(trials: list[Trial], metric: str, check: CheckReport | None = None,
                    confidence: float = 0.95) -> dict[str, ModeSummary]:
    """Per-mode figures, with speedup / memory reduction / metric delta relative to fp32."""
    by_mode: dict[str, list[Trial]] = {}
    for t in trials:
        by_mode.setdefault(t.mode, []).append(t)
    verdicts = {v.mode: v for v in (check.verdicts if check else [])}
    stats: dict[str, measure.ModeStats] = {}
    checker: dict[str, SpeedupDetails] = {}
    out: dict[str, ModeSummary] = {}
    for mode, ts in by_mode.items():
        out[mode], stats[mode] = _mode_summary(mode, ts, metric, confidence)
        if mode in verdicts:
            out[mode].verdict = verdicts[mode].verdict
            out[mode].flagged_rules = [r.rule for r in verdicts[mode].reasons]
            hist = next((r for r in verdicts[mode].rules if registry.result(r.rule).figure == "history_change"), None)
            if hist is not None:
                out[mode].history_status = hist.status
                ok = isinstance(hist.observed, (int, float)) and not isinstance(hist.observed, bool)
                out[mode].history_change = float(hist.observed) if ok and math.isfinite(hist.observed) else None
                hold = hist.details.get("hold")
                out[mode].history_hold = hold if hold in ("fail", "pending") else None
            details = registry.speedup_details(verdicts[mode])
            if details is not None:
                checker[mode] = details
    _relative(out, stats, checker, confidence)
    return out


def overall_verdict(check: CheckReport | None) -> str:
    if check is None:
        return NOT_CHECKED
    return combine([v.verdict for v in check.verdicts]) if check.verdicts else "PASS"


def summarize_run(info: RunInfo, suite: Suite, trials: list[Trial], check: CheckReport | None,
                  run_dir: str = "") -> RunSummary:
    """The history line of one run (typed inputs: the store opened the run, the caller read check.json)."""
    meta = suite.suite
    env = info.env if info.env.paddle or not trials else trials[0].env
    confidence = suite.thresholds.confidence
    modes = summarize_modes(trials, meta.metric, check, confidence=confidence)
    return RunSummary(
        suite=info.suite, workload=meta.workload, run_id=info.run_id, run_dir=run_dir, profile=info.profile,
        started=info.started, finished=info.finished, config_hash=info.config_hash, device=env.device,
        device_name=env.device_name, driver=env.driver, paddle=env.paddle, cuda=env.cuda, cudnn=env.cudnn,
        git_sha=env.git_sha, metric=meta.metric, metric_goal=meta.metric_goal, verdict=overall_verdict(check),
        exit_code=check.exit_code if check else None, confidence=confidence, modes=modes,
        history_min_change=suite.thresholds.history_min_change,
    )
