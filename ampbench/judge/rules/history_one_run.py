"""history-throughput against one `--baseline` run: the nightly gate with a history of one run (issue 62).

`check RUN --baseline OTHER` is judged by judge.gate.judge_runs, the function behind `check --history`
(judge.rules.history_pooled) and the nightly simulation: the same figures per trial (fast floor, trimmed
mean, median), the same comparisons (each mode's level; every AMP mode's AMP/FP32 ratio, which cancels
a level both modes of a run share), the same step-time gate and the same decision.  The baseline run is the
series.  What one run cannot show is how far a run's figure moves from run to run, the spread a series
measures: the prediction's spread is a prior (judge.gate.Spread.prior), of one run's value,

    V = drift^2 + s^2 (1 / K_this + 1 / K_base) / 2   (+ the reference mode's term for a ratio)

for each figure and basis (level or AMP/FP32 ratio) its own (judge.gate.judge_runs once per prior, the
comparisons decided together by judge.gate.decide_mode), with `drift` the run-to-run drift assumed (the
history's estimate where --history is given, judge.changepoint.drift, else inference.RUN_DRIFT_SD), s^2 the
trials' within-run variance of the figure pooled over every mode of both runs (a trial is its own process:
the unit), the run's value its trials' mean (judge.gate.judge_runs: a median's variance depends on how the
trials are distributed, which a formula cannot know; with two clusters of trials it is 2.2x a normal median's
at K = 3, and identical code FAILed 7.8% of AMP modes at K = 5, tests/test_one_run_sim.py), and
Satterthwaite's degrees of freedom (the drift is assumed, the trial part estimated).  Every result says what one run cannot decide and, undecided, how many seeds would.
The interference evidence of both runs is weighed alike (judge.interference.unlike): either side loaded
withholds a FAIL and a PASS (identical code under a busy loop per core came out 17% slower and 34% faster
than idle: docs/checks.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE
from ampbench.judge import gate, inference, interference, measure
from ampbench.judge.gate import TESTS
from ampbench.judge.rules.context import Ctx, more_seeds_text
from ampbench.judge.rules.history_pooled import (
    HISTORY_THROUGHPUT,
    STATISTIC,
    _codes,
    _details,
    _interleaved,
    slowdown_decided,
    split_text,
    withheld,
)
from ampbench.judge.rules.speed import clustering, fail_floor_of, level_text
from ampbench.results.baselines import STORED_REL_ERROR, Baseline, CompactTrial
from ampbench.results.verdicts import RuleResult, Status, as_status

SHOWN = (0, 2, 4, 6, 8)    # TESTS against the recent window: against one run, the reference is the same run


def _within(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per figure and mode of (3, M, K) log figures: (sum of squares around the run's mean, degrees of freedom,
    trials with the figure)."""
    n = (~np.isnan(x)).sum(-1)
    with np.errstate(all="ignore"):
        mean = np.nansum(x, -1) / np.maximum(n, 1)
        ss = np.nansum((x - mean[..., None]) ** 2, -1)
    return ss, np.maximum(n - 1, 0), n


Prior = tuple[float, float]


def priors(cur: np.ndarray, base: np.ndarray, j: int, ref: int | None, drift: float) -> dict[tuple[int, str], Prior]:
    """{(figure, basis): (sd, df)}: the prior of judge.gate.Spread for mode j's comparisons of that figure, the sd
    of one run's value (module docstring): the assumed drift and the trial noise of the run's median over its
    trials, from the trials' within-run variance of the figure pooled over every mode of both runs (each trial
    its own process: the unit), its degrees of freedom by Satterthwaite (the drift is assumed); a ratio carries
    the reference mode's trial noise too.  Infinite df where no trial spread is seen (the drift alone)."""
    ss_c, df_c, k_c = _within(cur)
    ss_b, df_b, k_b = _within(base)
    out: dict[tuple[int, str], Prior] = {}
    for f in range(cur.shape[0]):
        dfs = float(df_c[f].sum() + df_b[f].sum())
        s2 = float(ss_c[f].sum() + ss_b[f].sum()) / dfs if dfs > 0 else 0.0

        def noise(m: int, f: int = f, s2: float = s2) -> float:
            kc, kb = k_c[f, m], k_b[f, m]
            return s2 * (1 / kc + 1 / kb) / 2 if kc and kb else 0.0

        for basis, trial in (("level", noise(j)), ("ratio", noise(j) + (noise(ref) if ref is not None else 0.0))):
            v = drift ** 2 + trial
            out[f, basis] = (math.sqrt(v), math.inf if trial <= 0 else v ** 2 / (trial ** 2 / dfs))
    return out


