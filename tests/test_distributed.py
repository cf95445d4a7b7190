"""Data-parallel trials: 2 processes on CPU (gloo) under paddle.distributed.launch, for real.

The launches share one module fixture (each costs ~30 s of imports on 2 cores);
the helpers (command, failure attribution, process-tree kill, sharding) are tested directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest

from ampbench.config import ConfigError, DistributedConfig
from ampbench.core import protocol
from ampbench.engine.trials import launch_trial
from ampbench.launch import distributed, process
from ampbench.results import RunDir, Trial, load_trial
from ampbench.trial import replicas
from tests.conftest import TOY_SUITE
from tests.test_worker import spec_for

DP = """
[distributed]
nproc_per_node = 2
"""
FP16_ALLREDUCE_MODE = """
[[modes]]
name = "amp-o1-fp16ar"
level = "O1"
dtype = "float16"
fp16_allreduce = true
"""
STEPS = ["train.steps=6", "train.warmup_steps=1", "train.batch_size=16", "train.timeout_s=300"]


@pytest.fixture(scope="module")
def dp(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("dp")
    base = TOY_SUITE + FP16_ALLREDUCE_MODE
    (d / "dp.toml").write_text(base + DP)
    (d / "single.toml").write_text(base)
    run = RunDir(d / "run")
    single = RunDir(d / "single")
    jobs = {
        "ok": (d / "dp.toml", run, "fp32", 0, {}, {}),
        "crash": (d / "dp.toml", run, "fp32", 1, {"fault": "crash", "fault_step": 3}, {"AMPBENCH_FAULT_RANK": "1"}),
        "fp16ar": (d / "dp.toml", run, "amp-o1-fp16ar", 0, {}, {}),
        # one process, same per-device batch, grad_accum 2: the data a 2-rank step sees
        "accum2": (d / "single.toml", single, "fp32", 0, {}, {}),
    }

    def go(job):
        suite, r, mode, seed, kw, env = job
        overrides = STEPS + (["train.grad_accum=2"] if r is single else [])
        return launch_trial(spec_for(suite, r, mode, seed, overrides=overrides, **kw), r, env=env)

    def serially(keys):
        return {k: go(jobs[k]) for k in keys}

    # The three 2-rank launches go one after another (each picks its own free ports for gloo's store
    # and endpoints; launched together they could pick the same ones and meet the wrong peer), the
    # one-process reference beside them.
    with ThreadPoolExecutor(2) as ex:
        ranked = ex.submit(serially, ["ok", "crash", "fp16ar"])
        single_out = ex.submit(serially, ["accum2"])
        out = {**ranked.result(), **single_out.result()}
    out["_run"] = run
    return out


@pytest.mark.slow
def test_two_ranks_train_identical_weights(dp):
    t: Trial = dp["ok"]
    assert t.status == "ok", t.error
    d = t.distributed
    assert t.world_size == 2 and d["world_size"] == 2 and d["allreduce"] == "paddle.DataParallel"
    assert len(d["weight_digests"]) == 2 and d["weight_digests"][0] == d["weight_digests"][1]
    assert d["replicas_in_sync"] is True
    assert d["per_device_batch"] == 16 and d["global_batch"] == 32
    assert [s.samples for s in t.steps] == [32] * 6          # throughput counts both ranks' samples
    per_rank = t.memory.per_rank
    assert [m["rank"] for m in per_rank] == [0, 1] and all(m["rss_peak_bytes"] > 0 for m in per_rank)
    assert t.memory.rss_peak_bytes == max(m["rss_peak_bytes"] for m in per_rank)
    run: RunDir = dp["_run"]
    assert sorted(p.name for p in run.trials_dir.glob("*.json")) == sorted(
        f"{k}.json" for k in ("fp32__seed0", "fp32__seed1", "amp-o1-fp16ar__seed0"))  # rank 0 writes, alone
    ranks = run.logs_dir / "fp32__seed0.ranks"
    assert (ranks / "workerlog.0").is_file() and (ranks / "workerlog.1").is_file()


@pytest.mark.slow
def test_two_ranks_equal_one_process_accumulating_two(dp):
    """Rank r takes batches r, r+2, ...: a 2-rank step sees what grad_accum=2 sees in one process."""
    t, ref = dp["ok"], dp["accum2"]
    assert ref.status == "ok" and ref.world_size == 1 and ref.grad_accum == 2
    np.testing.assert_allclose([s.loss for s in t.steps], [s.loss for s in ref.steps], rtol=1e-5)
    for k in ("accuracy", "eval_loss"):
        assert t.metrics[k] == pytest.approx(ref.metrics[k], rel=1e-4, abs=1e-6)


@pytest.mark.slow
def test_crash_on_rank_1_is_the_trials_error(dp):
    t: Trial = dp["crash"]
    assert t.status == "crashed"
    assert t.error.startswith("rank 1 of 2 failed: RuntimeError: injected crash at step 3")
    assert "workerlog.1" in t.error and "Traceback" in t.log_tail  # the log tail is its own field
    assert [s.step for s in t.steps] == [1, 2]                # rank 0's steps before the crash, no repeats
    on_disk = load_trial(dp["_run"].trial_path("fp32", 1))
    assert on_disk.status == "crashed" and on_disk.error == t.error and on_disk.log_tail == t.log_tail


@pytest.mark.slow
def test_fp16_allreduce_compresses_gradients(dp):
    t, ref = dp["fp16ar"], dp["ok"]
    assert t.status == "ok", f"{t.error}\n{t.log_tail}"   # the rank's log tail: where it crashed
    d = t.distributed
    assert d["fp16_allreduce"] is True and d["allreduce"] == replicas.COMPRESSED
    assert d["replicas_in_sync"] is True
    assert list(d["comm_dtypes"]) == ["float16-rounded float32"] and "gloo" in d["note"]  # CPU: see GLOO_FP16_NOTE
    assert d["weight_digests"][0] != ref.distributed["weight_digests"][0]   # rounding really happened...
    assert t.metrics["eval_loss"] == pytest.approx(ref.metrics["eval_loss"], abs=0.05)  # ...and is small


# ---------------------------------------------------------------- helpers, no launch


def test_launch_command_wraps_worker():
    cfg = DistributedConfig(nproc_per_node=4, backend="nccl")
    cmd, env = distributed.launch_command(cfg, [sys.executable, "-m", "ampbench.trial.worker", "s.json"], Path("/x/ranks"))
    assert cmd[:3] == [sys.executable, "-m", "paddle.distributed.launch"]
    assert cmd[cmd.index("--nproc_per_node") + 1] == "4" and cmd[cmd.index("--log_dir") + 1] == "/x/ranks"
    assert cmd[-4:] == [sys.executable, "-m", "ampbench.trial.worker", "s.json"] and "--nnodes" not in cmd
    assert env["PADDLE_DISTRI_BACKEND"] == "nccl" and env[protocol.RANK_DIR_ENV] == "/x/ranks"
    multi = DistributedConfig(nproc_per_node=8, nnodes=2, master="10.0.0.1:8090")
    cmd, env = distributed.launch_command(multi, ["w"], Path("r"))
    assert cmd[cmd.index("--nnodes") + 1] == "2" and cmd[cmd.index("--master") + 1] == "10.0.0.1:8090"
    assert "PADDLE_DISTRI_BACKEND" not in env
    # no master in the suite: Slurm supplies one (the job's first node); by hand, --master does (a run
    # without either is refused before any run folder: test_hostile, test_multinode)
    with pytest.raises(ConfigError, match="master"):
        distributed.launch_command(DistributedConfig(nnodes=2), ["w"], Path("r"))
    cmd, _ = distributed.launch_command(DistributedConfig(nnodes=2), ["w"], Path("r"), node_rank=1, master="h:1")
    assert cmd[cmd.index("--rank") + 1] == "1" and cmd[cmd.index("--log_dir") + 1] == str(Path("r") / "node1")


def test_rank_failure_prefers_earliest_note_then_launcher_line(tmp_path):
    launcher = tmp_path / "launcher.log"
    launcher.write_text("LAUNCH ERROR Container failed !!!\nContainer rank 0 status failed cmd ['python'] code 1 log x\n")
    (tmp_path / "workerlog.1").write_text("line a\nTraceback (most recent call last):\nValueError: bad input on 1\n")
    assert distributed.rank_failure(tmp_path, launcher, 0, 2) is None
    # no notes: the launcher names rank 0
    f = distributed.rank_failure(tmp_path, launcher, 1, 2)
    assert f.rank == 0 and f.message.startswith("rank 0 of 2 failed: exit code 1")
    # rank 1 failed first, rank 0 followed in its next collective
    (tmp_path / "rank0.failure.json").write_text(json.dumps({"rank": 0, "time": 20.0, "status": "crashed",
                                                              "error": "RuntimeError: connection closed by peer"}))
    (tmp_path / "rank1.failure.json").write_text(json.dumps({"rank": 1, "time": 10.0, "status": "oom",
                                                              "error": "Traceback...\nValueError: bad input on 1"}))
    f = distributed.rank_failure(tmp_path, launcher, 1, 2)
    assert (f.rank, f.status) == (1, "oom")
    assert f.message.splitlines()[0] == "rank 1 of 2 failed: ValueError: bad input on 1"
    assert "workerlog.1" in f.message and "line a" in f.log_tail
    # a rank that aborted in a collective (gloo timeout) points at its peers
    (tmp_path / "workerlog.0").write_text("terminate called after throwing an instance of 'gloo::TimeoutException'\n")
    for note in tmp_path.glob("rank*.failure.json"):
        note.unlink()
    launcher.write_text("Container rank 0 status failed cmd ['python'] code -6 log x\n")
    f = distributed.rank_failure(tmp_path, launcher, 1, 2)
    assert f.message.startswith("rank 0 of 2 failed: signal SIGABRT (a collective timed out")


def test_rank_zero_file_relabelled_by_the_failing_rank(tmp_path):
    """Rank 0 finished (or died in a collective) but rank 1 failed: the trial is rank 1's failure."""
    from ampbench.results import atomic_write_json

    f = distributed.RankFailure(rank=1, status="crashed", message="rank 1 of 2 failed: boom")
    p = tmp_path / "t.json"
    atomic_write_json(p, Trial(suite="toy", workload="toy", mode="fp32", seed=0, status="ok",
                               metrics={"accuracy": 0.5}).to_json())
    t = distributed.apply_failure(p, f)
    assert (t.status, t.error, t.metrics) == ("crashed", "rank 1 of 2 failed: boom", {"accuracy": 0.5})
    assert load_trial(p).status == "crashed"
    atomic_write_json(p, Trial(suite="toy", workload="toy", mode="fp32", seed=0, status="crashed",
                               error="gloo: connection reset by peer").to_json())
    t = distributed.apply_failure(p, f)
    assert t.error.startswith("rank 1 of 2 failed: boom") and t.error.endswith("connection reset by peer")
    assert distributed.apply_failure(tmp_path / "missing.json", f) is None


