"""`run --launcher slurm` on a real one-host Slurm cluster (tests/slurm_cluster.py): jobs really queued,
run, cancelled, failed and resumed; skipped with the reason where the cluster cannot start (not root, no
slurm-wlm).  The parsing and option helpers are tested without a cluster below.

Every ampbench here is a real `python -m ampbench.cli` process (Ctrl-C and SIGKILL reach a real one),
polling Slurm every 0.5 s; the toy trials run side by side on the node's oversubscribed CPUs.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ampbench.core.errors import ConfigError
from ampbench.launch import slurm
from ampbench.launch.slurm import SlurmOptions
from tests import slurm_cluster
from tests.conftest import TOY_SUITE

ROOT = Path(__file__).resolve().parents[1]
SUITE = TOY_SUITE + "\n"
FAST = ["--set", "train.steps=12", "--set", "train.timeout_s=300", "--no-report"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_cluster.Cluster]:
    why = slurm_cluster.why_not()
    if why:
        pytest.skip(why)
    with slurm_cluster.running(tmp_path_factory.mktemp("slurm")) as c:
        yield c


def _ampbench(cluster: slurm_cluster.Cluster, args: list[str], cwd: Path, fault: str = "") -> subprocess.Popen[str]:
    env = {**cluster.env, "PYTHONPATH": str(ROOT), "AMPBENCH_CACHE": str(cwd / "cache"), "AMPBENCH_FAULT": fault,
           "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "ampbench.cli", "run", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _slurm_run(cluster, cwd: Path, extra: list[str] = (), fault: str = "") -> subprocess.Popen[str]:
    (cwd / "toy.toml").write_text(SUITE)
    return _ampbench(cluster, ["toy.toml", "--launcher", "slurm", "--slurm-poll", "0.5", "--out", "runs", *FAST,
                               *extra], cwd, fault)


def _run_dir(cwd: Path) -> Path:
    found = sorted((cwd / "runs" / "toy").glob("*/run.json"))
    return found[-1].parent if found else cwd / "runs" / "not-yet"


def _wait_for(cond: Callable[[], bool], what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _jobs(run: Path) -> dict[str, str]:
    try:
        return json.loads((run / "slurm.json").read_text())["jobs"]
    except (OSError, ValueError, IndexError):
        return {}


def _trial(run: Path, key: str) -> dict:
    return json.loads((run / "trials" / f"{key}.json").read_text())


def _ok_file(run: Path, key: str) -> bool:
    try:
        return _trial(run, key)["status"] == "ok"
    except (OSError, ValueError):
        return False


def _finish(p: subprocess.Popen[str], limit: float = 150) -> tuple[int, str]:
    out, _ = p.communicate(timeout=limit)
    return p.returncode, out


def _losses(run: Path, key: str) -> list[float]:
    return [s["loss"] for s in _trial(run, key)["steps"]]


@pytest.mark.slow
def test_a_slurm_run_gives_the_local_runs_verdict_and_losses(cluster, tmp_path):
    p = _slurm_run(cluster, tmp_path)
    local = _ampbench(cluster, ["toy.toml", "--out", "local", *FAST], tmp_path)
    code, out = _finish(p)
    local_code, local_out = _finish(local)
    run = _run_dir(tmp_path)
    local_run = next((tmp_path / "local" / "toy").glob("*/run.json")).parent
    assert code == local_code and code in (0, 3), out
    verdict = [ln for ln in out.splitlines() if ln.startswith("toy: ")]
    assert verdict == [ln for ln in local_out.splitlines() if ln.startswith("toy: ")] and verdict, (out, local_out)
    jobs = _jobs(run)
    assert set(jobs) == {"fp32__seed0", "amp-o1-fp16__seed0"}
    for key, job in jobs.items():
        t = _trial(run, key)
        assert t["status"] == "ok" and t["slurm"]["job_id"] == job and t["slurm"]["node"], t["slurm"]
        assert _losses(run, key) == _losses(local_run, key) and len(_losses(run, key)) == 12
        assert "slurm" not in _trial(local_run, key) or _trial(local_run, key)["slurm"] is None
    assert f"submitted as job {jobs['fp32__seed0']}" in out
    ts = [_trial(run, key) for key in jobs]   # the pair in place: one node, one after the other (issue 46)
    assert len({t["slurm"]["node"] for t in ts}) == 1
    spans = sorted((t["started_unix"], t["ended_unix"]) for t in ts)
    assert spans[0][1] <= spans[1][0], spans
    rules = [r for v in json.loads((run / "check.json").read_text())["verdicts"] for r in v["rules"]]
    assert not [r for r in rules if {"different-nodes", "overlapped"} & set(r["details"].get("reasons", []))]


@pytest.mark.slow
def test_scancel_of_one_job_records_it_cancelled_a_failed_job_its_exit_code_and_the_rest_go_on(cluster, tmp_path):
    (tmp_path / "seeds").mkdir()
    p = _slurm_run(cluster, tmp_path, ["--seeds", "0,1"], fault="amp-o1-fp16:0:hang,fp32:1:exit")
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 4, "4 jobs submitted")
    run = _run_dir(tmp_path)
    hung = _jobs(run)["amp-o1-fp16__seed0"]
    _wait_for(lambda: cluster.jobs().get(hung) == "RUNNING", f"job {hung} running")
    subprocess.run(["scancel", hung], env=cluster.env, check=True)
    code, out = _finish(p)
    assert code == 2, out  # the failed and the cancelled trial are errors of the run
    cancelled, failed = _trial(run, "amp-o1-fp16__seed0"), _trial(run, "fp32__seed1")
    assert cancelled["status"] == "cancelled" and cancelled["slurm"]["state"] == "CANCELLED", cancelled["error"]
    assert cancelled["slurm"]["job_id"] == hung and f"Slurm job {hung} ended CANCELLED" in cancelled["error"]
    assert failed["status"] == "crashed", failed["error"]
    assert failed["slurm"]["state"] == "FAILED" and failed["slurm"]["exit_code"] == "13:0", failed["slurm"]
    assert _ok_file(run, "fp32__seed0") and _ok_file(run, "amp-o1-fp16__seed1")


@pytest.mark.slow
def test_ctrl_c_cancels_every_job_and_resume_runs_only_the_rest(cluster, tmp_path):
    p = _slurm_run(cluster, tmp_path, fault="amp-o1-fp16:0:hang")
    _wait_for(lambda: _ok_file(_run_dir(tmp_path), "fp32__seed0"), "fp32 done")
    run = _run_dir(tmp_path)
    jobs = _jobs(run)
    p.send_signal(signal.SIGINT)
    code, out = _finish(p, 90)
    assert code == 130 and "--resume" in out, out
    states = cluster.jobs()
    assert states.get(jobs["amp-o1-fp16__seed0"]) == "CANCELLED"
    assert not [j for j in jobs.values() if states.get(j) in ("PENDING", "RUNNING", "COMPLETING")], states
    assert "amp-o1-fp16__seed0" not in _jobs(run)  # the cancelled job forgotten: resume submits it again
    before = (run / "trials" / "fp32__seed0.json").stat().st_mtime_ns
    code, out = _finish(_ampbench(cluster, ["--resume", str(run), "--no-report"], tmp_path))
    assert code in (0, 3), out
    assert "1 finished trial(s) kept, 1 to run" in out
    assert (run / "trials" / "fp32__seed0.json").stat().st_mtime_ns == before
    assert _ok_file(run, "amp-o1-fp16__seed0") and _jobs(run)["amp-o1-fp16__seed0"] != jobs["amp-o1-fp16__seed0"]


@pytest.mark.slow
def test_resume_after_ampbench_was_killed_waits_for_its_jobs_instead_of_submitting_them_again(cluster, tmp_path):
    p = _slurm_run(cluster, tmp_path)
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 2, "2 jobs submitted")
    run = _run_dir(tmp_path)
    jobs = _jobs(run)
    p.kill()
    p.communicate()
    assert any(cluster.jobs().get(j) in ("PENDING", "RUNNING") for j in jobs.values())  # they outlive ampbench
    code, out = _finish(_ampbench(cluster, ["--resume", str(run), "--no-report"], tmp_path))
    assert code in (0, 3), out
    assert out.count("found queued or running, not submitted again") + out.count("finished trial(s) kept") >= 1, out
    assert "submitted as job" not in out
    assert _jobs(run) == jobs
    for key, job in jobs.items():
        assert _trial(run, key)["slurm"]["job_id"] == job


@pytest.mark.slow
def test_a_two_node_trial_is_one_job_with_a_paddle_launcher_on_each_node(cluster, tmp_path):
    dist = '\n[distributed]\nnnodes = 2\nnproc_per_node = 1\nbackend = "gloo"\n'
    (tmp_path / "toy.toml").write_text(SUITE + dist)
    p = _ampbench(cluster, ["toy.toml", "--launcher", "slurm", "--slurm-poll", "0.5", "--out", "runs", "--mode", "fp32",
                            "--no-report", "--set", "train.steps=6", "--set", "train.warmup_steps=1"], tmp_path)
    _code, out = _finish(p, 240)
    run = _run_dir(tmp_path)
    t = _trial(run, "fp32__seed0")
    assert t["status"] == "ok", (t.get("error"), out)
    assert t["slurm"]["nodes"] == "node[1-2]" and t["slurm"]["node"] == "node1"
    ranks = t["distributed"]["per_rank"]
    assert [r["host"] for r in ranks] == ["node1", "node2"] and t["world_size"] == 2
    assert all(len(r["step_s"]) == 6 for r in ranks) and len(t["memory"]["per_rank"]) == 2
    assert sorted(p.name for p in (run / "logs" / "fp32__seed0.ranks").iterdir() if p.is_dir()) == ["node0", "node1"]


# ---------------------------------------------------------------- without a cluster


def test_slurm_args_become_sbatch_options_and_ampbenchs_own_are_refused():
    assert slurm.parse_slurm_args(["account=proj", "exclusive", "--qos=high"]) == \
        ["--account=proj", "--exclusive", "--qos=high"]
    for bad in ("output=/tmp/x", "job-name=x", "=x", "a b=c"):
        with pytest.raises(ConfigError):
            slurm.parse_slurm_args([bad])


def test_job_options_carry_the_users_choices(tmp_path):
    o = SlurmOptions(partition="gpu", time="2:00:00", constraint="a100", args=["account=p"])
    opts = slurm.job_options("ampbench-x", tmp_path / "l.log", o, nnodes=2, gpus=4, time_s=100, workdir=tmp_path)
    assert {"--partition=gpu", "--time=2:00:00", "--constraint=a100", "--gpus-per-node=4", "--nodes=2",
            "--account=p", f"--output={tmp_path / 'l.log'}"} <= set(opts)
    assert "--time=2" in slurm.job_options("x", tmp_path / "l", SlurmOptions(), 1, 0, 100, tmp_path)


def test_scheduler_ends_map_to_trial_statuses():
    assert [slurm.trial_status(s) for s in ("CANCELLED", "PREEMPTED", "TIMEOUT", "OUT_OF_MEMORY", "FAILED",
                                            "NODE_FAIL")] == ["cancelled", "cancelled", "timeout", "oom", "crashed",
                                                              "crashed"]


def test_the_batch_script_quotes_and_a_multi_node_one_starts_a_launcher_per_node():
    s = slurm.batch_script(["python", "-m", "x", "a b"], {"K": "v w"}, srun=False)
    assert "export K='v w'" in s and s.rstrip().endswith("exec python -m x 'a b'")
    assert "exec srun --kill-on-bad-exit=1 python" in slurm.batch_script(["python"], {}, srun=True)


def test_the_launcher_option_refuses_slurm_options_without_slurm(tmp_path):
    from typer.testing import CliRunner

    from ampbench.cli import app

    (tmp_path / "toy.toml").write_text(SUITE)
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--partition", "gpu", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--partition" in r.output and "only with --launcher slurm" in r.output
    assert not (tmp_path / "toy").exists()
    env = {"PATH": str(tmp_path / "empty")}
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--launcher", "slurm", "--out", str(tmp_path)],
                           env=env)
    assert r.exit_code == 2 and "sbatch" in r.output and "not found on PATH" in r.output, r.output
    assert not (tmp_path / "toy").exists()
    assert os.environ.get("PATH")


# ---------------------------------------------------------------- --slurm-parallel: one array job per run


def _scontrol_of(c: slurm_cluster.Cluster, job: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "--oneliner", job], env=c.env, capture_output=True, text=True,
                         check=True).stdout
    return slurm._fields(out.splitlines()[0])


@pytest.mark.slow
def test_slurm_parallel_runs_the_run_as_one_array_job_a_task_per_seed_its_arms_in_turn(cluster, tmp_path):
    before = set(cluster.jobs())
    p = _slurm_run(cluster, tmp_path, ["--seeds", "0,1", "--slurm-parallel", "1"])
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 4, "the array submitted")
    queued = {j.split("_")[0] for j in cluster.jobs()} - {j.split("_")[0] for j in before}
    code, out = _finish(p, 300)
    run = _run_dir(tmp_path)
    assert code in (0, 3), out
    jobs = _jobs(run)
    array = jobs["fp32__seed0"].split("_")[0]
    assert queued == {array} and f"submitted as array job {array}: 2 task(s)" in out, (queued, out)  # one queue entry
    assert jobs == {"fp32__seed0": f"{array}_0", "amp-o1-fp16__seed0": f"{array}_0",
                    "fp32__seed1": f"{array}_1", "amp-o1-fp16__seed1": f"{array}_1"}
    doc = json.loads((run / "slurm.json").read_text())
    assert doc["tasks"] == {f"{array}_0": ["fp32__seed0", "amp-o1-fp16__seed0"],
                            f"{array}_1": ["fp32__seed1", "amp-o1-fp16__seed1"]}
    spans = []
    for key, task in jobs.items():
        t = _trial(run, key)
        assert t["status"] == "ok" and t["slurm"]["job_id"] == task and len(t["steps"]) == 12, t.get("error")
        spans.append((t["started_unix"], t["ended_unix"], key))
    for seed in (0, 1):   # a seed's arms on one node (one task)
        assert _trial(run, f"fp32__seed{seed}")["slurm"]["node"] == _trial(run, f"amp-o1-fp16__seed{seed}")["slurm"]["node"]
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans   # %1: nothing overlapped, not even seeds
    info = _scontrol_of(cluster, f"{array}_1")
    assert info["ArrayJobId"] == array and info["Comment"] == "ampbench-run:" + doc["token"], info
    assert info["JobName"] == "ampbench-toy-array", info
    assert (run / "logs" / f"slurm-array-{array}_0.log").is_file()


@pytest.mark.slow
def test_ctrl_c_cancels_the_array_by_its_id_and_resume_submits_only_what_has_no_ok_trial(cluster, tmp_path):
    import shutil

    (tmp_path / "bin").mkdir()   # scancel as Slurm's own, saying what it was given
    (tmp_path / "bin" / "scancel").write_text(f'#!/bin/bash\necho "$@" >>{tmp_path}/scancel.args\n'
                                              f'exec {shutil.which("scancel")} "$@"\n')
    (tmp_path / "bin" / "scancel").chmod(0o700)
    path = cluster.env["PATH"]
    cluster.env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{path}"
    try:
        p = _slurm_run(cluster, tmp_path, ["--seeds", "0,1", "--slurm-parallel", "1"], fault="amp-o1-fp16:0:hang")
    finally:
        cluster.env["PATH"] = path
    _wait_for(lambda: _ok_file(_run_dir(tmp_path), "fp32__seed0"), "fp32 seed 0 done")
    run = _run_dir(tmp_path)
    array = _jobs(run)["fp32__seed0"].split("_")[0]
    p.send_signal(signal.SIGINT)
    code, out = _finish(p, 90)
    assert code == 130 and f"cancelled 2 Slurm job(s): {array}_0, {array}_1" in out, out
    assert (tmp_path / "scancel.args").read_text() == f"{array}\n"   # one scancel, of the array's id
    assert not [j for j, s in cluster.jobs().items() if j.startswith(f"{array}_") and s in ("PENDING", "RUNNING")]
    doc = json.loads((run / "slurm.json").read_text())
    assert not doc["jobs"] and not doc["tasks"]
    # a foreign array (the run's name and user, not its token) planted as the task of seed 1's trials
    foreign = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--array=0-1", "--job-name=ampbench-toy-array",
                              "--wrap", "sleep 600"], env=cluster.env, capture_output=True, text=True,
                             check=True).stdout.strip()
    doc["jobs"] = {"fp32__seed1": f"{foreign}_0", "amp-o1-fp16__seed1": f"{foreign}_0"}
    doc["tasks"] = {f"{foreign}_0": ["fp32__seed1", "amp-o1-fp16__seed1"]}
    (run / "slurm.json").write_text(json.dumps(doc))
    try:
        code, out = _finish(_ampbench(cluster, ["--resume", str(run), "--no-report"], tmp_path), 300)
        assert f"array task {foreign}_0 in slurm.json is not this run's (without this run's token): left alone" in out
        assert [cluster.jobs().get(f"{foreign}_{i}") for i in (0, 1)] == ["RUNNING", "RUNNING"]   # not cancelled
    finally:
        subprocess.run(["scancel", foreign], env=cluster.env, check=False)
    assert code in (0, 3), out
    assert not [t for t in json.loads((run / "slurm.json").read_text())["tasks"] if t.startswith(foreign)]
    assert "1 finished trial(s) kept, 3 to run" in out, out
    node = _trial(run, "fp32__seed0")["slurm"]["node"]
    assert f"1 task(s), one per seed, at most 1 at once, nodelist={node}" in out, out   # its pair's node
    t = _trial(run, "amp-o1-fp16__seed0")
    assert t["status"] == "ok" and t["slurm"]["node"] == node and not t["slurm"]["job_id"].startswith(array)
    assert _ok_file(run, "fp32__seed1") and _ok_file(run, "amp-o1-fp16__seed1")


def test_array_task_ids_in_squeue_answers_are_read_one_by_one():
    assert slurm.task_ids("51") == ["51"] and slurm.task_ids("123_4") == ["123_4"]
    assert slurm.task_ids("123_[5-7%1]") == ["123_5", "123_6", "123_7"]
    assert slurm.task_ids("123_[1,3-4]") == ["123_1", "123_3", "123_4"]
    assert slurm.task_ids("JOBID") == [] and slurm.task_ids("123_x") == []
    assert slurm._is_job({"JobId": "130", "ArrayJobId": "123", "ArrayTaskId": "4"}, "123_4")
    assert slurm._is_job({"JobId": "123", "ArrayJobId": "123", "ArrayTaskId": "5-7%1"}, "123_6")
    assert not slurm._is_job({"JobId": "123", "ArrayJobId": "123", "ArrayTaskId": "5-7%1"}, "123_4")
    assert not slurm._is_job({"JobId": "124", "ArrayJobId": "124", "ArrayTaskId": "4"}, "123_4")


def test_squeue_of_an_array_asks_for_the_array_and_reads_its_pending_tasks(monkeypatch):
    asked = []

    def fake(cmd, stdin=None, check=True):   # squeue's answer for one array: a task running, two pending
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "123_4|RUNNING|node1|None\n123_[5-7%1]|PENDING||JobArrayTaskLimit\n"
                                                  "99|RUNNING|node2|None\n", "")

    monkeypatch.setattr(slurm, "_run", fake)
    got = slurm.squeue(["123_4", "123_6", "99"])
    assert "--jobs=123,99" in asked[0] and "--array" in asked[0]
    assert got["123_4"].state == "RUNNING" and got["123_6"] == slurm.JobState("PENDING", "", "JobArrayTaskLimit")
    assert set(got) == {"123_4", "123_6", "99"}
    monkeypatch.setattr(slurm, "_run", lambda cmd, stdin=None, check=True: subprocess.CompletedProcess(
        cmd, 0, "123_[5-x]|PENDING||None\n", ""))
    with pytest.raises(slurm.SlurmUnreadable):
        slurm.squeue(["123_5"])


def test_the_array_job_is_one_sbatch_a_task_per_seed_running_its_arms_in_turn(tmp_path):
    assert slurm.array_range(3, 1) == "--array=0-2%1"
    s = slurm.array_script([[slurm.Arm(["python", "w", "a b"], {"K": "v w"}, tmp_path / "x y.log"),
                             slurm.Arm(["python", "w", "c"], {}, tmp_path / "z.log")],
                            [slurm.Arm(["python", "w", "d"], {}, tmp_path / "d.log", srun=True)]])
    task0 = s.split("0)\n")[1].split(";;")[0].splitlines()
    assert task0 == [f"  (export K='v w'; exec python w 'a b') >>'{tmp_path}/x y.log' 2>&1 || rc=$?",
                     f"  (exec python w c) >>{tmp_path}/z.log 2>&1 || rc=$?", "  "]
    assert "1)\n  (exec srun --kill-on-bad-exit=1 python w d)" in s and s.rstrip().endswith('exit "$rc"')
    r = subprocess.run(["bash", "-n"], input=s, text=True, capture_output=True)
    assert r.returncode == 0, r.stderr


def test_after_slurms_own_requeue_a_task_skips_the_arms_it_already_ran_ok(tmp_path):
    """Issue 62: `scontrol requeue` (or a REQUEUE preemption) starts an array task again from the top, under the
    same task id; the arms whose trial file is this task's ok trial are not run again (their measurement kept),
    an arm whose file is another task's, not ok, or missing runs.  The script as Slurm runs it, under bash."""
    from ampbench.core.docs import write_doc
    from ampbench.record.models import SlurmJob
    from tests.factories import make_trial

    def arm(name: str) -> slurm.Arm:
        cmd = [sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'a').write({name!r} + ' ')"]
        return slurm.Arm(cmd, {}, tmp_path / f"{name}.log", trial=tmp_path / f"{name}.json", key=name)

    names = ["fp32__seed0", "amp-o1-fp16__seed0", "amp-o2-bf16__seed0", "amp-o2-fp16__seed0"]
    ok_here = make_trial("fp32", 0, slurm=SlurmJob(job_id="123_0", node="n1"))
    write_doc(tmp_path / "fp32__seed0.json", ok_here)                                        # ok in this task: kept
    write_doc(tmp_path / "amp-o1-fp16__seed0.json",
              make_trial("amp-o1-fp16", 0, slurm=SlurmJob(job_id="99_0", node="n1")))     # another task's: run
    write_doc(tmp_path / "amp-o2-bf16__seed0.json",
              make_trial("amp-o2-bf16", 0, status="crashed", slurm=SlurmJob(job_id="123_0")))  # failed: run
    script = tmp_path / "task.sh"                                                           # amp-o2-fp16: no file, run
    script.write_text(slurm.array_script([[arm(n) for n in names]]))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLURM_JOB_ID": "130", "SLURM_ARRAY_JOB_ID": "123",
           "SLURM_ARRAY_TASK_ID": "0", "SLURM_RESTART_COUNT": "1"}
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ran").read_text().split() == names[1:]   # main ran all four: fp32 measured twice
    assert "fp32__seed0 already ended ok in this array task" in (tmp_path / "fp32__seed0.log").read_text()
    assert load_trial_json(tmp_path / "fp32__seed0.json") == ok_here.model_dump(mode="json", by_alias=True)


