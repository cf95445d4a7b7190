"""`run --launcher slurm` when Slurm misbehaves, on the real one-host cluster (tests/slurm_cluster.py):
a job id in slurm.json that is not the run's, a `squeue` that answers in another format or not in
UTF-8, an `scancel` that fails, slurmctld stopped mid-run and started again, a partition or a node
count the cluster does not have.  Each ends with no job of the test left queued.

The up-front `--master` checks need no cluster (last section).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests import slurm_cluster
from tests.test_slurm import (
    FAST,
    SUITE,
    _ampbench,
    _finish,
    _jobs,
    _ok_file,
    _run_dir,
    _slurm_run,
    _trial,
    _wait_for,
    cluster,  # noqa: F401  the module's own cluster (a pytest fixture)
)

LIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")
START = '@@ampbench {"event": "start"'   # a worker's first training event (trial/loop.py)
LONG_STEPS = 1200   # the preempted trial's steps, 10 ms of sleep each


def _sbatch(c: slurm_cluster.Cluster, *opts: str) -> str:
    """A job that is not ampbench's: it sleeps until cancelled."""
    out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", *opts, "--wrap", "sleep 600"], env=c.env,
                         capture_output=True, text=True, check=True).stdout
    return out.strip().split(";")[0]


def _scancel(c: slurm_cluster.Cluster, *jobs: str) -> None:
    subprocess.run(["scancel", *jobs], env=c.env, capture_output=True, check=False)
    _wait_for(lambda: all(c.jobs().get(j) not in LIVE for j in jobs), f"jobs {jobs} ended", 60)


def _on_path(tmp: Path, name: str, script: str) -> dict[str, str]:
    """An environment whose PATH finds this script as `name` before Slurm's own command."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text("#!/bin/bash\n" + script)
    (bin_dir / name).chmod(stat.S_IRWXU)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _run_with(c: slurm_cluster.Cluster, cwd: Path, env: dict[str, str], args: list[str], fault: str = ""):
    saved = dict(c.env)
    c.env.update(env)
    try:
        return _ampbench(c, args, cwd, fault)
    finally:
        c.env.clear()
        c.env.update(saved)


def _read_until(p: subprocess.Popen[str], text: str) -> str:
    """ampbench's output up to the line holding `text` (the rest stays for communicate)."""
    seen = []
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"{text!r} never said:\n{''.join(seen)}")


def _one_line_error(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in out, out
    return lines[-1]


@pytest.mark.slow
def test_a_foreign_job_in_slurm_json_is_neither_adopted_nor_cancelled(cluster, tmp_path):  # noqa: F811
    someone = _sbatch(cluster, "--job-name=someone-elses-job")
    # same name and user as the run's own job, but another run's token
    other_run = _sbatch(cluster, "--job-name=ampbench-toy-fp32__seed0", "--comment=ampbench-run:0123456789abcdef")
    try:
        p = _slurm_run(cluster, tmp_path, fault="fp32:0:hang,amp-o1-fp16:0:hang")
        _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 2, "2 jobs submitted")
        run = _run_dir(tmp_path)
        p.kill()
        p.communicate()
        _scancel(cluster, *_jobs(run).values())
        doc = json.loads((run / "slurm.json").read_text())
        doc["jobs"] = {"fp32__seed0": other_run, "amp-o1-fp16__seed0": someone}
        (run / "slurm.json").write_text(json.dumps(doc))
        p = _ampbench(cluster, ["--resume", str(run), "--no-report"], tmp_path, fault="amp-o1-fp16:0:hang")
        _wait_for(lambda: _jobs(run).get("amp-o1-fp16__seed0") not in (someone, None), "the amp trial resubmitted")
        mine = _jobs(run)["amp-o1-fp16__seed0"]
        _wait_for(lambda: cluster.jobs().get(mine) == "RUNNING", f"job {mine} running")
        p.send_signal(signal.SIGINT)
        code, out = _finish(p, 90)
        assert code == 130, out
        assert f"job {someone} in slurm.json is not this run's (name 'someone-elses-job', without this run's " \
               "token): left alone" in out, out
        assert f"job {other_run} in slurm.json is not this run's (without this run's token)" in out, out
        assert "found queued or running" not in out
        states = cluster.jobs()
        assert states[someone] == "RUNNING" and states[other_run] == "RUNNING", states  # neither cancelled
        assert states[mine] == "CANCELLED" and "cancelled " in out and mine in out.split("cancelled ")[1], out
        assert someone not in _jobs(run).values() and other_run not in _jobs(run).values()
    finally:
        _scancel(cluster, someone, other_run)


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["printf 'JOBID PARTITION NAME USER ST\\n 51 debug x root R\\n'",
                                    "printf '\\xff\\xfe%s|RUNNING|node1|None\\n' 1"], ids=["format", "not-utf8"])
