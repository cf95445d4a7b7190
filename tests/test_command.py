"""The `command` workload (issue 21): a user's own training script, run per mode and seed through
the real CLI, measured by the start-up hook; placeholders and faults."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.workloads.command import HOOK_DIR
from ampbench.workloads.command.presets import LogScan

ROOT = Path(__file__).resolve().parents[1]

cli = CliRunner()
SCRIPT = Path(__file__).parent / "fixtures" / "command" / "tiny_train.py"


AMP_MODE = """
[[modes]]
name = "amp-o1-fp16"
level = "O1"
args = ["--amp", "O1"]
"""


def suite_text(extra_args: str = "", seeds: str = "[0]", steps: int = 12, workload_extra: str = "",
               command: str | None = None, timeout: int = 120, amp: bool = True, regex: bool = True) -> str:
    cmd = command or (f'["{sys.executable}", "{SCRIPT}", "--steps", "{{steps}}", "--seed", "{{seed}}", '
                      f'"--out", "{{out}}"{extra_args}]')
    pats = ", patterns = { accuracy = 'final accuracy: (\\S+)' }" if regex else ""
    return f"""
[suite]
name = "mine"
workload = "command"
metric = "accuracy"
seeds = {seeds}

[workload]
command = {cmd}
metric = {{ preset = "json", json_file = "{{out}}/metrics.json"{pats} }}
{workload_extra}

[train]
batch_size = 16
steps = {steps}
warmup_steps = 2
timeout_s = {timeout}

[[modes]]
name = "fp32"
{AMP_MODE if amp else ""}"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "suite.toml"
    p.write_text(text)
    return p


def run(*args: str, env: dict[str, str] | None = None):
    return cli.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})


def trials(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("mine/*/trials/*.json")}


# ---------------------------------------------------------------- up front (exit 2, nothing run)

@pytest.mark.parametrize("text,key,reason", [
    (suite_text(seeds="[0, 1]", command='["python3", "x.py", "--max_steps", "{steps}"]'),
     "workload.command", "never uses {seed}"),
    (suite_text(command='["python3", "x.py", "--seed", "{seed}"]'), "workload.command", "cannot reach the program"),
    (suite_text(command='["python3", "x.py", "{steps}", "{seed}", "{epoch}"]'), "workload.command[4]",
     "unknown placeholder {epoch}"),
    (suite_text(command='["python3", "x.py", "{steps}", "{seed}", "{epochs}"]'), "workload.command",
     "{epochs} needs [workload.program]"),
    (suite_text(command='["no-such-program-here", "{steps}"]'), "workload.command[0]", "not found on PATH"),
    (suite_text(command=f'["{Path(__file__).parent / "fixtures" / "command" / "not_executable.txt"}", "{{steps}}"]'),
     "workload.command[0]", "not an executable file"),
    (suite_text().replace('args = ["--amp", "O1"]', 'args = ["--amp", "O1"]\nbatch_size = 64'),
     "workload.command", "never uses {batch_size}"),
    (suite_text(workload_extra="loss_every_ms = 5"), "workload.loss_every_ms", "replaced by loss_every_steps"),
    (suite_text(workload_extra="loss_every_steps = 0"), "workload.loss_every_steps", "greater than or equal to 1"),
])
def test_what_cannot_reach_the_program_is_refused_up_front(tmp_path, text, key, reason):
    out = tmp_path / "runs"
    r = run("run", str(write(tmp_path, text)), "--out", str(out))
    assert r.exit_code == 2, r.output
    assert key in r.output and reason in r.output and "Traceback" not in r.output
    assert not out.exists()


def test_mode_args_are_refused_for_built_in_workloads(tmp_path, toy_suite):
    p = toy_suite(body=toy_suite().read_text().replace('level = "O1"', 'level = "O1"\nargs = ["--fp16"]'))
    r = run("run", str(p), "--out", str(tmp_path / "runs"))
    assert r.exit_code == 2 and "modes (amp-o1-fp16).args" in r.output


