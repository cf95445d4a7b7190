"""The nightly gate (issue 55): one night's figures against the nights of its series, batch over rows.

`check --history` calls it with one row (judge.rules.history_pooled), the nightly simulation
(tests/nightly_sim.py, scripts/sim_nightly.py) with thousands; the nights come from judge.series (one
segmentation).  A run is the unit: each figure of a mode is its trials' median (inference.run_values_batch).

**The figures** of every mode (record.rates' definitions, per trial): the fast floor (95th percentile of the
per-step rates), the trimmed mean (samples over the time of the fastest 95% of the steps) and the median.

**The comparisons** of each figure (`predict`): this night against the recent window and against the
reference level (judge.series.Pools), each by the t prediction interval of one new night from the spread of
the series' nights around their segment's mean, Var = V (1 + 1/R), pooled over the modes with one mode's
degrees of freedom (the modes of a night share its GPU), at least DRIFT_FLOOR^2 (V of the reference from the
reference's own nights and earlier segments: a creep after them cannot widen it).  Beside each mode's level,
every AMP mode is judged on its AMP/FP32 ratio night over night, its own series: both modes of a night ran on
one GPU, so the ratio cancels the GPU-to-GPU level that dominates the levels' spread.

**The step-time gate** (`shape_evidence`): the trimmed mean sees slow steps whatever slows them; it counts
where the shape of the step times (s = log trimmed / floor, per trial) is steady in the segment (robust sd
of this mode's trials at most STEADY_SD) and in this night's trials of the mode (sd at most STEADY_SD_RUN),
and where the slow steps are not the machine's.  A mode's own slow steps recur in every trial of that mode; a
machine episode hits the trials running at that wall time, of either mode.  So: every trial of this mode
shifted and none of another mode's trials that ran between or beside them (wall clock, Trial.started_unix /
ended_unix) is this mode's own (counts at once); every mode shifted (a change of every mode, or a machine
busy all night), or no wall times, counts only when the previous night of the series showed the same shift
in this mode; else the night is held out pending the next one ("slow-steps-unconfirmed").

**The decision** of a mode (`decide_mode`): FAIL when a counted comparison demonstrates a slowdown beyond
history_min_change at 1 - history_alpha; PASS when every counted comparison rules it out at `confidence` (and
the median and an uncounted trimmed mean show none: else INCONCLUSIVE "typical-steps-slower"); else
INCONCLUSIVE.  The night is held out of later pools when it FAILed, or when a counted comparison shows the
slowdown at the PASS level only or its slow steps are unconfirmed ("pending"); judge.series lets a pending
night back in when the next night is not held.  A night FAILs only from its own figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ampbench.judge import inference, sequential
from ampbench.judge.series import Pools

FIGURES = ("floor", "trimmed", "median")
DRIFT_FLOOR = 0.003     # the least run-to-run sd a prediction allows (judge.changepoint.DRIFT_FLOOR)
STEADY_SD = 0.03        # robust sd of s over the segment's trials of the mode, at most
STEADY_SD_RUN = 0.06    # sd of s over this night's trials of the mode, at most
SHIFT_MIN = 0.01        # a trial's shape moved beyond max(SHIFT_MIN, SHIFT_K x the segment's robust sd)
SHIFT_K = 4.0
AGREE_MIN, AGREE_SHARE = 0.02, 0.3  # the previous night's shift confirms this one's within max(2%, 30%)
# the comparisons, in the order a tie names them: (figure, basis, against)
TESTS = (("floor", "level", "recent"), ("floor", "level", "reference"), ("trimmed", "level", "recent"),
         ("trimmed", "level", "reference"), ("floor", "ratio", "recent"), ("floor", "ratio", "reference"),
         ("trimmed", "ratio", "recent"), ("trimmed", "ratio", "reference"), ("median", "level", "recent"))


@dataclass(frozen=True)
class Levels:
    min_change: float
    confidence: float = 0.95   # PASS (and pending) one-sided level
    fail: float = 0.99         # FAIL one-sided level: 1 - history_alpha
    fail_ok: bool = True       # False below the FAIL floor (inference.MIN_FAIL_TRIALS trials this night)

    @property
    def threshold(self) -> float:
        return math.log(1 - self.min_change) if self.min_change < 1 else -math.inf


def nanmean(x: np.ndarray) -> np.ndarray:
    """The mean over the last axis leaving NaN out (NaN where nothing is left)."""
    with np.errstate(all="ignore"):
        n = (~np.isnan(x)).sum(-1)
        return np.where(n > 0, np.nansum(x, -1) / np.maximum(n, 1), np.nan)


def nanmedian(x: np.ndarray) -> np.ndarray:
    """The median over the last axis leaving NaN out (inference.run_values_batch)."""
    return inference.run_values_batch(x)


def gather(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """values (B, N), idx (B, R) with -1 pads -> (B, R) with NaN at the pads."""
    if idx.shape[-1] == 0:
        return np.full(idx.shape, np.nan)
    got = np.take_along_axis(values, np.maximum(idx, 0), -1)
    return np.where(idx >= 0, got, np.nan)


def _group_ss(values: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum of squares of `values` around their group's mean and degrees of freedom, per row (NaN values and
    label -1 left out)."""
    ss = np.zeros(values.shape[0])
    df = np.zeros(values.shape[0])
    ok = ~np.isnan(values) & (labels >= 0)
    for g in np.unique(labels[labels >= 0]):
        sel = ok & (labels == g)
        n = sel.sum(-1)
        x = np.where(sel, values, 0.0)
        mean = np.divide(x.sum(-1), n, out=np.zeros_like(ss), where=n > 0)
        ss += np.where(sel, (values - mean[:, None]) ** 2, 0.0).sum(-1)
        df += np.maximum(n - 1, 0)
    return ss, df


