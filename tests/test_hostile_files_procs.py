"""Issue 32, third hostile pass: nothing lost to an `-o`, a stamp or a flood; no process left running;
every mistake refused before anything runs, in one line; messages that say what really happened.

Every hostile input is built here; the process cases run real programs (a daemon that double-forks,
one that restarts itself on SIGTERM, one that kills its worker) through the real CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.trial.command import LAST_KEEP, Output
from ampbench.workloads.command.presets import LogScan
from tests.test_command import suite_text

cli = CliRunner()


def run(*args: str):
    return cli.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def refused(r, *words: str) -> None:
    """Exit 2, one line naming what was wrong, no traceback."""
    text = r.output.strip()
    assert r.exit_code == 2, r.output
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    for w in words:
        assert w in text, text


# ---------------------------------------------------------------- data loss: every -o through one check


@pytest.fixture
def ocr_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "PaddleOCR"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "train.py").write_text("print('their train.py')\n")
    return repo


def _ocr_config(tmp_path: Path, body: str = "Global: {seed: 3}") -> Path:
    p = tmp_path / "C.yml"
    p.write_text(f"Architecture: {{model_type: det, algorithm: DB}}\n{body}\n")
    return p


def test_an_import_never_replaces_its_input_a_record_or_a_file_of_another_kind(tmp_path, ocr_repo, run_dir):
    config = _ocr_config(tmp_path)
    script, args = tmp_path / "train.py", tmp_path / "args.json"
    script.write_text("print('my training script')\n")
    args.write_text(json.dumps({"max_steps": 10}))
    other = tmp_path / "notes.txt"
    other.write_text("mine\n")
    record = run_dir / "run.json"
    before = {p: p.read_bytes() for p in (config, script, args, other, record)}
    cases = [
        (["import", "paddleocr", config, "--repo", ocr_repo, "-o", config], "is the input"),
        (["import", "paddleocr", config, "--repo", ocr_repo, "-o", record], "record"),
        (["import", "paddleocr", config, "-o", record], "record"),
        (["import", "paddlenlp", args, "--script", script, "-o", script], "is the input"),
        (["import", "paddlenlp", "--args", "--max_steps 5", "--script", script, "-o", other], "not a .toml file"),
        (["import", "paddlenlp", args, "-o", args], "is the input"),
        (["compare", run_dir, "--format", "md", "-o", script], "not a"),
        (["report", run_dir, "-o", config], "not a"),
        (["compare", run_dir, "--format", "pytest-benchmark", "-o", other], "not a .json file"),
        (["baseline", "save", run_dir, "-o", record], "refusing"),
    ]
    for argv, words in cases:
        refused(run(*argv), words)
    assert {p: p.read_bytes() for p in before} == before


# ---------------------------------------------------------------- checked before anything runs


@pytest.mark.parametrize("argv,words", [
    (["--affinity", "0-99999999999"], ["--affinity", "not available"]),
    (["--affinity", ""], ["--affinity", "empty item"]),
    (["--affinity", "0,,1"], ["--affinity"]),
    (["--affinity", "3-1"], ["--affinity"]),
    (["--sweep", "train.steps=4,abc"], ["train.steps", "abc"]),
    (["--sweep", "train.steps=4,5", "--sweep", "train.batch_size=8,x"], ["train.batch_size"]),
    # issue 48.4: one line, like every other option (click's three-line usage box before)
    *((["--until-decided", f"--max-seeds={v}"], ["--max-seeds", "2 to 64"])
      for v in ("0", "-1", "1", "65", "9" * 30, "abc", "1.5", "", "\x1b[2J")),
])
def test_run_options_are_checked_before_a_run_folder_exists(toy_suite, tmp_path, argv, words):
    out = tmp_path / "runs"
    refused(run("run", toy_suite(), "--out", out, *argv), *words)
    assert not out.exists()


@pytest.mark.parametrize("item,words", [
    ("--x={seed", ["workload.command[6]", "brace"]),
    ("--x=seed}", ["workload.command[6]", "brace"]),
    ("--x={seed:{bogus}}", ["workload.command[6]", "{bogus}"]),
    ("--x={seed:abc}", ["workload.command[6]", "cannot be filled"]),
    ("--x={out!z}", ["workload.command[6]", "cannot be filled"]),
    # issue 48.2: placeholders that are not names (a traceback for {seed[0]} before)
    ("--x={Seed}", ["workload.command[6]", "{Seed}"]),
    ("--x={0}", ["workload.command[6]", "{0}"]),
    ("--x={}", ["workload.command[6]", "{}"]),
    ("--x={out.__class__}", ["workload.command[6]", "{out.__class__}"]),
    ("--x={seed[0]}", ["workload.command[6]", "{seed[0]}"]),
    ("--x={steps[0]}", ["workload.command[6]", "{steps[0]}"]),
])
def test_every_placeholder_is_checked_nested_and_unbalanced_included(tmp_path, item, words):
    cmd = f'["{sys.executable}", "x.py", "--steps", "{{steps}}", "--seed", "{{seed}}", "{item}"]'
    out = tmp_path / "runs"
    p = tmp_path / "suite.toml"
    p.write_text(suite_text(command=cmd))
    refused(run("run", p, "--out", out), *words)
    assert not out.exists()


def test_resume_refuses_options_it_would_ignore(run_dir, tmp_path):
    for extra, word in ((["--until-decided"], "--until-decided"), (["--affinity", "0"], "--affinity"),
                        (["--at-max-batch"], "--at-max-batch"), (["--out", tmp_path / "elsewhere"], "--out")):
        refused(run("run", "--resume", run_dir, *extra), word, "not honoured")


def test_options_that_would_be_ignored_are_refused(tmp_path, ocr_repo, run_dir):
    config, f = _ocr_config(tmp_path), tmp_path / "args.json"
    f.write_text(json.dumps({"max_steps": 10}))
    refused(run("import", "paddleocr", config, "--python", sys.executable), "--python", "--repo")
    refused(run("import", "paddleocr", config, "--repo", ocr_repo, "--synthetic-data"), "--synthetic-data")
    refused(run("import", "paddlenlp", f, "--python", sys.executable), "--python", "--script")
    refused(run("import", "paddlenlp", f, "--script", f, "--source", "paddlenlp"), "--source")
    refused(run("check", run_dir, "--allow-mismatch"), "--allow-mismatch", "--baseline")


@pytest.mark.parametrize("args,key", [
    ({"seed": "abc"}, "seed"), ({"max_steps": "ten"}, "max_steps"),
    ({"per_device_train_batch_size": [8]}, "per_device_train_batch_size"), ({"seed": -1}, "seed"),
    ({"metric_for_best_model": ["a"]}, "metric_for_best_model"),
])
def test_a_trainer_script_import_refuses_values_that_are_not_integers(tmp_path, args, key):
    script, f = tmp_path / "train.py", tmp_path / "args.json"
    script.write_text("pass\n")
    f.write_text(json.dumps(args))
    refused(run("import", "paddlenlp", f, "--script", script), str(f), key)


@pytest.mark.parametrize("body,key", [
    ("Train: {loader: {batch_size_per_card: abc}}", "Train.loader.batch_size_per_card"),
    ("Train: {loader: {batch_size_per_card: 0}}", "Train.loader.batch_size_per_card"),
    ("Global: {seed: x}", "Global.seed"),
    ("Metric: [1]", "Metric"),
    ("Metric: {main_indicator: [1, 2]}", "Metric.main_indicator"),
    ("Train: 5", "Train"),
])
def test_a_paddleocr_repo_import_refuses_bad_values_by_key(tmp_path, ocr_repo, body, key):
    config = _ocr_config(tmp_path, body)
    refused(run("import", "paddleocr", config, "--repo", ocr_repo), str(config), key)


def test_plan_of_a_run_with_no_ok_trial_says_so(work):
    from tests.factories import make_run, make_suite, make_trials

    s = make_suite(seeds=(0, 1))
    path = make_run(work / "runs", s, make_trials(s, n_steps=20, config_hash=s.config_hash(), status="crashed"))
    refused(run("plan", path), "no ok trial", "crashed")


# ---------------------------------------------------------------- output: bytes, binary, bounded memory


def _drain(cmd: str, max_bytes: int) -> tuple[Output, bytes, int]:
    """A real child's output through Output into a log file; (output, log bytes, peak Python memory)."""
    child = subprocess.Popen([sys.executable, "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = io.BytesIO()
    saved, sys.stderr = sys.stderr, io.TextIOWrapper(log, encoding="utf-8", write_through=True)
    tracemalloc.start()
    try:
        output = Output(LogScan("regex", {"accuracy": r"accuracy: (\S+)"}), max_bytes)
        output.run(child.stdout)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        sys.stderr.detach()
        sys.stderr = saved
        child.wait()
    return output, log.getvalue(), peak


def test_128_mib_of_binary_output_without_a_newline_keeps_memory_bounded_and_the_logs_tail():
    cmd = ("import os, sys\nw = sys.stdout.buffer\nblock = os.urandom(2**20).replace(b'\\n', b'x')\n"
           "for _ in range(128):\n    w.write(block)\nw.write(b'END-OF-OUTPUT')\n")
    output, log, peak = _drain(cmd, 2**20)
    assert peak < 8 * 2**20, f"Output held {peak / 2**20:.0f} MiB"
    assert log.endswith(b"END-OF-OUTPUT")   # the output's last bytes are in the log
    assert len(log) <= 2**20 + LAST_KEEP + 400
    assert output.dropped_bytes == 128 * 2**20 + len(b"END-OF-OUTPUT") - output.written
    assert output.tail_text().endswith("END-OF-OUTPUT")


def test_the_log_cap_counts_bytes_not_characters():
    cmd = "import sys\nfor i in range(3 * 2**20 // 201):\n    print('\\u00e9' * 100)\nprint('accuracy: 0.5')\n"
    output, log, _ = _drain(cmd, 2**20)
    assert output.written <= 2**20 and len(log) <= 2**20 + LAST_KEEP + 400
    assert output.scan.metrics == {"accuracy": 0.5} and log.rstrip().endswith(b"accuracy: 0.5")
    assert output.dropped > 1000


# ---------------------------------------------------------------- processes: real daemons, real kills

LEAVER = textwrap.dedent("""
    import json, os, signal, sys, time

    out, seed, seen = sys.argv[1], int(sys.argv[2]), sys.argv[3]

    def note(what):
        with open(seen, "a") as f:
            f.write(f"{what} {os.getpid()}\\n")

    def restarting():
        def again(*_):   # a fresh copy, in a session of its own, then this one goes
            r, w = os.pipe()
            if os.fork() == 0:
                os.setsid()
                note("daemon")
                os.write(w, b"x")
                restarting()
            os.read(r, 1)
            os._exit(0)
        signal.signal(signal.SIGTERM, again)
        note("daemon")
        while True:
            time.sleep(0.1)

    def double_fork(target):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                target()
                os._exit(0)
            os._exit(0)
        os.wait()
        time.sleep(0.5)

    note("cwd " + os.getcwd())
    if seed == 0:
        double_fork(restarting)
    else:
        double_fork(lambda: (note("daemon"), time.sleep(300)))
        os.kill(os.getppid(), signal.SIGKILL)   # its worker
        time.sleep(60)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"accuracy": 0.5}, f)
""")


@pytest.mark.slow
def test_daemons_that_restart_or_outlive_their_worker_are_killed_and_named(tmp_path):
    prog, seen = tmp_path / "leaver.py", tmp_path / "seen.txt"
    prog.write_text(LEAVER)
    (tmp_path / "dir{x}").mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(f"open({str(tmp_path / 'site.txt')!r}, 'a').write('ran\\n')\n")
    cmd = f'["{sys.executable}", "{prog}", "{{out}}", "{{seed}}", "{seen}", "{{steps}}"]'
    extra = f'cwd = "{tmp_path}/dir{{{{x}}}}"\nenv = {{ PYTHONPATH = "{theirs}" }}'
    p = tmp_path / "suite.toml"
    p.write_text(suite_text(command=cmd, seeds="[0, 1]", workload_extra=extra, amp=False, timeout=60))
    out = tmp_path / "runs"
    r = run("run", p, "--out", out, "--no-report")
    assert r.exit_code == 2, r.output
    trials = {q.stem: json.loads(q.read_text()) for q in out.glob("mine/*/trials/*.json")}
    restarted, orphaned = trials["fp32__seed0"], trials["fp32__seed1"]
    assert "never imported paddle" in restarted["error"] and "ampbench killed them" in restarted["error"]
    assert restarted["workload_info"]["leftover_processes"]
    assert "SIGKILL" in orphaned["error"] and "ampbench killed them" in orphaned["error"]
    lines = seen.read_text().splitlines()
    daemons = {int(ln.split()[1]) for ln in lines if ln.startswith("daemon")}
    assert len(daemons) >= 3   # 2 daemons, 1+ restarted copies
    assert {ln.split(" ", 1)[1].rsplit(" ", 1)[0] for ln in lines if ln.startswith("cwd")} == {str(tmp_path / "dir{x}")}
    time.sleep(0.5)
    alive = []
    for pid in daemons:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert not alive, alive
    assert (tmp_path / "site.txt").read_text().count("ran") == 2   # theirs once per program, not in the guard


STEPS_UNDER_I = textwrap.dedent("""
    import os, shutil, sys
    if sys.argv[1] == "0" and sys.flags.isolated == 0:   # as a launcher would: the training runs isolated
        os.execv(sys.executable, [sys.executable, "-I", *sys.argv])
    import paddle
    model = paddle.nn.Linear(4, 1)
    opt = paddle.optimizer.SGD(parameters=model.parameters())
    for _ in range(6):
        model(paddle.randn([2, 4])).mean().backward()
        opt.step()
        opt.clear_grad()
    if sys.argv[1] == "1":   # it cleans up: ampbench's outputs/ folder, {out}'s parent, goes too
        shutil.rmtree(os.path.dirname(os.path.abspath(sys.argv[2])))
    print("took 6 steps", flush=True)
""")


@pytest.mark.slow
def test_a_program_whose_python_skips_the_hook_is_not_told_it_never_stepped(tmp_path):
    prog = tmp_path / "isolated.py"
    prog.write_text(STEPS_UNDER_I)
    p = tmp_path / "suite.toml"
    p.write_text(suite_text(command=f'["{sys.executable}", "{prog}", "{{seed}}", "{{out}}", "{{steps}}"]',
                            amp=False, timeout=90, seeds="[0, 1]", steps=6))
    out = tmp_path / "runs"
    run("run", p, "--out", out, "--no-report")
    isolated, cleaned = (json.loads(q.read_text()) for q in sorted(out.glob("mine/*/trials/*.json")))
    assert isolated["status"] == "crashed" and "never called" not in isolated["error"]
    assert "hook never reported" in isolated["error"] and "-I" in isolated["error"]
    assert cleaned["status"] == "ok" or "never called" not in cleaned["error"], cleaned["error"]


def test_the_flag_that_skips_the_hook_is_named():
    from ampbench.trial.command_finish import _site_flag

    assert _site_flag(["python3", "-u", "-IS", "t.py"]) == "-IS"
    assert _site_flag(["/usr/bin/python3.11", "-E", "-m", "x"]) == "-E"
    assert _site_flag(["python3", "t.py", "-I"]) is None and _site_flag(["bash", "-E"]) is None


@pytest.mark.slow
def test_two_sweeps_started_in_the_same_second_keep_both_reports(tmp_path, cache_env, monkeypatch):
    """The clock frozen at one second for both sweeps (same pid too): two grid reports, two run folders."""
    import datetime as dt

    from ampbench.core import names

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2026, 12, 1, 23, 0, 0, tzinfo=tz)

    prog = tmp_path / "quick.py"
    prog.write_text("import json, os, sys\njson.dump({'accuracy': 0.5}, open(os.path.join(sys.argv[1], "
                    "'metrics.json'), 'w'))\n")
    p = tmp_path / "suite.toml"
    p.write_text(suite_text(command=f'["{sys.executable}", "{prog}", "{{out}}", "{{steps}}"]', amp=False,
                            workload_extra="instrument = false"))
    monkeypatch.setattr(names.dt, "datetime", Frozen)
    out = tmp_path / "runs"
    for _ in range(2):
        r = run("run", p, "--out", out, "--no-report", "--sweep", "train.steps=4")
        assert r.exit_code in (0, 3), r.output
    reports = sorted((out / "mine").glob("sweep-*.md"))
    assert len(reports) == 2 and all("train.steps=4" in q.read_text() for q in reports)
    assert len([q for q in (out / "mine").iterdir() if q.is_dir()]) == 2


@pytest.mark.parametrize("where", ["s-data", "s-data/scene_text"])
def test_synthetic_data_is_never_written_through_a_linked_data_folder(tmp_path, ocr_repo, where):
    """Issue 41.3: `import paddleocr --repo --synthetic-data -o DIR/s.toml` writes images and labels under
    DIR/s-data; a link there (or at its scene_text) is refused, nothing written where it points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    link = out / where
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    r = run("import", "paddleocr", _ocr_config(tmp_path), "--repo", ocr_repo, "--synthetic-data", "--no-pretrained",
            "-o", out / "s.toml")
    refused(r, str(link), "symbolic link")
    assert list(outside.iterdir()) == [] and not (out / "s.toml").exists()


ECHO_TRAINER = r'''
import json, sys
from pathlib import Path
a = sys.argv[1:]
out = Path(a[a.index("--output_dir") + 1])
out.mkdir(parents=True, exist_ok=True)
Path(__file__).with_name("argv.json").write_text(json.dumps(a))
(out / "all_results.json").write_text(json.dumps({"eval_loss": 0.5}))
'''


def test_trainer_arguments_with_braces_reach_the_program_as_typed(tmp_path):
    """Issue 48.3: `--args '--run_name exp{1}'` is data: written as exp{{1}}, run, received as exp{1}."""
    script = tmp_path / "train.py"
    script.write_text(ECHO_TRAINER)
    suite = tmp_path / "s.toml"
    r = run("import", "paddlenlp", "--script", script, "--args", "--run_name exp{1} --logging_dir {x}} --max_steps 12",
            "-o", suite)
    assert r.exit_code == 0, r.output
    r = run("run", suite, "--out", tmp_path / "runs", "--no-report", "--set", "workload.instrument=false",
            "--mode", "fp32")
    assert r.exit_code == 3 and "placeholder" not in r.output, r.output
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--run_name") + 1] == "exp{1}" and argv[argv.index("--logging_dir") + 1] == "{x}}"