def trial_sd(cur: np.ndarray, base: np.ndarray, f: int) -> float:
    """The trials' sd of figure f within a run, pooled over every mode of both runs (0 where none is seen)."""
    ss_c, df_c, _ = _within(cur)
    ss_b, df_b, _ = _within(base)
    dfs = float(df_c[f].sum() + df_b[f].sum())
    return math.sqrt(float(ss_c[f].sum() + ss_b[f].sum()) / dfs) if dfs > 0 else 0.0


def judge_mode(cur: np.ndarray, base: np.ndarray, j: int, ref: int | None, interleaved: np.ndarray, lv: gate.Levels,
               drift: float) -> tuple[gate.ModeGate, dict[str, np.ndarray]]:
    """Mode j of this run (cur) against the baseline run (base) by judge.gate: judge_runs with each figure's and
    basis's prior for its comparisons, the step-time gate's evidence, and judge.gate.decide_mode as judge_night
    decides a night."""
    pri = priors(cur, base, j, ref, drift)
    tests: list[dict[str, np.ndarray] | None] = [None] * len(TESTS)
    ev: dict[str, np.ndarray] = {}
    for (f, basis), prior in pri.items():
        if basis == "ratio" and (ref is None or ref == j):
            continue
        gates, ev = gate.judge_runs(cur, [base], ref, interleaved, lv, prior)
        for k, (fig, b, _) in enumerate(TESTS):
            if fig == gate.FIGURES[f] and b == basis:
                tests[k] = gates[j].tests[k]
    counts = ev["counts"]
    ratio_counts = counts[:, j] & (counts[:, ref] if ref is not None else True)
    return gate.decide_mode(tests, counts[:, j], ratio_counts, ev["unconfirmed"][:, j]), ev


def _bounds(t: dict[str, np.ndarray], c: Ctx, pc: float, fc: float) -> inference.Bounds:
    e = {k: float(math.exp(t[k][0])) for k in ("estimate", "low", "high", "lower", "upper", "fail_upper")}
    return inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(t["sd"][0]),
                            int(min(t["df"][0], 10 ** 6)), c.th.confidence, math.nan, e["fail_upper"], fc, pc)


def _name(k: int) -> str:
    fig, basis, _ = TESTS[k]
    return ("AMP/FP32 " if basis == "ratio" else "") + {"floor": "fast floor", "trimmed": "trimmed mean",
                                                        "median": "median"}[fig]


def _tests_text(g: gate.ModeGate) -> str:
    parts = []
    for k in SHOWN:
        t = g.tests[k]
        if t is None or not np.isfinite(t["estimate"][0]):
            continue
        counted = "" if g.counted[0, k] else " (not counted)"
        parts.append(f"{_name(k)} {math.exp(t['estimate'][0]) - 1:+.1%} [PASS bound {math.exp(t['lower'][0]) - 1:+.1%}, "
                     f"FAIL bound {math.exp(t['fail_upper'][0]) - 1:+.1%}]{counted}")
    return "; ".join(parts)


