"""Data parallel with BatchNorm (issue 30, item 1): the bundled suites whose models have BatchNorm
(resnet, ocr) run their cpu profile on 2 ranks (gloo) through the real CLI and end ok.

DataParallel keeps the trainable parameters equal (it all-reduces their gradients); BatchNorm's
running statistics are broadcast once at construction and then follow each rank's own shard
(paddle/distributed/parallel.py, sync_params_buffers). Before this fix every such trial ended
`crashed` ("ranks finished with different weights"). Both runs go concurrently in one module fixture
and are cut to a few steps and a small data set (--set), fp32 plus one AMP mode for ocr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHORT = ["--set", "distributed.nproc_per_node=2", "--set", "train.steps=3", "--set", "train.warmup_steps=1",
         "--seeds", "0", "--no-report"]
RUNS = {
    "resnet": ["--mode", "fp32", "--set", "train.batch_size=16", "--set", "workload.dataset.limit=400"],   # 80 held out
    "ocr": ["--set", "workload.dataset.images=16", "--set", "workload.dataset.eval_images=4"],   # fp32 and O2
}


@pytest.fixture(scope="module")
def bn_runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, list[dict]]]:
    d = tmp_path_factory.mktemp("dp-bn")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AMPBENCH_CACHE": str(d / "cache"), "COLUMNS": "200"}
    env.pop("AMPBENCH_FAULT", None)

    def go(suite: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
        out = d / suite
        cmd = [sys.executable, "-c", "from ampbench.cli import main; main()", "run", suite, "--profile", "cpu",
               "--out", str(out), *SHORT, *RUNS[suite]]
        r = subprocess.run(cmd, env=env, cwd=d, capture_output=True, text=True, timeout=600, check=False)
        return r, [json.loads(p.read_text()) for p in sorted(out.glob(f"{suite}/*/trials/*.json"))]

    with ThreadPoolExecutor(len(RUNS)) as ex:
        return dict(zip(RUNS, ex.map(go, RUNS), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("suite,modes", [("resnet", {"fp32"}), ("ocr", {"fp32", "amp-o2-fp16"})])
def test_bundled_batchnorm_suites_run_data_parallel_on_cpu_with_every_trial_ok(bn_runs, suite, modes):
    r, trials = bn_runs[suite]
    assert r.returncode in (0, 1, 3), r.stdout + r.stderr     # never 2 (a crashed trial is an ERROR)
    assert {t["mode"] for t in trials} == modes
    for t in trials:
        assert t["status"] == "ok", t["error"]
        d = t["distributed"]
        assert t["world_size"] == 2 and d["allreduce"] == "paddle.DataParallel"
        assert d["replicas_in_sync"] is True and len(set(d["weight_digests"])) == 1
        # the running statistics are each rank's own: reported, never a failure
        assert len(d["buffer_digests"]) == 2 and all(d["buffer_digests"])
        assert d["buffers_in_sync"] is (d["buffer_digests"][0] == d["buffer_digests"][1])
        assert [m["rank"] for m in t["memory"]["per_rank"]] == [0, 1]
        # O2 with data parallel: the built-in loop decorates, then wraps (Paddle's AMP guide; issue 35)
        assert t["amp"]["decorate_order"] == ("decorate-first" if t["mode"] == "amp-o2-fp16" else "")


def test_digests_compare_trainable_parameters_and_report_buffers_apart():
    """A rank whose BatchNorm statistics moved has the same weight digest and another buffer digest;
    a trainable parameter that moved changes the weight digest."""
    import paddle

    from ampbench.trial.replicas import buffer_digest, weight_digest

    paddle.seed(0)
    net = paddle.nn.Sequential(paddle.nn.Conv2D(1, 2, 3), paddle.nn.BatchNorm2D(2))
    w, b = weight_digest(net), buffer_digest(net)
    net[1]._mean.set_value(paddle.ones([2]))          # what a forward in train mode does on one rank's shard
    assert weight_digest(net) == w and buffer_digest(net) != b
    net[0].weight.set_value(net[0].weight + 1.0)
    assert weight_digest(net) != w
    assert buffer_digest(paddle.nn.Linear(2, 2)) == ""   # no buffers: nothing to report
