"""NVML across drivers, MIG set-ups and devices that do not offer a reading (issue 30, items 2, 3, 8).

Every test drives the REAL nvidia-ml-py module over a stub of the driver library
(tests/fake_nvml.py, whose profiles cite the nvml.h / NVML API behaviour they follow), so what
nvidia-ml-py does with a missing symbol (NVMLLibraryMismatchError for the unversioned call) or a
driver's record size is NVIDIA's own code, not our belief about it.
"""

from __future__ import annotations

import os
import time

import pytest

from ampbench.trackers import nvml
from tests.fake_nvml import ENERGY, GIB, Driver, FakeGpu, four_gpus, make_pynvml, mig_uuid

HOST_PID = 4242


def _opened(gpus: list[FakeGpu], driver: Driver | str = "current"):
    nv = make_pynvml(gpus, driver)
    nv.nvmlInit()
    return nv


def _window(nv, env=None, bus="0000:1b:00.0") -> dict:
    dev = nvml.resolve(nv, env or {}, bus)
    return nvml.Poller(nv, dev, interval_s=0.01).start().stop()


def test_the_stub_makes_nvidia_ml_py_fail_as_on_an_old_driver():
    """The premise of item 2, from NVIDIA's own wrapper: without _v3 the unversioned call raises
    NVMLLibraryMismatchError (throwOnVersionMismatch), not NVMLError_FunctionNotFound."""
    nv = _opened(four_gpus(own_on=0), "r470")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(nv.NVMLLibraryMismatchError):
        nv.nvmlDeviceGetComputeRunningProcesses(h)
    assert [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses_v2(h)] == [999_999, os.getpid()]


@pytest.mark.parametrize("driver", ["r470", "535.98"])
def test_a_driver_without_v3_is_listed_through_v2_with_no_error(driver):
    out = _window(_opened(four_gpus(own_on=0), driver))
    assert out["nvml_errors"] == {}
    assert out["device_used_source"] == nvml.PROCESS and out["device_used_bytes"] == 2 * GIB
    assert out["interference"]["foreign_processes"] == [999_999]
    assert out["processes_call"] == "nvmlDeviceGetComputeRunningProcesses_v2"


def test_current_driver_uses_v3():
    out = _window(_opened(four_gpus(own_on=0)))
    assert out["processes_call"] == "nvmlDeviceGetComputeRunningProcesses_v3" and out["nvml_errors"] == {}


def test_535_54_whose_v3_writes_a_larger_record_is_listed_through_v2():
    """535.43-535.86 fill _v3 with 32-byte records; nvidia-ml-py 13 reads 24: every PID after the
    first would be garbage (foreign 'processes' 0 and 4294967295, our own memory missed)."""
    gpus = four_gpus(own_on=0)
    gpus[0].pids[HOST_PID] = 7 * GIB
    out = _window(_opened(gpus, "535.54"))
    assert out["interference"]["foreign_processes"] == [HOST_PID, 999_999]
    assert out["processes_call"] == "nvmlDeviceGetComputeRunningProcesses_v2"
    assert out["device_used_bytes"] == 2 * GIB and out["device_used_source"] == nvml.PROCESS


def _mig_container() -> list[FakeGpu]:
    gpus = four_gpus(own_on=3)
    gpus[3].mig[0].visible = False      # the container was given instance 1 only
    return gpus


@pytest.mark.parametrize("how", ["cuda_uuid", "nvidia_visible_devices"])
def test_mig_without_cuda_visible_devices_resolves_the_instance_not_the_parent(how):
    """Kubernetes / docker --gpus device=MIG-...: CUDA reports the parent's bus id; the instance is
    found among the parent's MIG devices by the CUDA device's UUID or NVIDIA_VISIBLE_DEVICES."""
    nv = _opened(_mig_container())
    env = {"NVIDIA_VISIBLE_DEVICES": mig_uuid(3, 1)} if how == "nvidia_visible_devices" else {}
    uuid = {"cuda_uuid": mig_uuid(3, 1).removeprefix("MIG-")} if how == "cuda_uuid" else {}
    dev = nvml.resolve(nv, env, "0000:1e:00.0", **uuid)
    assert (dev.mig, dev.uuid, dev.matched_by, dev.index) == (True, mig_uuid(3, 1), "mig_uuid", None)
    out = nvml.Poller(nv, dev, interval_s=0.01).start().stop()
    assert out["device_used_bytes"] == GIB + 1 and out["device_used_source"] == nvml.PROCESS
    assert out["nvml_errors"] == {} and out["energy_j"] is not None and out["energy_j"] > 0


def test_mig_parent_with_no_way_to_name_the_instance_is_not_resolved_with_the_reason():
    nv = _opened(_mig_container())
    with pytest.raises(LookupError, match="MIG mode.*CUDA_VISIBLE_DEVICES=MIG-"):
        nvml.resolve(nv, {}, "0000:1e:00.0")


def test_the_parent_of_mig_instances_refuses_process_queries_without_privileges():
    """Why the parent is the wrong answer [API]: aggregate queries on a MIG-enabled GPU need privileges."""
    nv = _opened(_mig_container())
    parent = nv.nvmlDeviceGetHandleByIndex(3)
    with pytest.raises(nv.NVMLError_NoPermission):
        nv.nvmlDeviceGetComputeRunningProcesses_v3(parent)


