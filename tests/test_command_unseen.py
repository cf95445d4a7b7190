"""Two training programs in styles the other command tests do not cover, wrapped by following
docs/command.md alone (the suites below are what a new user writes from it), run for real on CPU
through `ampbench run`:
- tests/fixtures/command/hapi_fit.py: the high-level API, paddle.Model(...).prepare(...).fit(...) with
  `amp_configs` from its own flag, epochs and no step count (stop_after_steps), `hapi` preset;
- tests/fixtures/command/minimize_loop.py: a hand-written loop with opt.minimize(loss) and
  GradScaler.minimize(opt, scaled) under auto_cast from its own `--amp-level O1/O2`, epochs and no step
  count, the metric from the JSON file it rewrites each epoch (a dotted json_key), a regex beside it,
  and its own samples/sec line read by throughput_pattern.
Each yields measured steps, the metric from the program's own output, op dtype evidence, nothing
NVML on CPU, and exit 3 (AMP inactive on CPU)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app

cli = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "command"
STEPS, WARMUP = 12, 2

HAPI_SUITE = """
[suite]
name = "hapi"
workload = "command"
metric = "acc"
seeds = [0]

[workload]
command = ["{python}", "{script}", "--epochs", "5", "--seed", "{{seed}}", "--batch-size", "{{batch_size}}"]
env = {{ OMP_NUM_THREADS = "1" }}
stop_after_steps = true
metric = {{ preset = "hapi" }}

[train]
batch_size = 16
steps = 12
warmup_steps = 2
timeout_s = 300

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
args = ["--amp", "O1"]
"""

LOOP_SUITE = """
[suite]
name = "loop"
workload = "command"
metric = "macro_f1"
seeds = [0]

[workload]
command = ["{python}", "{script}", "--epochs", "10", "--batch-size", "{{batch_size}}", "--seed", "{{seed}}",
           "--log-dir", "{{out}}"]
env = {{ OMP_NUM_THREADS = "1" }}
stop_after_steps = true
# its line is epoch 2 alone (~5 steps), ours the mean over 10 steps: on this VM slow episodes of a few
# steps move one against the other by up to 27%; the median was 1.5-2.5x off (the test below)
throughput_tolerance = 0.4

[workload.metric]
preset = "json"
json_file = "{{out}}/metrics.json"
json_key = "val.macro_f1"
patterns = {{ val_acc = 'val_acc (\\S+)%' }}
throughput_pattern = '(\\S+) samples/sec'

[train]
batch_size = 32
steps = 12
warmup_steps = 2
timeout_s = 300

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
args = ["--amp-level", "O1"]

[[modes]]
name = "amp-o2-fp16"
level = "O2"
args = ["--amp-level", "O2", "--init-scale", "1024"]
"""


def _run(tmp_path: Path, template: str, script: str):
    suite = tmp_path / "suite.toml"
    suite.write_text(template.format(python=sys.executable, script=FIX / script))
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(suite), "--out", str(out)], env={"COLUMNS": "200"})
    ts = {p.stem: json.loads(p.read_text()) for p in out.glob("*/*/trials/*.json")}
    return r, ts, next(out.glob("*/*"), None)


def _measured_on_cpu(t: dict) -> None:
    assert t["status"] == "ok", (t["error"], t.get("log_tail"))
    assert len(t["steps"]) == STEPS and t["throughput"]["measured_steps"] == STEPS - WARMUP
    assert all(s["time_s"] > 0 for s in t["steps"]) and t["nonfinite_losses"] == 0
    seen = [s for s in t["steps"] if s["loss_seen"]]   # read at steps 1, 6, 11, ... (loss_every_steps = 5)
    assert t["steps"][0]["loss_seen"] and len(seen) >= 2 and all(s["loss"] is not None for s in seen)
    calls = t["amp"]["op_calls"]
    assert calls["matmul_v2"]["float32"] > 0 and not any(c.get("float16") for c in calls.values())
    m = t["memory"]
    assert m["source"] == "host" and m["peak_allocated_bytes"] > 0
    assert (m["device_used_bytes"], m["energy_j"], m["energy_j_per_sample"], m["nvml_device"]) == (None,) * 4
    assert not [k for k in m["errors"] if k.startswith("nvml")]


@pytest.mark.slow
def test_paddle_model_fit_with_its_own_amp_configs(tmp_path):
    r, ts, run = _run(tmp_path, HAPI_SUITE, "hapi_fit.py")
    assert r.exit_code == 3, r.output                       # AMP inactive on CPU: never PASS
    assert set(ts) == {"fp32__seed0", "amp-o1-fp16__seed0"}
    for t in ts.values():
        _measured_on_cpu(t)
        assert 0.0 <= t["metrics"]["acc"] <= 1.0 and "loss" in t["metrics"]   # fit's own eval, epoch 2
    amp = ts["amp-o1-fp16__seed0"]["amp"]
    assert amp["requested"] and not amp["active"]
    assert run is not None and "AMP inactive" in (run / "report.md").read_text()


@pytest.mark.slow
def test_a_minimize_loop_with_its_own_amp_level_flag_and_a_json_metric(tmp_path):
    r, ts, _ = _run(tmp_path, LOOP_SUITE, "minimize_loop.py")
    assert r.exit_code == 3, r.output
    assert set(ts) == {"fp32__seed0", "amp-o1-fp16__seed0", "amp-o2-fp16__seed0"}
    for t in ts.values():
        _measured_on_cpu(t)
        assert 0.0 <= t["metrics"]["macro_f1"] <= 1.0          # {out}/metrics.json, key val.macro_f1
        assert 0.0 <= t["metrics"]["val_acc"] <= 100.0         # its own log line, by regex
        check = t["workload_info"]["throughput_check"]        # its own samples/sec line, epochs 1 and 2
        assert check["lines"] == 2 and check["program_samples_per_s"] > 0
        # ampbench's mean rate agrees with the program's (the median per-step rate did not: each
        # epoch's first step starts the DataLoader's iterator, a cost a mean sees and a median does not)
        # ...on a machine of its own: where other processes took over half a core in the window (a
        # shared CI runner), the program's one epoch line and ampbench's whole window saw different
        # load, and only a gross mismatch (a wrong batch: 2x) is an error
        others = (t.get("interference") or {}).get("others_cpu") or 0.0
        assert check["agrees"] or (others > 0.5 and 0.6 < check["ratio"] < 1.6), (check, others)
        # the median misses the slow first steps of each epoch; it used to be asserted as the median rate 10%
        # above the mean, a margin partly made by the op-stats bookkeeping that ran inside measured step 3
        # (issue 43: the stats window now ends inside warm-up; measured there: 8 of 9 trials met it before,
        # 5 of 9 after), so the slow steps themselves are asserted
        times = [s["time_s"] for s in t["steps"][WARMUP:]]
        assert max(times) > 2 * statistics.median(times), times
        assert "warning" not in t["workload_info"]
    for mode in ("amp-o1-fp16", "amp-o2-fp16"):
        amp = ts[f"{mode}__seed0"]["amp"]
        assert amp["requested"] and not amp["active"] and amp["level"] == mode[4:6].upper()
