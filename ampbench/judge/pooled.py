"""The pooled history baseline of `check --history`: the run's series and its one segmentation (judge.series).

A comparison against one stored baseline run is bounded by that run's few trials, whatever the current
run adds (docs/checks.md, the issue-23 acceptance: at a 0.23 trial spread no number of current seeds
FAILs a 20% slowdown).  Nightly CI already holds dozens of comparable runs; asv and
PaddlePaddle/benchmark compare against the series.  Here:

- the series: the history lines of the same suite, config hash and device kind (judge.series), oldest
  first, the judged run itself left out; lines of another kind of GPU are never borrowed;
- the segmentation (judge.series.segment): the held and pending nights, where the current segment starts
  (the history's start, an accepted level, an improvement), the recent window, the reference level and the
  spread groups each mode is judged against (judge.gate, judge.rules.history_pooled);
- at least MIN_RUNS nights of the series with per-trial figures (their spread is the prediction's); with
  fewer, `check` falls back to --baseline if given, and says so.

The history line keeps per trial what the rules need (results.history.TrialPoint): the median, fast floor
and trimmed mean samples/s, the metric, the peak and the CPU evidence, so the run folders may be gone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ampbench.judge import inference, series
from ampbench.judge.series import Regression, Segmentation
from ampbench.record.models import Env, Interference
from ampbench.results.accepts import AcceptRecord
from ampbench.results.baselines import CompactTrial, device_slug
from ampbench.results.history import RunSummary, TrialPoint

POOL_CAP = series.POOL_CAP
MIN_RUNS = series.MIN_RUNS
FIGURE_KEYS = ("floor_samples_per_s", "trimmed_samples_per_s", "samples_per_s")  # judge.gate.FIGURES' order


@dataclass(frozen=True)
class OpenRegression:
    """The newest nights of the series held out of the pool: a regression (a night of it FAILed) or nights
    pending the next one; nobody accepted the level and no night recovered from it."""

    since: str  # the first night's run id
    started: str  # and its start time
    nights: int
    worst: dict[str, float]  # per mode, the lowest change a night of it recorded
    failed: bool = True  # a night of it FAILed (else: pending only)

    def describe(self) -> str:
        modes = ", ".join(f"{k} {v:+.1%}" for k, v in sorted(self.worst.items()))
        what = "open regression" if self.failed else "night(s) held out pending the next night"
        ask = ("fix it, or accept the new level with" if self.failed else
               "if the next night shows the same, it FAILs; to accept this level instead, run")
        return (f"{what} since run {self.since} ({self.started or 'start not recorded'}, {self.nights} "
                f"night(s) held out of the baseline; worst {modes or 'not recorded'}): {ask} "
                f"`ampbench history accept HISTORY --run {self.since} --by NAME --why TEXT`")


@dataclass(frozen=True)
class PooledBaseline:
    """The series (one device kind's lines, oldest first) with its segmentation."""

    lines: tuple[RunSummary, ...]
    seg: Segmentation
    kind: str = ""
    _index: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def runs(self) -> tuple[RunSummary, ...]:
        """The nights of the current segment that no mode holds out, newest POOL_CAP with per-trial figures: the
        metric's and memory's baseline, the CPU evidence."""
        held = {i for h in self.seg.held.values() for i in h}
        keep = [h for i, h in enumerate(self.lines) if i >= self.seg.start and i not in held
                and any(m.per_trial for m in h.modes.values())]
        return tuple(keep[-POOL_CAP:])

    @property
    def since(self) -> str:
        return self.seg.since

    @property
    def left_out(self) -> int:
        held = {i for h in self.seg.held.values() for i in h}
        n = sum(1 for i, h in enumerate(self.lines) if i >= self.seg.start and i not in held
                and any(m.per_trial for m in h.modes.values()))
        return max(0, n - POOL_CAP)

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    @property
    def enough(self) -> bool:
        """At least MIN_RUNS nights of the series can join a pool, one of them in the current segment."""
        kept = {i for m in self.seg.modes() for i in self.seg.kept(m)}
        return len(kept) >= MIN_RUNS and any(i >= self.seg.start for i in kept)

    @property
    def open_regression(self) -> OpenRegression | None:
        return open_of(self.seg, self.lines)

    def describe(self) -> str:
        """Which runs formed the baseline: the report and check.json's notes say it."""
        if not self.runs:
            return f"no comparable run in the history since {self.since}"
        span = self.runs[0].run_id if len(self.runs) == 1 else f"{self.runs[0].run_id} .. {self.runs[-1].run_id}"
        cap = f"; {self.left_out} older run(s) of the segment left out (cap {POOL_CAP})" if self.left_out else ""
        kind = f" on device kind {self.kind}" if self.kind else ""
        return f"the {len(self.runs)} run(s) of the history{kind} since {self.since} ({span}{cap})"

    def figures(self, modes: Sequence[str]) -> np.ndarray:
        """(3, 1, N, M, K) log figures of every night's trials (judge.gate.FIGURES order; NaN where missing)."""
        k = max((len(m.per_trial) for h in self.lines for m in h.modes.values()), default=1) or 1
        out = np.full((3, 1, len(self.lines), len(modes), k), np.nan)
        for n, h in enumerate(self.lines):
            for j, mode in enumerate(modes):
                m = h.modes.get(mode)
                for t, p in enumerate(m.per_trial if m else []):
                    for f, key in enumerate(FIGURE_KEYS):
                        v = getattr(p, key)
                        if v:
                            out[f, 0, n, j, t] = math.log(v)
        return out

    def metric_run_sd(self, modes: Sequence[str]) -> tuple[float, int] | None:
        """(tau, runs): the run-level sd of the metric over the segment's runs of `modes`
        (inference.run_effect_sd_batch), None with fewer than MIN_RUNS runs that recorded it in every mode."""
        runs = [[[p.metric for p in m.per_trial if p.metric is not None and math.isfinite(p.metric)]
                 for m in (r.modes.get(x) for x in modes) if m is not None] for r in self.runs]
        runs = [r for r in runs if len(r) == len(modes) and all(r)]
        if len(runs) < MIN_RUNS:
            return None
        k = max(len(v) for r in runs for v in r)
        arr = np.array([[[*v, *[math.nan] * (k - len(v))] for v in r] for r in runs])
        tau, _ = inference.run_effect_sd_batch(arr[None])
        return float(tau[0]), len(runs)

    def points(self, mode: str) -> list[TrialPoint]:
        return [p for r in self.runs if (m := r.modes.get(mode)) for p in m.per_trial]

    def per_seed(self, mode: str) -> list[CompactTrial]:
        """One compact trial per seed for the metric and memory rules: the seed's mean metric over the
        segment (the seed, not the run, is the metric's unit: unchanged code repeats a seeded metric)
        and its median peak, with the memory source all runs share ("mixed" when they differ)."""
        sources = {m.memory_source for r in self.runs if (m := r.modes.get(mode))}
        source = sources.pop() if len(sources) == 1 else "mixed"
        out = []
        for seed in sorted({p.seed for p in self.points(mode)}):
            pts = [p for p in self.points(mode) if p.seed == seed]
            vals = [p.metric for p in pts if p.metric is not None]
            peaks = sorted(p.peak_bytes for p in pts if p.peak_bytes)
            out.append(CompactTrial(mode=mode, seed=seed, metric=sum(vals) / len(vals) if vals else None,
                                    peak_bytes=peaks[len(peaks) // 2] if peaks else 0, memory_source=source))
        return out

    def evidence(self, mode: str) -> list[CompactTrial]:
        """The segment's trials as compact trials carrying only their CPU evidence (judge.interference)."""
        return [CompactTrial(mode=mode, seed=p.seed, cpu_count=p.cpu_count,
                             interference=Interference(cpu_share=p.cpu_share, others_cpu=p.others_cpu))
                for p in self.points(mode)]


def open_of(seg: Segmentation, lines: Sequence[RunSummary]) -> OpenRegression | None:
    """The series' open regression (or open pending nights): the newest held nights of any mode."""
    regs: list[Regression] = seg.open_regression()
    pend = {m: seg.pending(m) for m in seg.modes()}
    firsts = [r.first for r in regs] + [p[0] for p in pend.values() if p]
    if not firsts:
        return None
    first = min(firsts)
    tail = lines[first:]
    worst = {k: min(x for h in tail if (m := h.modes.get(k)) and (x := m.history_change) is not None)
             for k in {k for h in tail for k, m in h.modes.items() if m.history_change is not None}}
    return OpenRegression(lines[first].run_id, lines[first].started, len(tail), worst, failed=bool(regs))


def comparable(history: Sequence[RunSummary], suite: str, config_hash: str, env: Env,
               run_id: str) -> list[RunSummary]:
    """The series the run belongs to: same suite, config hash and device kind (a line that recorded no device
    joins only a run that recorded none), the run itself left out."""
    slug = device_slug(env) if env.device else ""
    return [h for h in history if h.suite == suite and h.config_hash == config_hash and h.run_id != run_id
            and series.kind_of(h) == slug]


def other_node(line: RunSummary, nodes: Sequence[str]) -> bool:
    """Whether a history line's trials ran on none of `nodes`, the run's (lines and runs that recorded no node:
    False): another machine of the same device model measures that machine, so it stays out of the series."""
    theirs = {p.node for m in line.modes.values() for p in m.per_trial if p.node}
    return bool(theirs) and bool(nodes) and theirs.isdisjoint(nodes)


def select(lines: Sequence[RunSummary], cap: int = POOL_CAP, min_change: float = 0.05,
           accepts: Sequence[AcceptRecord] = (), kind: str = "") -> PooledBaseline:
    """The series' one segmentation (judge.series.segment) over `lines` (one series, oldest first)."""
    del cap  # the window is judge.series.POOL_CAP
    nights = [series.night_of(h) for h in lines]
    return PooledBaseline(tuple(lines), series.segment(nights, series.accepted(accepts), min_change), kind)