def test_a_squeue_answer_that_cannot_be_read_is_never_taken_as_ended(cluster, tmp_path, answer):  # noqa: F811
    (tmp_path / "toy.toml").write_text(SUITE)
    env = _on_path(tmp_path, "squeue", answer + "\n")
    p = _run_with(cluster, tmp_path, env, ["toy.toml", "--launcher", "slurm", "--slurm-poll", "0.5", "--out", "runs",
                                           *FAST])
    code, out = _finish(p)
    run = _run_dir(tmp_path)
    assert code in (0, 3), out
    said = "squeue: unexpected answer, line 1" if "PARTITION" in answer else "squeue: its answer is not UTF-8 text"
    assert out.count(said) == 1 and "read through scontrol instead" in out, out  # said once, not every poll
    assert "a file is not UTF-8" not in out and "ended PENDING" not in out
    for key, job in _jobs(run).items():
        t = _trial(run, key)
        assert t["status"] == "ok" and t["slurm"]["job_id"] == job, t.get("error")
    assert not [j for j in _jobs(run).values() if cluster.jobs().get(j) in LIVE]


@pytest.mark.slow
def test_a_failed_scancel_is_said_and_the_jobs_kept_for_resume(cluster, tmp_path):  # noqa: F811
    (tmp_path / "toy.toml").write_text(SUITE)
    env = _on_path(tmp_path, "scancel", "echo 'scancel: error: Kill job error on job id $1: Access/permission denied'"
                                        " >&2\nexit 1\n")
    p = _run_with(cluster, tmp_path, env, ["toy.toml", "--launcher", "slurm", "--slurm-poll", "0.5", "--out", "runs",
                                           *FAST], fault="fp32:0:hang,amp-o1-fp16:0:hang")
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 2, "2 jobs submitted")
    run = _run_dir(tmp_path)
    jobs = _jobs(run)
    try:
        # fp32 runs (and hangs); its pair waits held behind it, pending
        _wait_for(lambda: cluster.jobs().get(jobs["fp32__seed0"]) == "RUNNING", "fp32 running")
        p.send_signal(signal.SIGINT)
        code, out = _finish(p, 90)
        assert code == 130, out
        assert "could not cancel job(s)" in out and "Access/permission denied" in out, out
        assert "cancelled 2" not in out and "kept in slurm.json" in out
        assert _jobs(run) == jobs  # nothing forgotten: --resume waits for them rather than submitting again
        assert [cluster.jobs().get(j) for j in jobs.values()] == ["RUNNING", "PENDING"]
        assert not (run / "trials" / "fp32__seed0.json").exists()  # no trial recorded for a live job
    finally:
        _scancel(cluster, *jobs.values())


