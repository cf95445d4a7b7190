"""The pooled history baseline of `check --history`: every run since the last change point, not one run.

A comparison against one stored baseline run is bounded by that run's few trials, whatever the current
run adds (docs/checks.md, the issue-23 acceptance: at a 0.23 trial spread no number of current seeds
FAILs a 20% slowdown).  Nightly CI already holds dozens of comparable runs; asv and
PaddlePaddle/benchmark compare against the series.  Here the baseline is the segment of the series
that belongs to the current code's regime:

- the series: the history lines (results.history) of the same suite, device (slug) and config hash,
  oldest first, the judged run itself left out;
- the segment: the runs after the last step that judge.changepoint confirms in any mode's throughput
  (a config change already cut the series; a step means the machine or the code changed there), the
  newest POOL_CAP of them (older runs describe an older machine state even without a detected step);
- at least MIN_RUNS runs, since the run-to-run drift is estimated from the spread of their run means
  (inference.series_bounds_batch); with fewer, `check` falls back to --baseline if given.

`check --baseline RUN` is judged by the same rule as a history of one run (`one_run`): the same figures and
gate, run against run; what one run cannot show, how far a run's level moves from run to run, is an
allowance it states (`assumed_drift`: the history's estimate where --history is given, else the default).

The history line keeps per trial what the rules need (results.history.TrialPoint): the median
samples/s, the metric, the peak and the CPU evidence, so the run folders may be gone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ampbench.core.text import printable
from ampbench.judge import changepoint, inference, measure
from ampbench.record.models import Env, Interference
from ampbench.results.accepts import AcceptRecord
from ampbench.results.baselines import Baseline, CompactTrial, device_slug
from ampbench.results.history import ModeSummary, RunSummary, TrialPoint

POOL_CAP = 20  # newest runs of the segment that form the baseline
MIN_RUNS = 3  # fewer runs leave the drift (the spread of run means) unestimated
FLOOR_KEY = "floor_samples_per_s"  # ModeSummary's run fast floor


@dataclass(frozen=True)
class OpenRegression:
    """The newest nights held out of the pool, one FAILed at least: a regression not accepted yet."""

    since: str  # the first night's run id
    started: str  # and its start time
    nights: int
    worst: dict[str, float]  # per mode, the lowest change a night of it recorded

    def describe(self) -> str:
        modes = ", ".join(f"{k} {v:+.1%}" for k, v in sorted(self.worst.items()))
        return (f"open regression since run {self.since} ({self.started or 'start not recorded'}, {self.nights} "
                f"night(s) held out of the baseline; worst {modes}): fix it, or accept the new level with "
                f"`ampbench history accept HISTORY --run {self.since} --by NAME --why TEXT`")


@dataclass(frozen=True)
class PooledBaseline:
    """The runs that form the baseline, oldest first, and why the segment starts where it does."""

    runs: tuple[RunSummary, ...]
    since: str  # "the start of the history" or the step that opened the segment
    left_out: int = 0  # older runs of the segment beyond POOL_CAP
    open_regression: OpenRegression | None = None  # the newest nights, held out and not accepted
    # one --baseline run (one_run): the run-to-run drift assumed, not estimated; its trials as they are
    assumed_drift: float | None = None
    trials_of: dict[str, list[CompactTrial]] | None = None

    @property
    def single(self) -> bool:
        """A history of one run (check --baseline): the run-to-run spread is assumed (`assumed_drift`)."""
        return self.assumed_drift is not None

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    def describe(self) -> str:
        """Which runs formed the baseline: the report and check.json's notes say it."""
        if self.single:
            return f"the baseline run ({self.since})"
        if not self.runs:
            return f"no comparable run in the history since {self.since}"
        span = self.runs[0].run_id if len(self.runs) == 1 else f"{self.runs[0].run_id} .. {self.runs[-1].run_id}"
        cap = f"; {self.left_out} older run(s) of the segment left out (cap {POOL_CAP})" if self.left_out else ""
        return f"the {len(self.runs)} run(s) of the history since {self.since} ({span}{cap})"

    def rates(self, mode: str) -> list[list[float]]:
        """Per run that has any: the log samples/s of its trials of `mode` (runs without one are left out)."""
        return self._logs(mode, "samples_per_s")

    def floors(self, mode: str) -> list[list[float]]:
        """Per run that has any: the log fast floors of its trials of `mode` (judge.measure.judged_floor;
        history lines written before the floor was kept have none and are left out)."""
        return self._logs(mode, "floor_samples_per_s")

    def trimmed(self, mode: str) -> list[list[float]]:
        """Per run that has any: the log trimmed mean rates of its trials of `mode` (judge.measure.judged_trimmed;
        lines written before it was kept have none and are left out)."""
        return self._logs(mode, "trimmed_samples_per_s")

    def _logs(self, mode: str, key: str) -> list[list[float]]:
        out = []
        for r in self.runs:
            m = r.modes.get(mode)
            v = [math.log(x) for p in (m.per_trial if m else []) if (x := getattr(p, key))]
            if v:
                out.append(v)
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
        """The segment's trials as compact trials carrying only their CPU evidence (judge.interference); one
        baseline run's trials as they are (their GPU evidence too)."""
        if self.trials_of is not None:
            return list(self.trials_of.get(mode, []))
        return [CompactTrial(mode=mode, seed=p.seed, cpu_count=p.cpu_count,
                             interference=Interference(cpu_share=p.cpu_share, others_cpu=p.others_cpu))
                for p in self.points(mode)]


def comparable(history: Sequence[RunSummary], suite: str, config_hash: str, env: Env,
               run_id: str) -> list[RunSummary]:
    """The series the run belongs to: same suite, config hash and device slug (a line that recorded no
    device is kept), the run itself left out."""
    slug = device_slug(env)
    return [h for h in history if h.suite == suite and h.config_hash == config_hash and h.run_id != run_id
            and (not h.device or device_slug(Env(device=h.device, device_name=h.device_name)) == slug)]


