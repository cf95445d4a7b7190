#!/usr/bin/env python3
"""Benchmark (not a test): ampbench's measured throughput vs a bare hand-written training loop.

Both sides train the same ResNet workload (same model, batch, data, optimizer) in their own fresh
process; the bare side is the loop a user would write (forward, loss, backward, step, clear_grad,
a loss.item() per step), timed over the same window. Pairs run interleaved (A B A B ...) and the
ratio of medians is reported, so machine noise hits both sides alike.

    python scripts/bench_overhead.py [--pairs 3] [--steps 30] [--batch 32]

Target: ampbench / bare >= 0.98.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = {"model": "resnet18", "image_size": 32, "dataset": {"kind": "mnist-5k", "limit": 2000}}


def bare(steps: int, warmup: int, batch: int) -> dict:
    """The hand-written loop, using the workload only for data and model construction."""
    import numpy as np
    import paddle

    from ampbench.workloads import WorkloadContext
    from ampbench.workloads.resnet.workload import ResNetParams, ResNetWorkload

    wl = ResNetWorkload(WorkloadContext(params=ResNetParams.model_validate(WORKLOAD), batch_size=batch,
                                        steps=steps, seed=0, cache_dir=Path(tempfile.gettempdir())))
    wl.prepare()
    paddle.seed(0)
    np.random.seed(0)
    model = wl.build_model()
    opt = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    batches = wl.train_batches(0, batch)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        b = next(batches)
        loss = wl.loss(model, b)
        loss.backward()
        opt.step()
        opt.clear_grad()
        loss.item()
        times.append(time.perf_counter() - t0)
    window = times[warmup:]
    return {"samples_per_s": batch * len(window) / sum(window)}


def harness(steps: int, warmup: int, batch: int, out: Path) -> dict:
    from ampbench.config import Suite
    from ampbench.launch.runner import TrialSpec, launch_trial
    from ampbench.results import RunDir

    suite = Suite.model_validate({
        "suite": {"name": "overhead", "workload": "resnet", "metric": "top1"},
        "workload": WORKLOAD,
        "train": {"batch_size": batch, "steps": steps, "warmup_steps": warmup},
        "modes": [{"name": "fp32"}],
    })
    run = RunDir(out)
    spec = TrialSpec(suite=suite.model_dump(mode="json"), suite_file="-", profile="bench",
                     config_hash=suite.config_hash(), mode="fp32", seed=0,
                     trial_path=str(run.trial_path("fp32", int(time.time() * 1000) % 10**9)),
                     cache_dir=str(Path(tempfile.gettempdir()) / "ampbench-bench"))
    t = launch_trial(spec, run)
    if t.status != "ok":
        raise SystemExit(f"harness trial failed: {t.error}")
    return {"samples_per_s": t.throughput.samples_per_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.bare:
        print(json.dumps(bare(a.steps, a.warmup, a.batch)))
        return 0
    h, b = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            h.append(harness(a.steps, a.warmup, a.batch, Path(tmp))["samples_per_s"])
            res = subprocess.run([sys.executable, __file__, "--bare", "--steps", str(a.steps), "--warmup",
                                  str(a.warmup), "--batch", str(a.batch)], capture_output=True, text=True, check=True)
            b.append(json.loads(res.stdout.strip().splitlines()[-1])["samples_per_s"])
            print(f"pair {i + 1}: ampbench {h[-1]:.2f} samples/s, bare loop {b[-1]:.2f} samples/s", flush=True)
    ratio = statistics.median(h) / statistics.median(b)
    print(f"ratio ampbench/bare (medians of {a.pairs}): {ratio:.3f}  (target >= 0.98)")
    return 0 if ratio >= 0.98 else 1


if __name__ == "__main__":
    sys.exit(main())