def _shape_text(c: Ctx, ev: dict[str, np.ndarray], j: int, modes: list[str]) -> str:
    """What the step-time gate saw for mode j against the baseline run's trials."""
    spread, sd, shift = float(ev["spread"][0, j]), float(ev["sd"][0, j]), float(ev["shift"][0, j])
    if not ev["steady"][0, j]:
        head = (f"the step-time shape (log trimmed mean / fast floor per trial) of the baseline run's trials is not "
                f"steady (robust sd {spread:.1%}, above {gate.STEADY_SD:.0%}), so the trimmed mean does not count")
    elif not ev["consistent"][0, j]:
        head = (f"some of this run's {c.mode} trials show slow steps and others do not (sd {sd:.1%} of the shape): a "
                "slow episode of the machine, so the trimmed mean does not count")
    elif not ev["shifted"][0, j]:
        head = f"the step-time shape is steady (baseline sd {spread:.1%}, this run's {sd:.1%}): the trimmed mean counts"
    elif ev["own"][0, j]:
        others = ", ".join(m for m in modes if m != c.mode)
        head = (f"every {c.mode} trial's step-time shape moved {shift:+.1%} and none of the {others} trials that ran "
                "between or beside them did: this mode's own slow steps; the trimmed mean counts")
    else:
        why = ("every mode's trials show them: a change of every mode or a machine busy during this run" if
               ev["others"][0, j] else "the trials' wall-clock times do not show the other modes running between them")
        head = (f"every {c.mode} trial shows slow steps ({shift:+.1%}), but {why}; one baseline run cannot tell which "
                "(slow-steps-unconfirmed): rerun, or judge against a history")
    return f"Step-time gate: {head}."


def _ending(status: Status, g: gate.ModeGate, k: int, b: inference.Bounds, c: Ctx, pc: float, fc: float) -> str:
    m = c.th.history_min_change
    by = f"the {_name(k)} against the baseline run"
    if status in ("FAIL", "PASS"):
        return slowdown_decided(status, m, b) + f" Decided by {by}."
    if g.typical[0] and g.tests[8] is not None and g.tests[0] is not None:
        return split_text(m, _bounds(g.tests[8], c, pc, fc), _bounds(g.tests[0], c, pc, fc))
    fail = "n/a" if not math.isfinite(b.fail_upper) else format(b.fail_upper - 1, "+.1%")
    return (f"; a slowdown beyond {m:.0%} is not demonstrated, nor ruled out ({by}: PASS bound {b.lower - 1:+.1%}, "
            f"FAIL bound {fail}, {level_text(b)}).")


def _caveat(c: Ctx, status: Status, drift: float, s: float, n: int) -> str:
    """What a history of one run cannot decide, said with every result against one --baseline run; undecided,
    how many seeds would decide (planned for the gap between no change and twice history_min_change)."""
    m = c.th.history_min_change
    more = ""
    if status == "INCONCLUSIVE":
        gap = math.log((1 - m) / (1 - 2 * m)) if m < 0.5 else m
        need = inference.seeds_needed(s if s > 0 else None, gap, c.th.confidence,
                                      drift_sd=drift * math.sqrt(2), fail_confidence=1 - c.th.history_alpha)
        text = more_seeds_text(n, need)
        more = f" {text[0].upper()}{text[1:]}."
    return (f"{more} One baseline run is a history of one run: how far this machine's runs drift from one another is "
            f"not measured but assumed ({drift:.1%}), so a change within that drift cannot be told from the code's, "
            f"and on a machine whose runs drift more (shared, loaded) neither a PASS nor a FAIL beyond {m:.0%} holds: "
            f"`check --history` with 3 runs or more measures the drift.")


def _change(ratio: float) -> float:
    """ratio - 1, a difference below a baseline file's storage rounding shown as 0 (a run checked against its
    own baseline is unchanged, not +4e-07)."""
    x = ratio - 1
    return 0.0 if abs(x) <= 2 * STORED_REL_ERROR else x


def _short(c: Ctx, cur: list[CompactTrial], base: list[CompactTrial], threshold: dict[str, float]) -> RuleResult | None:
    """INCONCLUSIVE when either run has fewer than MIN_TRIALS trials with a figure: no trial spread to judge by."""
    for who, trials, fix in (("the baseline run", base, "save a baseline from a run with more seeds"),
                             ("this run", cur, None)):
        have = len([t for t in trials if measure.judged_rate(t.rates())])
        if have < inference.MIN_TRIALS:
            fix = fix or more_seeds_text(have, inference.MIN_TRIALS)
            return c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, threshold,
                          f"{c.baseline_note}Not enough data: {who} has {have} trial(s) of {c.mode} with "
                          f"{measure.MIN_STEPS} measured steps; its trial spread needs {inference.MIN_TRIALS} ({fix}).",
                          reasons=["few-seeds"])
    return None


