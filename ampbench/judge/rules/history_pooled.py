"""history-throughput against the pooled history (`check --history`): the nightly gate, judge.gate.

The night is judged against its series (judge.pooled, judge.series: the device kind's lines, their one
segmentation) by judge.gate.judge_night, the function the nightly simulation calls too: each mode's fast
floor and trimmed mean (and the median beside them) against the recent nights and against the reference
level (the segment's first nights, which a creep cannot move); every AMP mode's AMP/FP32 ratio night over
night beside its level; the trimmed mean counting behind the step-time gate, which tells a mode's own slow
steps (in every trial of the mode, none in the other modes' trials between them) from a machine episode
(in the trials running at that wall time, of either mode) from the run's recorded evidence: each trial's
step times and its wall-clock start and end.  `statistic`, `basis` and `against` name the comparison that
decided; `hold` is what the history line records ("fail", "pending": judge.series holds the night out of
later pools).  A FAIL is this night's own evidence: nothing carries an earlier night's FAIL over.  The
figures are judged per run at the fixed levels: more seeds do not narrow them (judge.until).  History lines
without a fast floor, or trials shorter than FLOOR_MIN_STEPS, leave the median figure in the floor's place.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE
from ampbench.judge import gate, inference, interference, measure, sequential
from ampbench.judge.gate import TESTS
from ampbench.judge.pooled import MIN_RUNS
from ampbench.judge.rules.context import Ctx, more_seeds_text
from ampbench.judge.rules.speed import clustering, fail_floor_of, level_text
from ampbench.judge.rules.traits import ResultName
from ampbench.results.baselines import CompactTrial
from ampbench.results.verdicts import RuleResult, Status, as_status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
HISTORY_THROUGHPUT = ResultName("history-throughput")

HISTORY_CODE = {"PASS": "no-slowdown", "FAIL": "slowdown", "INCONCLUSIVE": "undecided", "ERROR": "error"}
STATISTIC = {"floor": "fast-floor", "trimmed": "trimmed-mean", "median": "median"}
EVIDENCE = ("evidence: each trial's step times and its wall-clock start and end (run records keep no per-step "
            "timestamps)")


def withheld(c: Ctx, why: str | None) -> tuple[str | None, str]:
    """(the evidence that withholds the decision, a note when the suite judges despite it:
    `thresholds.history_withhold_disturbed = false`)."""
    if why is None or c.th.history_withhold_disturbed:
        return why, ""
    return None, f" Note: {why}; judged on its figures (history_withhold_disturbed = false)."


def slowdown_decided(status: str, m: float, b: inference.Bounds) -> str:
    """The sentence a decided history-throughput result ends with, against one baseline run or a series."""
    if status == "FAIL":
        return f"; a slowdown beyond {m:.0%} is demonstrated (upper bound {b.fail_upper - 1:+.1%}, {level_text(b)})."
    return f"; no slowdown beyond {m:.0%} (lower bound {b.lower - 1:+.1%}, {level_text(b)})."


def decide(floor: Status | None, median: Status) -> tuple[Status, list[str]]:
    """A comparison with one baseline run: the floor decides, a median slowdown it rules out is not a PASS
    ("typical-steps-slower"); the median alone where there is no floor."""
    if floor is None:
        return median, []
    if floor == "PASS" and median == "FAIL":
        return "INCONCLUSIVE", ["typical-steps-slower"]
    return floor, []


def split_text(m: float, median: inference.Bounds, floor: inference.Bounds) -> str:
    """The sentence of a typical-steps-slower result (against one run or a series)."""
    return (f"; the median step is slower beyond {m:.0%} (FAIL bound {median.fail_upper - 1:+.1%}) but the fastest "
            f"steps are not (PASS bound {floor.lower - 1:+.1%}): slow episodes of the machine during this run, or a "
            "change that slows only part of the steps. Rerun; if it repeats, compare the step-time plots.")


def _night(c: Ctx, modes: list[str]) -> np.ndarray:
    """(3, 1, M, K) this run's log figures per ok trial (judge.gate.trial_figures)."""
    return gate.trial_figures([[t.rates() for t in c.compact(m)] for m in modes])[:, None]


