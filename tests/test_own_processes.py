"""Issue 43.3: ampbench's own processes on the GPU are never foreign, and tune's bf16 capability probe
runs in a short-lived child, so the tune process holds no CUDA context over its rung trials.

Real processes (the test is the ampbench process; a probe child; a trial worker; a trial beside it),
the real nvidia-ml-py over the stub driver (tests/fake_nvml.py) listing each of their pids on the GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ampbench.core.processes import WORKER_ENV
from ampbench.core.protocol import PARENT_ENV, process_token

ROOT = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent("""
    import json, os, sys, time
    from tests.fake_cuda import a100_gpus
    from tests.fake_nvml import GIB, make_pynvml
    from ampbench.trackers import nvml
    listed = [int(p) for p in sys.argv[1:]]
    gpus = a100_gpus()                      # this worker on GPU 0 with 5 GiB
    for pid in listed:
        gpus[0].pids[pid] = GIB             # every other pid NVML reports on the same GPU
    nv = make_pynvml(gpus)
    nv.nvmlInit()
    dev = nvml.resolve(nv, {}, "00000000:07:00.0")
    poller = nvml.Poller(nv, dev, interval_s=0.02).start()
    time.sleep(0.2)
    out = poller.stop()
    print(json.dumps({"foreign": out["interference"]["foreign_processes"], "source": out["device_used_source"]}))
""")


def _sleeper(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)


def test_the_ampbench_process_and_its_probe_are_not_foreign_a_trial_beside_it_and_a_stranger_are():
    base = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe = _sleeper({k: v for k, v in base.items() if k != WORKER_ENV})            # tune's probe child
    beside = _sleeper({**base, WORKER_ENV: "other-trial"})                          # another trial's worker
    try:
        env = {**base, PARENT_ENV: process_token(os.getpid()), WORKER_ENV: "this-trial"}
        stranger = os.getppid()      # a live process outside ampbench's tree (the one that started the tests)
        pids = [os.getpid(), probe.pid, beside.pid, stranger, 999_999_999]
        out = subprocess.run([sys.executable, "-c", WORKER, *map(str, pids)], env=env, capture_output=True,
                             text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for p in (probe, beside):
            p.kill()
            p.wait()
    assert got["source"] == "nvml-process"
    # the tune process (AMPBENCH_PARENT) and its probe child are ampbench's own; the trial beside this one,
    # a process outside ampbench and a pid no process has are what the speed rule must hear about
    assert got["foreign"] == sorted([beside.pid, stranger, 999_999_999]), (got, pids)


@pytest.mark.slow
def test_tunes_bf16_probe_runs_in_a_child_and_the_tune_process_never_imports_paddle_for_it():
    """The probe's answer comes from a child; the asking process has no Paddle (so no CUDA context) after."""
    code = ("import sys; from ampbench.trackers import device; ok = device.amp_supported_in_child('bfloat16'); "
            "print(ok, 'paddle' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"], out.stdout   # CPU build: bf16 AMP is a no-op; no paddle here


def test_a_failing_or_hanging_probe_child_answers_false(monkeypatch):
    from ampbench.trackers import capability

    monkeypatch.setattr(capability, "_CHILD_PROBE", "import sys; print('@@probe works'); sys.exit(1)")
    assert capability.amp_works_in_child("bfloat16") is False
    monkeypatch.setattr(capability, "_CHILD_PROBE", "print('@@probe works')")
    assert capability.amp_works_in_child("bfloat16") is True       # the parsing path, on a stated answer
    monkeypatch.setattr(capability, "_CHILD_PROBE", "import time; time.sleep(30)")
    assert capability.amp_works_in_child("bfloat16", timeout_s=1.0) is False


def test_gpu_busy_leaves_out_the_reading_taken_before_the_window():
    """Issue 43.6: NVML's utilization.gpu covers its past sample period, so the sample taken as the window
    opens describes what ran before it (here: a 100% busy GPU, idle at 10% once the window is open)."""
    import time

    from ampbench.trackers import nvml
    from tests.fake_cuda import a100_gpus
    from tests.fake_nvml import make_pynvml

    gpus = a100_gpus()
    gpus[0].busy_pct = 100
    nv = make_pynvml(gpus)
    nv.nvmlInit()
    poller = nvml.Poller(nv, nvml.resolve(nv, {}, "00000000:07:00.0"), interval_s=0.02).start()
    gpus[0].busy_pct = 10
    time.sleep(0.2)
    out = poller.stop()
    nv.nvmlShutdown()
    assert out["interference"]["gpu_busy_pct"] == 10.0