def run_figures(c: Ctx, b: Baseline) -> tuple[list[str], np.ndarray, np.ndarray, bool]:
    """(the modes both runs hold, this run's and the baseline's (3, M, K) log figures per trial, whether the median
    stands in for the floor: short trials, no trimmed mean then)."""
    modes = [x.name for x in c.suite.modes if b.trials(x.name) and c.compact(x.name)]
    now = gate.trial_figures([[t.rates() for t in c.compact(x)] for x in modes])
    then = gate.trial_figures([[t.rates() for t in b.trials(x)] for x in modes])
    median_only = bool(np.isnan(now[0]).all() or np.isnan(then[0]).all())
    if median_only:
        now[0], then[0], now[1], then[1] = now[2], then[2], np.nan, np.nan
    return modes, now, then, median_only


def _level_details(g: gate.ModeGate, fig: str, c: Ctx, pc: float, fc: float) -> dict[str, Any]:
    """The mode's own change in the figure that decided (`compare`'s column), also where its ratio decided."""
    level = g.tests[TESTS.index((fig, "level", "recent"))]
    if level is None or not np.isfinite(level["estimate"][0]):
        return {}
    lb = _bounds(level, c, pc, fc)
    return {"level_ratio": lb.estimate, "level_ci_low": lb.low, "level_ci_high": lb.high}


def one_run_throughput(c: Ctx, cur: list[CompactTrial], b: Baseline, drift: float) -> RuleResult:
    """observed = relative change of throughput of the comparison that decided (details `statistic`, `basis`),
    this run against the baseline run `b` by judge.gate.judge_runs; `drift`: the run-to-run sd assumed."""
    m = c.th.history_min_change
    threshold = {"min_change": m, "confidence": c.th.confidence, "alpha": c.th.history_alpha}
    base = b.trials(c.mode)
    short = _short(c, cur, base, threshold)
    if short is not None:
        return short
    modes, now, then, median_only = run_figures(c, b)
    ref = modes.index(REFERENCE_MODE) if REFERENCE_MODE in modes else None
    j = modes.index(c.mode)
    pc, fc = c.history_levels(len(base))
    clustered = clustering([c.compact(x) for x in modes])
    lv = gate.Levels(m, pc, fc, len(cur) >= fail_floor_of([cur], clustered))
    g, ev = judge_mode(now, then, j, ref, _interleaved(c, modes)[0], lv, drift)
    k = int(g.decided[0])
    fig, basis, _ = TESTS[k]
    s = trial_sd(now, then, gate.FIGURES.index(fig))
    t = g.tests[k]
    assert t is not None
    bd = _bounds(t, c, pc, fc)
    status = as_status(str(g.status[0]))
    where = b.source or b.path or "the baseline file"
    msg = (f"{c.mode} throughput against the baseline run ({where}): {_tests_text(g)}. "
           + ("The median figure decides (short trials: no fast floor). " if median_only else
              _shape_text(c, ev, j, modes) + " ")
           + "The run" + _ending(status, g, k, bd, c, pc, fc) + _caveat(c, status, drift, s, len(cur)))
    codes = [x for x in _codes(g, status, k) if x not in ("pending", "below-reference")]
    why, noted = withheld(c, interference.unlike(cur, base, ("this run", "the baseline run"), bd.estimate))
    if why:
        status, msg, codes = "INCONCLUSIVE", f"{why[0].upper()}{why[1:]}. {msg}", codes + ["disturbed"]
    msg += noted
    if clustered:
        msg, codes = msg + f" Note: {clustered}.", codes + ["clustered"]
    details: dict[str, Any] = {**_details(g, ev, j, median_only), **_level_details(g, fig, c, pc, fc)}
    details["per_run"] = False   # against one run this run's trial spread is part of the interval: seeds narrow it
    return c.rule(HISTORY_THROUGHPUT, status, _change(bd.estimate), threshold, c.baseline_note + msg,
                  ratio=bd.estimate, lower=bd.lower, upper=bd.upper, fail_upper=bd.fail_upper, ci_low=bd.low,
                  ci_high=bd.high, seeds=[len(cur), len(base)], runs=1, drift_sd=drift, trial_sd=s,
                  disturbed=bool(why), clustered=clustered, baseline_runs=[where],
                  statistic="median" if median_only and fig == "floor" else STATISTIC[fig], basis=basis,
                  against="baseline", **details, reasons=codes)