def test_the_hook_imports_nothing_of_ampbench_but_the_standard_library_files_it_shares():
    """The hook runs in the user's interpreter (which may not have ampbench): sitecustomize and its
    package import the standard library, paddle and each other only; the vocabulary and the
    environment names come from record/wire.py and core/protocol.py, and emulated AMP from the trial/emulate
    package (only for a mode's emulate = true), loaded by path, which import the standard library only
    (at import time; their own modules relatively). No module of the hook is over 400 lines."""
    files = [HOOK_DIR / "sitecustomize.py", *sorted((HOOK_DIR / "_ampbench_hook").glob("*.py"))]
    assert {p.name for p in HOOK_DIR.iterdir() if p.name != "__pycache__"} == {"sitecustomize.py", "_ampbench_hook"}
    shared = [ROOT / "ampbench" / "record" / "wire.py", ROOT / "ampbench" / "core" / "protocol.py",
              *sorted((ROOT / "ampbench" / "trial" / "emulate").glob("*.py"))]
    for f in files + shared:
        tree = ast.parse(f.read_text())
        top = tree.body if f in shared else list(ast.walk(tree))   # shared: module level only (psutil is lazy)
        names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        assert names <= set(sys.stdlib_module_names) | {"__future__", "paddle", "_ampbench_hook"}, (f, names)
        assert len(f.read_text().splitlines()) <= 400, f
    text = "\n".join(f.read_text() for f in files)
    assert "AMPBENCH_HOOK_" not in text and "ampbench.core" not in text   # names come from protocol.py


def test_hook_environment_names_are_spelled_only_in_the_protocol():
    hits = [str(p) for p in (ROOT / "ampbench").rglob("*.py") if "AMPBENCH_HOOK_" in p.read_text()]
    assert hits == [str(ROOT / "ampbench" / "core" / "protocol.py")], hits


# ---------------------------------------------------------------- presets (formats from the projects' code)

@pytest.mark.parametrize("preset,lines,metrics,ips", [
    ("paddleocr", ["[2024/01/01 10:00:00] ppocr INFO: epoch: [1/2], iter: 10, lr: 0.001, loss: 3.1, "
                   "reader_cost: 0.1 s, batch_cost: 0.5 s, samples: 80, ips: 160.00000 samples/s, eta: 0:01:00",
                   "[2024/01/01 10:00:05] ppocr INFO: cur metric, precision: 0.5, recall: 0.25, hmean: 0.3333, "
                   "fps: 20.1"],
     {"precision": 0.5, "recall": 0.25, "hmean": 0.3333, "fps": 20.1}, [160.0]),
    ("trainer", ["[2024-01-01 10:00:00,000] [    INFO] - loss: 0.6931, learning_rate: 5e-05, global_step: 10, "
                 "interval_runtime: 1.0, interval_samples_per_second: 32.5, interval_steps_per_second: 2.0",
                 "[2024-01-01 10:00:01,000] [    INFO] - eval_loss: 0.65, eval_accuracy: 0.61, eval_runtime: 0.3",
                 "[2024-01-01 10:00:02,000] [    INFO] -   eval_accuracy           =       0.62"],
     {"eval_loss": 0.65, "eval_accuracy": 0.62, "eval_runtime": 0.3}, [32.5]),
    ("paddleclas", ["[2024/01/01 10:00:00] ppcls INFO: [Train][Epoch 1/2][Iter: 0/10]lr(LinearWarmup): 0.01, "
                    "top1: 0.1, CELoss: 2.3, loss: 2.3, batch_cost: 0.1s, reader_cost: 0.01, ips: 320.5 samples/s, "
                    "eta: 0:00:10",
                    "[2024/01/01 10:00:03] ppcls INFO: [Eval][Epoch 1][Avg]CELoss: 2.25, loss: 2.25, top1: 0.125, "
                    "top5: 0.5"],
     {"CELoss": 2.25, "loss": 2.25, "top1": 0.125, "top5": 0.5}, [320.5]),
    ("paddleseg", ["2024-01-01 10:00:00 [INFO]\t[TRAIN] epoch: 1, iter: 10/20, loss: 0.9, lr: 0.01, batch_cost: "
                   "0.5, reader_cost: 0.01, ips: 4.0000 samples/sec | ETA 00:00:05",
                   "2024-01-01 10:00:09 [INFO]\t[EVAL] #Images: 4 mIoU: 0.2143 Acc: 0.6 Kappa: 0.1 Dice: 0.3"],
     {"mIoU": 0.2143, "Acc": 0.6, "Kappa": 0.1, "Dice": 0.3}, [4.0]),
    ("hapi", ["Epoch 1/1", "step 2/2 - loss: 0.7 - acc: 0.4 - 3ms/step", "Eval begin...",
              "step 1/1 - loss: 0.65 - acc: 0.55 - 2ms/step", "Eval samples: 32"],
     {"loss": 0.65, "acc": 0.55}, []),
])
def test_presets_read_the_projects_own_formats(preset, lines, metrics, ips):
    scan = LogScan(preset)
    for ln in lines:
        scan.feed(ln)
    assert scan.metrics == metrics
    assert scan.throughput == ips


