"""Acceptance of the command workload (issue 21): real training programs whose training loops nobody
here wrote, run for real on CPU through `ampbench run`: the paddleformers Trainer with its own AMP
flags, and PaddleSeg's own training loop (paddleseg.core.train) with its own AMP switches; and (issue 60)
PaddleSeg's own unmodified tools/train.py from a checkout through `ampbench import paddleseg`, when
AMPBENCH_PADDLESEG_REPO names one. Each yields measured steps, the metric from the program's own output,
op dtype evidence, and exit 3 (AMP inactive on CPU)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app

cli = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "command"

TRAINER_SUITE = """
[suite]
name = "trainer"
workload = "command"
metric = "eval_accuracy"
seeds = [0]

[workload]
command = ["{python}", "{script}", "--output_dir", "{{out}}", "--max_steps", "{{steps}}", "--seed", "{{seed}}",
           "--per_device_train_batch_size", "{{batch_size}}", "--logging_steps", "4", "--save_strategy", "no",
           "--report_to", "none", "--disable_tqdm", "true", "--dataloader_num_workers", "0"]
metric = {{ preset = "trainer" }}

[train]
batch_size = 16
steps = 12
warmup_steps = 2
timeout_s = 240

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-bf16"
level = "O1"
dtype = "bfloat16"
args = ["--bf16", "--fp16_opt_level", "O1"]

[[modes]]
name = "amp-o1-fp16"
level = "O1"
args = ["--fp16", "--fp16_opt_level", "O1", "--scale_loss", "1024"]
"""

SEG_SUITE = """
[suite]
name = "seg"
workload = "command"
metric = "mIoU"
seeds = [0]

[workload]
command = ["{python}", "{script}", "--iters", "{{steps}}", "--seed", "{{seed}}", "--save_dir", "{{out}}",
           "--batch_size", "{{batch_size}}"]
metric = {{ preset = "paddleseg" }}

[train]
batch_size = 2
steps = 12
warmup_steps = 2
timeout_s = 240

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
args = ["--precision", "fp16", "--amp_level", "O1"]
"""


def _run(tmp_path: Path, text: str, *args: str):
    suite = tmp_path / "suite.toml"
    suite.write_text(text)
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(suite), "--out", str(out), "--no-report", *args], env={"COLUMNS": "200"})
    ts = {p.stem: json.loads(p.read_text()) for p in out.glob("*/*/trials/*.json")}
    return r, ts


def _measured(t: dict, steps: int) -> None:
    assert t["status"] == "ok", (t["error"], t.get("log_tail"))
    assert len(t["steps"]) == steps and t["throughput"]["measured_steps"] == steps - 2
    assert all(s["time_s"] > 0 for s in t["steps"])
    seen = {s["step"] for s in t["steps"] if s["loss_seen"]}   # steps 1, 6, 11, ... (+ the stop_after step)
    assert set(range(1, steps + 1, 5)) <= seen <= set(range(1, steps + 1, 5)) | {steps}
    assert all(s["loss"] is not None for s in t["steps"] if s["loss_seen"])
    calls = t["amp"]["op_calls"]
    assert sum(c["float32"] for c in calls.values()) > 0 and "matmul_v2" in calls or "conv2d" in calls


@pytest.mark.slow
def test_paddleformers_trainer_with_its_own_amp_flags(tmp_path):
    pytest.importorskip("paddleformers")
    text = TRAINER_SUITE.format(python=sys.executable, script=FIX / "trainer_text_cls.py")
    r, ts = _run(tmp_path, text, "--mode", "amp-o1-bf16")
    assert r.exit_code == 3, r.output                      # AMP inactive on CPU: never PASS
    for key in ("fp32__seed0", "amp-o1-bf16__seed0"):
        t = ts[key]
        _measured(t, 12)
        assert 0.0 <= t["metrics"]["eval_accuracy"] <= 1.0  # from the Trainer's own all_results.json
        assert "eval_loss" in t["metrics"]
        assert t["workload_info"]["throughput_check"]["lines"] >= 1   # its interval_samples_per_second
    bf16 = ts["amp-o1-bf16__seed0"]["amp"]
    assert bf16["requested"] and not bf16["active"] and bf16["dtype"] == "bfloat16"


@pytest.mark.slow
def test_paddleformers_trainer_fp16_on_a_cpu_build_is_a_clear_per_trial_error(tmp_path):
    """paddleformers 0.4.1's Trainer reads GradScaler._cache_found_inf after every step, which a CPU
    Paddle's (disabled) GradScaler never sets: --fp16 crashes on CPU. ampbench records that trial as
    crashed with the program's traceback, and keeps the fp32 trial."""
    pytest.importorskip("paddleformers")
    text = TRAINER_SUITE.format(python=sys.executable, script=FIX / "trainer_text_cls.py")
    r, ts = _run(tmp_path, text, "--mode", "amp-o1-fp16")
    assert r.exit_code == 2, r.output
    assert ts["fp32__seed0"]["status"] == "ok"
    t = ts["amp-o1-fp16__seed0"]
    assert t["status"] == "crashed" and "exited with code 1" in t["error"]
    assert "_cache_found_inf" in t["log_tail"]
    assert "amp-o1-fp16 seed 0: crashed: the program exited with code 1" in r.output


