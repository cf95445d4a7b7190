"""NVML for command trials (issue 21): the worker polls the GPU the program's processes report, matching
the program's process tree, and cuts energy and memory to the hook's measured window; on CPU nothing
NVML is opened or recorded. Worker-side units against the fake pynvml of tests/fake_cuda.py (the
numbers are fixtures, never measurements)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ampbench.record.wire import StepEvent
from ampbench.results import RunDir
from ampbench.trackers import nvml
from ampbench.trackers.energy_window import counter_at, window_energy_j, window_peaks
from ampbench.trial.command import Output
from ampbench.trial.command_finish import finish_command
from ampbench.trial.command_gpu import ProgramGpu, TreePids, measured_window
from ampbench.trial.command_record import EventReader, Ran
from ampbench.trial.context import Events, TrialContext
from ampbench.workloads.command.params import CommandParams
from ampbench.workloads.command.presets import LogScan
from tests.fake_cuda import GIB, FakeGpu, make_pynvml
from tests.test_command import suite_text
from tests.test_worker import spec_for

ROOT_PID, RANK_PID, FOREIGN_PID = 4242, 4243, 999_999


def _gpus() -> list[FakeGpu]:
    """GPU 0 runs the program (its launcher-started rank too) beside a foreign process; GPU 1 is idle."""
    return [FakeGpu(index=0, uuid="GPU-0", bus_id="00000000:1B:00.0", used=9 * GIB,
                    pids={ROOT_PID: GIB, RANK_PID: 2 * GIB, FOREIGN_PID: 3 * GIB}),
            FakeGpu(index=1, uuid="GPU-1", bus_id="00000000:1C:00.0", used=GIB, pids={})]


def test_poller_matches_a_pid_set_and_sums_its_memory():
    nv = make_pynvml(_gpus())
    nv.nvmlInit()
    dev = nvml.resolve(nv, {}, "0000:1b:00.0")
    out = nvml.Poller(nv, dev, pid=ROOT_PID, pids=lambda: {ROOT_PID, RANK_PID}, interval_s=0.01).start().stop()
    assert out["device_used_bytes"] == 3 * GIB and out["device_used_source"] == nvml.PROCESS
    assert out["interference"]["foreign_processes"] == [FOREIGN_PID]
    assert nvml.PID_NOTE not in out["nvml_errors"]


def test_window_energy_is_interpolated_at_its_bounds_and_evaluations_are_left_out():
    tl = [(0.0, 1000.0, GIB, 5 * GIB), (1.0, 3000.0, 2 * GIB, 6 * GIB), (2.0, 5000.0, 4 * GIB, 8 * GIB),
          (3.0, 7000.0, GIB, 5 * GIB)]
    assert counter_at([(t, e) for t, e, _, _ in tl], 0.5) == 2000.0
    assert window_energy_j(tl, 0.5, 2.5) == pytest.approx(4.0)              # 6000 - 2000 mJ
    assert window_energy_j(tl, 0.5, 2.5, [(1.0, 1.5)]) == pytest.approx(3.0)  # an evaluation's 1 J out
    assert window_energy_j(tl, -1.0, 2.0) is None                           # a bound before the first sample
    assert window_peaks(tl, 0.5, 2.5) == (4 * GIB, 8 * GIB)


def test_measured_window_runs_from_the_first_measured_steps_start_to_the_last_steps_end():
    steps = [StepEvent(step=i, t=0.5, at=10.0 + i, eval_s=0.0) for i in range(1, 6)]
    steps[3].eval_s, steps[3].evals = 0.25, [[13.4, 13.65]]
    window, gaps = measured_window(steps, warmup=2)
    assert window == (12.5, 15.0) and gaps == [(13.4, 13.65)]
    assert measured_window([StepEvent(step=1, t=0.5)], warmup=0) == (None, [])   # no time: no window


def test_tree_pids_list_the_program_and_its_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert {os.getpid(), child.pid} <= TreePids(os.getpid())()
    finally:
        child.kill()
        child.wait()


def _start_event(reader: EventReader, device: str) -> None:
    """The start event a program's hook sends once its `import paddle` finished, and the device event
    it sends at the end of the first step."""
    start = {"e": "start", "pid": ROOT_PID, "rank": 0, "world": 1, "paddle": "3.3.1", "python": "3.11"}
    named = {"e": "device", "device": device}
    if device == "gpu":
        named |= {"device_name": "Fake A100", "cuda_env": {"CUDA_VISIBLE_DEVICES": "0"}, "pci_bus_id": "0000:1B:00.0"}
    reader.ingest(ROOT_PID, json.dumps(start).encode() + b"\n" + json.dumps(named).encode())


def _trial(tmp_path: Path, device: str, monkeypatch, driver: str = "current"):
    nv = make_pynvml(_gpus(), driver)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_text(amp=False, steps=6))
    run = RunDir(tmp_path / "run")
    tr = TrialContext(spec_for(suite, run), Events(None))
    p = CommandParams.model_validate(tr.suite.workload)
    reader = EventReader()
    _start_event(reader, device)
    gpu = ProgramGpu(ROOT_PID, pids=lambda: {ROOT_PID, RANK_PID})
    gpu.see(reader.procs.values())            # what _pump does as the start event arrives
    prev = time.perf_counter()
    for i in range(1, 7):
        time.sleep(0.03)
        now = time.perf_counter()
        reader.ingest(ROOT_PID, json.dumps({"e": "step", "step": i, "t": now - prev, "at": now, "loss": 0.5,
                                            "eval_s": 0.0}).encode())
        prev = now
    reader.ingest(ROOT_PID, json.dumps({"e": "memory", "source": "cuda" if device == "gpu" else "host",
                                        "peak_allocated": GIB}).encode())
    reader.ingest(ROOT_PID, json.dumps({"e": "end", "reason": "exit", "steps": 6}).encode())
    time.sleep(0.05)
    output = Output(LogScan("regex", {"accuracy": r"final accuracy: (\S+)"}), 2**20)
    output.scan.feed("final accuracy: 0.9")
    finish_command(tr, p, reader, output, "", tmp_path / "out", Ran(code=0, gpu=gpu))
    return tr.trial, nv


def test_command_finish_fills_the_built_in_memory_and_energy_fields_on_a_gpu(tmp_path, monkeypatch):
    t, nv = _trial(tmp_path, "gpu", monkeypatch)
    assert t.status == "ok", t.error
    m = t.memory
    assert m.device_used_bytes == 3 * GIB and m.device_used_source == "nvml-process"   # the tree, summed
    assert m.nvml_device is not None and m.nvml_device["index"] == 0 and m.nvml_device["matched_by"] == "pci_bus_id"
    assert m.energy_j is not None and m.energy_j > 0
    samples = sum(s.samples for s in t.measured_steps())
    assert m.energy_j_per_sample == pytest.approx(m.energy_j / samples)
    assert not [k for k in m.errors if k.startswith("nvml")], m.errors
    assert t.interference is not None and t.interference.foreign_processes == [FOREIGN_PID]
    assert t.interference.sm_clock_mhz_median == 1410 and "sw_power_cap" in t.interference.throttle_reasons
    assert nv.stub.calls["nvmlInitWithFlags"] == 1 and nv.stub.calls["nvmlShutdown"] == 1


def test_command_finish_records_the_gpu_busy_share_of_the_measured_window(tmp_path, monkeypatch):
    """NVML's utilization.gpu (35% in the stub driver), polled every 5 ms so the ~0.15 s window holds samples,
    averaged over the window the hook's steps give."""
    monkeypatch.setattr(nvml.Poller.__init__, "__defaults__", (None, 0.005, None, False))
    t, nv = _trial(tmp_path, "gpu", monkeypatch)
    assert t.interference is not None and t.interference.gpu_busy_pct == 35.0
    assert nv.stub.calls["nvmlDeviceGetUtilizationRates"] > 3