def test_failure_note_written_only_in_a_launched_rank(tmp_path, monkeypatch):
    monkeypatch.setenv(protocol.RANK_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "1")
    replicas.write_failure_note("crashed", "x")
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "2")
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    replicas.write_failure_note("crashed", "RuntimeError: y")
    note = json.loads((tmp_path / "rank1.failure.json").read_text())
    assert note["rank"] == 1 and note["error"] == "RuntimeError: y"


def test_only_rank_zero_writes_and_faults_target_a_rank(monkeypatch):
    dp_suite = {"distributed": {"nproc_per_node": 2}}
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    assert not replicas.writes_trial(dp_suite)
    assert replicas.writes_trial({})                       # single process: stray env ignored
    monkeypatch.setenv(protocol.FAULT_RANK_ENV, "1")
    assert replicas.fault_applies()
    monkeypatch.setenv("PADDLE_TRAINER_ID", "0")
    assert replicas.writes_trial(dp_suite) and not replicas.fault_applies()


def test_every_nth_shards_a_stream_without_overlap():
    shards = [list(replicas._every_nth(iter(range(10)), r, 3)) for r in range(3)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_kill_tree_reaches_ranks_in_their_own_session():
    """paddle's launcher setsid()s every rank: killing its process group alone would orphan them."""
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
            "print(p.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(parent.stdout.readline())
    assert os.getpgid(child) != os.getpgid(parent.pid)
    t0 = time.monotonic()
    process.kill_tree(parent.pid, grace_s=2)
    parent.wait(timeout=5)
    deadline = time.monotonic() + 5
    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)
    assert time.monotonic() - t0 < 8