@pytest.mark.slow
def test_slurmctld_down_mid_run_ends_the_wait_bounded_keeps_the_jobs_and_resume_submits_none_again(
        cluster, tmp_path):  # noqa: F811
    before = set(cluster.jobs())
    p = _slurm_run(cluster, tmp_path, ["--slurm-outage", "8"], fault="amp-o1-fp16:0:hang")
    _wait_for(lambda: _ok_file(_run_dir(tmp_path), "fp32__seed0"), "fp32 done")
    run = _run_dir(tmp_path)
    jobs = _jobs(run)
    hung = jobs["amp-o1-fp16__seed0"]
    try:
        _wait_for(lambda: cluster.jobs().get(hung) == "RUNNING", f"job {hung} running")
        cluster.stop_controller()
        t0 = time.monotonic()
        try:
            code, out = _finish(p, 200)
            took = time.monotonic() - t0
        finally:
            cluster.start_controller()
        assert code == 2, out
        assert "Slurm did not answer for" in out and "--slurm-outage 8" in out, out
        said = [ln for ln in out.splitlines() if "could not cancel job(s)" in ln]
        assert said and hung in said[0] and "Unable to contact slurm controller" in said[0], out
        assert "kept in slurm.json" in out, out
        assert "cancelled 1" not in out and "cancelled 2" not in out and took < 150, (took, out)
        print(f"slurmctld down: ampbench gave up after {took:.1f} s (--slurm-outage 8)")
        assert _jobs(run) == jobs
        assert not (run / "trials" / "amp-o1-fp16__seed0.json").exists()  # nothing recorded for a live job
        _wait_for(lambda: cluster.jobs().get(hung) == "RUNNING", f"job {hung} recovered by slurmctld", 60)
        p = _ampbench(cluster, ["--resume", str(run), "--no-report"], tmp_path, fault="amp-o1-fp16:0:hang")
        head = _read_until(p, "not submitted again")
        subprocess.run(["scancel", hung], env=cluster.env, check=True)
        code, out = _finish(p, 120)
        out = head + out
        assert code in (1, 2), out  # the cancelled trial: completeness FAIL
        assert f"job {hung} found queued or running, not submitted again" in out, out
        assert "submitted as job" not in out
        assert _jobs(run) == jobs and set(cluster.jobs()) - before == set(jobs.values())  # no duplicate
        t = _trial(run, "amp-o1-fp16__seed0")
        assert t["status"] == "cancelled" and t["slurm"]["job_id"] == hung
        assert _ok_file(run, "fp32__seed0")
    finally:
        _scancel(cluster, *jobs.values())


@pytest.mark.slow
def test_a_partition_or_node_count_the_cluster_lacks_is_refused_before_a_run_folder(cluster, tmp_path):  # noqa: F811
    p = _slurm_run(cluster, tmp_path, ["--partition", "nope"])
    code, out = _finish(p)
    assert code == 2 and _one_line_error(out) == "error: --partition: nope: no such partition on this cluster " \
                                                 "(it has debug, urgent)", out
    (tmp_path / "toy.toml").write_text(SUITE + '\n[distributed]\nnnodes = 3\nnproc_per_node = 1\nbackend = "gloo"\n')
    p = _ampbench(cluster, ["toy.toml", "--launcher", "slurm", "--out", "runs", *FAST], tmp_path)
    code, out = _finish(p)
    assert code == 2 and "distributed.nnodes: nnodes = 3, but partition debug has 2 node(s)" in _one_line_error(out)
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- without a cluster


@pytest.mark.parametrize("master", ["foo", "127.0.0.1:99999", "127.0.0.1:0", ":29400", "a b:1"])
def test_a_master_that_is_not_host_port_is_refused_before_a_run_folder(tmp_path, master):
    from typer.testing import CliRunner

    from ampbench.cli import app

    (tmp_path / "toy.toml").write_text(SUITE + '\n[distributed]\nnnodes = 2\nnproc_per_node = 1\nbackend = "gloo"\n')
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--master", master, "--node-rank", "0",
                                 "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"error: --master: {master!r}: expected HOST:PORT, a port from 1 to 65535 " \
                               "(e.g. 10.0.0.1:29400)", r.output
    assert not (tmp_path / "runs").exists()
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--master", "127.0.0.1:29400", "--node-rank", "2",
                                 "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "--node-rank: 2: the suite has nnodes = 2: node ranks 0..1" in r.output
    assert not (tmp_path / "runs").exists()


def test_scontrol_fields_keep_a_job_name_with_spaces_whole():
    from ampbench.launch.slurm import _fields

    f = _fields("JobId=12 JobName=my job UserId=root(0) JobState=RUNNING Reason=None Dependency=(null) "
                "TRES=cpu=1,node=1 Comment=ampbench-run:abc NodeList=node1")
    assert f["JobName"] == "my job" and f["TRES"] == "cpu=1,node=1" and f["Comment"] == "ampbench-run:abc"
    assert f["JobState"] == "RUNNING" and f["Reason"] == "None"


def _scontrol(c: slurm_cluster.Cluster, job: str) -> dict[str, str]:
    from ampbench.launch.slurm import _fields

    return _fields(subprocess.run(["scontrol", "show", "job", "--oneliner", job], env=c.env, capture_output=True,
                                  text=True, check=True).stdout)