@dataclass(frozen=True)
class Spread:
    """The spread a prediction uses: this mode's (values, group labels) and the other modes' of the same
    nights, or a prior (sd, df) for a history too short to show one (issue 62: a history of one run)."""

    own: tuple[np.ndarray, np.ndarray]
    others: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    prior: tuple[float, float] | None = None

    def variance(self) -> tuple[np.ndarray, np.ndarray]:
        """(V, degrees of freedom for t) per row: pooled over the modes, one mode's df (the modes share their
        nights' GPU, so their deviations are not independent)."""
        ss, df = _group_ss(*self.own)
        ss_all, df_all = ss.copy(), df.copy()
        for v, lab in self.others:
            s2, d2 = _group_ss(v, lab)
            ss_all, df_all = ss_all + s2, df_all + d2
        if self.prior is not None:
            sd, pdf = self.prior
            if math.isinf(pdf):
                return np.full(ss.shape, sd ** 2), np.full(ss.shape, np.inf)
            ss_all, df_all, df = ss_all + sd ** 2 * pdf, df_all + pdf, df + pdf
        v = np.divide(ss_all, df_all, out=np.full(ss.shape, np.nan), where=df_all > 0)
        return v, df


def predict(cur: np.ndarray, means: np.ndarray, spread: Spread, lv: Levels,
            floor: float = DRIFT_FLOOR) -> dict[str, np.ndarray]:
    """This night's value `cur` (B,) against the nights `means` (B, R, NaN pads) by the t prediction interval:
    estimate, one-sided bounds at the PASS and FAIL levels, status and pending (a slowdown beyond min_change
    shown at the PASS level only)."""
    r = (~np.isnan(means)).sum(-1)
    with np.errstate(all="ignore"):
        est = cur - np.where(r > 0, np.nansum(means, -1) / np.maximum(r, 1), np.nan)
        v, df = spread.variance()
        v = np.maximum(v, floor ** 2)
        se = np.sqrt(v * (1 + 1 / r))
        ok = (r > 0) & (df >= 1) & np.isfinite(est)
        dfq = np.where(ok, df, 1)
        tp = sequential.t_quantile(lv.confidence, dfq)
        tf = sequential.t_quantile(lv.fail, dfq) if lv.fail_ok else np.inf
        lower, upper, fail_upper = est - tp * se, est + tp * se, est + tf * se
        t2 = sequential.t_quantile((1 + lv.confidence) / 2, dfq)
    thr = lv.threshold
    status = np.where(~ok, "INCONCLUSIVE", np.where(lower >= thr, "PASS", np.where(fail_upper < thr, "FAIL",
                                                                                    "INCONCLUSIVE")))
    pending = ok & (upper < thr) & (status != "FAIL")
    return {"estimate": est, "lower": lower, "upper": upper, "fail_upper": fail_upper, "low": est - t2 * se,
            "high": est + t2 * se, "sd": np.sqrt(v),
            "df": df, "runs": r, "status": status, "pending": pending}