# ---------------------------------------------------------------- real runs of the user's script

@pytest.fixture(scope="module")
def script_run(tmp_path_factory: pytest.TempPathFactory):
    """One real run (fp32 and an AMP mode) of the user's script for the tests below: step times drawn at
    random per run (--jitter-ms), the loss read every 3 steps, and the user's own sitecustomize.py first on
    the program's PYTHONPATH (beside the hook's)."""
    tmp = tmp_path_factory.mktemp("script")
    theirs = tmp / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("print('users sitecustomize ran', flush=True)\n")
    text = suite_text(extra_args=', "--jitter-ms", "8"',
                      workload_extra=f'loss_every_steps = 3\nenv = {{ PYTHONPATH = "{theirs}" }}')
    out = tmp / "runs"
    return run("run", str(write(tmp, text)), "--out", str(out)), out


@pytest.mark.slow
def test_user_script_is_measured_and_amp_inactive_exits_3(script_run):
    r, out = script_run
    assert r.exit_code == 3, r.output
    ts = trials(out)
    assert set(ts) == {"fp32__seed0", "amp-o1-fp16__seed0"}
    for t in ts.values():
        assert t["status"] == "ok", t["error"]
        assert len(t["steps"]) == 12 and t["throughput"]["measured_steps"] == 10
        assert all(s["time_s"] > 0 and s["samples"] == 16 for s in t["steps"])
        seen = [s["step"] for s in t["steps"] if s["loss_seen"]]
        assert seen == [1, 4, 7, 10], seen   # loss_every_steps = 3: steps 1, 1 + k, ..., whatever they took
        assert all(s["loss"] is not None for s in t["steps"] if s["loss_seen"])
        assert t["host"] and t["started_unix"] < t["ended_unix"]   # where and when (the pairing check)
        assert 0.5 < t["metrics"]["accuracy"] <= 1.0
        assert t["amp"]["op_calls"]["matmul_v2"]["float32"] > 0   # the program's own ops, counted
        assert t["memory"]["source"] == "host" and t["memory"]["peak_allocated_bytes"] > 0
        assert t["env"]["paddle"]
        # CPU contention, as the built-in loop records it (issue 60): each step's CPU seconds from the hook's
        # process clock (none for step 1), the CPU share and the other processes' cores over the measured steps
        assert t["steps"][0]["cpu_s"] is None and all(s["cpu_s"] >= 0 for s in t["steps"][1:])
        assert 0 < t["interference"]["cpu_share"] and t["interference"]["others_cpu"] is not None
    spans = sorted((t["started_unix"], t["ended_unix"]) for t in ts.values())
    assert spans[0][1] <= spans[1][0]   # a seed's arms one after the other, never at once
    amp = ts["amp-o1-fp16__seed0"]["amp"]
    assert amp["requested"] and not amp["active"] and "every recorded op ran in float32" in amp["inactive_reason"]
    assert amp["inactive_code"] == "device"
    assert "AMP inactive" in r.output


