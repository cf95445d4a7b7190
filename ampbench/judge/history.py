"""The compact per-run summary: one JSON line per run in results/history/<suite>.jsonl.

The nightly job appends a line after each run; the trend report reads the file back.  A line
holds per-mode medians, intervals, peak memory, metric mean/std and the checker's verdicts,
enough to draw a trend without the (large, git-ignored) run folders.  The same summary feeds
the report's summary table, so a report and the history line never disagree.

Statistics come from the stored per-step records of the trials (never from averages of
averages): samples/s is the median of per-step rates pooled over a mode's ok trials, with a
seeded two-stage percentile bootstrap interval (ampbench.judge.stats, the checker's method).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ampbench.config import REFERENCE_MODE
from ampbench.judge import stats
from ampbench.judge.verdict import CheckReport, combine, load_check
from ampbench.results import ResultsError, RunDir, RunInfo, Trial, atomic_write_text, read_text, safe_name, validate_doc

HISTORY_SCHEMA = "ampbench.history/1"
NOT_CHECKED = "not checked"
# Looser than a run folder's id (older tools wrote ':' and '+'), but bounded and starting with a letter or
# digit: no control character, no formula start in a CSV cell, no path trick.
HISTORY_RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,511}$"


class ModeSummary(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: str
    amp_requested: bool = False
    amp_active: bool = False
    level: str = "O0"
    dtype: str = "float32"
    batch_size: int = 0
    trials: int = 0
    ok: int = 0
    statuses: dict[str, int] = {}
    unit: str = "samples"
    samples_per_s: float | None = None
    samples_per_s_ci: tuple[float, float] | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    peak_bytes: int | None = None
    memory_source: str = "none"
    memory_reduction: float | None = None
    metric_mean: float | None = None
    metric_std: float | None = None
    metric_n: int = 0
    metric_delta: float | None = None
    skipped_steps: int = 0
    total_steps: int = 0
    verdict: str = NOT_CHECKED
    flagged_rules: list[str] = []


class RunSummary(BaseModel):
    """One line of results/history/<suite>.jsonl (schema HISTORY_SCHEMA), read through validate_doc."""

    SCHEMA: ClassVar[str] = HISTORY_SCHEMA
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(HISTORY_SCHEMA, alias="schema")
    suite: str
    workload: str = ""
    run_id: str = Field(pattern=HISTORY_RUN_ID)
    run_dir: str = ""
    profile: str = ""
    started: str = ""
    finished: str | None = None
    config_hash: str = ""
    device: str = ""
    device_name: str = ""
    driver: str = ""
    paddle: str = ""
    cuda: str = ""
    cudnn: str = ""
    git_sha: str = ""
    metric: str = ""
    metric_goal: str = "max"
    verdict: str = NOT_CHECKED
    exit_code: int | None = None
    confidence: float = 0.95  # of the intervals below
    modes: dict[str, ModeSummary] = {}

    def to_line(self) -> str:
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, separators=(",", ":"), allow_nan=False)


# ---------------------------------------------------------------- statistics from raw steps


def _median_ci(groups: list[np.ndarray], resamples: int, confidence: float,
               seed: int) -> tuple[float, float] | None:
    """Two-stage bootstrap CI of the pooled median (trials, then steps), as the checker's speedup CI.

    stats.bootstrap_median_ratio over a constant denominator of 1 is exactly that interval.
    """
    if sum(len(g) for g in groups) < 3:
        return None
    iv = stats.bootstrap_median_ratio(groups, [np.ones(1)], confidence, resamples, seed)
    return (iv.low, iv.high)


def _ratio_ci(num: list[np.ndarray], den: list[np.ndarray], resamples: int, confidence: float,
              seed: int) -> tuple[float, float] | None:
    if sum(len(g) for g in num) < 3 or sum(len(g) for g in den) < 3:
        return None
    iv = stats.bootstrap_median_ratio(num, den, confidence, resamples, seed)
    return (iv.low, iv.high)


def _seed(*names: str) -> int:
    return stats.stable_seed("report", *names)


def suite_meta(run: RunInfo | None, trials: list[Trial]) -> tuple[str, str]:
    """(primary metric, goal) from the run's effective config, else from the trials' metrics."""
    cfg: dict[str, Any] = (run.config if run else {}) or (trials[0].config if trials else {})
    meta = cfg.get("suite", {}) if isinstance(cfg.get("suite"), dict) else {}
    name = str(meta.get("metric") or "")
    if not name:
        for t in trials:
            if t.metrics:
                name = next(iter(t.metrics))
                break
    return name, str(meta.get("metric_goal") or "max")


def _mode_summary(mode: str, ts: list[Trial], metric: str, resamples: int, confidence: float
                  ) -> tuple[ModeSummary, list[np.ndarray]]:
    """One mode's own figures (throughput with its interval, peak memory, metric) and its step rates."""
    ok = [t for t in ts if t.status == "ok"]
    first = ts[0]
    s = ModeSummary(
        mode=mode, amp_requested=first.amp.requested, amp_active=any(t.amp.active for t in ok or ts),
        level=first.amp.level, dtype=first.amp.dtype, batch_size=first.batch_size, trials=len(ts),
        ok=len(ok), unit=first.throughput.unit or "samples",
    )
    for t in ts:
        s.statuses[t.status] = s.statuses.get(t.status, 0) + 1
    groups = [g for g in (t.step_rates() for t in ok) if len(g)]
    if groups:
        s.samples_per_s = float(np.median(np.concatenate(groups)))
        s.samples_per_s_ci = _median_ci(groups, resamples, confidence, _seed(mode))
    elif ok and any(t.throughput.samples_per_s for t in ok):
        s.samples_per_s = float(np.median([t.throughput.samples_per_s for t in ok]))
    peaks = [t.peak_memory() for t in ok if t.peak_memory()[0]]
    if peaks:
        s.peak_bytes = max(p for p, _ in peaks)
        s.memory_source = peaks[0][1]
    vals = [t.metrics[metric] for t in ok if metric in t.metrics and math.isfinite(t.metrics[metric])]
    if vals:
        s.metric_mean = float(np.mean(vals))
        s.metric_std = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
        s.metric_n = len(vals)
    s.skipped_steps = sum(t.skipped_steps for t in ok)
    s.total_steps = sum(len(t.steps) for t in ok)
    return s, groups


