"""Issue 32: a record the program under test cannot write, nothing deleted outside the run folder,
and measurements that survive ordinary training code. The program-under-test cases run real programs
(small Python scripts written here) that try to forge events or rewrite records."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.core.errors import ResultsError
from ampbench.core.files import empty_folder

cli = CliRunner()


def run(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


def trials(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("mine/*/trials/*.json")}


def command_suite(tmp_path: Path, program: str, *, instrument: bool = True, steps: int = 4, amp: bool = False,
                  seeds: str = "[0]", args: str = '"--seed", "{seed}", ') -> Path:
    """A command suite running `program` (written to prog.py) as `prog.py --seed S --steps N --out OUT`."""
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    amp_mode = '\n[[modes]]\nname = "amp-o1-fp16"\nlevel = "O1"\nargs = ["--amp"]\n' if amp else ""
    suite = tmp_path / "suite.toml"
    suite.write_text(f"""
[suite]
name = "mine"
workload = "command"
metric = "accuracy"
seeds = {seeds}

[workload]
command = ["{sys.executable}", "{prog}", {args}"--steps", "{{steps}}", "--out", "{{out}}"]
metric = {{ preset = "json", json_file = "{{out}}/metrics.json" }}
instrument = {str(instrument).lower()}

[train]
batch_size = 4
steps = {steps}
warmup_steps = 1
timeout_s = 120

[[modes]]
name = "fp32"
{amp_mode}""")
    return suite


# ---------------------------------------------------------------- emptying a folder never follows a link

def test_empty_folder_removes_links_as_links_and_refuses_a_linked_folder(tmp_path):
    root = tmp_path / "run"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.jsonl").write_text("mine\n")
    target = root / "outputs" / "t"
    (target / "sub" / "deeper").mkdir(parents=True)
    (target / "sub" / "deeper" / "a.txt").write_text("x")
    (target / "f.jsonl").write_text("x")
    (target / "to-outside").symlink_to(outside)
    (target / "sub" / "to-file").symlink_to(outside / "keep.jsonl")
    empty_folder(target, root)
    assert target.is_dir() and list(target.iterdir()) == []
    assert (outside / "keep.jsonl").read_text() == "mine\n"            # links removed, targets untouched

    linked = root / "outputs" / "linked"
    linked.symlink_to(outside)
    with pytest.raises(ResultsError, match="symbolic link"):
        empty_folder(linked, root)
    (root / "outputs2").symlink_to(root / "outputs")                    # a link above the folder, below root
    with pytest.raises(ResultsError, match="symbolic link"):
        empty_folder(root / "outputs2" / "t", root)
    assert (outside / "keep.jsonl").exists()
    empty_folder(root / "outputs" / "new", root)                         # missing: created
    assert (root / "outputs" / "new").is_dir()


CRASH_ONCE = r'''
import json, os, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
marker = Path(__file__).with_name("attempt")
if not marker.exists():                       # first attempt: a metric, then a crash
    marker.write_text("1")
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps({"accuracy": 0.99}))
    sys.exit(1)
print("retry: no metric this time")           # the retry writes none: a stale file must not count
'''


def _crashed_run(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "runs"
    r = run("run", str(command_suite(tmp_path, CRASH_ONCE, instrument=False)), "--out", str(out), "--no-report")
    assert r.exit_code != 0 and trials(out)["fp32__seed0"]["status"] == "crashed", r.output
    return out, next(out.glob("mine/*"))


def test_resume_deletes_nothing_through_a_linked_output_or_events_folder(tmp_path):
    out, run_dir = _crashed_run(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious.jsonl").write_text("not ampbench's\n")
    (outside / "metrics.json").write_text("{}")
    for name in ("fp32__seed0.events", "fp32__seed0"):   # a run folder from a CI artifact, or one the program rewrote
        link = run_dir / "outputs" / name
        if link.exists():
            empty_folder(link, run_dir)
            link.rmdir()
        link.symlink_to(outside)
    r = run("run", "--resume", str(run_dir), "--no-report")
    assert sorted(p.name for p in outside.iterdir()) == ["metrics.json", "precious.jsonl"], r.output
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "crashed" and "is a symbolic link" in t["error"], t["error"]


def test_resume_of_a_crashed_trial_starts_from_an_empty_out(tmp_path):
    out, run_dir = _crashed_run(tmp_path)
    assert (run_dir / "outputs" / "fp32__seed0" / "metrics.json").exists()
    run("run", "--resume", str(run_dir), "--no-report")
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "crashed" and "no metric 'accuracy'" in t["error"], t["error"]
    assert "accuracy" not in t["metrics"]     # the first attempt's metrics.json was not the retry's metric


# ---------------------------------------------------------------- measurement that survives ordinary code

FROZEN_BN = r'''
import argparse, json, time
import paddle
ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int); ap.add_argument("--steps", type=int); ap.add_argument("--out")
a = ap.parse_args()
model = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.BatchNorm1D(4), paddle.nn.Linear(4, 2))
bn = model[1]
opt = paddle.optimizer.SGD(parameters=model.parameters())
for i in range(1, a.steps + 1):
    model.train(); bn.eval()                  # fine-tuning with frozen BatchNorm statistics
    time.sleep(0.04)                          # the step's real work
    model(paddle.ones([3, 4])).mean().backward(); opt.step(); opt.clear_grad()
    if i == 3:                                # one real evaluation between steps 3 and 4
        model.eval(); time.sleep(0.3); model.train()
print("accuracy: 0.5")
'''


def test_a_frozen_submodule_is_never_subtracted_and_a_real_evaluation_is(tmp_path):
    out = tmp_path / "runs"
    suite = command_suite(tmp_path, FROZEN_BN, steps=6)
    suite.write_text(suite.read_text().replace('preset = "json", json_file = "{out}/metrics.json"',
                                               "patterns = { accuracy = 'accuracy: (\\S+)' }"))
    r = run("run", str(suite), "--out", str(out), "--no-report")
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "ok", (t["error"], r.output)
    times = [s["time_s"] for s in t["steps"]]
    assert all(x >= 0.035 for x in times), times          # never ~0 (the BN's eval() to the next train())
    assert times[3] < 0.3, times                            # the 0.3 s evaluation is not step 4's time
    assert t["throughput"]["samples_per_s"] < 4 / 0.035


NAN_LATE = r'''
import sys
print("accuracy: 0.91", flush=True)
print("loss diverged", flush=True)
print("accuracy: nan", flush=True)
'''


def test_a_final_non_finite_metric_is_the_metric(tmp_path):
    from ampbench.workloads.command.presets import LogScan, json_metrics

    scan = LogScan("regex", {"accuracy": r"accuracy: (\S+)"})
    for line in ("accuracy: 0.91", "accuracy: -inf"):
        scan.feed(line)
    assert scan.metrics["accuracy"] == float("-inf")
    (tmp_path / "m.json").write_text('{"accuracy": NaN, "loss": 0.5}')
    got = json_metrics(tmp_path / "m.json")
    assert got["loss"] == 0.5 and got["accuracy"] != got["accuracy"]

    out = tmp_path / "runs"
    suite = command_suite(tmp_path, NAN_LATE, instrument=False)
    suite.write_text(suite.read_text().replace('preset = "json", json_file = "{out}/metrics.json"',
                                               "patterns = { accuracy = 'accuracy: (\\S+)' }"))
    run("run", str(suite), "--out", str(out), "--no-report")
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "ok" and t["metrics"]["accuracy"] != t["metrics"]["accuracy"], t   # NaN, not 0.91
