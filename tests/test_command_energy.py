"""Energy in every command trial (issue 58.2): NVML samples the program's GPU before the measured window opens.

The worker opens NVML when a process's device event (the end of its step 1) arrives, on a thread of its own,
and tells the process once the first sample is taken; the hook waits for that word before its window opens.
The stub driver's nvmlInit takes 1 s (tests/fake_nvml.py, `init_delay_s`, [PER]): before, a window opened at
the end of step 1 (warmup_steps = 1) always started before NVML's first sample and energy was null. Numbers
are fixtures (the stub's 250 W), never measurements.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ampbench.core import protocol
from ampbench.trial.command_gpu import ProgramGpu, measured_window
from ampbench.trial.command_record import EventReader
from ampbench.workloads.command import HOOK_DIR
from tests.fake_nvml import Driver, FakeGpu, make_pynvml

ROOT = Path(__file__).resolve().parent.parent
PID = 4242
LATE = Driver(init_delay_s=1.0)


def _gpu_events(reader: EventReader, pid: int = PID) -> None:
    start = {"e": "start", "pid": pid, "rank": 0, "world": 1}
    dev = {"e": "device", "device": "gpu", "cuda_env": {"CUDA_VISIBLE_DEVICES": "0"}, "pci_bus_id": "0000:1B:00.0"}
    reader.ingest(pid, json.dumps(start).encode() + b"\n" + json.dumps(dev).encode())


def test_the_worker_says_a_gpu_is_sampled_only_after_nvmls_first_sample(monkeypatch):
    """nvmlInit takes 1 s: the word comes after it, on the opening thread (the pump is never held up), and a
    window opened after the word has energy."""
    nv = make_pynvml([FakeGpu(index=0, uuid="GPU-0", bus_id="00000000:1B:00.0", pids={PID: 2**30})], LATE)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    words: list[tuple[int, bytes, float]] = []
    gpu = ProgramGpu(PID, pids=lambda: {PID}, ack=lambda pid, w: words.append((pid, w, time.perf_counter())))
    reader = EventReader()
    _gpu_events(reader)
    t0 = time.perf_counter()
    gpu.see(reader.procs.values())
    assert time.perf_counter() - t0 < 0.5          # handed to the opening thread
    while not words and time.perf_counter() - t0 < 10:
        time.sleep(0.01)
    ((pid, word, at),) = words
    assert pid == PID and word == protocol.NVML_SAMPLING and at - t0 >= 1.0
    (poller,) = gpu.pollers.values()
    assert poller.s.timeline and poller.s.timeline[0][0] <= at    # the first sample came before the word
    time.sleep(0.05)
    window = (at + 0.001, time.perf_counter())
    got = gpu.fields(window, [])
    assert got["energy_j"] is not None and got["energy_j"] > 0 and "nvml.window" not in got["errors"]


def test_a_window_that_opened_before_the_first_sample_says_so(monkeypatch):
    """The hook gave up waiting: energy null with the honest reason, never a silent null."""
    nv = make_pynvml([FakeGpu(index=0, uuid="GPU-0", bus_id="00000000:1B:00.0")], LATE)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    gpu = ProgramGpu(PID, pids=lambda: {PID})
    reader = EventReader()
    opened = time.perf_counter()
    _gpu_events(reader)
    gpu.see(reader.procs.values())
    time.sleep(1.3)
    got = gpu.fields((opened, time.perf_counter()), [])
    assert got["energy_j"] is None
    assert got["errors"]["nvml.window"].startswith("n/a: NVML started after the window: its first sample came 1.")


def test_a_worker_without_nvml_answers_at_once(monkeypatch):
    """No NVML here: the process is told `none` (its hook does not wait out NVML_WAIT_S), the reason recorded."""
    nv = make_pynvml([FakeGpu(index=0, uuid="GPU-0", bus_id="00000000:1B:00.0")], library=False)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    words: list[bytes] = []
    gpu = ProgramGpu(PID, pids=lambda: {PID}, ack=lambda pid, w: words.append(w))
    reader = EventReader()
    _gpu_events(reader)
    gpu.see(reader.procs.values())
    gpu.stop()
    assert words == [protocol.NVML_NONE] and "NVML unavailable" in gpu.errors["nvml"]


def _hook_state(sock: socket.socket):
    sys.path.insert(0, str(HOOK_DIR))
    try:
        from _ampbench_hook import device, state
    finally:
        sys.path.remove(str(HOOK_DIR))
    st = state.State(sock)
    st.ordinal = 0
    return device, st


def test_the_hook_waits_for_the_workers_word_before_its_window_opens(monkeypatch):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        device, st = _hook_state(ours)
        threading.Timer(0.5, lambda: theirs.send(protocol.NVML_SAMPLING)).start()
        t0 = time.perf_counter()
        device.wait_for_sampling(st)
        assert time.perf_counter() - t0 >= 0.45 and st.nvml_word == protocol.NVML_SAMPLING and not st.pending
        device.wait_for_sampling(st)          # once: a later window (none) never waits again
        st.nvml_word, st.ordinal = None, None
        device.wait_for_sampling(st)          # on CPU nothing is waited for
        assert st.nvml_word is None
        st.ordinal = 0
        monkeypatch.setattr(device.protocol, "NVML_WAIT_S", 0.2)
        device.wait_for_sampling(st)          # a worker that never answers: the wait ends, and says so
        assert st.nvml_word == b"" and st.pending[-1]["where"] == "nvml-wait"


PROGRAM = r'''
import importlib, os, sys
from pathlib import Path
import paddle
from _pytest.monkeypatch import MonkeyPatch
from tests.fake_cuda import Machine, a100_gpus, install_machine

amp, tmp = sys.argv[1] == "amp", Path(sys.argv[2])
install_machine(MonkeyPatch(), Machine("one", a100_gpus(1)), tmp)
os.environ["AMPBENCH_HOOK_SOCKET"] = os.environ.pop("TEST_HOOK_SOCKET")
import sitecustomize
importlib.reload(sitecustomize)
paddle.set_device("gpu")
m = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=m.parameters())
for i in range(8):
    with paddle.amp.auto_cast(enable=amp, level="O1"):
        loss = m(paddle.ones([4, 8])).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
'''


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["fp32", "amp"])
def test_a_fast_program_with_one_warm_up_step_records_energy_in_both_arms(tmp_path, monkeypatch, arm):
    """For real: the hook in a program on the fake GPU build (tests/fake_cuda.py), the worker's own pump and
    channel, NVML starting 1 s late; 8 steps of a few ms, warmup_steps = 1."""
    from ampbench.results import RunDir
    from ampbench.trackers.load import LoadSamples
    from ampbench.trial.command import _pump
    from ampbench.trial.command_finish import nvml_fields
    from ampbench.trial.context import Events, TrialContext
    from tests.fake_cuda import a100_gpus
    from tests.test_command import hook_channel, suite_text
    from tests.test_worker import spec_for

    nv = make_pynvml(a100_gpus(1), LATE)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    (tmp_path / "suite.toml").write_text(suite_text(amp=False, steps=8))
    tr = TrialContext(spec_for(tmp_path / "suite.toml", RunDir(tmp_path / "run")), Events(None))
    (tmp_path / "p.py").write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOK_DIR), str(ROOT)]), "AMPBENCH_HOOK_WARMUP": "1"}
    env.pop("AMPBENCH_HOOK_SOCKET", None)
    with hook_channel() as channel:
        env["TEST_HOOK_SOCKET"] = next(iter(channel.env().values()))
        proc = subprocess.Popen([sys.executable, str(tmp_path / "p.py"), arm, str(tmp_path)], env=env,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        reader = EventReader(channel)
        gpu = ProgramGpu(proc.pid, ack=channel.reply)
        _pump(tr, proc, reader, 4, gpu, LoadSamples(os.getpid()))
        out = proc.stdout.read().decode() if proc.stdout else ""
        assert proc.wait() == 0, out
    reader.poll()
    (lead,) = reader.stepping()
    assert lead.device is not None and lead.device.device == "gpu"
    assert len(lead.steps) == 8 and not lead.errors, (lead.errors, out)
    window, _ = measured_window(lead.steps, 1)
    assert window is not None
    tr.trial.memory.errors = {}
    nvml_fields(tr, gpu, lead.steps, 1)
    m = tr.trial.memory
    assert m.energy_j is not None and m.energy_j > 0, m.errors
    assert "nvml.window" not in m.errors
