"""Hostile input and faults (issue 14): every case ends with its documented exit code, one line naming
the problem, no traceback, nothing written outside the results folder, and no surviving worker.

Most cases run the CLI in-process (fast); the ones where the process itself matters (tracebacks,
signals, orphaned workers, pipes) run `python -m ampbench.cli` as a subprocess on the toy workload.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import ConfigError
from ampbench.core.processes import MARKER_PLACEHOLDER, WORKER_ENV
from ampbench.core.units import parse_bytes
from ampbench.engine.plan import parse_faults
from ampbench.launch.launcher import _killed_status
from ampbench.launch.process import Outcome
from ampbench.results import ResultsError, RunDir, atomic_write_text, new_run_dir, run_lock, safe_name
from ampbench.trial.spec import TrialSpec
from ampbench.workloads.suites import load_suite
from tests.conftest import TOY_SUITE
from tests.factories import make_run, make_suite, make_trial, make_trials

ROOT = Path(__file__).resolve().parents[1]
cli = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None):
    r = cli.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def suite_file(work: Path, text: str, name: str = "s.toml") -> Path:
    p = work / name
    p.write_text(text, encoding="utf-8")
    return p


TOY_CPU = TOY_SUITE + """
[profiles.cpu]
train = { steps = 6, warmup_steps = 1 }
"""


# ---------------------------------------------------------------- suite files and options: exit 2, no run folder

BAD_SUITES = {
    "profiles-int": (TOY_SUITE + "\nprofiles = 5\n", [], "profiles"),
    "profiles-string-entry": (TOY_SUITE + '\n[profiles]\ncpu = "fast"\n', [], "profiles.cpu"),
    "profile-suite-int": (TOY_SUITE + "\n[profiles.cpu]\nsuite = 3\n", ["--profile", "cpu"], "profiles.cpu.suite"),
    "profile-seeds-string": (TOY_SUITE + '\n[profiles.cpu]\nseeds = "x"\n', ["--profile", "cpu"], "seeds"),
    "profile-modes-int": (TOY_SUITE + "\n[profiles.cpu]\nmodes = 5\n", ["--profile", "cpu"], "profiles.cpu.modes"),
    "profile-unknown-key": (TOY_SUITE + "\n[profiles.cpu]\nbogus = 1\n", ["--profile", "cpu"], "bogus"),
    "profile-missing": (TOY_CPU, ["--profile", "gpu"], "no such profile"),
    "base-masked-by-profile": (TOY_SUITE.replace("batch_size = 32", 'batch_size = "eight"')
                               + "\n[profiles.cpu]\ntrain = { batch_size = 8 }\n", ["--profile", "cpu"],
                               "train.batch_size"),
    "threshold-inf": (TOY_SUITE + "\n[thresholds]\nmetric_abs_tol = inf\n", [], "thresholds.metric_abs_tol"),
    "threshold-nan-floor": (TOY_SUITE + "\n[thresholds]\nmin_baseline_metric = nan\n", [],
                            "thresholds.min_baseline_metric"),
    "lr-inf": (TOY_SUITE.replace("timeout_s = 120", "timeout_s = 120\noptimizer = { lr = inf }"), [], "lr"),
    "workload-nan": (TOY_SUITE.replace("eval_rows = 128", "eval_rows = 128\nloss_factor = nan"), [],
                     "workload.loss_factor"),
    "profile-nan": (TOY_SUITE + "\n[profiles.cpu]\nthresholds = { confidence = nan }\n", [], "confidence"),
    "unknown-metric": (TOY_SUITE.replace('metric = "accuracy"', 'metric = "acc"'), [], "suite.metric"),
    "unknown-target-metric": (TOY_SUITE.replace("timeout_s = 120", "timeout_s = 120\ntarget = { metric = 'f1', "
                                                "value = 0.5 }"), [], "train.target.metric"),
    "seed-negative": (TOY_SUITE.replace("seeds = [0]", "seeds = [-1]"), [], "out of range"),
    "seed-too-big": (TOY_SUITE.replace("seeds = [0]", "seeds = [4294967296]"), [], "out of range"),
    "batch-over-rows": (TOY_SUITE.replace("batch_size = 32", "batch_size = 1000"), [], "train.batch_size"),
    "mode-batch-over-rows": (TOY_SUITE.replace('dtype = "float16"', 'dtype = "float16"\nbatch_size = 600'), [],
                             "amp-o1-fp16"),
    "nnodes-no-master": (TOY_SUITE + "\n[distributed]\nnnodes = 2\n", [], "master"),
    "mode-name-markup": (TOY_SUITE.replace('name = "amp-o1-fp16"', 'name = "a[/]b[red]"'), [], "a[/]b[red]"),
    "metric-markup": (TOY_SUITE.replace('metric = "accuracy"', 'metric = "[bold]acc[/]"'), [], "[bold]acc[/]"),
    "modes-int": (TOY_SUITE.split("[[modes]]")[0] + "\nmodes = 5\n", [], "modes"),
    "suite-string": ('suite = "x"\n[[modes]]\nname = "fp32"\n', [], "suite"),
    "unknown-top-table": (TOY_SUITE + "\n[extra]\na = 1\n", [], "extra"),
    "unknown-workload": (TOY_SUITE.replace('workload = "toy"', 'workload = "nope"'), [], "suite.workload"),
    "malformed-toml": ("[suite\nname=", [], "malformed TOML"),
    "empty-file": ("", [], "suite"),
    "no-fp32": (TOY_SUITE.replace('name = "fp32"', 'name = "ref"\nlevel = "O1"'), [], "fp32"),
    "warmup-over-steps": (TOY_SUITE.replace("warmup_steps = 2", "warmup_steps = 50"), [], "warmup_steps"),
    "bad-set-no-equals": (TOY_SUITE, ["--set", "train.steps"], "KEY=VALUE"),
    "bad-set-empty-key": (TOY_SUITE, ["--set", "train..steps=3"], "empty key"),
    "bad-set-type": (TOY_SUITE, ["--set", "train.steps=abc"], "train.steps"),
    "bad-set-nan": (TOY_SUITE, ["--set", "thresholds.metric_abs_tol=nan"], "thresholds.metric_abs_tol"),
    "bad-set-into-scalar": (TOY_SUITE, ["--set", "suite.name.x=1"], "not a table"),
    "bad-seeds-text": (TOY_SUITE, ["--seeds", "1,a"], "--seeds"),
    "bad-seeds-negative": (TOY_SUITE, ["--seeds", "-5"], "out of range"),
    "bad-seeds-repeat": (TOY_SUITE, ["--seeds", "0,0"], "unique"),
    "bad-mode": (TOY_SUITE, ["--mode", "amp-o9"], "unknown mode"),
}


@pytest.mark.parametrize("case", sorted(BAD_SUITES))
def test_bad_suite_exits_2_before_any_run_folder(work, case):
    text, args, expect = BAD_SUITES[case]
    p = suite_file(work, text)
    before = listing(work)
    r = invoke("run", str(p), "--out", str(work / "runs"), "--no-report", *args)
    assert r.exit_code == 2, r.output
    assert expect in r.output, r.output
    assert r.output.count("error:") == 1
    assert not (work / "runs").exists()
    assert listing(work) == before


FAULTS = {"unknown-kind": ("fp32:0:explode", "unknown fault kind"), "no-colons": ("nope", "MODE:SEED:KIND"),
          "not-in-plan": ("fp32:7:crash", "no such trial"), "bad-seed": ("fp32:x:crash", "MODE:SEED:KIND")}


@pytest.mark.parametrize("case", sorted(FAULTS))
def test_bad_fault_env_refused_before_any_trial(work, case):
    value, expect = FAULTS[case]
    r = invoke("run", str(suite_file(work, TOY_SUITE)), "--out", "runs", env={"AMPBENCH_FAULT": value})
    assert r.exit_code == 2 and expect in r.output and "AMPBENCH_FAULT" in r.output
    assert not (work / "runs").exists()


@pytest.mark.parametrize("name,value", [("AMPBENCH_FAULT_RANK", "abc"), ("AMPBENCH_FAULT_RANK", "-1"),
                                        ("AMPBENCH_NUMERICS_LEVEL", "-7"), ("AMPBENCH_NUMERICS_LEVEL", "0")])
def test_bad_worker_env_is_one_error_before_any_trial(work, name, value):
    """Issue 41.6: every trial crashed with the same traceback; now one line up front, no run folder."""
    r = invoke("run", str(suite_file(work, TOY_SUITE)), "--out", "runs", env={name: value})
    assert r.exit_code == 2 and r.output.count("error:") == 1 and name in r.output and value in r.output, r.output
    assert "Traceback" not in r.output and not (work / "runs").exists()


def test_suite_path_with_markup_is_named_whole(work):
    d = work / "[red]x[bold]"
    d.mkdir()
    r = invoke("run", str(suite_file(d, "[suite\n", "[profiles.cpu].toml")), "--out", "runs")
    assert r.exit_code == 2 and "[red]x[bold]/[profiles.cpu].toml" in r.output


def test_non_utf8_suite_and_folder_as_suite(work):
    p = work / "bin.toml"
    p.write_bytes(b"\xff\xfe[suite]\n")
    r = invoke("run", str(p), "--out", "runs")
    assert r.exit_code == 2 and "UTF-8" in r.output
    (work / "dir.toml").mkdir()
    r = invoke("run", str(work / "dir.toml"), "--out", "runs")
    assert r.exit_code == 2 and "dir.toml" in r.output


def test_wrong_length_hash_bucket_list_is_a_config_error(work):
    data = work / "log.txt"
    data.write_text("0\t" + "\t" * 38 + "\n")
    with pytest.raises(ConfigError, match="hash_buckets lists 2 sizes for 26"):
        load_suite(suite_file(work, f"""