@pytest.mark.slow
def test_both_arms_of_a_seed_run_on_one_node_one_after_the_other(cluster, tmp_path):  # noqa: F811
    p = _slurm_run(cluster, tmp_path, ["--seeds", "0,1"])
    code, out = _finish(p, 240)
    run = _run_dir(tmp_path)
    assert code in (0, 3), out
    jobs = _jobs(run)
    for seed in (0, 1):
        first, later = jobs[f"fp32__seed{seed}"], jobs[f"amp-o1-fp16__seed{seed}"]
        a, b = _scontrol(cluster, first), _scontrol(cluster, later)
        node = _trial(run, f"fp32__seed{seed}")["slurm"]["node"]
        assert node and _trial(run, f"amp-o1-fp16__seed{seed}")["slurm"]["node"] == node
        assert b["ReqNodeList"] == node and b["NodeList"] == node, b   # pinned there, not by chance
        assert f"held: after job {first}, on its pair's node" in out and f"job {later} released onto {node}" in out
        assert b["StartTime"] >= a["EndTime"], (a["EndTime"], b["StartTime"])  # one after the other (ISO times)
    assert not _jobs(run).keys() - {f"{m}__seed{s}" for m in ("fp32", "amp-o1-fp16") for s in (0, 1)}
    assert "held" not in json.loads((run / "slurm.json").read_text()) or \
        not json.loads((run / "slurm.json").read_text())["held"]


@pytest.mark.slow
def test_a_job_requeued_by_slurm_is_waited_for_and_its_second_attempt_recorded(cluster, tmp_path):  # noqa: F811
    p = _slurm_run(cluster, tmp_path, ["--mode", "fp32", "--set", "train.steps=150"])
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 1, "1 job submitted")
    run = _run_dir(tmp_path)
    job = _jobs(run)["fp32__seed0"]
    log = run / "logs" / "fp32__seed0.log"
    _wait_for(lambda: log.is_file() and "@@ampbench " in log.read_text(errors="replace"), "the job's first steps")
    subprocess.run(["scontrol", "requeue", job], env=cluster.env, check=True)   # what preemption (REQUEUE) does
    _eligible_now(cluster, job, requeued_at=time.time())
    code, out = _finish(p, 300)
    assert code in (0, 3), out + "\n--- the job's log ---\n" + log.read_text(errors="replace")[-2000:] + "".join(
        f"\n--- {f.name} ---\n" + f.read_text(errors="replace")[-1500:] for f in sorted(cluster.dir.glob("slurm*.log")))
    t = _trial(run, "fp32__seed0")
    assert t["status"] == "ok" and t["slurm"]["job_id"] == job and len(t["steps"]) == 150, t.get("error")
    assert _scontrol(cluster, job)["Restarts"] == "1"
    assert _jobs(run) == {"fp32__seed0": job} and "submitted as job" in out and out.count("submitted as job") == 1


def _eligible_now(c: slurm_cluster.Cluster, job: str, requeued_at: float) -> None:
    """Slurm holds a requeued job back: it pends with Reason=BeginTime, its start put off (by about
    two minutes here). That wait is Slurm's, not ampbench's, so the test lifts it (`StartTime=now`)
    once the job pends again: the job has still ended, pends and runs a second time, which is what
    ampbench must wait through (131 s of this test's 146 before).

    Not within the requeue's own second, though: slurmd revoked the first attempt's credential, and
    Slurm compares a credential's time with the revocation in whole seconds (`slurm_cred_revoked`: `ctime <= revoked`,
    src/common/slurm_cred.c), so a job started again in that same second is killed as "non-startable
    batch job: Job credential revoked" and ends FAILED, which Slurm's own delay exists to avoid. That
    race (seen in CI: the second attempt never ran) was the test's doing, not ampbench's."""
    while time.time() < int(requeued_at) + 2:
        time.sleep(0.1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _scontrol(c, job).get("JobState") == "PENDING":
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], env=c.env, check=True,
                           capture_output=True)
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} never pended again after its requeue")