def _relative(out: dict[str, ModeSummary], rates: dict[str, list[np.ndarray]],
              checker: dict[str, tuple[float, tuple[float, float]] | None], resamples: int, confidence: float) -> None:
    """Speedup, memory reduction and metric delta of each mode against fp32 (in place)."""
    ref = out.get(REFERENCE_MODE)
    if ref is None:
        return
    for mode, s in out.items():
        if mode == REFERENCE_MODE:
            continue
        if checker.get(mode):  # the checker's own interval: report and check.json must agree
            s.speedup, s.speedup_ci = checker[mode]  # type: ignore[misc]
        elif s.samples_per_s and ref.samples_per_s:
            s.speedup = s.samples_per_s / ref.samples_per_s
            if rates[mode] and rates[REFERENCE_MODE]:
                s.speedup_ci = _ratio_ci(rates[mode], rates[REFERENCE_MODE], resamples, confidence,
                                         _seed(mode, REFERENCE_MODE))
        if s.peak_bytes and ref.peak_bytes and s.memory_source == ref.memory_source:
            s.memory_reduction = 1.0 - s.peak_bytes / ref.peak_bytes
        if s.metric_mean is not None and ref.metric_mean is not None:
            s.metric_delta = s.metric_mean - ref.metric_mean


def summarize_modes(
    trials: list[Trial], metric: str, check: CheckReport | None = None,
    resamples: int = 1000, confidence: float = 0.95,
) -> dict[str, ModeSummary]:
    """Per-mode figures, with speedup / memory reduction / metric delta relative to fp32."""
    by_mode: dict[str, list[Trial]] = {}
    for t in trials:
        by_mode.setdefault(t.mode, []).append(t)
    verdicts = {v.mode: v for v in (check.verdicts if check else [])}
    rates: dict[str, list[np.ndarray]] = {}
    checker: dict[str, tuple[float, tuple[float, float]] | None] = {}
    out: dict[str, ModeSummary] = {}
    for mode, ts in by_mode.items():
        out[mode], rates[mode] = _mode_summary(mode, ts, metric, resamples, confidence)
        if mode in verdicts:
            out[mode].verdict = verdicts[mode].verdict
            out[mode].flagged_rules = [r.rule for r in verdicts[mode].reasons]
            checker[mode] = _checker_speedup(verdicts[mode].rules)
    _relative(out, rates, checker, resamples, confidence)
    return out


