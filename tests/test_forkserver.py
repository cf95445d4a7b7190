"""The run's fork server (launch/forkserver.py): trial workers forked from one Paddle import are workers like
spawned ones (the same losses, ampbench's children in sessions of their own, marked, gone with ampbench),
and a worker the server's import does not fit is spawned.

Real processes throughout: the real server, real toy trials, a real process tree for the marker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ampbench.core.processes import MARKER_PLACEHOLDER, WORKER_ENV, end_descendants, worker_marker
from ampbench.engine import execute as execute_module
from ampbench.engine.execute import Policies, execute
from ampbench.engine.request import Output, RunRequest
from ampbench.launch import forkserver
from ampbench.launch.forkserver import SWITCH_ENV, ForkedWorker, ForkServer

ROOT = Path(__file__).resolve().parent.parent


def _losses(run: Path) -> dict[str, list[float]]:
    return {p.stem: [s["loss"] for s in json.loads(p.read_text())["steps"]] for p in sorted(run.glob("trials/*.json"))}


def _run(out: str) -> Path:
    code = execute(RunRequest(suite_file=Path("toy.toml"), out_dir=Path(out), seeds="0"),
                   Policies(output=Output(report=False, judge=False)), Console(quiet=True))
    assert code == 0
    return next(Path(out).glob("toy/*/run.json")).parent


@pytest.mark.slow
def test_forked_workers_train_the_same_losses_as_spawned_ones(work: Path, toy_suite: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    toy_suite(name="toy.toml")
    started: list[Any] = []

    class Watched(ForkServer):
        def start(self, cmd: list[str], env: dict[str, str], log: Any) -> ForkedWorker | None:
            got = super().start(cmd, env, log)
            started.append(got if got is not None else self.why_not or "spawned")
            return got

    monkeypatch.setattr(execute_module, "ForkServer", Watched)
    forked = _losses(_run("forked"))
    assert len(started) == 2 and all(isinstance(w, ForkedWorker) for w in started), started
    started.clear()
    monkeypatch.setenv(SWITCH_ENV, "0")
    spawned = _losses(_run("spawned"))
    assert started == [f"{SWITCH_ENV}=0"] * 2
    assert forked == spawned and set(forked) == {"fp32__seed0", "amp-o1-fp16__seed0"}
    assert all(len(v) == 12 for v in forked.values())


def _hanging_run(work: Path, toy_suite: Any) -> tuple[subprocess.Popen, Path]:
    p = toy_suite(name="toy.toml")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AMPBENCH_FAULT": "fp32:0:hang"}
    proc = subprocess.Popen([sys.executable, "-m", "ampbench.cli", "run", str(p), "--out", "runs", "--no-report"],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        runs = list(work.glob("runs/toy/*/logs/fp32__seed0.log"))
        if runs and len(_forked(proc.pid)) == 2:
            time.sleep(1.0)
            return proc, runs[0].parents[1]
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the hanging trial never started")


def _children(pid: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _forked(pid: int) -> list[int]:
    """`pid`'s children on the fork server's command line: the server and the workers forked from it."""
    found = []
    for k in _children(pid):
        try:
            if b"ampbench.launch.forkserver" in Path(f"/proc/{k}/cmdline").read_bytes():
                found.append(k)
        except OSError:
            continue
    return found


def _marker(pid: int) -> str:
    env = dict(e.split("=", 1) for e in (Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
                                         .split("\0")) if "=" in e)
    return env.get(WORKER_ENV, "")


@pytest.mark.slow
def test_a_forked_worker_is_ampbenchs_own_child_marked_in_its_session_and_dies_with_it(work: Path,
                                                                                      toy_suite: Any) -> None:
    proc, run = _hanging_run(work, toy_suite)
    try:
        kids = _forked(proc.pid)
        cmdlines = {k: Path(f"/proc/{k}/cmdline").read_bytes().split(b"\0") for k in kids}
        assert all(b"ampbench.launch.forkserver" in c and str(run).encode() in c for c in cmdlines.values()), cmdlines
        markers = {k: _marker(k) for k in kids}
        server = [k for k, m in markers.items() if m == MARKER_PLACEHOLDER]
        worker = [k for k, m in markers.items() if m != MARKER_PLACEHOLDER]
        assert len(server) == 1 and len(worker) == 1, markers
        w = worker[0]
        assert markers[w].startswith(f"{proc.pid:07d}-") and len(markers[w]) == len(MARKER_PLACEHOLDER)
        assert os.getsid(w) == w and os.getsid(server[0]) == server[0]     # sessions of their own
        assert _children(w) == [] or all(_marker(c) == markers[w] for c in _children(w))
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{k}").exists() and "Z" not in Path(f"/proc/{k}/stat").read_text().split()[2]
              for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    gone = [k for k in kids if not Path(f"/proc/{k}").exists() or Path(f"/proc/{k}/stat").read_text().split()[2] == "Z"]
    assert sorted(gone) == sorted(kids)
    assert not (run / "trials" / "fp32__seed0.json").exists()


FORKING_CHILD = textwrap.dedent("""
    import os, sys, time
    from ampbench.launch.forkserver import _write_marker
    _write_marker(sys.argv[1])
    if os.fork() == 0:          # a child forked without exec, as Paddle's DataLoader workers are
        time.sleep(60)
        os._exit(0)
    print("forked", flush=True)
    time.sleep(60)