def _preempt(c: slurm_cluster.Cluster, node: str) -> str:
    """A job of the `urgent` partition on this node: it preempts the debug jobs there (they end PREEMPTED)."""
    return subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--partition=urgent", f"--nodelist={node}",
                           "--wrap", "sleep 2"], env=c.env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_a_preempted_trial_is_submitted_again_up_to_the_cap(cluster, tmp_path):  # noqa: F811
    (tmp_path / "again").mkdir()
    (tmp_path / "capped").mkdir()
    # long enough (12 s) that the preemption lands while it runs: each batch's fetch sleeps (the toy's
    # workload.fetch_delay_s), so the trial costs sleep, not the CPU of 15000 steps run twice as before
    p = _slurm_run(cluster, tmp_path / "again", ["--mode", "fp32", "--set", f"train.steps={LONG_STEPS}",
                                                 "--set", "workload.fetch_delay_s=0.01"])
    q = _slurm_run(cluster, tmp_path / "capped", ["--mode", "fp32", "--slurm-requeue", "0"], fault="fp32:0:hang")
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path / "again"))) == 1 and len(_jobs(_run_dir(tmp_path / "capped"))) == 1,
              "both jobs submitted")
    run, capped = _run_dir(tmp_path / "again"), _run_dir(tmp_path / "capped")
    first, hung = _jobs(run)["fp32__seed0"], _jobs(capped)["fp32__seed0"]
    log = run / "logs" / "fp32__seed0.log"
    _wait_for(lambda: log.is_file() and "@@ampbench " in log.read_text(errors="replace"), "the job's first steps")
    _wait_for(lambda: cluster.jobs().get(hung) == "RUNNING", f"job {hung} running")
    nodes = {_scontrol(cluster, j)["NodeList"] for j in (first, hung)}
    for node in nodes:
        _preempt(cluster, node)
    code, out = _finish(p, 300)
    assert code in (0, 3), out
    again = _jobs(run)["fp32__seed0"]
    assert again != first and f"job {first} ended PREEMPTED: submitted again as job {again} (requeue 1 of 2" in out, out
    t = _trial(run, "fp32__seed0")
    assert t["status"] == "ok" and t["slurm"]["job_id"] == again and len(t["steps"]) == LONG_STEPS, t.get("error")
    assert json.loads((run / "slurm.json").read_text())["requeued"] == {"fp32__seed0": 1}
    code, out = _finish(q, 120)
    assert code in (1, 2) and "submitted again" not in out, out  # the cancelled trial: completeness FAIL
    t = _trial(capped, "fp32__seed0")
    assert t["status"] == "cancelled" and t["slurm"]["state"] == "PREEMPTED" and t["slurm"]["job_id"] == hung, t


@pytest.mark.slow
def test_a_preempted_array_task_is_submitted_again_as_a_task_on_its_node_up_to_the_cap(cluster, tmp_path):  # noqa: F811
    p = _slurm_run(cluster, tmp_path, ["--mode", "fp32", "--slurm-parallel", "1", "--slurm-requeue", "1"],
                   fault="fp32:0:hang")
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 1, "the array submitted")
    run = _run_dir(tmp_path)
    first = _jobs(run)["fp32__seed0"]
    _wait_for(lambda: cluster.jobs().get(first) == "RUNNING", f"task {first} running")
    node = _scontrol(cluster, first)["NodeList"]
    _preempt(cluster, node)
    _wait_for(lambda: _jobs(run)["fp32__seed0"] != first, "the trial submitted again")
    again = _jobs(run)["fp32__seed0"]
    _wait_for(lambda: cluster.jobs().get(again) == "RUNNING", f"task {again} running")
    assert _scontrol(cluster, again)["NodeList"] == node and _scontrol(cluster, again)["ReqNodeList"] == node
    _preempt(cluster, node)   # the cap (1) reached: recorded as it ended
    code, out = _finish(p, 120)
    assert code in (1, 2), out
    assert f"array task {first} ended PREEMPTED: fp32__seed0 submitted again as array job {again.split('_')[0]} " \
           f"(requeue 1 of 1, on {node})" in out, out
    t = _trial(run, "fp32__seed0")
    assert t["status"] == "cancelled" and t["slurm"]["state"] == "PREEMPTED" and t["slurm"]["job_id"] == again, t
    doc = json.loads((run / "slurm.json").read_text())
    assert doc["requeued"] == {"fp32__seed0": 1} and doc["tasks"][again] == ["fp32__seed0"]
    assert cluster.jobs().get(first) == "PREEMPTED" and cluster.jobs().get(again) == "PREEMPTED"