def load_trial_json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_an_array_tasks_trial_names_the_task_not_its_own_job_id():
    from ampbench.trackers.scheduler import slurm_job

    env = {"SLURM_JOB_ID": "130", "SLURM_ARRAY_JOB_ID": "123", "SLURM_ARRAY_TASK_ID": "4", "SLURMD_NODENAME": "n1"}
    assert slurm_job(env).job_id == "123_4" and slurm_job({"SLURM_JOB_ID": "51"}).job_id == "51"


def test_slurm_parallel_is_refused_without_slurm(tmp_path):
    from typer.testing import CliRunner

    from ampbench.cli import app

    (tmp_path / "toy.toml").write_text(SUITE)
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--slurm-parallel", "2", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--slurm-parallel" in r.output and "only with --launcher slurm" in r.output


# ---------------------------------------------------------------- bisect --parallel K --launcher slurm


def _bisect_proc(cluster: slurm_cluster.Cluster, args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**cluster.env, "PYTHONPATH": str(ROOT), "AMPBENCH_CACHE": str(cwd / "cache"), "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "ampbench.cli", "bisect", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _span(run: Path) -> tuple[float, float]:
    ts = [json.loads(p.read_text()) for p in (run / "trials").glob("*.json")]
    return min(t["started_unix"] for t in ts), max(t["ended_unix"] for t in ts)


@pytest.mark.slow
def test_bisect_k_section_over_slurm_submits_a_round_at_once_cancels_it_on_ctrl_c_and_resumes(cluster, tmp_path):
    """4 commits, commit 2 makes every step 2.5x as long: `bisect --parallel 2 --launcher slurm` runs the endpoints,
    then commits 1 and 2 as one round, each candidate's trials its own Slurm jobs.  Ctrl-C while the round's
    jobs are queued or running: exit 130, none of them left queued or running.  `--resume` finishes the
    search, naming commit 2; the recheck round's two runs overlap in time (submitted at once).  Each round runs
    6 trials at once on this machine's 2 cores (a run's seeds are submitted together), so the rule is set to
    tell a 25% change (`history_min_change`): at the default 5% a good commit's look under that contention
    stayed INCONCLUSIVE at 3 seeds (-7.6%, loaded)."""
    from tests.test_bisect import _repo, _suite

    repo, shas = _repo(tmp_path, [0.010, 0.010, 0.025, 0.025])
    suite = _suite(tmp_path, repo, steps=30)
    # a run's seeds are Slurm jobs side by side on a node's one CPU "device": accepted here (issue 62's check
    # holds a history comparison of such a run back otherwise), the planted step time is sleep, not CPU
    suite.write_text(suite.read_text().replace("seeds = [0, 1, 2]\n", 'seeds = [0, 1, 2]\npairs = "any"\n', 1))
    p = _bisect_proc(cluster, [str(suite), "--good", shas[0], "--bad", shas[3], "--repo", str(repo), "--parallel", "2",
                               "--launcher", "slurm", "--slurm-poll", "0.5", "--max-seeds", "3", "--out", "out",
                               "--set", "thresholds.history_min_change=0.25"], tmp_path)
    runs = tmp_path / "out" / "prog"

    def round_submitted() -> bool:
        dirs = [d for d in runs.glob("bisect-*/runs/prog/00[12]-*") if d.is_dir()]
        return len(dirs) == 2 and all(_jobs(d) for d in dirs)

    _wait_for(round_submitted, "the first round's two runs submitted", limit=400)
    round_jobs = [j for d in runs.glob("bisect-*/runs/prog/00[12]-*") for j in _jobs(d).values()]
    p.send_signal(signal.SIGINT)
    code, out = _finish(p, 120)
    assert code == 130 and "bisect --resume" in out, out
    states = cluster.jobs()
    assert not [j for j in round_jobs if states.get(j) in ("PENDING", "RUNNING", "COMPLETING")], (states, out)
    folder = next(runs.glob("bisect-*"))

    code, out = _finish(_bisect_proc(cluster, ["--resume", str(folder)], tmp_path), 600)
    assert code == 1 and f"first bad commit: {shas[2]}" in out, out
    doc = json.loads((folder / "bisect.json").read_text())
    assert doc["slurm"]["poll_s"] == 0.5 and doc["parallel"] == 2
    assert [c["role"] for c in doc["candidates"]][:4] == ["good-endpoint", "bad-endpoint", "candidate", "candidate"]
    # the boundary pair (commits 1 and 2) is rechecked as one round; a recheck that disagrees (noise from the
    # other test workers beside it) asks for more rounds, so only the first round's two are held to the overlap
    # (a loaded `-n 2` run saw four rechecks, and the right commit named)
    rechecks = [Path(c["run_dir"]) for c in doc["candidates"] if c["role"] == "recheck"]
    assert len(rechecks) >= 2, doc["candidates"]
    assert {c["index"] for c in [c for c in doc["candidates"] if c["role"] == "recheck"][:2]} == {1, 2}, doc["candidates"]
    for run in rechecks:
        assert all(t for t in _jobs(run).values())   # every trial a Slurm job
        assert all(_trial(run, k)["slurm"]["job_id"] for k in _jobs(run))
    (a0, a1), (b0, b1) = (_span(r) for r in rechecks[:2])
    assert max(a0, b0) < min(a1, b1), (a0, a1, b0, b1)
    assert not [j for j, s in cluster.jobs().items() if s in ("PENDING", "RUNNING")]


def test_bisect_cancels_only_the_live_jobs_of_its_own_runs_after_an_interrupt(tmp_path, monkeypatch):
    """What a stopped candidate's run still records in slurm.json: its own live job is cancelled; an ended
    one, one with another run's token and another user's are left alone (scontrol's answers stubbed)."""
    import io
    import pwd

    from rich.console import Console

    from ampbench.engine import side_by_side
    from ampbench.launch.slurm import JobState
    from ampbench.launch.slurm_run import SlurmRun, save_state

    run = tmp_path / "001-abc"
    run.mkdir()
    state = SlurmRun(options=SlurmOptions(), jobs={"fp32__seed0": "11", "fp32__seed1": "12", "fp32__seed2": "13",
                                                   "fp32__seed3": "14"})
    save_state(run, state)
    me = pwd.getpwuid(os.getuid()).pw_name
    answers = {"11": JobState(state="RUNNING", user=me, comment=state.comment),
               "12": JobState(state="COMPLETED", user=me, comment=state.comment),
               "13": JobState(state="PENDING", user=me, comment="ampbench-run:someone-else"),
               "14": JobState(state="RUNNING", user="other", comment=state.comment)}
    cancelled: list[list[str]] = []
    monkeypatch.setattr(slurm, "job_info", lambda job: answers.get(job))
    monkeypatch.setattr(slurm, "scancel", lambda jobs: cancelled.append(list(jobs)))
    side_by_side.cancel_left([run, tmp_path / "never-started"], Console(file=io.StringIO()))
    assert cancelled == [["11"]]
