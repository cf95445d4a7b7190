#!/usr/bin/env python3
"""Benchmark (not a test): a local run with its workers forked from one Paddle import, against the same run
with every worker spawned (AMPBENCH_FORKSERVER=0), in one invocation, alternating.

Each look is `ampbench run SUITE --seeds ... --no-report` as a fresh process; what is compared is that
process tree's CPU seconds (its own and its reaped children's: os.times() after it ended) and its wall time.
The ratio forked/spawned is per pair of neighbouring looks (order alternating), the interval over pairs.

    python scripts/bench_forkserver.py [--suite toy] [--seeds 0,1] [--pairs 3]

Measured on the 2-core CPU machine the tests run on (idle, toy suite, 2 modes x 2 seeds, 3 pairs): printed by
the script with its load average; a shared machine makes the wall ratio only indicative.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def look(suite: str, seeds: str, out: Path, forked: bool) -> tuple[float, float]:
    env = {**os.environ, "AMPBENCH_FORKSERVER": "1" if forked else "0"}
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ampbench.cli", "run", suite, "--seeds", seeds, "--out", str(out),
                    "--no-report"], env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="toy")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; suite {args.suite}, seeds {args.seeds}")
    cpu_ratio, wall_ratio = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            got = {f: look(args.suite, args.seeds, Path(tmp) / f"{i}-{f}", f) for f in order}
            (fc, fw), (sc, sw) = got[True], got[False]
            cpu_ratio.append(fc / sc)
            wall_ratio.append(fw / sw)
            print(f"pair {i + 1}: forked {fc:.1f} CPU s {fw:.1f} s wall; spawned {sc:.1f} CPU s {sw:.1f} s wall")
    for name, xs in (("CPU", cpu_ratio), ("wall", wall_ratio)):
        sd = statistics.stdev(xs) if len(xs) > 1 else float("nan")
        print(f"{name} forked/spawned: mean {statistics.mean(xs):.2f} (sd {sd:.2f} over {len(xs)} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