@pytest.mark.slow
def test_slurms_own_requeue_of_an_array_task_does_not_run_its_ok_arms_again(cluster, tmp_path):  # noqa: F811
    """Issue 62: `scontrol requeue` of an array task whose fp32 arm ended ok and whose AMP arm still runs: the
    task starts again from the top under its own id, skips the fp32 arm (its trial, measured once, is kept
    and recorded) and runs the AMP arm again."""
    p = _slurm_run(cluster, tmp_path, ["--seeds", "0", "--slurm-parallel", "1"], fault="amp-o1-fp16:0:hang")
    _wait_for(lambda: len(_jobs(_run_dir(tmp_path))) == 2, "the array submitted")
    run = _run_dir(tmp_path)
    task = _jobs(run)["fp32__seed0"]
    amp_log, fp32_log = run / "logs" / "amp-o1-fp16__seed0.log", run / "logs" / "fp32__seed0.log"
    # the AMP worker's own start event, not any of its events: counted before it was written (a loaded CI run),
    # the first attempt's START passed for the requeued one's and Ctrl-C came before the requeue ran anything
    _wait_for(lambda: _ok_file(run, "fp32__seed0") and amp_log.is_file()
              and START in amp_log.read_text(errors="replace"), "fp32 ok, the AMP arm started")
    first = _trial(run, "fp32__seed0")
    starts = amp_log.read_text(errors="replace").count(START)
    subprocess.run(["scontrol", "requeue", task], env=cluster.env, check=True)
    _eligible_now(cluster, task, requeued_at=time.time())
    _wait_for(lambda: amp_log.read_text(errors="replace").count(START) > starts, "the AMP arm started again")
    p.send_signal(signal.SIGINT)
    code, out = _finish(p, 90)
    assert code == 130, out
    assert "fp32__seed0 already ended ok in this array task" in fp32_log.read_text(errors="replace")
    assert _trial(run, "fp32__seed0") == first                   # main ran it again: a second measurement
    assert _scontrol(cluster, task)["Restarts"] == "1"


@pytest.mark.slow
def test_resume_with_slurmctld_down_says_so_in_one_line_and_stops_nothing_lost(cluster, tmp_path):  # noqa: F811
    """Issue 62: with slurmctld stopped, `--resume` waited with squeue warnings until interrupted (430 s). It now
    says in one line that the controller is unreachable and stops (exit 2) before it asks anything else: no job
    submitted or forgotten, the finished trial kept; started again, the controller's job is waited for."""
    p = _slurm_run(cluster, tmp_path, fault="amp-o1-fp16:0:hang")
    _wait_for(lambda: _ok_file(_run_dir(tmp_path), "fp32__seed0"), "fp32 done")
    run = _run_dir(tmp_path)
    jobs = _jobs(run)
    hung = jobs["amp-o1-fp16__seed0"]
    try:
        _wait_for(lambda: cluster.jobs().get(hung) == "RUNNING", f"job {hung} running")
        p.kill()          # ampbench gone (a lost session): the job stays in slurm.json, running
        p.communicate()
        state = (run / "slurm.json").read_text()
        cluster.stop_controller()
        t0 = time.monotonic()
        try:
            q = _ampbench(cluster, ["--resume", str(run), "--no-report"], tmp_path, fault="amp-o1-fp16:0:hang")
            code, out = _finish(q, 200)
            took = time.monotonic() - t0
        finally:
            cluster.start_controller()
        line = _one_line_error(out)
        assert code == 2 and "Slurm's controller (slurmctld) is unreachable" in line, out
        assert "ampbench run --resume" in line and "nothing was submitted" in line, line
        assert "warning:" not in out and took < 90, (took, out)
        assert (run / "slurm.json").read_text() == state and _ok_file(run, "fp32__seed0")
        assert not (run / "trials" / "amp-o1-fp16__seed0.json").exists()
        _wait_for(lambda: cluster.jobs().get(hung) == "RUNNING", f"job {hung} recovered by slurmctld", 60)
    finally:
        _scancel(cluster, *jobs.values())