def shape_evidence(cur: np.ndarray, seg: np.ndarray, prev: np.ndarray, interleaved: np.ndarray) -> dict[str, np.ndarray]:
    """The step-time gate, per row and mode.  cur (B, M, K): s = log(trimmed / floor) of this night's trials
    (NaN pads); seg (B, M, S): of the segment's trials; prev (B, M, P, K): of the newest nights'; interleaved
    (B, M): another mode's trials ran between or beside this mode's (wall clock)."""
    with np.errstate(all="ignore"):
        centre = nanmedian(seg)
        spread = 1.4826 * nanmedian(np.abs(seg - centre[..., None]))
        enough = (~np.isnan(seg)).sum(-1) >= 3
        bar = np.maximum(SHIFT_MIN, SHIFT_K * spread)[..., None]
        n = (~np.isnan(cur)).sum(-1)
        mean = np.nansum(cur, -1) / np.maximum(n, 1)
        sd = np.where(n > 1, np.sqrt(np.nansum((cur - mean[..., None]) ** 2, -1) / np.maximum(n - 1, 1)), 0.0)
        moved = (cur - centre[..., None]) < -bar
        every = (moved | np.isnan(cur)).all(-1) & (n > 0)
        touched = moved.any(-1)
        b4 = bar[..., None]
        prev_every = ((prev - centre[..., None, None] < -b4) | np.isnan(prev)).all(-1) & ((~np.isnan(prev)).sum(-1) > 0)
    steady = enough & (spread <= STEADY_SD)
    consistent = (sd <= STEADY_SD_RUN) & (every | ~touched)  # some trials moved, others not: the machine
    others = np.zeros_like(touched)
    for m in range(touched.shape[1]):
        others[:, m] = np.delete(touched, m, 1).any(-1)
    own = every & ~others & interleaved
    with np.errstate(all="ignore"):
        shift, prev_shift = nanmedian(cur) - centre, nanmedian(prev) - centre[..., None]
    # a change of the code slows the same share of steps night after night; a machine busy all night, a share
    # of its own: one of the newest nights confirms a shift of every mode only with about the same size
    agree = np.abs(shift[..., None] - prev_shift) <= np.maximum(AGREE_MIN, AGREE_SHARE * np.abs(shift))[..., None]
    confirmed = every & (prev_every & agree).any(-1)
    shifted = every
    counts = steady & consistent & (~shifted | own | confirmed)
    unconfirmed = steady & consistent & shifted & ~(own | confirmed)
    return {"steady": steady, "consistent": consistent, "shifted": shifted, "own": own, "confirmed": confirmed,
            "others": others, "counts": counts, "unconfirmed": unconfirmed, "centre": centre, "spread": spread,
            "sd": sd, "shift": shift, "prev_shift": prev_shift[..., 0] if prev_shift.shape[-1] else shift * np.nan}


@dataclass(frozen=True)
class ModeGate:
    """One mode's decision, per row: status, hold ("fail", "pending" or ""), the comparison that decided (an
    index into TESTS) and every comparison's result (None: not made, e.g. the ratio of the FP32 mode)."""

    status: np.ndarray
    hold: np.ndarray
    decided: np.ndarray
    tests: tuple[dict[str, np.ndarray] | None, ...]
    counted: np.ndarray          # (B, len(TESTS)) bool: which comparisons counted
    typical: np.ndarray          # typical-steps-slower: a PASS held back by the median or an uncounted trimmed mean
    unconfirmed: np.ndarray      # a trimmed-mean FAIL whose slow steps the next night must confirm

    @property
    def change(self) -> np.ndarray:
        """The decided comparison's change (ratio - 1; NaN where none was made): what the history line records."""
        est = np.full(self.status.shape, np.nan)
        for k, t in enumerate(self.tests):
            if t is not None:
                est = np.where(self.decided == k, t["estimate"], est)
        return np.exp(est) - 1


