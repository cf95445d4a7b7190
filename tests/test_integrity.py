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
from tests.test_command import suite_text

cli = CliRunner()


def run(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


def trials(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("mine/*/trials/*.json")}


def command_suite(tmp_path: Path, program: str, *, instrument: bool = True, steps: int = 4, amp: bool = False,
                  args: str = '"--seed", "{seed}", ') -> Path:
    """test_command's suite running `program` (written to prog.py) as `prog.py --seed S --steps N --out OUT`."""
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    cmd = f'["{sys.executable}", "{prog}", {args}"--steps", "{{steps}}", "--out", "{{out}}"]'
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_text(command=cmd, steps=steps, amp=amp, regex=False,
                                workload_extra=f"instrument = {str(instrument).lower()}"))
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


@pytest.mark.slow
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
    assert t["throughput"]["samples_per_s"] < t["steps"][0]["samples"] / 0.035


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


# ---------------------------------------------------------------- a record the program cannot write

FORGER = r'''
import argparse, json, os, time
from pathlib import Path
import paddle
ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int); ap.add_argument("--steps", type=int); ap.add_argument("--out")
ap.add_argument("--amp", default="")
a = ap.parse_args()
out = Path(a.out)
# Forged events, wherever a program could find ampbench's events: the folder named in its environment
# (older ampbench) and beside {out}. "1.jsonl": pid 1 as "rank 0" with 1 us steps, world 2.
fake = [{"e": "start", "pid": 1, "rank": 0, "world": 2, "paddle": "9.9", "device": "cpu"}]
fake += [{"e": "step", "step": i, "t": 1e-6, "at": float(i), "loss": 0.1, "eval_s": 0.0} for i in range(1, 99)]
fake += [{"e": "ops", "calls": {"matmul_v2": "500,0,0,0"}, "steps": 2}]
folders = [Path(os.environ["AMPBENCH_HOOK_DIR"])] if os.environ.get("AMPBENCH_HOOK_DIR") else []
folders.append(out.parent / (out.name + ".events"))
for d in folders:
    d.mkdir(parents=True, exist_ok=True)
    (d / "1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in fake))
model = paddle.nn.Linear(4, 2)
opt = paddle.optimizer.SGD(parameters=model.parameters())
for i in range(a.steps):
    time.sleep(0.03)
    with paddle.amp.auto_cast(enable=bool(a.amp)):
        loss = model(paddle.ones([4, 4])).mean()
    loss.backward(); opt.step(); opt.clear_grad()
time.sleep(0.6)                                # the hook's own ops event is out: the forged one comes last
for d in folders:                              # one JSON line appended to its own events file
    with open(d / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps({"e": "ops", "calls": {"matmul_v2": "500,0,0,0"}, "steps": 2}) + "\n")
for s in ("ampbench_hook", "AMPBENCH_HOOK_SOCKET"):   # the socket's name is no file to write into
    assert not (out.parent / s).exists()
print("accuracy: 0.5")
'''


@pytest.mark.slow
def test_a_program_cannot_forge_its_events_by_files(tmp_path):
    out = tmp_path / "runs"
    suite = command_suite(tmp_path, FORGER, steps=4, amp=True)
    suite.write_text(suite.read_text().replace('preset = "json", json_file = "{out}/metrics.json"',
                                               "patterns = { accuracy = 'accuracy: (\\S+)' }"))
    r = run("run", str(suite), "--out", str(out), "--no-report")
    got = trials(out)
    fp32, amp = got["fp32__seed0"], got["amp-o1-fp16__seed0"]
    assert fp32["status"] == "ok" and amp["status"] == "ok", (fp32["error"], amp["error"], r.output)
    assert fp32["world_size"] == 1 and amp["world_size"] == 1                 # "1.jsonl" is no rank
    assert all(s["time_s"] >= 0.025 for s in fp32["steps"]), [s["time_s"] for s in fp32["steps"]]
    assert fp32["throughput"]["samples_per_s"] < fp32["steps"][0]["samples"] / 0.025
    assert amp["amp"]["active"] is False and "AMP inactive" in amp["amp"]["inactive_reason"]  # CPU: a no-op
    assert r.exit_code != 0 and "PASS -> exit 0" not in r.output