@pytest.mark.parametrize("driver,absent", [("pre-volta", {ENERGY}),
                                           ("vgpu", {ENERGY, "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature"})])
def test_not_supported_readings_are_not_measured_not_errors(driver, absent):
    out = _window(_opened(four_gpus(own_on=0), driver))
    assert out["energy_j"] is None
    assert set(out["nvml_errors"]) == {"not_supported." + f for f in absent}
    assert all(v.startswith("not measured") for v in out["nvml_errors"].values())
    assert out["device_used_bytes"] == 2 * GIB          # what the device offers is still measured
    inter = out["interference"]
    assert (inter["power_w_median"] is None) == ("nvmlDeviceGetPowerUsage" in absent)


def test_the_trial_record_and_selftest_say_not_measured_for_energy(monkeypatch, tmp_path, toy_suite):
    """Item 8 end to end: a P100's trial keeps energy null with the not-supported note, and the
    selftest's nvml-energy and nvml-device rows read n/a and ok, not FAIL."""
    from ampbench.commands.selftest import Machine, check_trial
    from tests.fake_cuda import install_machine, machines
    from tests.test_gpu_machines import run_toy

    install_machine(monkeypatch, machines()["p100"], tmp_path)
    t = run_toy(toy_suite(), tmp_path, "fp32")
    assert t.status == "ok", t.error
    key = "nvml.not_supported." + ENERGY
    assert t.memory.energy_j is None and t.memory.energy_j_per_sample is None and key in t.memory.errors
    rows = {r.check: r for r in check_trial(t, Machine(gpus=1, unsupported={}))}
    assert rows["nvml-energy"].ok is None and "not measured" in rows["nvml-energy"].detail
    assert rows["nvml-device"].ok is True


def test_the_worker_finds_the_mig_instance_by_the_cuda_drivers_uuid(monkeypatch, tmp_path, toy_suite):
    """docker --gpus device=MIG-...: the runtime chose the instance and no variable says so; CUDA's
    cuDeviceGetUuid_v2 names it, and the trial reads the instance, never the parent."""
    from ampbench.trackers import cuda
    from tests.fake_cuda import install_machine, machines
    from tests.test_gpu_machines import run_toy

    install_machine(monkeypatch, machines()["mig-container"], tmp_path)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES")
    t = run_toy(toy_suite(), tmp_path, "fp32")
    assert t.status == "ok", t.error
    m = t.memory
    assert m.nvml_device["mig"] is True and m.nvml_device["uuid"] == mig_uuid(3, 1)
    assert m.device_used_bytes == 3 * GIB + 1 and m.device_used_source == nvml.PROCESS
    assert not [k for k in m.errors if k.startswith("nvml")], m.errors
    assert cuda.cuda_uuid(0) == mig_uuid(3, 1).removeprefix("MIG-")


def test_the_window_keeps_the_peak_of_memory_that_moves():
    """The driver's figures move with the processes (used = their memory + the rest): the window keeps
    the highest sample, not the first or the last."""
    import time

    gpus = four_gpus(own_on=0)
    nv = _opened(gpus)
    poller = nvml.Poller(nv, nvml.resolve(nv, {}, "0000:1b:00.0"), interval_s=0.01, timeline=True).start()
    gpus[0].pids[os.getpid()] = 6 * GIB
    time.sleep(0.1)
    gpus[0].pids[os.getpid()] = GIB
    time.sleep(0.05)
    out = poller.stop()
    assert out["device_used_bytes"] == 6 * GIB
    used = [d for _, _, _, d in poller.s.timeline]
    assert max(used) == 3 * GIB + GIB + 6 * GIB and used[-1] == 3 * GIB + GIB + GIB   # base + foreign + ours


def test_utilisation_is_averaged_over_the_window_and_not_asked_under_mig():
    """nvmlDeviceGetUtilizationRates through the real nvidia-ml-py (the stub's utilization.gpu is 35%, a
    fixture): averaged over the samples inside a window, evaluations (gaps) left out; a MIG device is not
    asked ([API]: not supported there), so it records nothing and no error."""
    nv = _opened(four_gpus(own_on=0))
    poller = nvml.Poller(nv, nvml.resolve(nv, {}, "0000:1b:00.0"), interval_s=0.01).start()
    time.sleep(0.05)
    out = poller.stop()
    t0, t1 = poller.s.busy[0][0], poller.s.busy[-1][0]
    assert len(poller.s.busy) >= 3 and out["interference"]["gpu_busy_pct"] == 35.0
    assert poller.busy_pct((t0, t1)) == 35.0 and poller.busy_pct((t1 + 1, t1 + 2)) is None
    assert poller.busy_pct((t0, t1), gaps=[(t0, t1)]) is None
    assert nv.stub.calls["nvmlDeviceGetUtilizationRates"] == len(poller.s.busy)
    nv = _opened(_mig_container())
    dev = nvml.resolve(nv, {}, "0000:1e:00.0", cuda_uuid=mig_uuid(3, 1).removeprefix("MIG-"))
    out = nvml.Poller(nv, dev, interval_s=0.01).start().stop()
    assert out["interference"]["gpu_busy_pct"] is None and out["nvml_errors"] == {}
    assert nv.stub.calls["nvmlDeviceGetUtilizationRates"] == 0
