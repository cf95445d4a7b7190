"""A multi-node data-parallel trial started by hand: `run --master HOST:PORT --node-rank R` on each node.

Two node ranks on this host (gloo on CPU), each a real `ampbench run` process with one rank, against the
same suite on one node with two processes: the 2-node trial ends ok, node 0 records both ranks' step
times, hosts and memory, and its losses equal the 1-node 2-process trial's (the same global batches).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from tests.conftest import TOY_SUITE

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--mode", "fp32", "--no-report", "--set", "train.steps=6", "--set", "train.warmup_steps=1",
        "--set", "train.batch_size=16", "--set", "train.timeout_s=300"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cwd: Path, suite: str, out: str, extra: list[str]) -> subprocess.Popen[str]:
    (cwd / f"{out}.toml").write_text(TOY_SUITE + suite)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AMPBENCH_CACHE": str(cwd / "cache"), "COLUMNS": "200",
           "AMPBENCH_FAULT": ""}
    return subprocess.Popen([sys.executable, "-m", "ampbench.cli", "run", f"{out}.toml", "--out", out, *ARGS, *extra],
                            cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _trial(cwd: Path, out: str) -> dict:
    return json.loads(next((cwd / out).glob("toy/*/trials/fp32__seed0.json")).read_text())


@pytest.mark.slow
def test_two_node_ranks_on_this_host_train_as_the_one_node_two_process_trial(tmp_path):
    master = f"127.0.0.1:{_port()}"
    two_nodes = '\n[distributed]\nnnodes = 2\nnproc_per_node = 1\nbackend = "gloo"\n'
    one_node = '\n[distributed]\nnproc_per_node = 2\nbackend = "gloo"\n'
    procs = {
        "node0": _run(tmp_path, two_nodes, "node0", ["--master", master, "--node-rank", "0"]),
        "node1": _run(tmp_path, two_nodes, "node1", ["--master", master, "--node-rank", "1"]),
        "single": _run(tmp_path, one_node, "single", []),
    }
    outs = {k: p.communicate(timeout=400)[0] for k, p in procs.items()}
    assert procs["node1"].returncode == 0 and "node rank done" in outs["node1"], outs["node1"]
    assert not list((tmp_path / "node1").glob("toy/*/trials/*.json"))  # node 0 records the trial
    t, ref = _trial(tmp_path, "node0"), _trial(tmp_path, "single")
    assert t["status"] == "ok" and ref["status"] == "ok", (t.get("error"), outs["node0"])
    d = t["distributed"]
    assert d["world_size"] == 2 and d["nnodes"] == 2 and d["replicas_in_sync"] is True
    assert [r["rank"] for r in d["per_rank"]] == [0, 1]
    assert all(len(r["step_s"]) == 6 and all(x > 0 for x in r["step_s"]) and r["host"] for r in d["per_rank"])
    assert [m["rank"] for m in t["memory"]["per_rank"]] == [0, 1]
    assert all(m["rss_peak_bytes"] for m in t["memory"]["per_rank"])
    assert [s["loss"] for s in t["steps"]] == pytest.approx([s["loss"] for s in ref["steps"]], rel=1e-6, abs=1e-7)


def test_a_multi_node_suite_without_a_master_is_refused_before_any_folder(tmp_path):
    (tmp_path / "toy.toml").write_text(TOY_SUITE + "\n[distributed]\nnnodes = 2\n")
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "nnodes = 2" in r.output and "--master" in r.output, r.output
    r = CliRunner().invoke(app, ["run", str(tmp_path / "toy.toml"), "--out", str(tmp_path / "out"),
                                 "--master", "127.0.0.1:1234", "--node-rank", "2"])
    assert r.exit_code == 2 and "--node-rank" in r.output and "0..1" in r.output, r.output
    assert not (tmp_path / "out").exists()