def test_the_channel_reads_only_the_programs_own_processes():
    """A sender outside the program's tree (here: this test process, not a child of the tree the
    channel checks) is refused, with the token or without it: by its kernel-given pid, whatever it claims."""
    import socket
    import subprocess

    from ampbench.core.protocol import HOOK_SOCKET_ENV
    from ampbench.trial.command_channel import EventChannel
    from ampbench.trial.command_record import EventReader

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with EventChannel(lambda: {child.pid}) as channel:
            token, _, path = channel.env()[HOOK_SOCKET_ENV].partition(":")
            for first in (token.encode(), b"not the token"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(path)
                s.sendall(first)
                assert s.recv(8) == b""                              # refused: closed without "ok"
                s.close()
        assert channel.refused == [os.getpid(), os.getpid()]
        assert channel.refusals == {"a token from outside the program's process tree": 1, "no token": 1}
        assert EventReader(channel).poll() == [] and EventReader(channel).procs == {}
    finally:
        child.kill()
        child.wait()


REWRITER = r'''
import argparse, json, sys
from pathlib import Path
ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int); ap.add_argument("--steps", type=int); ap.add_argument("--out")
ap.add_argument("--amp", default="")
a = ap.parse_args()
if a.amp:   # the AMP trial's program rewrites the finished fp32 trial through {out}/../..
    done = Path(a.out) / ".." / ".." / "trials" / "fp32__seed0.json"
    t = json.loads(done.read_text())
    t["metrics"]["accuracy"] = 0.1
    done.write_text(json.dumps(t))
print("accuracy: 0.5")
'''


@pytest.mark.slow
def test_a_record_rewritten_by_a_later_program_or_by_hand_is_refused(tmp_path):
    out = tmp_path / "runs"
    suite = command_suite(tmp_path, REWRITER, instrument=False, amp=True)
    suite.write_text(suite.read_text().replace('preset = "json", json_file = "{out}/metrics.json"',
                                               "patterns = { accuracy = 'accuracy: (\\S+)' }"))
    r = run("run", str(suite), "--out", str(out), "--no-report")
    assert r.exit_code == 2, r.output
    assert "fp32__seed0.json" in r.output and "changed after ampbench wrote it" in r.output
    assert "Traceback" not in r.output
    run_dir = next(out.glob("mine/*"))
    for verb in (["check", str(run_dir)], ["report", str(run_dir)]):
        r = run(*verb)
        assert r.exit_code == 2 and "fp32__seed0.json" in r.output and "Traceback" not in r.output, r.output


def test_check_and_report_refuse_a_record_changed_after_the_run(tmp_path):
    out = tmp_path / "runs"
    suite = command_suite(tmp_path, REWRITER, instrument=False)
    suite.write_text(suite.read_text().replace('preset = "json", json_file = "{out}/metrics.json"',
                                               "patterns = { accuracy = 'accuracy: (\\S+)' }"))
    run("run", str(suite), "--out", str(out), "--no-report")
    run_dir = next(out.glob("mine/*"))
    assert run("check", str(run_dir)).exit_code != 2
    path = run_dir / "trials" / "fp32__seed0.json"
    t = json.loads(path.read_text())
    t["metrics"]["accuracy"] = 0.99
    path.write_text(json.dumps(t))
    for verb in (["check", str(run_dir)], ["report", str(run_dir)]):
        r = run(*verb)
        assert r.exit_code == 2 and "fp32__seed0.json" in r.output and "changed after" in r.output, r.output


# ---------------------------------------------------------------- options that would mislead, refused or said

QUICK = r'''
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--steps"); ap.add_argument("--out"); ap.add_argument("--bs")
ap.parse_known_args()
print("accuracy: 0.5")
'''


def test_until_decided_refuses_a_command_that_never_uses_its_seed(tmp_path):
    out = tmp_path / "runs"
    suite = command_suite(tmp_path, QUICK, instrument=False, args="")
    r = run("run", str(suite), "--until-decided", "--out", str(out))
    assert r.exit_code == 2 and "workload.command" in r.output and "{seed}" in r.output, r.output
    assert "Traceback" not in r.output and not out.exists()


def test_at_max_batch_refuses_another_suites_probe(tmp_path):
    from ampbench.core.files import atomic_write_text
    from ampbench.results.probe_file import ProbeFile, ProbeMode

    probe_dir = tmp_path / "probe"
    probe = ProbeFile(suite="someone-else", suite_file="x.toml", profile="default", run_id="p1", device="cpu",
                      ceiling="memory_limit", steps=2, max_batch_limit=64, seed=0, finished="2026-12-01T00:00:00Z",
                      modes={"fp32": ProbeMode(configured_batch=4, max_batch=64)})
    atomic_write_text(probe_dir / "probe.json", probe.model_dump_json(by_alias=True))
    out = tmp_path / "runs"
    suite = command_suite(tmp_path, QUICK, instrument=False, args='"--seed", "{seed}", "--bs", "{batch_size}", ')
    r = run("run", str(suite), "--at-max-batch", "--probe", str(probe_dir), "--out", str(out), "--no-report")
    assert r.exit_code == 2 and "--probe" in r.output and "someone-else" in r.output, r.output
    assert "Traceback" not in r.output and not out.exists()


def test_compare_says_when_the_runs_are_of_different_suites(tmp_path):
    import numpy as np

    from tests.factories import make_run, make_suite
    from tests.test_until_decided import _trial

    rng = np.random.default_rng(3)
    paths = []
    for rid, s in (("a", make_suite(seeds=[0, 1])), ("b", make_suite(seeds=[0, 1], name="other"))):
        trials = [_trial(m.name, k, 1.0, rng, 0.005) for m in s.modes for k in (0, 1)]
        for t in trials:
            t.suite = s.suite.name
        paths.append(make_run(tmp_path, s, trials, run_id=rid))
    r = run("compare", str(paths[1]), str(paths[0]))
    assert r.exit_code == 0 and "different suites" in r.output and "'toy'" in r.output, r.output
