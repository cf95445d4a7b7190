#!/usr/bin/env python3
"""Benchmark (not a test): emulated AMP's step time against FP32's, per bundled suite (docs/emulation.md, "Cost").

For each bundled suite's `cpu-emulated` profile, one fresh process runs its three modes (fp32, emulated O1
float16, emulated O2 bfloat16) `--pairs` times each, interleaved (fp32, o1, o2, fp32, o1, o2, ...), through
the worker's own `run_trial` in this process (`launch.inprocess.launch_in_process`; the emulator takes its
patches out after each trial), so drift of a shared machine hits every mode alike.  A trial's figure is the
median of its measured steps' wall time and of their process CPU time (all threads: on a loaded machine the
CPU time moves less than the wall time); a mode's ratio is the geometric mean over the rounds of its
trial's figure over the same round's fp32 trial.  Target: at most 3x.

    python scripts/bench_emulation.py [--suites toy,resnet,ctr,bert,ocr] [--pairs 3] [--steps N]

`--steps` shortens every suite (default: each suite's own below, warm-up 2). The load average is printed:
on a shared machine the wall ratio is only indicative.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEPS = {"toy": 200, "resnet": 10, "ctr": 30, "bert": 30, "ocr": 10}
MODES = ("fp32", "amp-o1-fp16", "amp-o2-bf16")


def trial_figures(suite_name: str, steps: int, mode: str, i: int, out: Path) -> tuple[float, float]:
    """One trial of `mode`: (median wall s, median CPU s) of its measured steps."""
    from ampbench.launch.inprocess import launch_in_process
    from ampbench.results import RunDir
    from ampbench.trial.spec import TrialSpec
    from ampbench.workloads.suites import load_suite

    loaded = load_suite(suite_name, profile="cpu-emulated",
                        overrides=[f"train.steps={steps}", "train.warmup_steps=2", "train.eval_every=0"])
    suite = loaded.suite
    spec = TrialSpec(suite=suite.model_dump(mode="json"), suite_file=loaded.path, profile="cpu-emulated",
                     config_hash=suite.config_hash(), mode=mode, seed=0,
                     trial_path=str(RunDir(out).trial_path(mode, i)),
                     cache_dir=str(Path(tempfile.gettempdir()) / "ampbench-bench"))
    t = launch_in_process(spec)
    if t.status != "ok":
        raise SystemExit(f"{suite_name} {mode}: {t.status}: {(t.error or '')[-500:]}")
    steps_ = t.measured_steps()
    cpu = [s.cpu_s for s in steps_ if s.cpu_s is not None]
    return statistics.median(s.time_s for s in steps_), statistics.median(cpu) if cpu else math.nan


def bench_suite(name: str, pairs: int, steps: int, out: Path) -> dict[str, tuple[float, float]]:
    """{mode: (wall ratio, CPU ratio)} against fp32, geometric means over the rounds."""
    figs: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for i in range(pairs):
        for m in MODES:
            figs[m].append(trial_figures(name, steps, m, i, out / name))
            print(f"  {name} round {i + 1} {m}: {figs[m][-1][0] * 1e3:.1f} ms wall, {figs[m][-1][1] * 1e3:.1f} ms CPU "
                  "per step", flush=True)
    out_ratios = {}
    for m in MODES[1:]:
        wall = [a[0] / b[0] for a, b in zip(figs[m], figs["fp32"])]
        cpu = [a[1] / b[1] for a, b in zip(figs[m], figs["fp32"])]
        out_ratios[m] = (math.exp(statistics.fmean(map(math.log, wall))), math.exp(statistics.fmean(map(math.log, cpu))))
    return out_ratios


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default="toy,resnet,ctr,bert,ocr")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="steps per trial (default: each suite's own)")
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} on {os.cpu_count()} CPUs; {a.pairs} round(s) per suite")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.suites.split(","):
            ratios = bench_suite(name, a.pairs, a.steps or STEPS[name], Path(tmp))
            rows += [(name, m, w, c) for m, (w, c) in ratios.items()]
    print(f"\n{'suite':8} {'mode':12} {'wall x fp32':>12} {'CPU x fp32':>11}  (target <= 3x)")
    for name, m, w, c in rows:
        print(f"{name:8} {m:12} {w:12.2f} {c:11.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