def _interleaved(c: Ctx, modes: list[str]) -> np.ndarray:
    """(1, M): another mode's trial ran between or beside this mode's trials (wall clock), from every trial's
    started_unix / ended_unix; False where a time is missing (then a machine episode cannot be ruled out)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    missing = set()
    for m in modes:
        for t in c.ok(m):
            if t.started_unix is None or t.ended_unix is None:
                missing.add(m)
            else:
                spans.setdefault(m, []).append((t.started_unix, t.ended_unix))
    out = np.zeros((1, len(modes)), bool)
    for j, m in enumerate(modes):
        mine = spans.get(m, [])
        if not mine or m in missing:
            continue
        lo, hi = min(a for a, _ in mine), max(b for _, b in mine)
        out[0, j] = any(a < hi and b > lo for o in modes if o != m for a, b in spans.get(o, []))
    return out


def night_gate(c: Ctx) -> tuple[list[gate.ModeGate], dict[str, np.ndarray], list[str], bool]:
    """Every mode of this run through judge.gate.judge_night against the pooled series: (gates, step-time
    evidence, the modes in order, whether the median stands in for a missing floor)."""
    assert c.pooled is not None
    p = c.pooled
    modes = [m.name for m in c.suite.modes]
    cur, hist = _night(c, modes), p.figures(modes)
    median_only = bool(np.isnan(cur[0]).all() or np.isnan(hist[0]).all())
    if median_only:  # lines written before the floor was kept, or short trials: the median in the floor's place
        cur[0], hist[0] = cur[2], hist[2]
        cur[1], hist[1] = np.nan, np.nan
    ref = modes.index(REFERENCE_MODE) if REFERENCE_MODE in modes else None
    levels = [gate.Index.of([p.seg.pools(m)]) for m in modes]
    ratios = [None if ref is None or j == ref else gate.Index.of([p.seg.pools(m, also=REFERENCE_MODE)])
              for j, m in enumerate(modes)]
    pc, fc = sequential.levels(c.th.confidence, c.th.history_alpha)
    clustered = clustering([c.compact(m) for m in modes])
    fail_ok = len(c.compact(c.mode)) >= fail_floor_of([c.compact(c.mode)], clustered)
    lv = gate.Levels(c.th.history_min_change, pc, fc, fail_ok)
    gates, ev = gate.judge_night(cur, hist, levels, ratios, ref, _interleaved(c, modes), lv)
    return gates, ev, modes, median_only


def _bounds(t: dict[str, np.ndarray], c: Ctx) -> inference.Bounds:
    pc, fc = sequential.levels(c.th.confidence, c.th.history_alpha)
    e = {k: float(math.exp(t[k][0])) for k in ("estimate", "low", "high", "lower", "upper", "fail_upper")}
    return inference.Bounds(e["estimate"], e["low"], e["high"], e["lower"], e["upper"], float(t["sd"][0]),
                            int(min(t["df"][0], 10 ** 6)), c.th.confidence, math.nan, e["fail_upper"], fc, pc)


def _shape_text(c: Ctx, ev: dict[str, np.ndarray], j: int, modes: list[str]) -> str:
    """What the step-time gate saw for mode j, and on what evidence."""
    def pct(x: Any) -> str:
        return f"{float(x):+.1%}"

    spread, sd = float(ev["spread"][0, j]), float(ev["sd"][0, j])
    if not ev["steady"][0, j]:
        head = (f"the step-time shape (log trimmed mean / fast floor per trial) is not steady over the segment "
                f"(robust sd {spread:.1%}, above {gate.STEADY_SD:.0%}): slow episodes of the machine move the trimmed "
                "mean there, so it does not count")
    elif not ev["consistent"][0, j]:
        head = (f"some of this mode's trials show slow steps and others do not (sd {sd:.1%} of the shape over its "
                "trials): a slow episode of the machine, so the trimmed mean does not count tonight")
    elif not ev["shifted"][0, j]:
        head = f"the step-time shape is steady (segment sd {spread:.1%}, this night's {sd:.1%}): the trimmed mean counts"
    elif ev["own"][0, j]:
        others = ", ".join(m for m in modes if m != c.mode)
        head = (f"every {c.mode} trial's step-time shape moved {pct(ev['shift'][0, j])} and none of the {others} "
                "trials that ran between or beside them did: this mode's own slow steps (a machine episode hits the "
                "trials running at its wall time, of either mode); the trimmed mean counts")
    elif ev["confirmed"][0, j]:
        head = (f"every trial shows slow steps ({pct(ev['shift'][0, j])}), as on the previous night "
                f"({pct(ev['prev_shift'][0, j])}): a change, not a machine busy for one night; the trimmed mean counts")
    else:
        why = ("every mode's trials show them: a change of every mode or a machine busy all night" if ev["others"][0, j]
               else "the trials' wall-clock times do not show the other modes running between them")
        head = (f"every {c.mode} trial shows slow steps ({pct(ev['shift'][0, j])}), but {why}; the previous night "
                "did not show the same, so this night is held out pending the next one (slow-steps-unconfirmed)")
    return f"Step-time gate: {head} ({EVIDENCE})."


def _tests_text(g: gate.ModeGate, c: Ctx) -> str:
    parts = []
    for k, t in enumerate(g.tests):
        if t is None or not np.isfinite(t["estimate"][0]):
            continue
        fig, basis, against = TESTS[k]
        name = ("AMP/FP32 " if basis == "ratio" else "") + {"floor": "fast floor", "trimmed": "trimmed mean",
                                                            "median": "median"}[fig]
        counted = "" if g.counted[0, k] else " (not counted)"
        parts.append(f"{name} vs {'recent' if against == 'recent' else 'reference'} "
                     f"{math.exp(t['estimate'][0]) - 1:+.1%} [PASS bound {math.exp(t['lower'][0]) - 1:+.1%}, FAIL bound "
                     f"{math.exp(t['fail_upper'][0]) - 1:+.1%}, {int(t['runs'][0])} nights]{counted}")
    return "; ".join(parts)


def _codes(g: gate.ModeGate, status: str, k: int) -> list[str]:
    fig, basis, against = TESTS[k]
    codes = [HISTORY_CODE[status]]
    if g.typical[0]:
        codes.append("typical-steps-slower")
    if g.unconfirmed[0]:
        codes.append("slow-steps-unconfirmed")
    if status == "FAIL" and fig == "trimmed":
        codes.append("slow-steps")
    if status == "FAIL" and basis == "ratio":
        codes.append("amp-fp32-ratio")
    if status == "FAIL" and against == "reference":
        codes.append("below-reference")
    if g.hold[0] == "pending":
        codes.append("pending")
    return codes


def _pooled_short(c: Ctx, now: list[CompactTrial], threshold: dict[str, float]) -> RuleResult | None:
    """The INCONCLUSIVE of too little data: a series of fewer than MIN_RUNS nights of this device kind cannot show
    the night-to-night spread (another kind's nights are not borrowed), a run with fewer than MIN_TRIALS trials
    of MIN_STEPS measured steps has no spread of its own."""
    assert c.pooled is not None
    p = c.pooled
    if not p.enough:
        kind = f" on device kind {p.kind}" if p.kind else ""
        return c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, threshold,
                      f"Not enough data: the history holds {len(p.lines)} night(s) of this suite and config{kind} "
                      f"since {p.since}; the night-to-night spread needs {MIN_RUNS} (other device kinds' nights are "
                      "not borrowed: their level is another one).", baseline_runs=p.run_ids, reasons=["few-runs"])
    if len([t for t in now if measure.judged_rate(t.rates())]) < inference.MIN_TRIALS:
        return c.rule(HISTORY_THROUGHPUT, "INCONCLUSIVE", None, threshold,
                      f"Not enough data: {len(now)} trial(s) of this run have {measure.MIN_STEPS} measured steps; "
                      f"{more_seeds_text(len(now), inference.MIN_TRIALS)}.", baseline_runs=p.run_ids,
                      reasons=["few-seeds"])
    return None


def _ending(status: str, g: gate.ModeGate, k: int, b: inference.Bounds, c: Ctx) -> str:
    m = c.th.history_min_change
    by = gate.describe_test(k)
    if status in ("FAIL", "PASS"):
        return slowdown_decided(status, m, b) + f" Decided by {by}."
    if g.typical[0]:
        med = g.tests[8]
        floor = g.tests[0]
        if med is not None and floor is not None:
            return split_text(m, _bounds(med, c), _bounds(floor, c))
    fail = "n/a" if not math.isfinite(b.fail_upper) else format(b.fail_upper - 1, "+.1%")
    held = (" The night is held out of the baseline pending the next night: if the next night shows the same, "
            "it is judged on its own figures again." if g.hold[0] == "pending" else "")
    return (f"; a slowdown beyond {m:.0%} is not demonstrated, nor ruled out ({by}: PASS bound {b.lower - 1:+.1%}, "
            f"FAIL bound {fail}, {level_text(b)}).{held}")


def pooled_throughput(c: Ctx, cur: list[CompactTrial]) -> RuleResult:
    """observed = relative change of throughput of the comparison that decided (details `statistic`, `basis`,
    `against`): PASS: every counted comparison's lower bound is above -history_min_change; FAIL: one's upper
    bound at 1 - history_alpha is below it (judge.gate)."""
    assert c.pooled is not None
    p, m = c.pooled, c.th.history_min_change
    threshold = {"min_change": m, "confidence": c.th.confidence, "alpha": c.th.history_alpha}
    short = _pooled_short(c, cur, threshold)
    if short is not None:
        return short
    gates, ev, modes, median_only = night_gate(c)
    j = modes.index(c.mode)
    g = gates[j]
    k = int(g.decided[0])
    t = g.tests[k]
    assert t is not None
    b = _bounds(t, c)
    status = as_status(str(g.status[0]))
    fig, basis, against = TESTS[k]
    figure = "median" if median_only and fig == "floor" else STATISTIC[fig]
    head = (f"{c.mode} throughput against the history since {p.since} ({p.describe()}): {_tests_text(g, c)}. "
            + ("" if median_only else _shape_text(c, ev, j, modes) + " ")
            + ("The median figure decides (no fast floor on both sides: older history lines or short trials). "
               if median_only else ""))
    msg = head + "The night" + _ending(status, g, k, b, c)
    codes = _codes(g, status, k)
    # weighed alike: either side loaded withholds the decision, a PASS too (identical code measured under load
    # came out 17% slower and 34% faster than its idle twin: docs/checks.md, issue 62)
    why, noted = withheld(c, interference.unlike(cur, p.evidence(c.mode), ("this run", "the baseline runs"),
                                                 b.estimate))
    clustered = clustering([c.compact(x) for x in modes])
    if why:
        status, msg, codes = "INCONCLUSIVE", f"{why[0].upper()}{why[1:]}. {msg}", codes + ["disturbed"]
    msg += noted
    if clustered:
        msg += f" Note: {clustered}."
        codes.append("clustered")
    open_ = p.open_regression
    if open_ is not None:
        msg += f" The history's {open_.describe()}."
    return c.rule(HISTORY_THROUGHPUT, status, b.estimate - 1, threshold, msg, ratio=b.estimate, lower=b.lower,
                  upper=b.upper, fail_upper=b.fail_upper, ci_low=b.low, ci_high=b.high,
                  seeds=[len(cur), sum(len(r.modes[c.mode].per_trial) for r in p.runs if c.mode in r.modes)],
                  runs=int(t["runs"][0]), drift_sd=float(t["sd"][0]), disturbed=bool(why), clustered=clustered,
                  baseline_runs=p.run_ids, statistic=figure, basis=basis, against=against,
                  hold=str(g.hold[0]) or None, **_details(g, ev, j, median_only),
                  open_regression=open_.since if open_ else None, reasons=codes)


def _details(g: gate.ModeGate, ev: dict[str, np.ndarray], j: int, median_only: bool) -> dict[str, Any]:
    """Each comparison's ratio and status (None where not made), and what the step-time gate saw."""
    out: dict[str, Any] = {}
    for k, (fig, basis, against) in enumerate(TESTS):
        t = g.tests[k]
        key = f"{fig}_{basis}_{against}"
        made = t is not None and bool(np.isfinite(t["estimate"][0]))
        out[key] = {"ratio": float(math.exp(t["estimate"][0])) if made and t is not None else None,
                    "status": str(t["status"][0]) if t is not None else None, "counted": bool(g.counted[0, k])}
    gate_keys = ("steady", "consistent", "shifted", "own", "confirmed", "counts", "unconfirmed")
    out["step_time_gate"] = None if median_only else {
        **{k: bool(ev[k][0, j]) for k in gate_keys},
        "shape_sd_segment": float(ev["spread"][0, j]), "shape_sd_night": float(ev["sd"][0, j]),
        "shape_shift": float(ev["shift"][0, j]) if np.isfinite(ev["shift"][0, j]) else None}
    out["per_run"] = not median_only
    # the figures' results against the recent nights, under the keys check.json has carried since issue 40
    for name, k in (("floor", 0), ("trimmed", 2), ("median", 8)):
        t = g.tests[k]
        out[f"{name}_ratio"] = out[f"{TESTS[k][0]}_level_recent"]["ratio"]
        out[f"{name}_status"] = str(t["status"][0]) if t is not None else None
    out["trimmed_counts"] = bool(g.counted[0, 2])
    return out
