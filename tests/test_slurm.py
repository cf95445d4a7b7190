"""`run --launcher slurm` on a real one-host Slurm cluster (tests/slurm_cluster.py): jobs really queued,
run, cancelled, failed and resumed; skipped with the reason where the cluster cannot start (not root, no
slurm-wlm).  The parsing and option helpers are tested without a cluster below.

Every ampbench here is a real `python -m ampbench.cli` process (Ctrl-C and SIGKILL reach a real one),
polling Slurm every 0.5 s; the toy trials run side by side on the node's oversubscribed CPUs.
"""

from __future__ import annotations

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