def decide_mode(tests: Sequence[dict[str, np.ndarray] | None], trimmed_counts: np.ndarray, ratio_counts: np.ndarray,
                unconfirmed: np.ndarray) -> ModeGate:
    """The decision of one mode from its comparisons (in TESTS order; None where not made)."""
    b = trimmed_counts.shape[0]
    counted = np.zeros((b, len(TESTS)), bool)
    status = np.full((b, len(TESTS)), "INCONCLUSIVE", dtype=object)
    est = np.full((b, len(TESTS)), np.inf)
    pending = np.zeros((b, len(TESTS)), bool)
    for k, ((fig, basis, _), t) in enumerate(zip(TESTS, tests)):
        if t is None:
            continue
        status[:, k], est[:, k], pending[:, k] = t["status"], np.nan_to_num(t["estimate"], nan=np.inf), t["pending"]
        if fig == "floor":
            counted[:, k] = True
        elif fig == "trimmed":
            counted[:, k] = trimmed_counts if basis == "level" else ratio_counts
    failed = counted & (status == "FAIL")
    unconf = unconfirmed & (status[:, 2:4] == "FAIL").any(-1)
    # PASS: the level comparisons rule a slowdown out; the ratio can only add evidence of one (it cannot rule out
    # a slowdown of every mode), so its undecided result does not hold a PASS back, its pending one does
    level = np.array([basis == "level" for _, basis, _ in TESTS])
    passed = (~counted[:, level] | (status[:, level] == "PASS")).all(-1) & ~(counted & pending)[:, ~level].any(-1)
    trimmed_fail = (status[:, 2:4] == "FAIL").any(-1) & ~trimmed_counts
    median_fail = status[:, 8] == "FAIL"
    typical = passed & ~unconf & (median_fail | trimmed_fail)
    out = np.where(failed.any(-1), "FAIL", np.where(passed & ~unconf & ~typical, "PASS", "INCONCLUSIVE"))
    hold = np.where(out == "FAIL", "fail", np.where((counted & pending).any(-1) | unconf, "pending", ""))
    # the comparison that decided: the FAIL with the lowest estimate; else the counted comparison nearest to a
    # slowdown (the lowest estimate), the uncounted trimmed mean or the median when they held a PASS back
    key = np.where(failed, est, np.inf)
    fallback = np.where(counted, est, np.inf)
    open_ = np.where(counted & (status != "PASS"), est, np.inf)
    decided = np.where(failed.any(-1), key.argmin(-1), np.where(np.isfinite(open_).any(-1), open_.argmin(-1),
                                                                 fallback.argmin(-1)))
    decided = np.where(unconf, 2, decided)
    return ModeGate(out, hold, decided, tuple(tests), counted, typical, unconf)


def describe_test(k: int) -> str:
    fig, basis, against = TESTS[k]
    what = {"floor": "the fast floor", "trimmed": "the trimmed mean", "median": "the median figure"}[fig]
    of = " of the AMP/FP32 ratio" if basis == "ratio" else ""
    return f"{what}{of} against the {'recent nights' if against == 'recent' else 'reference level'}"


@dataclass(frozen=True)
class Index:
    """judge.series.Pools of many rows as padded index arrays into the series' nights (-1: a pad)."""

    window: np.ndarray
    reference: np.ndarray
    spread: np.ndarray
    spread_labels: np.ndarray
    ref_spread: np.ndarray
    ref_labels: np.ndarray
    previous: np.ndarray

    @staticmethod
    def of(pools: Sequence[Pools | None], glob: Sequence[Sequence[int]] | None = None) -> Index:
        """From one judge.series.Pools per row (None: no pool); `glob` maps a row's series indexes to the
        indexes of the figures array (the simulation's nights of one device kind among all)."""
        cols: dict[str, list[list[int]]] = {k: [] for k in ("w", "r", "s", "sl", "rs", "rl", "p")}
        for row, p in enumerate(pools):
            if p is None:
                for col in cols.values():
                    col.append([])
                continue
            to = glob[row] if glob is not None else None

            def m(i: int, to: Sequence[int] | None = to) -> int:
                return to[i] if to is not None else i

            cols["w"].append([m(i) for i in p.window])
            cols["r"].append([m(i) for i in p.reference])
            cols["s"].append([m(i) for g in p.spread for i in g])
            cols["sl"].append([k for k, g in enumerate(p.spread) for _ in g])
            cols["rs"].append([m(i) for g in p.reference_spread for i in g])
            cols["rl"].append([k for k, g in enumerate(p.reference_spread) for _ in g])
            cols["p"].append([m(i) for i in p.previous])
        return Index(_pad(cols["w"]), _pad(cols["r"]), _pad(cols["s"]), _pad(cols["sl"]), _pad(cols["rs"]),
                     _pad(cols["rl"]), _pad(cols["p"]))