[suite]
name = "c"
workload = "ctr"
metric = "auc"
[workload]
dataset = "criteo"
criteo = {{ path = "{data}", hash_buckets = [10, 20] }}
[[modes]]
name = "fp32"
"""))


def test_parse_bytes_and_fault_parsing_units():
    assert parse_bytes("6GiB") == 6 * 2**30 and parse_bytes("512MiB") == 512 * 2**20 and parse_bytes("8GB") == 8 * 10**9
    for bad in ("", "lots", "-1g", "inf", "nanb"):
        with pytest.raises(ConfigError):
            parse_bytes(bad)
    assert parse_faults("fp32:0:crash, amp:1:nan", [("fp32", 0), ("amp", 1)]) == {
        "fp32__seed0": "crash", "amp__seed1": "nan"}


# ---------------------------------------------------------------- result files: exit 2 naming the file


def _break(run: Path, how: str) -> str:
    """Damage a run folder; returns what the error must name."""
    rj, trial = run / "run.json", run / "trials" / "fp32__seed0.json"
    info = json.loads(rj.read_text())
    if how == "run-not-utf8":
        rj.write_bytes(b"\xff\x00{")
    elif how == "run-is-folder":
        rj.unlink()
        rj.mkdir()
    elif how == "run-truncated":
        rj.write_text(rj.read_text()[:40])
    elif how == "run-plan-int":
        rj.write_text(json.dumps({**info, "plan": 5}))
    elif how == "run-plan-no-seed":
        rj.write_text(json.dumps({**info, "plan": [{"mode": "fp32"}]}))
    elif how == "run-missing":
        rj.unlink()
    elif how == "run-deep":
        rj.write_text("[" * 100000 + "]" * 100000)
    elif how == "run-foreign-schema":
        rj.write_text(json.dumps({**info, "schema": "other/1"}))
    elif how == "trial-not-utf8":
        trial.write_bytes(b"\x80\x81")
    elif how == "trial-is-folder":
        trial.unlink()
        trial.mkdir()
    elif how == "trial-other-suite":
        trial.write_text(json.dumps({**json.loads(trial.read_text()), "suite": "other"}))
    elif how == "trial-renamed":
        trial.rename(run / "trials" / "fp32__seed9.json")
        return "fp32__seed9"
    elif how == "trial-wrong-type":
        trial.write_text(json.dumps({**json.loads(trial.read_text()), "steps": "many"}))
    return "run.json" if how.startswith("run") else "fp32__seed"


BREAKS = ["run-not-utf8", "run-is-folder", "run-truncated", "run-plan-int", "run-plan-no-seed", "run-missing",
          "run-deep", "run-foreign-schema", "trial-not-utf8", "trial-is-folder", "trial-other-suite",
          "trial-renamed", "trial-wrong-type"]


@pytest.mark.parametrize("how", BREAKS)
@pytest.mark.parametrize("verb", ["check", "report"])
def test_damaged_run_folder_exits_2_naming_the_file(run_dir, how, verb):
    named = _break(run_dir, how)
    r = invoke(verb, str(run_dir))
    assert r.exit_code == 2, r.output
    assert named in r.output and "error:" in r.output
    assert not (run_dir / "report.md").exists()


def test_report_refuses_a_foreign_trial_that_check_refuses(run_dir):
    assert invoke("check", str(run_dir)).exit_code != 2
    _break(run_dir, "trial-other-suite")
    for verb in ("check", "report"):
        r = invoke(verb, str(run_dir))
        assert r.exit_code == 2 and "another suite" in r.output.replace("a trial of suite", "another suite")


def test_report_output_is_a_folder_or_under_a_file(run_dir, work):
    (work / "out.md").mkdir()
    r = invoke("report", str(run_dir), "-o", str(work / "out.md"))
    assert r.exit_code == 2 and "out.md" in r.output
    (work / "plain").write_text("x")
    r = invoke("report", str(run_dir), "-o", str(work / "plain" / "r.md"))
    assert r.exit_code == 2 and "plain" in r.output


def test_report_output_onto_a_fifo_is_refused_not_replaced(run_dir, work):
    os.mkfifo(work / "pipe.md")
    r = invoke("report", str(run_dir), "-o", str(work / "pipe.md"))
    assert r.exit_code == 2 and "not a regular file" in r.output
    assert stat.S_ISFIFO((work / "pipe.md").stat().st_mode)


def test_check_json_folder_in_the_way_still_judges(run_dir):
    (run_dir / "check.json").mkdir()
    r = invoke("check", str(run_dir))
    assert r.exit_code in (0, 1, 3) and "check.json not written" in r.output and "fp32" in r.output


def _fail_replace(err: int):
    def replace(*a, **k):
        raise OSError(err, os.strerror(err))
    return replace


@pytest.mark.parametrize("err,name", [(errno.EROFS, "EROFS"), (errno.ENOSPC, "ENOSPC"), (errno.EACCES, "EACCES")])
def test_check_on_unwritable_run_folder_judges_and_prints(run_dir, monkeypatch, err, name):
    monkeypatch.setattr("ampbench.core.files.os.replace", _fail_replace(err))
    r = invoke("check", str(run_dir))
    assert r.exit_code in (0, 1, 3), r.output
    assert "check.json not written" in r.output and name in r.output and "amp-o1-fp16" in r.output
    assert not (run_dir / "check.json").exists()
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("err,name", [(errno.ENOSPC, "ENOSPC"), (errno.EROFS, "EROFS")])
def test_report_and_baseline_on_full_or_readonly_disk_exit_2(run_dir, monkeypatch, work, err, name):
    monkeypatch.setattr("ampbench.core.files.os.replace", _fail_replace(err))
    for args in (["report", str(run_dir)], ["baseline", "save", str(run_dir), "-o", str(work / "b.json")]):
        r = invoke(*args)
        assert r.exit_code == 2 and name in r.output, r.output


def test_markup_in_trial_error_and_mode_does_not_break_check(work):
    s = make_suite(modes=("fp32", "amp-o1-fp16"), seeds=(0,))
    bad = make_trial("amp-o1-fp16", 0, status="crashed", error="RuntimeError: [/] [red]boom[/red] x$\\frac{$y")
    run = make_run(work / "runs", s, [make_trial("fp32", 0), bad])
    r = invoke("check", str(run), "--explain")   # the rule messages (which quote the error): behind --explain
    assert r.exit_code == 2 and "[red]boom[/red]" in r.output


def test_tampered_suite_name_cannot_direct_writes_outside(run_dir, work):
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "suite": "../../../../X"}))
    for t in (run_dir / "trials").glob("*.json"):
        t.write_text(json.dumps({**json.loads(t.read_text()), "suite": "../../../../X"}))
    before = listing(work)
    r = invoke("baseline", "save", str(run_dir))
    assert r.exit_code == 2 and "cannot be used in a file name" in r.output
    assert listing(work) == before and not Path("/X.json").exists()
    from ampbench.commands.history import append_history

    with pytest.raises(ResultsError, match="cannot be used"):
        append_history(run_dir, work / "history")
    assert not (work / "X.jsonl").exists()


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "..", "x" * 200, "a\x00b", 5, None])
def test_safe_name_refuses_path_tricks(name):
    with pytest.raises(ResultsError):
        safe_name(name)


def test_export_into_a_folder_refuses_a_tampered_run_id(run_dir, work):
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "run_id": "../../escaped"}))
    (work / "bench").mkdir()
    before = listing(work)
    r = invoke("compare", str(run_dir), "--format", "pytest-benchmark", "-o", str(work / "bench"))
    assert r.exit_code == 2 and "run_id" in r.output and listing(work) == before


def test_plot_labels_with_math_text_are_plain_text(work):
    from ampbench.report.plots import _figure, _save

    fig, axes = _figure(2.0)
    ax = axes[0, 0]
    ax.plot([1, 2], [1, 2], label="x$\\frac{$y")
    ax.set_title("a$\\frac{$b")
    ax.set_xticks([1, 2], ["m$\\frac{$", "ok"])
    ax.legend()
    assert _save(fig, work / "p.png").stat().st_size > 0


def test_export_benchmark_under_a_file_exits_2(run_dir, work):
    (work / "plain").write_text("x")
    r = invoke("compare", str(run_dir), "--format", "pytest-benchmark", "-o", str(work / "plain" / "bench.json"))
    assert r.exit_code == 2 and "plain" in r.output and "ENOTDIR" in r.output


# ---------------------------------------------------------------- --resume and the run-folder lock


@pytest.mark.parametrize("args,expect", [
    (["--mode", "fp32"], "--mode"), (["--seeds", "3"], "--seeds"), (["--profile", "cpu"], "--profile"),
    (["--set", "train.steps=3"], "--set"),
])
def test_resume_refuses_arguments_it_would_not_honour(run_dir, args, expect):
    r = invoke("run", "--resume", str(run_dir), *args)
    assert r.exit_code == 2 and expect in r.output and "not honoured" in r.output


def test_resume_refuses_another_suite_and_a_missing_one(run_dir, work):
    other = suite_file(work, TOY_SUITE, "other.toml")
    for given in (str(other), str(work / "missing.toml")):
        r = invoke("run", given, "--resume", str(run_dir))
        assert r.exit_code == 2 and "--resume" in r.output and "run.json" in r.output


@pytest.mark.parametrize("how", ["run-plan-no-seed", "run-plan-int", "run-missing", "run-not-utf8"])
def test_resume_validates_run_json(run_dir, how):
    named = _break(run_dir, how)
    r = invoke("run", "--resume", str(run_dir))
    assert r.exit_code == 2 and named in r.output


def test_resume_refuses_a_tampered_suite_name(run_dir):
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "suite": "../../etc"}))
    r = invoke("run", "--resume", str(run_dir))
    assert r.exit_code == 2 and "cannot be used in a file name" in r.output


def test_resume_of_a_locked_folder_is_refused(run_dir):
    with run_lock(run_dir):
        r = invoke("run", "--resume", str(run_dir))
    assert r.exit_code == 2 and "another ampbench process" in r.output
    with run_lock(run_dir):  # released: can be taken again
        pass


def test_resume_reruns_trials_of_another_config_or_suite(run_dir):
    rd = RunDir(run_dir)
    info = rd.load_run()
    assert rd.finished_keys(info.config_hash, info.suite) == {f"{m}__seed{s}" for m in ("fp32", "amp-o1-fp16")
                                                             for s in (0, 1)}
    p = rd.trial_path("fp32", 0)
    p.write_text(json.dumps({**json.loads(p.read_text()), "config_hash": "sha256:other"}))
    q = rd.trial_path("fp32", 1)
    q.write_text(json.dumps({**json.loads(q.read_text()), "suite": "other"}))
    assert rd.finished_keys(info.config_hash, info.suite) == {"amp-o1-fp16__seed0", "amp-o1-fp16__seed1"}


def test_run_ids_do_not_collide(work, monkeypatch):
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    ids = {new_run_dir(work / "runs")[1] for _ in range(200)}
    assert len(ids) == 200 and len(list((work / "runs").iterdir())) == 200


# ---------------------------------------------------------------- permissions


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_created_with_the_process_umask(work, umask, mode):
    old = os.umask(umask)
    try:
        atomic_write_text(work / "f.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((work / "f.json").stat().st_mode) == mode


def test_history_append_keeps_the_files_mode(run_dir, work):
    from ampbench.commands.history import append_history

    old = os.umask(0o077)
    try:
        path = append_history(run_dir, work / "history")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.chmod(0o644)
        append_history(run_dir, work / "history")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        os.umask(old)


# ---------------------------------------------------------------- a killed worker's status says what is known


def _spec(**kw) -> TrialSpec:
    s = make_suite()
    return TrialSpec(suite=s, suite_file="-", profile="default", config_hash="", mode="fp32", seed=0,
                     trial_path="/dev/null", cache_dir="/tmp", **kw)


def test_sigkill_without_evidence_is_not_called_oom():
    status, msg = _killed_status(Outcome(-9, None, 300 * 2**20, 1.0, 0), _spec(), 60)
    assert status == "crashed" and "SIGKILL" in msg and "no memory ceiling" in msg and "300 MiB" in msg
    status, msg = _killed_status(Outcome(-9, None, 10 * 2**20, 1.0, 1), _spec(), 60)
    assert status == "oom" and "OOM killer" in msg
    status, msg = _killed_status(Outcome(None, "oom", 900 * 2**20, 1.0, 0), _spec(memory_limit_bytes=2**29), 60)
    assert status == "oom" and "ceiling of 512 MiB" in msg
    status, msg = _killed_status(Outcome(13, None, 0, 1.0, -1), _spec(), 60)
    assert status == "crashed" and "exit code 13" in msg


def test_trial_spec_suite_is_a_validated_suite():
    spec = _spec()
    again = TrialSpec.model_validate_json(spec.model_dump_json())
    assert again.suite == spec.suite and again.suite.modes[0].name == "fp32"


# ---------------------------------------------------------------- the real CLI process


def ampbench(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60):
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    e.pop("COLUMNS", None)
    return subprocess.run([sys.executable, "-m", "ampbench.cli", *args], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_subprocess_bad_inputs_have_no_traceback(work):
    p = suite_file(work, TOY_SUITE + "\nprofiles = 5\n")
    (work / "rd").mkdir()
    (work / "rd" / "run.json").write_bytes(b"\xff")
    for args, code in ((["run", str(p), "--out", "runs"], 2), (["check", str(work / "rd")], 2),
                       (["report", str(work / "nope")], 2), (["run", "--resume", str(work / "rd")], 2),
                       (["run"], 2)):
        r = ampbench(*args, cwd=work)
        assert r.returncode == code, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stdout + r.stderr and "error" in (r.stdout + r.stderr).lower()
    assert not (work / "runs").exists()


def test_help_lists_exit_codes_and_strict_is_a_flag(work):
    r = ampbench("run", "--help", cwd=work)
    assert r.returncode == 0
    for code in ("130", "143", "INCONCLUSIVE", "  2 "):
        assert code in r.stdout
    assert "--strict  " in r.stdout and "<bool>" not in r.stdout
    assert "Exit codes" in ampbench("--help", cwd=work).stdout


@pytest.mark.slow
def test_check_piped_shows_every_mode_name_whole(work):
    modes = ("fp32", "amp-o1-fp16-with-a-rather-long-name", "amp-o2-bf16-with-another-long-name")
    s = make_suite(modes=modes)
    run = make_run(work / "runs", s, make_trials(s, n_steps=20))
    r = ampbench("check", str(run), cwd=work)
    assert r.returncode in (0, 1, 3)
    for m in modes:
        assert m in r.stdout
    assert "…" not in r.stdout.split("\n")[0]


def _run_processes(run_dir: Path) -> dict[int, tuple[int, bool]]:
    """pid -> (ppid, is the fork server) of the run's processes: command lines naming the worker module (a
    spawned worker) or the fork server (it and the workers forked from it: launch/forkserver.py) and the run
    folder.  The server is the one whose environment still holds the marker placeholder."""
    found: dict[int, tuple[int, bool]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ("ampbench.trial.worker" in cmd or "ampbench.launch.forkserver" in cmd) and str(run_dir) in cmd:
                    server = f"{WORKER_ENV}={MARKER_PLACEHOLDER}\0".encode() in (d / "environ").read_bytes()
                    found[int(d.name)] = (ppid, server)
            except (OSError, IndexError, ValueError):
                continue
    return found


def _workers_of(run_dir: Path) -> list[int]:
    """The trial workers of the run (spawned or forked; not the fork server).  A worker's own child between
    its fork and its exec (the worker runs `git`, a probe, ...) still shows the worker's command line: it is
    left out while its parent is one of them (a child left behind by a worker that is gone still counts)."""
    found = {pid: ppid for pid, (ppid, server) in _run_processes(run_dir).items() if not server}
    return [pid for pid, ppid in found.items() if ppid not in found]


def _servers_of(run_dir: Path) -> list[int]:
    return [pid for pid, (_, server) in _run_processes(run_dir).items() if server]


def _start_hanging_run(work: Path, hang: str = "amp-o1-fp16") -> tuple[subprocess.Popen, Path]:
    """ampbench running the toy (2 seeds) until `hang`'s seed-0 trial hangs: fp32 seed 0 finishes first
    unless it is the one that hangs."""
    p = suite_file(work, TOY_SUITE.replace("seeds = [0]", "seeds = [0, 1]"))
    out = work / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AMPBENCH_FAULT": f"{hang}:0:hang",
           "AMPBENCH_CACHE": str(work / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "ampbench.cli", "run", str(p), "--out", str(out), "--no-report"],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        runs = list((out / "toy").glob(f"*/specs/{hang}__seed0.json")) if (out / "toy").exists() else []
        if runs and _workers_of(runs[0].parents[1]):
            time.sleep(2.0)  # the hanging worker is up and training
            return proc, runs[0].parents[1]
        time.sleep(0.3)
    proc.kill()
    raise AssertionError("the hanging trial never started")


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_the_worker_keeps_trials_and_says_how_to_resume(work, sig, code):
    proc, run = _start_hanging_run(work)
    proc.send_signal(sig)
    text, _ = proc.communicate(timeout=30)
    assert proc.returncode == code, text
    assert "Traceback" not in text and f"--resume {run}" in text.replace("\n", " ").replace("  ", " ") or \
        "--resume" in text
    time.sleep(0.5)
    assert _workers_of(run) == [] and _servers_of(run) == []
    assert (run / "trials" / "fp32__seed0.json").is_file()  # the finished trial is kept
    assert json.loads((run / "trials" / "fp32__seed0.json").read_text())["status"] == "ok"
    assert not (run / "trials" / "amp-o1-fp16__seed0.json").exists()  # not recorded as crashed


@pytest.mark.slow
def test_sigkilled_ampbench_leaves_no_worker(work):
    proc, run = _start_hanging_run(work, hang="fp32")   # the first trial hangs: no finished one needed here
    workers = _workers_of(run)
    proc.kill()
    proc.communicate(timeout=10)
    deadline = time.monotonic() + 10
    while (_workers_of(run) or _servers_of(run)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert workers and _workers_of(run) == [] and _servers_of(run) == []
