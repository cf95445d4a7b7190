#!/usr/bin/env python
"""The nightly-gate tables of docs/checks.md ("Nightly histories judged night after night"), in the page's shape:
simulated GPU-nightly histories judged night after night with
the rule's own code (tests/nightly_sim.py over tests/nightly_noise.py).

    PYTHONPATH=. python scripts/sim_nightly.py                  # 1,000 histories a row (about 8 CPU minutes)
    PYTHONPATH=. python scripts/sim_nightly.py --rows 200 --only null

Rows: identical code over 40-night histories (10 nights, then 30 judged) in every noise model; then each
change on the first judged night (6 judged nights; a creep 15, one degraded night and an improvement 10) in
the GPU fleet, the two-SKU fleet and the fleet with machine episodes and shared nights.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/ of this checkout, not a site-packages `tests`

from tests import nightly_noise as nn
from tests import nightly_sim as ns

GPU5 = nn.GpuNight(gpu_spread=0.05)
TWO = nn.GpuNight(kinds=(0.0, 0.06), gpu_spread=0.05)
EPISODES = nn.GpuNight(gpu_spread=0.05, episodes=0.2, shared=0.05)
MODELS = {
    "GPU, GPUs 2% apart": nn.GpuNight(gpu_spread=0.02),
    "GPU, GPUs 5% apart": GPU5,
    "GPU, 5% + drift 0.5%/night": nn.GpuNight(gpu_spread=0.05, drift=0.005),
    "GPU, GPUs 10% apart (stress)": nn.GpuNight(gpu_spread=0.10),
    "two SKUs 6% apart, alternating": TWO,
    "two SKUs 6% apart, at random": nn.GpuNight(kinds=(0.0, 0.06), gpu_spread=0.05, alternate=False),
    "GPU 5% + episodes (20% of nights) + shared nights (5%)": EPISODES,
    "the same, trials side by side": nn.GpuNight(gpu_spread=0.05, episodes=0.2, shared=0.05, side_by_side=True),
    "CPU slow episodes": nn.CpuNight(),
}
AMP, FP32 = (nn.AMP,), (nn.FP32,)
CASES = {
    "uniform 20%": (nn.Change("uniform", 0.20), 6),
    "uniform 10%": (nn.Change("uniform", 0.10), 6),
    "30% of steps 1.5-2x, both modes": (nn.Change("steps"), 6),
    "30% of steps 1.5-2x, AMP only": (nn.Change("steps", modes=AMP), 6),
    "30% of steps 1.5-2x, FP32 only": (nn.Change("steps", modes=FP32), 6),
    "every 3rd step 1.5x, both modes": (nn.Change("periodic"), 6),
    "every 3rd step 1.5x, AMP only": (nn.Change("periodic", modes=AMP), 6),
    "+15% after 30% of the trial": (nn.Change("late"), 6),
    "creep 1%/night": (nn.Change("creep", 0.01), 15),
    "creep 2%/night": (nn.Change("creep", 0.02), 15),
    "one degraded night (-20%)": (nn.Change("once", 0.20), 10),
    "improvement +10%": (nn.Change("faster", 0.10), 10),
}
CASE_MODELS = {"GPU, GPUs 5% apart": GPU5, "two SKUs 6% apart, alternating": TWO,
               "GPU 5% + episodes (20% of nights) + shared nights (5%)": EPISODES}


def _pct(x: float, digits: int = 1) -> str:
    return "-" if math.isnan(x) else f"{x:.{digits}%}"


def null_table(rows: int) -> list[str]:
    out = ["| noise model | nights FAILed | histories with a FAIL | nights INCONCLUSIVE | nights held out |",
           "|---|---|---|---|---|"]
    for i, (name, model) in enumerate(MODELS.items()):
        r = ns.rates(ns.simulate(rows, model, nn.Change(), 1000 + i, judged=30))
        out.append(f"| {name} | {_pct(r['night_fail'], 2)} | {_pct(r['any_fail'])} | "
                   f"{_pct(r['inconclusive'])} | {_pct(r['held'], 2)} |")
    return out


def _num(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:.1f}"


def case_table(rows: int) -> list[str]:
    """The changes as docs/checks.md shows them: a row per change, a column per noise model (A, B, C), each cell
    FAILed within 3 nights / every later night FAILed / nights FAILed / nights held out; the notes under it."""
    letters = dict(zip(CASE_MODELS, "ABC", strict=True))
    cells: dict[str, list[str]] = {c: [] for c in CASES}
    notes: list[str] = []
    for i, (mname, model) in enumerate(CASE_MODELS.items()):
        for j, (cname, (change, judged)) in enumerate(CASES.items()):
            r = ns.rates(ns.simulate(rows, model, change, 100 * i + j, judged=judged), change)
            cells[cname].append(f"{_num(r['within3'])} / {_num(r['every_later'])} / {_num(r['night_fail'])} / "
                                f"{_num(r['held'])}%")
            if "before12" in r:
                notes.append(f"- {cname}, {letters[mname]}: FAILed before the loss passed 12% in {_pct(r['before12'])}")
            if "after_fail" in r:
                notes.append(f"- {cname}, {letters[mname]}: normal nights after it FAILed {_pct(r['after_fail'], 2)}, "
                             f"held {_pct(r['after_held'], 2)}")
    legend = "; ".join(f"{v} = {k}" for k, v in letters.items())
    out = [f"Each cell: FAILed within 3 nights / every later night FAILed / nights FAILed / nights held out. {legend}:",
           "", "| change | A | B | C |", "|---|---|---|---|"]
    out += [f"| {c} | {' | '.join(v)} |" for c, v in cells.items()]
    return [*out, "", *notes]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000, help="simulated histories per row")
    ap.add_argument("--only", choices=["null", "cases"], default=None)
    args = ap.parse_args()
    t0 = time.process_time()
    if args.only in (None, "null"):
        print(f"#### Identical code, 40-night histories (10 nights, then 30 judged), {args.rows} histories a row\n")
        print("\n".join(null_table(args.rows)))
    if args.only in (None, "cases"):
        print(f"\n#### Changes landing on the 11th night, {args.rows} histories a row\n")
        print("\n".join(case_table(args.rows)))
    print(f"\n({time.process_time() - t0:.0f} CPU s)")


if __name__ == "__main__":
    main()
