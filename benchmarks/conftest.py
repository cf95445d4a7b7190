"""Shared set-up for the op micro-benchmarks: device, AMP activity, shape set, and the CPU notice.

Where AMP is inactive (a CPU-only Paddle) the `fp32` and `amp` columns run the same float32
kernels; the terminal summary and the saved JSON (`ampbench.amp_active`, `ampbench.note`) say so,
so nobody reads a CPU difference as an AMP speed-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

ROUNDS_ENV = "AMPBENCH_BENCH_ROUNDS"
DTYPE_ENV = "AMPBENCH_BENCH_DTYPE"  # float16 (default) or bfloat16
SAME_PATH_NOTE = ("AMP inactive on this device: the fp32 and amp columns ran the same float32 kernels (auto_cast is "
                  "a no-op here); their difference is noise plus auto_cast's dispatch overhead, not an AMP effect.")


@dataclass(frozen=True)
class BenchEnv:
    gpu: bool
    dtype: str
    amp_active: bool
    device: str
    rounds: int

    @property
    def note(self) -> str:
        return "" if self.amp_active else SAME_PATH_NOTE


def _bench_env() -> BenchEnv:
    import paddle

    from ampbench.trackers import device

    gpu = device.select_device()
    dtype = os.environ.get(DTYPE_ENV, "float16")
    if dtype not in ("float16", "bfloat16"):
        raise pytest.UsageError(f"{DTYPE_ENV}={dtype!r}: expected float16 or bfloat16")
    rounds = int(os.environ.get(ROUNDS_ENV, "30" if gpu else "8"))
    # auto_cast evidence (a probe matmul/conv2d really returns dtype), not paddle.amp.is_*_supported()
    return BenchEnv(gpu=gpu, dtype=dtype, amp_active=device.amp_supported(dtype),
                    device=str(paddle.get_device()), rounds=rounds)


ENV_KEY = pytest.StashKey[BenchEnv]()  # set by the fixture, read by the summary hooks


@pytest.fixture(scope="session")
def bench_env(request: pytest.FixtureRequest) -> BenchEnv:
    env = _bench_env()
    request.config.stash[ENV_KEY] = env
    return env


def pytest_benchmark_update_json(config, benchmarks, output_json):
    e = config.stash.get(ENV_KEY, None)
    if e is not None:
        output_json["ampbench"] = {"device": e.device, "amp_dtype": e.dtype, "amp_active": e.amp_active,
                                   "rounds": e.rounds, "note": e.note}


@pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    e = config.stash.get(ENV_KEY, None)
    if e is not None and not e.amp_active:
        terminalreporter.write_sep("-", "ampbench")
        terminalreporter.write_line(SAME_PATH_NOTE, yellow=True)