def test_command_finish_on_cpu_opens_no_nvml_and_records_none(tmp_path, monkeypatch):
    t, nv = _trial(tmp_path, "cpu", monkeypatch)
    assert t.status == "ok", t.error
    m = t.memory
    assert (m.device_used_bytes, m.device_used_source, m.energy_j, m.energy_j_per_sample, m.nvml_device) == \
        (None, None, None, None, None)
    assert not [k for k in m.errors if k.startswith("nvml")]
    assert nv.stub.calls["nvmlInitWithFlags"] == 0 and t.interference is None


def test_command_trial_on_a_device_without_energy_says_not_measured_and_why(tmp_path, monkeypatch):
    """NVML answers Not Supported for energy (before Volta, vGPU guests): energy null with that note,
    not the misleading "samples do not cover the window"; memory still measured."""
    t, _ = _trial(tmp_path, "gpu", monkeypatch, driver="pre-volta")
    assert t.status == "ok", t.error
    m = t.memory
    assert m.energy_j is None and "nvml.not_supported.nvmlDeviceGetTotalEnergyConsumption" in m.errors
    assert "nvml.window" not in m.errors and m.device_used_bytes == 3 * GIB


def test_a_mig_instance_picked_by_index_is_resolved_from_the_cuda_uuid_the_hook_sends(monkeypatch):
    """Issue 43.6: CUDA_VISIBLE_DEVICES=0 inside a container given one MIG instance: the bus id finds the
    MIG-enabled parent, and only the CUDA device's own UUID (cuDeviceGetUuid_v2, sent by the hook) names the
    instance; without it the device was not resolved."""
    from tests.fake_nvml import four_gpus, mig_uuid

    gpus = four_gpus(own_on=3)
    for inst in gpus[3].mig:
        inst.pids = {ROOT_PID: GIB}
    want = mig_uuid(3, 1)
    for with_uuid in (True, False):
        nv = make_pynvml(gpus)
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        reader = EventReader()
        named = {"e": "device", "device": "gpu", "cuda_env": {"CUDA_VISIBLE_DEVICES": "0"},
                 "pci_bus_id": "0000:1E:00.0", **({"cuda_uuid": want.removeprefix("MIG-")} if with_uuid else {})}
        reader.ingest(ROOT_PID, json.dumps({"e": "start", "pid": ROOT_PID, "rank": 0, "world": 1}).encode() + b"\n"
                      + json.dumps(named).encode())
        gpu = ProgramGpu(ROOT_PID, pids=lambda: {ROOT_PID})
        gpu.see(reader.procs.values())
        gpu.stop()
        if with_uuid:
            assert list(gpu.results) == [want] and not gpu.errors, gpu.errors
            assert gpu.results[want]["nvml_device"]["mig"] is True
        else:
            assert gpu.results == {} and "MIG mode" in gpu.errors["nvml"], gpu.errors