def other_node(line: RunSummary, nodes: Sequence[str]) -> bool:
    """Whether a history line's trials ran on none of `nodes`, the run's (lines and runs that recorded no node:
    False): another machine of the same device model measures that machine, so it stays out of the series."""
    theirs = {p.node for m in line.modes.values() for p in m.per_trial if p.node}
    return bool(theirs) and bool(nodes) and theirs.isdisjoint(nodes)


def regressed(line: RunSummary, min_change: float) -> bool:
    """Whether check judged this night's throughput below -min_change in any mode (the estimate its
    history-throughput recorded in the line: judge.summary); lines that recorded none are not."""
    return any(m.history_change is not None and m.history_change < -min_change for m in line.modes.values())


def _accepted_cut(series: Sequence[RunSummary], accepts: Sequence[AcceptRecord]) -> tuple[int, set[str], str | None]:
    """(index the newest accepted level starts at, run ids every record cleared, its description)."""
    index = {h.run_id: i for i, h in enumerate(series)}
    cut, cleared, text = 0, set(), None
    for a in accepts:
        lo = index.get(a.run_id)
        if lo is None:  # a level of another device or config of the suite
            continue
        cleared |= set(a.cleared)
        if lo >= cut:
            cut, text = lo, printable(f"the level accepted from run {a.run_id} by {a.by} on {a.at}: {a.why}")
    return cut, cleared, text


def select(series: Sequence[RunSummary], cap: int = POOL_CAP, min_change: float | None = None,
           accepts: Sequence[AcceptRecord] = ()) -> PooledBaseline:
    """The segment since the last confirmed step of any mode's throughput (or the newest accepted level,
    if later): its newest `cap` runs that carry per-trial figures.  With `min_change`, a night that check
    judged below -min_change (`regressed`) stays out, before the steps are sought, unless a person
    accepted its level (`accepts`, results.accepts): a regression missed once must not become the level
    the next nights are judged against, nor cut the series into a segment of its own."""
    cut, cleared, accepted = _accepted_cut(series, accepts)
    held = [h for h in series[cut:] if min_change is not None and h.run_id not in cleared and regressed(h, min_change)]
    out = {h.run_id for h in held}
    kept = [h for h in series[cut:] if h.run_id not in out]
    entries = [h.model_dump(mode="json", by_alias=True) for h in kept]
    # the steps of the figure the rule judges: the runs' fast floors where the lines keep them (a slow
    # episode of the machine moves the median figure by up to 45% here and would cut the series at it)
    floored = sum(1 for h in kept if any(m.floor_samples_per_s for m in h.modes.values()))
    found = changepoint.all_steps(entries, FLOOR_KEY if floored >= MIN_RUNS else "samples_per_s")
    last = max(found, key=lambda s: s.after, default=None)
    start = last.after if last is not None else 0
    since = (accepted or "the start of the history") if last is None else \
        f"the step at run {last.run_after} ({last.describe()})"
    # lines written before per-trial figures were kept (issue 34) mark steps but cannot join the pool
    seg = [h for h in kept[start:] if any(m.per_trial for m in h.modes.values())]
    return PooledBaseline(tuple(seg[-cap:]), since, max(0, len(seg) - cap), _open(series[cut:], out))


def _open(series: Sequence[RunSummary], held: set[str]) -> OpenRegression | None:
    """The newest nights, when they are held out of the pool and one of them FAILed: a regression that
    no person accepted and no later night has recovered from."""
    tail: list[RunSummary] = []
    for h in reversed(series):
        if h.run_id not in held:
            break
        tail.insert(0, h)
    failed = [h for h in tail if any(m.history_status == "FAIL" for m in h.modes.values())]
    if not failed:
        return None
    worst = {k: min(x for h in tail if (m := h.modes.get(k)) and (x := m.history_change) is not None)
             for k in {k for h in tail for k, m in h.modes.items() if m.history_change is not None}}
    return OpenRegression(tail[0].run_id, tail[0].started, len(tail), worst)


def one_run(b: Baseline, drift: float) -> PooledBaseline:
    """A --baseline run as a history of one run: one line whose trial points carry the figures the pooled
    rule judges (judge.measure: median, fast floor, trimmed mean) and their CPU evidence; `drift` (sd of the
    log level difference between two runs) is what the one run cannot show, assumed."""
    modes = {}
    for mode in b.modes:
        points = [_point(t) for t in b.trials(mode)]
        modes[mode] = ModeSummary(mode=mode, ok=len(points), per_trial=points,
                                  memory_source=next((t.memory_source for t in b.trials(mode)), "none"))
    line = RunSummary(suite=b.suite, run_id="baseline", config_hash=b.config_hash, modes=modes)
    where = b.source or b.path or "the baseline file"
    return PooledBaseline((line,), where, assumed_drift=drift, trials_of={m: b.trials(m) for m in b.modes})


def _point(t: CompactTrial) -> TrialPoint:
    rates = t.rates()
    share = t.interference.cpu_share if t.interference is not None else None
    others = t.interference.others_cpu if t.interference is not None else None
    finite = t.metric is not None and math.isfinite(t.metric)
    return TrialPoint(seed=t.seed, samples_per_s=measure.judged_rate(rates), floor_samples_per_s=measure.judged_floor(rates),
                      trimmed_samples_per_s=measure.judged_trimmed(rates), metric=t.metric if finite else None,
                      peak_bytes=t.peak_bytes or None, cpu_share=share if share and share > 0 else None,
                      others_cpu=others, cpu_count=t.cpu_count, node=t.node)