def _pad(rows: list[list[int]]) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    return np.array([r + [-1] * (width - len(r)) for r in rows], dtype=int).reshape(len(rows), width)


def _shapes(shape_hist: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(B, N, K) trial shapes of one mode, (B, R) night indexes -> (B, R * K) (NaN at pads)."""
    b, _, k = shape_hist.shape
    got = np.take_along_axis(shape_hist, np.maximum(idx, 0)[..., None].repeat(k, -1), 1)
    return np.where((idx >= 0)[..., None], got, np.nan).reshape(b, -1)


def _padded_stack(parts: list[np.ndarray]) -> np.ndarray:
    width = max((p.shape[-1] for p in parts), default=0)
    return np.stack([np.pad(p, ((0, 0), (0, width - p.shape[-1])), constant_values=np.nan) for p in parts], 1)


@dataclass(frozen=True)
class _Night:
    """What every comparison of one night reads: the run values of this night and the series', which nights'
    trimmed mean and median say something of the code (`clean`), the pools."""

    runs: np.ndarray     # (3, B, N, M) the series' nights
    now: np.ndarray      # (3, B, M) this night
    clean: np.ndarray    # (B, N, M)
    levels: Sequence[Index]
    ref: int | None
    lv: Levels
    prior: tuple[float, float] | None

    def values(self, f: int, m: int, ratio: bool) -> tuple[np.ndarray, np.ndarray]:
        """(the series' values, this night's) of figure f of mode m, or of its ratio to the reference mode."""
        values, value = self.runs[f][:, :, m], self.now[f][:, m]
        if ratio and self.ref is not None:
            values, value = values - self.runs[f][:, :, self.ref], value - self.now[f][:, self.ref]
        if FIGURES[f] != "floor":
            keep = self.clean[:, :, m] & (self.clean[:, :, self.ref] if ratio and self.ref is not None else True)
            values = np.where(keep, values, np.nan)
        return values, value

    def compare(self, m: int, k: int, rx: Index | None) -> dict[str, np.ndarray]:
        """Comparison k of TESTS for mode m (rx: the ratio's pools)."""
        fig, _, against = TESTS[k]
        f, recent = FIGURES.index(fig), against == "recent"
        values, value = self.values(f, m, rx is not None)
        ix = rx if rx is not None else self.levels[m]
        spread_idx, labels = (ix.spread, ix.spread_labels) if recent else (ix.ref_spread, ix.ref_labels)
        others: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
        if rx is None:  # the other modes' spread on their own kept nights (their deviations share the GPU)
            masked = self.runs[f] if fig == "floor" else np.where(self.clean, self.runs[f], np.nan)
            others = tuple((gather(masked[:, :, o], self.levels[o].spread if recent else self.levels[o].ref_spread),
                            self.levels[o].spread_labels if recent else self.levels[o].ref_labels)
                           for o in range(len(self.levels)) if o != m)
        sp = Spread((gather(values, spread_idx), labels), others, self.prior)
        return predict(value, gather(values, ix.window if recent else ix.reference), sp, self.lv)


def judge_night(cur: np.ndarray, hist: np.ndarray, levels: Sequence[Index], ratios: Sequence[Index | None],
                ref: int | None, interleaved: np.ndarray, lv: Levels,
                prior: tuple[float, float] | None = None,
                centre: Callable[[np.ndarray], np.ndarray] = nanmedian) -> tuple[list[ModeGate], dict[str, np.ndarray]]:
    """Every mode of one night against its series.  cur (3, B, M, K): this night's log figures per trial
    (FIGURES order, NaN pads); hist (3, B, N, M, K): the series' nights'; levels[m]: mode m's pools; ratios[m]:
    its AMP/FP32 ratio's (None for the reference mode `ref`); interleaved (B, M): wall-clock evidence
    (shape_evidence); `prior`: (sd, df) of the night-to-night spread where the series is too short to show it
    (a history of one run); `centre`: a run's value of its trials (the median: a series' spread is measured on
    the same figure; judge_runs' prior is a formula, the mean's).  Returns each mode's ModeGate and the step-time
    evidence."""
    modes = cur.shape[2]
    shape_hist = hist[1] - hist[0]
    seg = _padded_stack([_shapes(shape_hist[:, :, m], levels[m].window) for m in range(modes)])
    rows = np.arange(cur.shape[1])[:, None]
    prev = np.stack([np.where((levels[m].previous >= 0)[..., None], shape_hist[rows, np.maximum(levels[m].previous, 0), m],
                              np.nan) for m in range(modes)], 1)  # (B, M, P, K)
    ev = shape_evidence(cur[1] - cur[0], seg, prev, interleaved)
    # the trimmed mean and the median of a night some of whose trials a slow episode touched say nothing of
    # the code: they stay out of those figures' pools (the floor keeps every kept night)
    bar = np.maximum(SHIFT_MIN, SHIFT_K * ev["spread"])[:, None, :, None]
    with np.errstate(invalid="ignore"):
        clean = ((shape_hist - ev["centre"][:, None, :, None] >= -bar) | np.isnan(shape_hist)).all(-1)
    night = _Night(centre(hist), centre(cur), clean, levels, ref, lv, prior)
    out = []
    for m in range(modes):
        rx = ratios[m] if ref is not None else None
        tests = [None if basis == "ratio" and rx is None else night.compare(m, k, rx if basis == "ratio" else None)
                 for k, (_, basis, _) in enumerate(TESTS)]
        ratio_counts = ev["counts"][:, m] & (ev["counts"][:, ref] if ref is not None else True)
        out.append(decide_mode(tests, ev["counts"][:, m], ratio_counts, ev["unconfirmed"][:, m]))
    return out, ev


# ---------------------------------------------------------------- a history of N runs without a series (N = 1 too)


def trial_figures(rates: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """(3, M, K) log fast floor, trimmed mean and median of every trial (FIGURES order, record.rates' definitions
    through judge.measure; NaN where a trial is too short for one) from each mode's trials' per-step rates."""
    from ampbench.judge import measure

    k = max((len(m) for m in rates), default=1) or 1
    out = np.full((3, len(rates), k), np.nan)
    for j, trials in enumerate(rates):
        for t, r in enumerate(trials):
            for f, fig in enumerate((measure.judged_floor, measure.judged_trimmed, measure.judged_rate)):
                v = fig(np.asarray(r))
                if v:
                    out[f, j, t] = math.log(v)
    return out


def plain_index(n: int) -> Index:
    """The pools of n earlier runs with no cut and no night held out: all of them the recent window, the first
    REFERENCE_RUNS the reference, one spread group (judge.series.Pools' shape)."""
    from ampbench.judge.series import REFERENCE_RUNS

    nights = tuple(range(n))
    return Index.of([Pools(nights, nights[:REFERENCE_RUNS], (nights,) if n else (), (nights[:REFERENCE_RUNS],) if n
                           else (), tuple(reversed(nights))[:2])])


def judge_runs(cur: np.ndarray, runs: Sequence[np.ndarray], ref: int | None, interleaved: np.ndarray, lv: Levels,
               prior: tuple[float, float] | None = None) -> tuple[list[ModeGate], dict[str, np.ndarray]]:
    """This run against N earlier runs of the same modes (a stored baseline is N = 1) with the nightly gate's
    figures, comparisons, step-time gate and decision.  cur and each of `runs`: (3, M, K) (trial_figures);
    interleaved (M,); `prior`: (sd, df) of the run-to-run spread where the runs cannot show it (N < 3: e.g.
    (changepoint.drift(...).sd, math.inf), or (inference.RUN_DRIFT_SD, math.inf)).  A run's value is its trials'
    mean: the prior's variance of it is a formula (sd^2 / K), which holds for the mean whatever the trials'
    distribution; a median's variance it does not know (trials in two clusters: 2.2x a normal one's at K = 3,
    and identical code FAILed 7.8% of AMP modes at K = 5 with medians, tests/test_one_run_sim.py)."""
    k = max([cur.shape[-1], *(r.shape[-1] for r in runs)])
    pad = [np.pad(x, ((0, 0), (0, 0), (0, k - x.shape[-1])), constant_values=np.nan) for x in (cur, *runs)]
    hist = np.stack(pad[1:], 1)[:, None] if runs else np.full((3, 1, 0, cur.shape[1], k), np.nan)
    ix = plain_index(len(runs))
    ratios = [None if m == ref else ix for m in range(cur.shape[1])]
    return judge_night(pad[0][:, None], hist, [ix] * cur.shape[1], ratios, ref, interleaved[None], lv, prior, nanmean)
