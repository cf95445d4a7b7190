#!/usr/bin/env python3
"""Benchmark (not a test): the host-side cost of the command hook's per-step device sync, measured on CPU.

On a GPU the hook calls `paddle.device.synchronize("gpu:N")` at every optimizer step's end (steps.boundary).
Its cost has two parts: the host's Python path into the driver (Paddle's synchronize: the place from the
string, the isinstance checks, `core._device_synchronize`), measurable here, and the wait for the device's queue
to drain plus the lost overlap of the next step's host work with this step's tail kernels, which needs a GPU and
is NOT measured here. This script runs Paddle's own synchronize over the fake GPU build of the tests
(tests/fake_cuda.py: `core._device_synchronize` a no-op, the rest Paddle's Python) and reports:

- the call alone, in a tight loop (warm caches): microseconds per call;
- the call inside a training loop (a small MLP on CPU, ~1 ms a step): blocks of steps with and without the
  call at each step's end, alternating, the difference of the median step times over the blocks.

    python scripts/bench_step_sync.py [--blocks 60] [--steps 20] [--hidden 64]

Run it on an idle machine; on a shared one the in-loop figure is only indicative (it is a difference of
two noisy medians), the tight-loop one is steadier.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=64)
    a = ap.parse_args()
    import paddle
    from _pytest.monkeypatch import MonkeyPatch

    from tests.fake_cuda import CudaPlace, Machine, a100_gpus, install_machine

    mp = MonkeyPatch()
    install_machine(mp, Machine("one", a100_gpus(1)), Path(tempfile.mkdtemp()))
    mp.setattr(paddle, "CUDAPlace", CudaPlace)   # the GPU build's place, as Paddle's synchronize sees it here
    paddle.set_device("gpu")
    # what the hook binds (device.name_device): the place, made once; the string "gpu:0" is parsed at every call
    sync = functools.partial(paddle.device.synchronize, paddle.CUDAPlace(0))
    by_string = functools.partial(paddle.device.synchronize, "gpu:0")
    n = 20000
    alone = {}
    for name, fn in (("place", sync), ("string", by_string), ("place", sync), ("string", by_string)):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        alone[name] = min(alone.get(name, 1.0), (time.perf_counter() - t0) / n)
    m = paddle.nn.Sequential(paddle.nn.Linear(64, a.hidden), paddle.nn.ReLU(), paddle.nn.Linear(a.hidden, 10))
    opt = paddle.optimizer.Adam(parameters=m.parameters())
    x, y = paddle.randn([64, 64]), paddle.randint(0, 10, [64])

    def block(with_sync: bool) -> float:
        times = []
        for _ in range(a.steps):
            t = time.perf_counter()
            paddle.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            opt.clear_grad()
            if with_sync:
                sync()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    block(False)
    bare, synced = [], []
    for i in range(a.blocks):
        for with_sync in ((False, True) if i % 2 else (True, False)):
            (synced if with_sync else bare).append(block(with_sync))
    step = statistics.median(bare)
    diffs = [s - b for s, b in zip(synced, bare)]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"Paddle's synchronize over a no-op driver call, alone: {alone['place'] * 1e6:.2f} us a call bound to "
          f"CUDAPlace(0) (the hook's), {alone['string'] * 1e6:.2f} us bound to 'gpu:0'")
    print(f"in a training loop ({step * 1e3:.2f} ms a step, {a.blocks} block pairs of {a.steps} steps): "
          f"{statistics.median(diffs) * 1e6:+.1f} us a step (median of the pairs' differences; "
          f"quartiles {statistics.quantiles(diffs, n=4)[0] * 1e6:+.1f} .. {statistics.quantiles(diffs, n=4)[2] * 1e6:+.1f})")
    print("not measured (needs a GPU): the wait for the device's queue and the lost host/device overlap")


if __name__ == "__main__":
    main()
