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
import os
import statistics
import sys
import time
from pathlib import Path

import psutil
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


def _busy_s() -> float:
    """CPU seconds the whole machine has been busy (psutil's /proc/stat: idle and iowait left out)."""
    c = psutil.cpu_times()
    return sum(getattr(c, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq", "steal"))


def _own_s() -> float:
    t = os.times()   # this process and its waited-for children: the run's workers and, through them, the programs
    return t.user + t.system + t.children_user + t.children_system


def _run(tmp_path: Path, template: str, script: str):
    """The suite run through the CLI; also the cores other processes (another pytest worker, another job)
    used meanwhile: a command trial's record has no others_cpu off a GPU (its interference comes from NVML
    alone), so the test measures the machine's load itself, the way trackers/load.py does for a trial."""
    suite = tmp_path / "suite.toml"
    suite.write_text(template.format(python=sys.executable, script=FIX / script))
    out = tmp_path / "runs"
    busy, own, wall = _busy_s(), _own_s(), time.monotonic()
    r = cli.invoke(app, ["run", str(suite), "--out", str(out)], env={"COLUMNS": "200"})
    others = max(0.0, (_busy_s() - busy) - (_own_s() - own)) / max(time.monotonic() - wall, 1e-9)
    ts = {p.stem: json.loads(p.read_text()) for p in out.glob("*/*/trials/*.json")}
    return r, ts, next(out.glob("*/*"), None), others


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
    r, ts, run, _ = _run(tmp_path, HAPI_SUITE, "hapi_fit.py")
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
    r, ts, _, others = _run(tmp_path, LOOP_SUITE, "minimize_loop.py")
    assert r.exit_code == 3, r.output
    assert set(ts) == {"fp32__seed0", "amp-o1-fp16__seed0", "amp-o2-fp16__seed0"}
    for t in ts.values():
        _measured_on_cpu(t)
        assert 0.0 <= t["metrics"]["macro_f1"] <= 1.0          # {out}/metrics.json, key val.macro_f1
        assert 0.0 <= t["metrics"]["val_acc"] <= 100.0         # its own log line, by regex
        check = t["workload_info"]["throughput_check"]        # its own samples/sec line, epochs 1 and 2
        assert check["lines"] == 2 and check["program_samples_per_s"] > 0
        # over the same batches, the program's epoch-2 line and ampbench's steps 5-8 (that epoch's 4 steps)
        # agree on a machine of its own: both timed the same ~1-4 ms steps (measured: ratio 0.90-0.93, the
        # hook's step 5 also holds epoch 1's print and JSON write); a wrong train.batch_size is off 2x.
        # Under load the print in step 5 can wait for a core (measured with others 1.6 cores: ratio 0.55),
        # so there the batch itself is checked: every step's samples are the program's --batch-size
        epoch2 = [s for s in t["steps"] if 5 <= s["step"] <= 8]
        same = sum(s["samples"] for s in epoch2) / sum(s["time_s"] for s in epoch2)
        assert len(epoch2) == 4 and all(s["samples"] == 32 for s in t["steps"])
        assert abs(same / check["program_samples_per_s"] - 1) <= check["tolerance"] or others > 0.5, (
            same, check, others)
        # ampbench's mean rate over its whole window (steps 3-12) agrees with the program's line (the median
        # per-step rate did not: each epoch's first step starts the DataLoader's iterator, a cost a mean sees
        # and a median does not) on a machine of its own. Where other processes took over half a core
        # meanwhile (another pytest worker, a shared CI runner), one slow step of 1-4 ms ones outside epoch 2
        # moves the two windows apart (measured under load: ratio 0.56, epoch 3's first step 9.3 ms against
        # epoch 2's 4.2 ms), so the check may disagree; the batch is then still checked on the same steps
        # above. `others` is the test's own measure (_run): a command trial's record has no others_cpu on
        # CPU, so reading it gave 0.0 on every machine and a loaded run failed here (313.6 samples/s)
        assert check["agrees"] or others > 0.5, (check, others)
        # the median misses the slow first steps of each epoch; it used to be asserted as the median rate 10%
        # above the mean, a margin partly made by the op-stats bookkeeping that ran inside measured step 3
        # (issue 43: the stats window now ends inside warm-up; measured there: 8 of 9 trials met it before,
        # 5 of 9 after), so the slow steps themselves are asserted, on a machine of its own: beside other
        # pytest workers (CI: 3 on 2 cores) half the 1-4 ms steps waited for a core (measured on CI: median
        # 4.2 ms, max 5.6 ms, the fast steps 1.2 ms), so there nothing tells the iterator's start apart
        times = [s["time_s"] for s in t["steps"][WARMUP:]]
        assert max(times) > 2 * statistics.median(times) or others > 0.5, (times, others)
        assert ("warning" in t["workload_info"]) == (not check["agrees"]), t["workload_info"]   # only then
    for mode in ("amp-o1-fp16", "amp-o2-fp16"):
        amp = ts[f"{mode}__seed0"]["amp"]
        assert amp["requested"] and not amp["active"] and amp["level"] == mode[4:6].upper()