@pytest.mark.slow
def test_stop_after_steps_ends_the_program_cleanly(tmp_path):
    text = suite_text(command=f'["{sys.executable}", "{SCRIPT}", "--steps", "1000", "--out", "{{out}}"]',
                      workload_extra="stop_after_steps = true", amp=False, regex=False)
    out = tmp_path / "runs"
    r = run("run", str(write(tmp_path, text)), "--out", str(out), "--no-report")
    t = trials(out)["fp32__seed0"]
    assert len(t["steps"]) == 12        # stopped by the hook after train.steps
    assert t["status"] == "crashed" and "no metric 'accuracy'" in t["error"]   # its final eval never ran
    assert r.exit_code == 2


@pytest.mark.slow
@pytest.mark.parametrize("args,expect", [
    (', "--fail-at", "5"', ["exited with code 1", "something broke in the user's code"]),
    (', "--no-metric"', ["no metric 'accuracy'"]),
    (', "--linger"', ["left 1 process(es) running"]),
])
def test_faults_are_clear_per_trial_errors_with_the_log_tail(tmp_path, args, expect):
    out = tmp_path / "runs"
    text = suite_text(extra_args=args, amp=False)
    r = run("run", str(write(tmp_path, text)), "--out", str(out), "--no-report")
    assert r.exit_code == 2, r.output
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "crashed"
    blob = (t["error"] or "") + (t["log_tail"] or "")
    assert all(e in blob for e in expect), blob
    assert expect[0] in r.output


@pytest.mark.slow
def test_steps_short_of_train_steps_and_a_flood_are_reported(tmp_path):
    out = tmp_path / "runs"
    text = suite_text(extra_args=', "--quit-at", "5", "--flood", "3"', workload_extra="max_log_mib = 1", amp=False)
    r = run("run", str(write(tmp_path, text)), "--out", str(out), "--no-report")
    assert r.exit_code == 2
    t = trials(out)["fp32__seed0"]
    assert "ended after 5 optimizer steps; train.steps = 12" in t["error"]
    log = next(out.glob("mine/*/logs/fp32__seed0.log"))
    assert log.stat().st_size < 1.5 * 2**20 and "passed 1 MiB" in log.read_text()
    assert t["workload_info"]["log_lines_dropped"] > 1000


@pytest.mark.slow
def test_a_hanging_program_times_out_and_its_whole_tree_is_killed(tmp_path):
    out = tmp_path / "runs"
    text = suite_text(extra_args=', "--hang-at", "6", "--linger"', timeout=20, amp=False)
    r = run("run", str(write(tmp_path, text)), "--out", str(out), "--no-report")
    assert r.exit_code == 1, r.output   # a timeout is a FAIL of its mode... fp32 here: its own completeness
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "timeout" and len(t["steps"]) >= 5   # the steps done before the hang are kept
    time.sleep(1)
    alive = [p for p in Path("/proc").iterdir()   # this test's program (its --out is under tmp_path), not another test's
             if p.name.isdigit() and str(SCRIPT) in _cmdline(p) and str(tmp_path) in _cmdline(p)]
    assert not alive, [(_cmdline(p)) for p in alive]