""")


def test_the_marker_written_in_place_is_what_a_child_forked_without_exec_shows_and_is_found_by(tmp_path) -> None:
    marker = worker_marker()
    env = {**os.environ, "PYTHONPATH": str(ROOT), WORKER_ENV: MARKER_PLACEHOLDER}
    p = subprocess.Popen([sys.executable, "-c", FORKING_CHILD, marker], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "forked"
        assert _marker(p.pid) == marker
        (child,) = _children(p.pid)
        assert _marker(child) == marker
        killed = end_descendants(os.getpid(), (WORKER_ENV, marker))
        assert {int(k.split()[0]) for k in killed} == {p.pid, child}
    finally:
        p.kill()
        p.wait()


@pytest.mark.slow   # a server importing Paddle: ~2.5 CPU s in a child
def test_a_worker_the_servers_import_does_not_fit_is_spawned(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Paddle reads FLAGS_* (and CUDA_VISIBLE_DEVICES, OMP_*, ...) when imported: a worker whose environment
    adds one, or runs in another folder, is not forked from a server that imported Paddle without it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "missing.json"      # the forked worker fails at once: what matters is who started it
    cmd = [sys.executable, "-m", "ampbench.trial.worker", str(spec)]
    with ForkServer("test", "toy") as forks, open(tmp_path / "log", "w") as log:
        first = forks.start(cmd, {WORKER_ENV: worker_marker()}, log)
        assert isinstance(first, ForkedWorker) and first.wait(timeout=60) == 1
        assert forks.start(cmd, {WORKER_ENV: worker_marker(), "FLAGS_use_mkldnn": "0"}, log) is None
        assert forks.start(cmd, {WORKER_ENV: "short-marker"}, log) is None
        assert forks.start([sys.executable, "-m", "ampbench.cli", "run"], {WORKER_ENV: worker_marker()}, log) is None
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")
        assert forks.start(cmd, {WORKER_ENV: worker_marker()}, log) is None
        assert forks.why_not == ""       # each of those spawned; the server still serves
        monkeypatch.chdir(tmp_path)
        again = forks.start(cmd, {WORKER_ENV: worker_marker()}, log)
        assert isinstance(again, ForkedWorker) and again.wait(timeout=60) == 1
    assert "FileNotFoundError" in (tmp_path / "log").read_text()


@pytest.mark.parametrize("lacks", ["is_compiled_with_cuda", "is_compiled_with_rocm", "is_compiled_with_xpu"])
def test_a_paddle_built_for_an_accelerator_is_never_forked_from(monkeypatch: pytest.MonkeyPatch, lacks: str) -> None:
    """What the CPU build lacks, replaced: its is_compiled_with_* answers as a GPU (ROCm, XPU) build's would."""
    import paddle

    assert forkserver._accelerator() is False
    monkeypatch.setattr(paddle, lacks, lambda: True)
    assert forkserver._accelerator() is True


