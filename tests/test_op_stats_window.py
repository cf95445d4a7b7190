"""Issue 43.6: Paddle's operator stats (and the op-count reads around each optimizer step) stay inside
warm-up, so no measured step pays for them: the window is `amp_stats_steps` cut to the warm-up steps
(built-in loop: from step 1; a command trial's hook: from step 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config.suite import TrainConfig


@pytest.mark.parametrize("warmup,amp_stats,first,expect", [
    (5, 2, 1, 2), (2, 2, 1, 2), (1, 2, 1, 1), (0, 2, 1, 1),      # built-in: steps 1..k
    (5, 2, 2, 2), (2, 2, 2, 1), (1, 2, 2, 1), (3, 4, 2, 2),      # command: steps 2..k+1
])
def test_the_op_stats_window_ends_inside_warm_up(warmup, amp_stats, first, expect):
    train = TrainConfig(steps=20, warmup_steps=warmup, amp_stats_steps=amp_stats)
    assert train.op_stats_steps(first=first) == expect


def _matmuls(out: Path, warmup: int) -> int:
    r = CliRunner().invoke(app, ["run", str(out / "toy.toml"), "--out", str(out / f"w{warmup}"), "--mode", "fp32",
                                 "--set", f"train.warmup_steps={warmup}", "--set", "train.amp_stats_steps=2",
                                 "--no-report"], env={"COLUMNS": "200"})
    assert r.exit_code in (0, 3), r.output
    t = json.loads(next((out / f"w{warmup}").glob("toy/*/trials/fp32__seed0.json")).read_text())
    assert str(t["amp"]["evidence"]).endswith("apart") and t["status"] == "ok"
    return sum(sum(c.values()) for op, c in t["amp"]["op_calls"].items() if op == "matmul_v2")


@pytest.mark.slow
def test_a_one_step_warm_up_counts_one_step_of_ops_not_a_measured_one(toy_suite, tmp_path):
    """The real loop: with warmup_steps = 1 the stats cover step 1 only (half of warmup_steps = 2's count)."""
    toy_suite()
    one, two = _matmuls(tmp_path, 1), _matmuls(tmp_path, 2)
    assert two > 0 and one * 2 == two, (one, two)