def _cmdline(p: Path) -> str:
    try:
        return (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.slow
def test_the_users_own_sitecustomize_still_runs(script_run):
    _, out = script_run   # the run above: its PYTHONPATH names the user's folder holding a sitecustomize.py
    for key in ("fp32__seed0", "amp-o1-fp16__seed0"):
        t = trials(out)[key]
        assert t["status"] == "ok" and len(t["steps"]) == 12
        assert "users sitecustomize ran" in next(out.glob(f"mine/*/logs/{key}.log")).read_text()


@pytest.mark.slow
def test_a_command_under_paddle_distributed_launch_is_measured_on_every_rank(tmp_path):
    cmd = (f'["{sys.executable}", "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir", '
           f'"{{out}}/ranks", "{SCRIPT}", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"]')
    out = tmp_path / "runs"
    r = run("run", str(write(tmp_path, suite_text(command=cmd, amp=False, regex=False, timeout=200))), "--out",
            str(out), "--no-report")
    assert r.exit_code == 3, r.output              # fp32 only: nothing compared, never 0
    t = trials(out)["fp32__seed0"]
    assert t["status"] == "ok", t["error"]
    assert t["world_size"] == 2 and len(t["steps"]) == 12 and t["steps"][0]["samples"] == 32
    assert sorted(m["rank"] for m in t["memory"]["per_rank"]) == [0, 1]   # the launcher itself never stepped


UNPATCH_PROGRAM = r'''
import json, os, sys
from _ampbench_hook import state as hook
import paddle
st = hook.S
def ours(owner, name):
    fn = vars(owner).get(name)
    fn = getattr(fn, "__func__", fn)
    return os.path.dirname(getattr(getattr(fn, "__code__", None), "co_filename", "")) == os.path.dirname(hook.__file__)
def train(n):
    m = paddle.nn.Linear(4, 2); opt = paddle.optimizer.SGD(parameters=m.parameters())
    for _ in range(n):
        m(paddle.ones([3, 4])).mean().backward(); opt.step(); opt.clear_grad()
before = [ours(o, n) for o, n, _, _ in st.patched]
st.unpatched(undo=True)
undone = [ours(o, n) for o, n, _, _ in st.patched]
train(3)
steps_undone = st.step
st.unpatched(undo=False)
train(2)
print(json.dumps({"n": len(st.patched), "before": before, "undone": undone, "steps_undone": steps_undone,
                  "steps": st.step, "names": sorted({n for _, n, _, _ in st.patched})}))
'''


SAMPLED_PROGRAM = r'''
import sys, time
import paddle
m = paddle.nn.Linear(4, 2); opt = paddle.optimizer.SGD(parameters=m.parameters())
for i in range(12):
    if i >= 6:
        time.sleep(0.03)   # long steps: a timed read would have read every one of them
    m(paddle.ones([3, 4])).mean().backward(); opt.step(); opt.clear_grad()
'''


@pytest.mark.slow
def test_the_loss_is_read_at_fixed_steps_and_a_step_not_read_is_not_a_non_finite_loss(tmp_path):
    """Reading a tensor is most of the hook's cost on short steps, so it reads the loss at steps 1, 1 + k,
    1 + 2k, ... (AMPBENCH_HOOK_LOSS_EVERY_STEPS = k): short and long steps alike, so two runs line up
    step for step; a step whose loss was not read is neither a value nor a non-finite loss to the judge."""
    import subprocess
    from types import SimpleNamespace

    from ampbench.config.suite import Thresholds
    from ampbench.core import protocol
    from ampbench.judge.rules.stability import _trial_problems
    from ampbench.record.assemble import step_from_wire
    from ampbench.trial.command_record import EventReader
    from tests.factories import make_trial

    (tmp_path / "p.py").write_text(SAMPLED_PROGRAM)
    with hook_channel() as channel:
        env = {**os.environ, "PYTHONPATH": str(HOOK_DIR), **channel.env(), protocol.HOOK_LOSS_EVERY_ENV: "4"}
        subprocess.run([sys.executable, str(tmp_path / "p.py")], env=env, check=True, timeout=120, capture_output=True)
    reader = EventReader(channel)
    steps = [step_from_wire(ev, 3, 0) for _, ev in reader.poll()]
    assert [s.step for s in steps] == list(range(1, 13))
    assert [s.step for s in steps if s.loss_seen] == [1, 5, 9]   # fast steps and 30 ms steps alike
    assert all(s.loss is not None for s in steps if s.loss_seen)
    assert all(s.loss is None for s in steps if not s.loss_seen)
    problems, nonfinite, _, _ = _trial_problems(SimpleNamespace(th=Thresholds()), make_trial(steps=steps))
    assert nonfinite == 0 and problems == []


@pytest.mark.slow
def test_the_hook_can_put_paddles_own_functions_back_and_its_own_again(tmp_path):
    """The overhead benchmark's bare blocks rely on this: undone, no patched name is ours and steps go
    unrecorded; redone, every one is ours again and steps are counted."""
    import subprocess

    (tmp_path / "p.py").write_text(UNPATCH_PROGRAM)
    with hook_channel() as channel:
        env = {**os.environ, "PYTHONPATH": str(HOOK_DIR), **channel.env()}
        out = subprocess.run([sys.executable, str(tmp_path / "p.py")], env=env, capture_output=True, text=True,
                             check=True, timeout=120).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert {"backward", "step", "minimize", "eval", "train", "scale"} <= set(got["names"])
    assert all(got["before"]) and not any(got["undone"]) and got["n"] == len(got["before"]) > 6
    assert got["steps_undone"] == 0 and got["steps"] == 2


def hook_channel():
    """The socket a trial's worker opens for its program's hook, accepting this test's own children."""
    from ampbench.core.processes import descendants
    from ampbench.trial.command_channel import EventChannel

    return EventChannel(lambda: set(descendants(os.getpid())))


def test_a_steps_line_is_read_as_one_step_event_per_row_and_malformed_lines_are_dropped(tmp_path):
    import base64
    from array import array

    import numpy as np

    from ampbench.record.wire import STEP_F64_KEYS, StartEvent, StepEvent, encode_steps
    from ampbench.trial.command_record import EventReader

    bf16 = np.array(16320, dtype=np.uint16)   # 1.5 as bfloat16, as _getitem_from_offset returns it
    rows = [(1, 5.0, 4.99, np.array(2.5, dtype=np.float32), None, False, 0.0, None),
            (2, 5.1, 4.78, None, 1024.0, True, 0.3, [[5.05, 5.08]]), (3, 5.2, 5.1, bf16, None, False, 0.0, None)]
    good = json.loads(encode_steps(rows))
    torn = {**good, "t": good["t"][:-4]}
    short = {**good, "n": good["n"] + 1}
    swapped = json.loads(encode_steps([(7, 9.0, 8.5, 1.5, None, False, 0.0, None)]))
    swapped["byteorder"] = "big" if sys.byteorder == "little" else "little"   # as a machine of the other order writes it
    for key in STEP_F64_KEYS:
        arr = array("d", base64.b64decode(swapped[key]))
        arr.byteswap()
        swapped[key] = base64.b64encode(arr.tobytes()).decode()
    lines = [{"e": "start", "rank": 0}, good, torn, short, {**good, "first": "1"}, {**good, "found_inf": "!"},
             {"e": "steps", "first": 4, "n": 1}, swapped]
    reader = EventReader()
    steps = [ev for x in lines for _, ev in reader.ingest(123, json.dumps(x).encode())]
    assert [s.step for s in steps] == [1, 2, 3, 7] and all(isinstance(s, StepEvent) for s in steps)
    assert steps[0].loss == 2.5 and steps[0].scale is None and steps[0].found_inf is False
    assert steps[0].evals is None and steps[1].evals == [[5.05, 5.08]] and steps[1].scale == 1024.0
    assert steps[1].loss is None and steps[1].found_inf is True and steps[1].eval_s == 0.3
    assert steps[0].t == pytest.approx(0.01) and steps[1].t == pytest.approx(0.02)   # minus the evaluation
    assert steps[2].loss == 1.5   # bfloat16's bits, widened as Paddle's item() does
    assert steps[3].t == 0.5 and steps[3].at == 9.0 and steps[3].loss == 1.5
    assert reader.procs[123].start == StartEvent(rank=0)


def test_a_steps_cpu_time_is_the_difference_of_the_hooks_process_clock():
    """The hook sends the process's CPU clock at each step's end (wire column `cpu`); a step's CPU seconds are
    the differences, none for the first step nor for one whose evaluation was left out of its time; a line
    from a hook without the column still reads, without CPU times (issue 60)."""
    from ampbench.record.assemble import cpu_seconds
    from ampbench.record.wire import encode_steps
    from ampbench.trial.command_record import EventReader

    rows = [(1, 5.0, 4.0, None, None, False, 0.0, None, 2.0), (2, 5.1, 5.0, None, None, False, 0.0, None, 2.08),
            (3, 5.4, 5.1, None, None, False, 0.2, [[5.15, 5.35]], 2.4), (4, 5.5, 5.4, None, None, False, 0.0, None, 2.45)]
    steps = [ev for _, ev in EventReader().ingest(1, encode_steps(rows).encode())]
    assert [s.cpu for s in steps] == [2.0, 2.08, 2.4, 2.45]
    assert cpu_seconds(steps) == pytest.approx({2: 0.08, 4: 0.05})
    old = json.loads(encode_steps([r[:8] for r in rows]))
    old.pop("cpu")
    steps = [ev for _, ev in EventReader().ingest(2, json.dumps(old).encode())]
    assert len(steps) == 4 and all(s.cpu is None for s in steps) and cpu_seconds(steps) == {}


def test_other_processes_cpu_is_read_over_the_samples_enclosing_the_measured_steps():
    """The worker samples the machine's busy CPU and the program's tree CPU every poll; the measured steps'
    window (the program's own clock, the same monotonic clock) is widened to the samples around it, so a
    window shorter than a poll still has a rate (issue 60: 12 steps of a few ms gave others_cpu 0 before)."""
    from ampbench.trackers.load import LoadMark, LoadSamples

    s = LoadSamples(0)
    s.marks = [LoadMark(10.0, 1.0, 100.0), LoadMark(10.9, 1.2, 100.5), LoadMark(11.8, 1.4, 101.0)]
    assert s.others(100.6, 100.62) == pytest.approx((0.9 - 0.2) / 0.5)   # the window inside the second interval
    assert s.others(100.2, 100.9) == pytest.approx((1.8 - 0.4) / 1.0)
    assert s.others(99.0, 100.2) is None and s.others(100.6, 101.5) is None and s.others(None, 1.0) is None


@pytest.mark.slow
def test_a_program_measured_under_a_competing_load_is_a_disturbed_measurement(tmp_path):
    """Command trials record CPU contention (steps[].cpu_s, interference), so the speed rule's "measurement
    disturbed" fires for a user's program as for the built-in loop: here one busy loop per core runs beside every
    trial (on this shared machine other jobs may add theirs), and the speedup is INCONCLUSIVE, disturbed, with the
    checker's note; it never fired for command trials before (interference null; issue 60). One loop per core
    already leaves each trial at most half a core on a 2-core machine; a loop more only burned CPU (it
    tripled the test's own cost: the run takes as long as its trials get CPU)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(min(os.cpu_count() or 1, 8))]
    try:
        r = run("run", str(write(tmp_path, suite_text(seeds="[0, 1]"))), "--out", str(tmp_path / "runs"), "--no-report")
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert r.exit_code == 3, r.output
    ts = trials(tmp_path / "runs")
    assert len(ts) == 4
    cores = os.cpu_count() or 1
    for t in ts.values():
        assert t["interference"]["others_cpu"] >= 0.4 * min(cores, len(loops)), t["interference"]
        assert all(s["cpu_s"] is not None for s in t["steps"][1:])
    check = json.loads(next((tmp_path / "runs").glob("mine/*/check.json")).read_text())
    speed = next(x for v in check["verdicts"] for x in v["rules"] if x["rule"] == "speedup")
    assert speed["details"]["disturbed"] is True and "disturbed" in speed["details"]["reasons"], speed
    assert any("measurement disturbed" in n for n in check["notes"])