@pytest.mark.slow   # a server importing Paddle: ~2.5 CPU s in a child
def test_a_server_that_says_accelerator_leaves_every_worker_spawned(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The hello of a server whose Paddle is a GPU build (forkserver._accelerator replaced in the server by a
    sitecustomize: what the CPU build lacks) closes it; every worker is spawned and the reason kept."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import ampbench.launch.forkserver as f\nf._accelerator = lambda: True\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{ROOT}")
    cmd = [sys.executable, "-m", "ampbench.trial.worker", str(tmp_path / "missing.json")]
    with ForkServer("test", "toy") as forks, open(tmp_path / "log", "w") as log:
        assert forks.start(cmd, {WORKER_ENV: worker_marker()}, log) is None
        assert "accelerator" in forks.why_not
        assert forks.start(cmd, {WORKER_ENV: worker_marker()}, log) is None


def test_the_server_ends_when_the_run_closes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cmd = [sys.executable, "-m", "ampbench.trial.worker", str(tmp_path / "missing.json")]
    forks = ForkServer("test", "command")     # a command workload's server: no Paddle imported
    with open(tmp_path / "log", "w") as log:
        w = forks.start(cmd, {WORKER_ENV: worker_marker()}, log)
    assert isinstance(w, ForkedWorker) and w.wait(timeout=60) == 1
    server = forks._proc
    assert server is not None and server.poll() is None
    forks.close()
    assert server.returncode == 0      # it left on its own when the socket closed, not killed


def test_on_a_gpu_machine_a_model_workloads_workers_are_spawned_a_command_workloads_forked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a GPU here (trackers.cuda.has_gpu_cheap: nvidia-smi or the driver's device nodes, replaced: what
    this machine lacks) a model workload's server imports no Paddle and every worker is spawned; a command
    workload's server imports no Paddle either way, so its workers (which start the user's program) are forked."""
    monkeypatch.setattr(forkserver, "has_gpu_cheap", lambda: True)
    monkeypatch.chdir(tmp_path)
    cmd = [sys.executable, "-m", "ampbench.trial.worker", str(tmp_path / "missing.json")]
    with open(tmp_path / "log", "w") as log:
        with ForkServer("test", "toy") as forks:
            assert forks.start(cmd, {WORKER_ENV: worker_marker()}, log) is None
            assert "accelerator" in forks.why_not
        with ForkServer("test", "command") as forks:
            w = forks.start(cmd, {WORKER_ENV: worker_marker()}, log)
            assert isinstance(w, ForkedWorker) and w.wait(timeout=60) == 1


GC_PROBE = """
import gc, json, os, socket, sys
from ampbench.core.processes import WORKER_ENV, become_subreaper
from ampbench.launch import forkserver
from ampbench.trial import worker

out = sys.argv[1]
assert become_subreaper()
mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
server = os.fork()
if server == 0:   # the real serve, _fork_worker and _become_worker; no Paddle, no marker block, main replaced
    mine.close()
    forkserver._preload = lambda workload, gpu_machine: False
    forkserver._write_marker = lambda marker: None
    worker.main = lambda argv: json.dump({"worker_gc": gc.isenabled(), "frozen": gc.get_freeze_count()},
                                         open(out, "w")) or 0
    os._exit(forkserver.serve(theirs.fileno()))
theirs.close()
hello, _ = forkserver._recv(mine)
r, w = os.pipe()
with open(os.devnull, "rb") as null:
    forkserver._send(mine, {"spec": "x.json", "env": {**os.environ, WORKER_ENV: "m"}, "cwd": os.getcwd(),
                            "parent": os.getpid()}, [null.fileno(), w, 2])
reply, _ = forkserver._recv(mine)
os.close(w)
_, status = os.waitpid(reply["pid"], 0)
mine.close()
os.waitpid(server, 0)
print(json.dumps({"hello": hello, "code": os.waitstatus_to_exitcode(status)}))
"""


def test_the_server_freezes_its_objects_and_the_forked_worker_collects_its_own(tmp_path: Path) -> None:
    """gc's recipe for a server that forks without exec: the collector off in the server, its objects frozen
    before the fork, on again in the worker (which then neither walks nor writes the server's objects)."""
    out = tmp_path / "gc.json"
    done = subprocess.run([sys.executable, "-c", GC_PROBE, str(out)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"hello": {"accelerator": False}, "code": 0}
    seen = json.loads(out.read_text())
    assert seen["worker_gc"] is True and seen["frozen"] > 1000, seen
