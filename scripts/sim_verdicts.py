#!/usr/bin/env python
"""The simulated error-rate tables of docs/checks.md ("Measured error rates"): the grid of tests/test_verdict_sim.py,
more runs, printed in the page's shape.

    PYTHONPATH=. python scripts/sim_verdicts.py > /tmp/table.md     # a few minutes on one core
    PYTHONPATH=. python scripts/sim_verdicts.py --only sequential   # one table (fixed, kinds, sequential,
                                                                     # two-seeds, pooled, correlated); nightly
                                                                     # histories: scripts/sim_nightly.py)

False FAIL = FAIL when nothing is wrong (history: no change; speedup: true speedup 10% above
min_speedup; parity: no drop).  False PASS = PASS at the issue's effect sizes (10% slowdown, speedup 10%
below min_speedup, metric drop of twice the margin).  INCONCLUSIVE is shown for both cases.  Noise
model: tests/verdict_sim.py.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/ of this checkout, not a site-packages `tests`

from ampbench.config import Thresholds
from ampbench.judge import inference
from tests import verdict_sim as vs

TH = Thresholds(min_speedup=1.3)


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _planner(sd: float, gap: float, drift: float = 0.0, margin_k: float = 0.0, alpha: float | None = None) -> str:
    k = inference.seeds_needed(sd, gap, TH.confidence, drift_sd=drift, margin_k=margin_k,
                               fail_confidence=1 - (TH.fail_alpha if alpha is None else alpha))
    return ">64" if k is None else str(k)


def history_table(null_n: int, eff_n: int) -> list[str]:
    gap = math.log((1 - TH.history_min_change) / (1 - 2 * TH.history_min_change))
    out = [("| seeds | spread | false FAIL (worst) | false PASS (worst) | INCONCLUSIVE, no change | "
           "10% slowdown FAILs | planner seeds (rho 0 / 0.7) |"), "|---|---|---|---|---|---|---|"]
    two: dict[str, list[float]] = {"ff": [], "fp": [], "det": []}
    for k, sp in itertools.product((2, 3, 5), (0.005, 0.01, 0.02, 0.05)):
        ff, fp, inc, det = [], [], [], []
        for d, rho in itertools.product((0.0, 0.01, 0.02), (0.0, 0.7)):
            rng = np.random.default_rng(int(k * 1000 + sp * 1e5 + d * 1e4 + rho * 10))
            n = vs.rates(vs.history_outcomes(rng, null_n, k, 0.0, sp, rho, d, TH))
            e = vs.rates(vs.history_outcomes(rng, eff_n, k, 0.10, sp, rho, d, TH))
            ff.append(n["FAIL"]), fp.append(e["PASS"]), inc.append(n["INCONCLUSIVE"]), det.append(e["FAIL"])
        rng = np.random.default_rng(7)
        sds = [float(np.std(np.log(vs.trial_medians(rng, 1, 4000, 0.0, sp, rho, 0.0)), ddof=1)) for rho in (0, 0.7)]
        plan = " / ".join(_planner(s, gap, inference.RUN_DRIFT_SD, alpha=TH.history_alpha) for s in sds)
        if k == 2:   # no throughput FAIL from 2 trials a side: a line above the table, as docs/checks.md says it
            two["ff"] += ff
            two["fp"] += fp
            two["det"] += det
            continue
        out.append(f"| {k} | {sp:.1%} | {_pct(max(ff))} | {_pct(max(fp))} | {_pct(min(inc))}-{_pct(max(inc))} | "
                   f"{_pct(min(det))}-{_pct(max(det))} | {plan} |")
    line = (f"At 2 seeds no throughput rule FAILs (the 3-trial floor): false FAIL {_pct(max(two['ff']))}, false PASS "
            f"<= {_pct(max(two['fp']))}, detection {_pct(max(two['det']))}.")
    return [line, "", *out]


def speedup_table(n: int) -> list[str]:
    out = [("| seeds | spread | false FAIL (true 1.1 x min) | false PASS (true 0.9 x min) | INCONCLUSIVE (1.1x / 0.9x) | "
           "95% CI coverage (worst) | planner seeds (rho 0 / 0.7) |"), "|---|---|---|---|---|---|---|"]
    two: dict[str, list[float]] = {"fp": [], "cov": [], "pass": []}
    for k, sp in itertools.product((2, 3, 5), (0.005, 0.01, 0.02, 0.05)):
        ff, fp, inc_g, inc_b, cov = [], [], [], [], []
        for rho in (0.0, 0.7):
            rng = np.random.default_rng(int(k * 1000 + sp * 1e5 + rho * 10 + 3))
            g, cg = vs.speedup_outcomes(rng, n, k, TH.min_speedup * 1.1, sp, rho, TH)
            b, cb = vs.speedup_outcomes(rng, n, k, TH.min_speedup * 0.9, sp, rho, TH)
            g, b = vs.rates(g), vs.rates(b)
            ff.append(g["FAIL"]), fp.append(b["PASS"]), inc_g.append(g["INCONCLUSIVE"]), inc_b.append(b["INCONCLUSIVE"])
            cov += [float(cg.mean()), float(cb.mean())]
        rng = np.random.default_rng(8)
        sds = [float(np.std(np.log(vs.trial_medians(rng, 1, 4000, 0.0, sp, rho, 0.0)), ddof=1)) for rho in (0, 0.7)]
        plan = " / ".join(_planner(s, -math.log(0.9)) for s in sds)
        if k == 2:   # no speedup FAIL from 2 trials a side: a line above the table
            two["fp"] += fp
            two["cov"] += cov
            two["pass"].append(1 - max(inc_g) - max(ff))
            continue
        out.append(f"| {k} | {sp:.1%} | {_pct(max(ff))} | {_pct(max(fp))} | {_pct(max(inc_g))} / {_pct(max(inc_b))} | "
                   f"{_pct(min(cov))} | {plan} |")
    line = (f"At 2 seeds speedup never FAILs (the floor): false PASS <= {_pct(max(two['fp']))}, coverage "
            f"{min(two['cov']) * 100:.1f}-{_pct(max(two['cov']))}, true 1.1 x min PASSed in "
            f"{min(two['pass']) * 100:.0f}-{max(two['pass']):.0%} (spread 5% to 0.5%), planner seeds as at 3.")
    return [line, "", *out]


def parity_table(n: int) -> list[str]:
    out = [("| seeds | metric seed sd / abs_tol | false FAIL | false PASS (drop 2 x margin) | INCONCLUSIVE (no drop / drop) | "
           "drop detected | planner seeds |"), "|---|---|---|---|---|---|---|"]
    for k, frac in itertools.product((3, 5), (0.25, 0.5, 1.0)):   # 2 seeds: two_seed_metric_table
        sd = frac * TH.metric_abs_tol
        rng = np.random.default_rng(int(k * 100 + frac * 1000))
        a = vs.rates(vs.parity_outcomes(rng, n, k, 0.0, sd, TH))
        b = vs.rates(vs.parity_outcomes(rng, n, k, 2 * vs.true_margin(sd, TH), sd, TH))
        plan = _planner(sd, vs.true_margin(sd, TH), margin_k=TH.metric_sigma_k if TH.metric_sigma_k * sd >= 0.8 * TH.metric_abs_tol else 0)
        out.append(f"| {k} | {frac:g} | {_pct(a['FAIL'])} | {_pct(b['PASS'])} | {_pct(a['INCONCLUSIVE'])} / "
                   f"{_pct(b['INCONCLUSIVE'])} | {_pct(b['FAIL'])} | {plan} |")
    return out


KINDS = (("normal", 0.02), ("normal", 0.05), ("t3", 0.05), ("normal", 0.12), ("t3", 0.12), ("bimodal", 0.10),
         ("bimodal", 0.29))


def kinds_table(null_n: int, eff_n: int) -> list[str]:
    """Fixed seeds, non-normal trial levels: history (2% drift) and speedup."""
    out = [("| trial levels | seeds | history false FAIL | history false PASS (10% slower) | 20% slowdown FAILs | "
            "speedup false FAIL (1.1 x min) | speedup false PASS (0.9 x min) |"), "|---|---|---|---|---|---|---|"]
    worst: dict[str, tuple[float, str]] = {"history": (0.0, ""), "speedup": (0.0, "")}
    for (kind, sp), k in itertools.product(KINDS, (2, 3, 5)):
        rng = np.random.default_rng(int(k * 1000 + sp * 1e5) + len(kind))
        n = vs.rates(vs.history_outcomes(rng, null_n, k, 0.0, sp, 0.0, 0.02, TH, kind))
        e = vs.rates(vs.history_outcomes(rng, eff_n, k, 0.10, sp, 0.0, 0.02, TH, kind))
        e2 = vs.rates(vs.history_outcomes(rng, eff_n, k, 0.20, sp, 0.0, 0.02, TH, kind))
        g = vs.rates(vs.speedup_outcomes(rng, null_n, k, TH.min_speedup * 1.1, sp, 0.0, TH, kind)[0])
        b = vs.rates(vs.speedup_outcomes(rng, eff_n, k, TH.min_speedup * 0.9, sp, 0.0, TH, kind)[0])
        if k == 2:   # nothing FAILs from 2 trials a side: the worst false PASS in a line above the table
            worst["history"] = max(worst["history"], (e["PASS"], f"{kind} {sp:.0%}"))
            worst["speedup"] = max(worst["speedup"], (b["PASS"], f"{kind} {sp:.0%}"))
            continue
        out.append(f"| {kind} {sp:.0%} | {k} | {_pct(n['FAIL'])} | {_pct(e['PASS'])} | {_pct(e2['FAIL'])} | "
                   f"{_pct(g['FAIL'])} | {_pct(b['PASS'])} |")
    line = ("At 2 seeds nothing FAILs (the floor); the worst false PASS there: "
            + ", ".join(f"{r} {_pct(v)} ({where})" for r, (v, where) in worst.items()) + ".")
    return [line, "", *out]


def _fixed_seeds_of_power(power: float, make, kmax: int) -> str:
    for k in range(3, kmax + 1):
        if vs.rates(make(k))["FAIL"] >= power - 0.005:
            return str(k)
    return f">{kmax}"


def _cell(false_fail: float, false_pass: float, detected: float, seeds_null: float, seeds_effect: float,
          fixed: str) -> str:
    return (f"{_pct(false_fail)} / {_pct(false_pass)} / {_pct(detected)} / {seeds_null:g}, {seeds_effect:g} / "
            f"{fixed}")


def sequential_table(null_n: int, eff_n: int, k0: int = 3, kmax: int = 12) -> list[str]:
    """run --until-decided from k0 seeds to the cap kmax, one look per added seed: a row per trial-level kind with
    history-throughput and speedup side by side, then accuracy-parity."""
    out = [("Each cell: false FAIL / false PASS / detected / median seeds (no change, effect) / fixed seeds of the "
            "same power."), "",
           "| trial levels | history-throughput, 10% slower, 2% drift | speedup, true 1.1 / 0.9 x min |", "|---|---|---|"]
    for kind, sp in KINDS:
        for rho in ((0.0, 0.7) if kind == "normal" and sp <= 0.05 else (0.0,)):
            rng = np.random.default_rng(int(sp * 1e5 + rho * 10) + len(kind))
            label = f"{kind} {sp:.0%}" + (f", rho {rho}" if rho else "")
            n, un = vs.sequential_history(rng, null_n, k0, kmax, 0.0, sp, rho, 0.02, TH, kind)
            e, ue = vs.sequential_history(rng, eff_n, k0, kmax, 0.10, sp, rho, 0.02, TH, kind)
            p = vs.rates(e)["FAIL"]
            fixed = _fixed_seeds_of_power(p, lambda k: vs.history_outcomes(np.random.default_rng(k), eff_n, k, 0.10, sp,
                                                                            rho, 0.02, TH, kind), 2 * kmax)
            hist = _cell(vs.rates(n)["FAIL"], vs.rates(e)["PASS"], p, np.median(un), np.median(ue), fixed)
            g, ug = vs.sequential_speedup(rng, null_n, k0, kmax, TH.min_speedup * 1.1, sp, rho, TH, kind)
            b, ub = vs.sequential_speedup(rng, eff_n, k0, kmax, TH.min_speedup * 0.9, sp, rho, TH, kind)
            p = vs.rates(b)["FAIL"]
            fixed = _fixed_seeds_of_power(p, lambda k: vs.speedup_outcomes(np.random.default_rng(k), eff_n, k,
                                                                            TH.min_speedup * 0.9, sp, rho, TH, kind)[0],
                                          2 * kmax)
            speed = _cell(vs.rates(g)["FAIL"], vs.rates(b)["PASS"], p, np.median(ug), np.median(ub), fixed)
            out.append(f"| {label} | {hist} | {speed} |")
    out += ["", "| accuracy-parity, drop 2 x margin | cell as above |", "|---|---|"]
    for frac in (0.25, 0.5, 1.0):
        sd = frac * TH.metric_abs_tol
        rng = np.random.default_rng(int(frac * 100))
        n, un = vs.sequential_parity(rng, 5 * null_n, k0, kmax, 0.0, sd, TH)
        d, ud = vs.sequential_parity(rng, eff_n, k0, kmax, 2 * vs.true_margin(sd, TH), sd, TH)
        p = vs.rates(d)["FAIL"]
        fixed = _fixed_seeds_of_power(p, lambda k: vs.parity_outcomes(np.random.default_rng(k), eff_n, k,
                                                                       2 * vs.true_margin(sd, TH), sd, TH), 2 * kmax)
        out.append(f"| seed sd {frac:g} x abs_tol | "
                   f"{_cell(vs.rates(n)['FAIL'], vs.rates(d)['PASS'], p, np.median(un), np.median(ud), fixed)} |")
    return out


METRIC_SPREADS = (0.07, 0.25, 0.5, 1.0, 2.0, 4.0)


def two_seed_metric_table(n: int) -> list[str]:
    """accuracy-parity / history-metric at 2 + 2 seeds (no 3-seed floor): Gaussian and heavy-tailed seeds."""
    out = [("| metric seed sd / abs_tol | seed spread | false FAIL | PASS, no drop | drop of 2 x margin FAILs | "
            "false PASS (drop 2 x margin) |"), "|---|---|---|---|---|---|"]
    for frac, kind in itertools.product(METRIC_SPREADS, ("normal", "t3")):
        sd = frac * TH.metric_abs_tol
        rng = np.random.default_rng(int(frac * 1000) + len(kind))
        a = vs.rates(vs.parity_outcomes(rng, n, 2, 0.0, sd, TH, kind))
        b = vs.rates(vs.parity_outcomes(rng, n // 5, 2, 2 * vs.true_margin(sd, TH), sd, TH, kind))
        out.append(f"| {frac:g} | {kind} | {_pct(a['FAIL'])} | {_pct(a['PASS'])} | {_pct(b['FAIL'])} | "
                   f"{_pct(b['PASS'])} |")
    return out


POOLED = (("normal", 0.02), ("normal", 0.06), ("t3", 0.06), ("normal", 0.12), ("bimodal", 0.29))


def pooled_table(null_n: int, eff_n: int) -> list[str]:
    """history-throughput against 10 earlier runs (check --history) vs against one baseline run, 3 trials a run;
    a row per trial-level kind, each cell drift 0 / 2 / 5% (2 trials a run: a line above the table)."""
    drifts = (0.0, 0.02, 0.05)
    out = ["Each cell: drift 0 / 2 / 5%.", "",
           "| trial levels | false FAIL | 10% slowdown FAILs | 20% slowdown FAILs | 20% FAILs against one run |",
           "|---|---|---|---|---|"]
    two = 0.0
    for kind, sp in POOLED:
        cols: list[list[float]] = [[], [], [], []]
        for d, k in itertools.product(drifts, (2, 3)):
            rng = np.random.default_rng(int(sp * 1e4 + d * 1e3 + k) + len(kind))
            n = vs.rates(vs.pooled_outcomes(rng, null_n, 10, k, 0.0, sp, 0.0, d, TH, kind))
            e1 = vs.rates(vs.pooled_outcomes(rng, eff_n, 10, k, 0.10, sp, 0.0, d, TH, kind))
            e2 = vs.rates(vs.pooled_outcomes(rng, eff_n, 10, k, 0.20, sp, 0.0, d, TH, kind))
            one = vs.rates(vs.history_outcomes(rng, eff_n, k, 0.20, sp, 0.0, d, TH, kind))
            if k == 2:
                two = max(two, n["FAIL"], e1["FAIL"], e2["FAIL"], one["FAIL"])
                continue
            for col, x in zip(cols, (n["FAIL"], e1["FAIL"], e2["FAIL"], one["FAIL"]), strict=True):
                col.append(x)
        out.append(f"| {kind} {sp:.0%} | " + " | ".join(" / ".join(f"{x * 100:.1f}" for x in c) + "%" for c in cols)
                   + " |")
    return [f"At 2 trials per run no FAIL (the floor): every FAIL rate {_pct(two)}.", "", *out]


def correlated_table(n: int) -> list[str]:
    """issues 40, 55: FAIL of identical code by accuracy parity when the seeds of one mode share a run effect (seed sd
    0.05 pt, run sd from rho): on the seeds alone (as before issue 55), without a history as the rule decides now
    (a FAIL must clear an unseen run effect, parity.guarded_parity), with the run-level sd from 10 earlier runs."""
    out = [("| seeds | rho | abs_tol (pt) | false FAIL, seeds alone (before) | false FAIL, no history (now) | "
            "false FAIL, run sd from 10 runs | 5-point drop FAILs, no history |"), "|---|---|---|---|---|---|---|"]
    for k, rho, tol in itertools.product((2, 3, 5), (0.5, 0.8), (0.0, 0.1, 0.5)):
        run_sd = 0.05 * math.sqrt(rho / (1 - rho))
        rng = np.random.default_rng(500 + k + int(100 * rho) + int(1000 * tol))
        today, hist, now = vs.correlated_parity_outcomes(rng, n, k, run_sd, 0.05, tol)
        _, _, drop = vs.correlated_parity_outcomes(rng, n // 4, k, run_sd, 0.05, tol, drop=5.0)
        out.append(f"| {k} | {rho:g} | {tol:g} | {_pct(float((today == 'FAIL').mean()))} | "
                   f"{_pct(float((now == 'FAIL').mean()))} | {_pct(float((hist == 'FAIL').mean()))} | "
                   f"{_pct(float((drop == 'FAIL').mean()))} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--null", type=int, default=10000, help="simulated comparisons per cell, no change")
    ap.add_argument("--effect", type=int, default=4000, help="simulated comparisons per cell, with the effect")
    ap.add_argument("--only", choices=["fixed", "kinds", "sequential", "two-seeds", "pooled", "correlated"],
                    default=None)
    args = ap.parse_args()
    if args.only in (None, "correlated"):
        print("#### accuracy-parity with seeds sharing a run effect (seed sd 0.05 pt, run sd from rho)\n")
        print("\n".join(correlated_table(args.null)))
    if args.only in (None, "two-seeds"):
        print("#### accuracy-parity and history-metric at 2 + 2 seeds\n")
        print("\n".join(two_seed_metric_table(5 * args.null)))
    if args.only in (None, "pooled"):
        print("\n#### history-throughput on the median figure: pooled history (10 runs) and one run\n")
        print("\n".join(pooled_table(args.null // 2, args.effect // 2)))
    if args.only in (None, "kinds"):
        print("#### Non-normal trial levels, fixed seeds (rho 0; history with 2% drift)\n")
        print("\n".join(kinds_table(args.null, args.effect)))
    if args.only in (None, "sequential"):
        print("\n#### run --until-decided: 3 seeds to a cap of 12, one look per added seed\n")
        print("\n".join(sequential_table(args.null // 2, args.effect // 2)))
    if args.only not in (None, "fixed"):
        return
    print("\n#### history-throughput against one run, fixed seeds (worst / range over drift 0, 1, 2% and rho 0, 0.7)\n")
    print("\n".join(history_table(args.null, args.effect)))
    print("\n#### speedup (worst over rho 0, 0.7; min_speedup 1.3)\n")
    print("\n".join(speedup_table(args.effect)))
    print("\n#### accuracy-parity (and history-metric: the same test)\n")
    print("\n".join(parity_table(5 * args.null)))


if __name__ == "__main__":
    main()