@pytest.mark.slow
def test_paddleseg_training_loop_with_its_own_amp_switches(tmp_path):
    pytest.importorskip("paddleseg")
    text = SEG_SUITE.format(python=sys.executable, script=FIX / "paddleseg_train.py")
    r, ts = _run(tmp_path, text)
    assert r.exit_code == 3, r.output
    for t in ts.values():
        _measured(t, 12)
        assert 0.0 <= t["metrics"]["mIoU"] <= 1.0 and "Kappa" in t["metrics"]   # its [EVAL] line
        assert t["workload_info"]["throughput_check"]["lines"] >= 1            # its ips: ... samples/sec
        assert "conv2d" in t["amp"]["op_calls"]
    amp = ts["amp-o1-fp16__seed0"]["amp"]
    assert amp["requested"] and not amp["active"]


REAL_SEG = os.environ.get("AMPBENCH_PADDLESEG_REPO")


@pytest.mark.slow
@pytest.mark.skipif(not REAL_SEG, reason="AMPBENCH_PADDLESEG_REPO does not name a PaddleSeg checkout to run its own "
                                         "tools/train.py (git clone https://github.com/PaddlePaddle/PaddleSeg)")
def test_paddleseg_own_trainer_from_import_to_verdict(tmp_path):
    """PaddleSeg's unmodified tools/train.py (its quick-start BiSeNetV2 config, --synthetic-data in its Dataset
    format) through `ampbench import paddleseg --repo` and `ampbench run --profile cpu --mode amp-o1-fp16`: every
    trial ok, exit 3 (AMP inactive on CPU), mIoU equal to its own [EVAL] line, and ampbench's samples/s within
    0.9-1.1 of its own `ips` over the same steps (its [TRAIN] line at iteration 10 covers iterations 6-10,
    --log_iters 5).  The checkout is imported ahead of the installed PyPI paddleseg 2.8.0 (its env PYTHONPATH)."""
    suite = tmp_path / "seg.toml"
    r = cli.invoke(app, ["import", "paddleseg", "configs/quick_start/bisenet_optic_disc_512x512_1k.yml", "--repo",
                         str(REAL_SEG), "--synthetic-data", "-o", str(suite)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(suite), "--profile", "cpu", "--mode", "amp-o1-fp16", "--out", str(out),
                         "--no-report", "--set", "train.timeout_s=3000"], env={"COLUMNS": "200"})
    assert r.exit_code == 3, r.output
    folder = next(p for p in out.glob("*/*") if (p / "trials").is_dir())
    ts = {p.stem: json.loads(p.read_text()) for p in (folder / "trials").glob("*.json")}
    assert set(ts) == {"fp32__seed0", "amp-o1-fp16__seed0"}
    for key, t in ts.items():
        assert t["status"] == "ok", (t["error"], t.get("log_tail"))
        log = (folder / "logs" / f"{key}.log").read_text(errors="replace")
        evals = re.findall(r"\[EVAL\] #Images: \d+ mIoU: ([0-9.]+)", log)
        assert evals and t["metrics"]["mIoU"] == float(evals[-1])
        ips = float(re.search(r"\[TRAIN\] .*iter: 10/12,.*ips: ([0-9.]+) samples/sec", log).group(1))
        steps = {s["step"]: s for s in t["steps"]}
        ours = sum(steps[k]["samples"] for k in range(6, 11)) / sum(steps[k]["time_s"] for k in range(6, 11))
        assert 0.9 <= ours / ips <= 1.1, (key, ours, ips)
        assert t["interference"]["cpu_share"] is not None       # CPU contention recorded (issue 60)
    amp = ts["amp-o1-fp16__seed0"]["amp"]
    assert amp["requested"] and not amp["active"] and "conv2d" in amp["op_calls"]
