"""scripts/aa_runs.py accept: the planted slowdown really wraps Paddle's optimizer step (the acceptance
runs themselves need an idle machine: the lead runs them, see docs/checks.md)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _aa():
    spec = importlib.util.spec_from_file_location("aa_runs", ROOT / "scripts" / "aa_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_planted_slowdown_wraps_the_optimizer_step_and_spins(tmp_path):
    env = _aa()._plant_env(tmp_path, 0.5)
    code = ("import time, paddle\n"
            "print(paddle.optimizer.Optimizer.step.__name__)\n"
            "w = paddle.create_parameter([4], 'float32'); opt = paddle.optimizer.SGD(parameters=[w])\n"
            "t = []\n"
            "for _ in range(6):\n"
            "    s = time.perf_counter(); (w * w).sum().backward(); time.sleep(0.02); opt.step(); opt.clear_grad()\n"
            "    t.append(time.perf_counter() - s)\n"
            "print(min(t[2:]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    name, step = out.stdout.split()[-2:]
    assert name == "_slow_step", out.stderr[-2000:]
    assert float(step) >= 0.035  # a 20 ms step spun up by F / (1 - F) = 1x: at least ~40 ms