def _checker_speedup(rules: list[Any]) -> tuple[float, tuple[float, float]] | None:
    """(estimate, (low, high)) from the speedup rule's details in check.json, when it has them."""
    for r in rules:
        d = (r.model_extra or {}).get("details") if r.rule == "speedup" else None
        keys = ("estimate", "ci_low", "ci_high")
        if isinstance(d, dict) and all(isinstance(d.get(k), (int, float)) for k in keys):
            return float(d["estimate"]), (float(d["ci_low"]), float(d["ci_high"]))
    return None


def overall_verdict(check: CheckReport | None) -> str:
    if check is None:
        return NOT_CHECKED
    return combine([v.verdict for v in check.verdicts]) if check.verdicts else "PASS"


def load_check_optional(run: RunDir) -> CheckReport | None:
    """check.json if the run was checked; a corrupt one is an error, a missing one is not."""
    p = run.path / "check.json"
    return load_check(p, root=run.path) if p.is_symlink() or p.is_file() else None


def summarize_run(run_dir: Path | RunDir, trials: list[Trial] | None = None,
                  check: CheckReport | None = None) -> RunSummary:
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    info = run.load_run()
    trials = run.load_trials() if trials is None else trials
    if check is None:
        check = load_check_optional(run)
    metric, goal = suite_meta(info, trials)
    env = info.env if info.env.paddle or not trials else trials[0].env
    thr = info.config.get("thresholds", {}) if isinstance(info.config, dict) else {}
    confidence = float(thr.get("confidence", 0.95))
    modes = summarize_modes(trials, metric, check, confidence=confidence)
    return RunSummary(
        suite=info.suite,
        workload=trials[0].workload if trials else str((info.config.get("suite") or {}).get("workload", "")),
        run_id=info.run_id, run_dir=str(run.path), profile=info.profile, started=info.started,
        finished=info.finished, config_hash=info.config_hash, device=env.device, device_name=env.device_name,
        driver=env.driver, paddle=env.paddle, cuda=env.cuda, cudnn=env.cudnn, git_sha=env.git_sha,
        metric=metric, metric_goal=goal, verdict=overall_verdict(check),
        exit_code=check.exit_code if check else None, confidence=confidence, modes=modes,
    )


# ---------------------------------------------------------------- the history file


def history_file(history_dir: Path, suite: str) -> Path:
    return Path(history_dir) / f"{safe_name(suite, 'suite')}.jsonl"  # a name from a file: no path tricks


def append_history(run_dir: Path, history_dir: Path) -> Path:
    """Add (or replace, if the run is already there) the run's summary line; returns the file.

    Re-appending the same run replaces its line, so a re-checked nightly does not count twice.
    The file is rewritten atomically: a crash never leaves half a line behind.
    """
    summary = summarize_run(run_dir)
    path = history_file(history_dir, summary.suite)
    lines: list[str] = []
    if path.is_file():
        for i, line in enumerate(read_text(path, "history file").splitlines(), 1):
            if not line.strip():
                continue
            if _parse_line(line, path, i).run_id != summary.run_id:  # a corrupt file is refused
                lines.append(line)
    lines.append(summary.to_line())
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def _parse_line(line: str, path: Path, lineno: int) -> RunSummary:
    """One history line through the versioned loader (the error names file:line and the key)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}:{lineno}: not valid JSON ({e.msg}); fix or delete that line") from None
    return validate_doc(RunSummary, data, f"{path}:{lineno}")


def load_history(path: Path) -> list[dict]:
    """All lines of one history file, oldest first (by start time), one entry per run id."""
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"{path}: history file not found")
    entries: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(read_text(path, "history file").splitlines(), 1):
        if line.strip():
            data = _parse_line(line, path, i)
            entries[data.run_id] = data.model_dump(mode="json", by_alias=True)
    return sorted(entries.values(), key=lambda d: (d.get("started") or "", d["run_id"]))


def history_sources(history: Path, suites: list[str]) -> list[Path]:
    """`--history` is a jsonl file or a folder of <suite>.jsonl; only existing files are returned."""
    history = Path(history)
    if history.is_file():
        return [history]
    if history.is_dir():
        return [p for s in suites if (p := history_file(history, s)).is_file()]
    raise ResultsError(f"{history}: history file or folder not found")
