"""Contract tests: the real worker (toy workload, in this process) against a fake CUDA layer and a
fake `pynvml` (tests/fake_cuda.py), so every GPU branch of trackers/ and trial/ executes in CI.

What they pin: the device each rank really uses (FLAGS_selected_gpus into CUDA_VISIBLE_DEVICES,
indices, UUIDs, MIG, PCI bus id), per-process vs device-wide memory with its source, null for
"not measured", NVML errors recorded, nvmlShutdown, energy per sample, the GPU interference
fields, and the timing policy (one device sync per step, plus the window's open and close).
"""

from __future__ import annotations

import sys

import pytest

from ampbench.results import Memory, RunDir
from ampbench.trackers import nvml
from tests.fake_cuda import GIB, FakeCuda, four_gpus, make_pynvml
from tests.fake_nvml import DRIVER_NOT_LOADED, ENERGY, GPU_IS_LOST, Driver, mig_uuid
from tests.test_worker import spec_for

STEPS, WARMUP = 6, 2


def _run_toy(toy_suite, tmp_path, mode: str = "fp32", overrides: list[str] | None = None):
    from ampbench.trial.worker import Events, TrialRunner

    run = RunDir(tmp_path / "run")
    spec = spec_for(toy_suite(), run, mode=mode, overrides=[f"train.steps={STEPS}", f"train.warmup_steps={WARMUP}",
                                                            "train.eval_every=0", *(overrides or [])])
    tr = TrialRunner(spec, Events(None))
    tr.run()
    return tr.trial


@pytest.fixture
def gpu(monkeypatch):
    """Install the fake layer: returns a function (gpus, own bus id, env) -> (fake pynvml, FakeCuda)."""

    def install(gpus, bus_id, env=None, **kw):
        nv = make_pynvml(gpus, **kw)
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        for k in ("FLAGS_selected_gpus", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
            monkeypatch.delenv(k, raising=False)
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        cuda = FakeCuda()
        cuda.install(monkeypatch, bus_id, gpus)
        return nv, cuda

    return install


@pytest.mark.slow
def test_rank_on_gpu_2_measures_its_own_process_memory_energy_and_interference(toy_suite, tmp_path, gpu):
    """Rank 1 of a launch with CUDA_VISIBLE_DEVICES=1,2 uses CUDA ordinal 1 = physical GPU 2: NVML must
    read GPU 2 (matched by PCI bus id), not GPU 0 or the first visible entry."""
    gpus = four_gpus(own_on=2)
    nv, cuda = gpu(gpus, "0000:1d:00.0", {"FLAGS_selected_gpus": "1", "CUDA_VISIBLE_DEVICES": "1,2"})
    t = _run_toy(toy_suite, tmp_path)
    assert t.status == "ok", t.error
    m = t.memory
    assert m.source == "cuda" and m.peak_allocated_bytes == cuda.allocated and m.peak_reserved_bytes == cuda.reserved
    assert m.nvml_device["index"] == 2 and m.nvml_device["matched_by"] == "pci_bus_id"
    assert m.device_used_bytes == 2 * GIB + 2 and m.device_used_source == "nvml-process"
    assert m.energy_j and m.energy_j > 0
    assert m.energy_j_per_sample == pytest.approx(m.energy_j / sum(s.samples for s in t.measured_steps()))
    assert not any(k.startswith("nvml") for k in m.errors)
    calls = nv.stub.calls   # the driver library's symbols, as the real nvidia-ml-py called them
    assert calls["nvmlInitWithFlags"] >= 2 and calls["nvmlInitWithFlags"] == calls["nvmlShutdown"]   # env + window
    # timing policy: one device sync per step (warm-up included), plus the window's open and close
    assert cuda.syncs == STEPS + 2 and cuda.resets == 2
    assert t.throughput.window_s and sum(s.time_s for s in t.measured_steps()) <= t.throughput.window_s
    inter = t.interference if isinstance(t.interference, dict) else t.interference.model_dump()
    assert inter["foreign_processes"] == [999_999] and inter["throttle_reasons"] == ["sw_power_cap"]
    assert inter["sm_clock_mhz_median"] == 1410 and inter["temperature_c_max"] == 61 and inter["power_w_median"] == 250
    assert t.env.device == "gpu" and t.env.device_name == "Fake A100-SXM4-40GB" and t.env.driver == "580.95.05"
    assert t.env.gpu["power_limit_w"] == 400 and t.env.gpu["sm_clock_max_mhz"] == 1410


def test_container_pids_fall_back_to_device_memory_with_source(toy_suite, tmp_path, gpu):
    gpus = four_gpus(own_on=0)
    gpus[0].pids = {4242: 5 * GIB, 4343: GIB}           # host PIDs: ours is not among them
    gpu(gpus, "0000:1b:00.0")
    t = _run_toy(toy_suite, tmp_path)
    assert t.memory.device_used_bytes == 9 * GIB and t.memory.device_used_source == "nvml-device"   # 3 + 5 + 1
    assert "not in NVML's process list" in t.memory.errors["nvml.pid"]
    inter = t.interference if isinstance(t.interference, dict) else t.interference.model_dump()
    assert inter["foreign_processes"] == [4242, 4343]


def test_nvml_missing_is_null_with_the_reason_not_zero(toy_suite, tmp_path, gpu):
    gpu(four_gpus(own_on=0), "0000:1b:00.0", driver=Driver(init_error=DRIVER_NOT_LOADED))
    t = _run_toy(toy_suite, tmp_path)
    m = t.memory
    assert m.device_used_bytes is None and m.energy_j is None and m.energy_j_per_sample is None
    assert "Driver Not Loaded" in m.errors["nvml"] and m.peak_allocated_bytes > 0
    assert "device_used_bytes" in m.model_dump(mode="json") and m.model_dump(mode="json")["device_used_bytes"] is None


def test_a_failing_nvml_call_is_recorded_and_the_others_go_on(toy_suite, tmp_path, gpu):
    gpu(four_gpus(own_on=1), "0000:1c:00.0", driver=Driver(errors=((ENERGY, GPU_IS_LOST),)))
    t = _run_toy(toy_suite, tmp_path)
    assert "GPU is lost" in t.memory.errors["nvml.nvmlDeviceGetTotalEnergyConsumption"]
    assert t.memory.energy_j is None and t.memory.device_used_bytes == 2 * GIB + 1


@pytest.mark.parametrize("env,bus,expect", [
    ({"CUDA_VISIBLE_DEVICES": mig_uuid(3, 1)}, None, ("mig_uuid", mig_uuid(3, 1))),
    ({"CUDA_VISIBLE_DEVICES": "GPU-00000002-aaaa-bbbb-cccc-dddddddddddd"}, None, ("uuid", "GPU-00000002-aaaa-bbbb-cccc-dddddddddddd")),
    ({"CUDA_VISIBLE_DEVICES": "3,1", "FLAGS_selected_gpus": "1"}, None, ("index-assumed", "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd")),
    ({"CUDA_VISIBLE_DEVICES": "3,1", "FLAGS_selected_gpus": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, None,
     ("index", "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd")),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, "0000:1D:00.0", ("pci_bus_id", "GPU-00000002-aaaa-bbbb-cccc-dddddddddddd")),
    ({"FLAGS_selected_gpus": "2"}, None, ("index-assumed", "GPU-00000002-aaaa-bbbb-cccc-dddddddddddd")),
])
def test_device_resolution(env, bus, expect):
    nv = make_pynvml(four_gpus(own_on=0))
    nv.nvmlInit()
    dev = nvml.resolve(nv, env, bus)
    assert (dev.matched_by, dev.uuid) == expect
    if dev.mig:
        assert nv.nvmlDeviceGetIndex(dev.parent) == 3 and dev.index is None and dev.pci_bus_id == "0000:1e:00.0"


def test_mig_window_reads_the_instance_memory_and_the_parent_energy():
    gpus = four_gpus(own_on=3)
    nv = make_pynvml(gpus)
    nv.nvmlInit()
    dev = nvml.resolve(nv, {"CUDA_VISIBLE_DEVICES": mig_uuid(3, 1)}, None)
    out = nvml.Poller(nv, dev, interval_s=0.01).start().stop()
    assert out["device_used_bytes"] == GIB + 1 and out["device_used_source"] == "nvml-process"
    assert out["energy_j"] > 0 and out["nvml_device"]["mig"] is True


def test_bus_ids_normalise():
    assert nvml.norm_bus_id("00000000:3B:00.0") == nvml.norm_bus_id("0000:3b:00.0") == "0000:3b:00.0"
    assert nvml.cuda_ordinal({"FLAGS_selected_gpus": "3,4"}) == 3 and nvml.cuda_ordinal({}) == 0
    assert nvml.visible_entry({"CUDA_VISIBLE_DEVICES": "all"}, 0) is None
    assert nvml.visible_entry({"CUDA_VISIBLE_DEVICES": "4, 5"}, 1) == "5"


def test_data_parallel_memory_covers_every_rank_and_stays_null_when_unmeasured():
    from ampbench.record.assemble import RankMemory, merge_ranks

    mem = Memory(source="cuda")
    merge_ranks(mem, [
        RankMemory(0, Memory(peak_allocated_bytes=10, peak_reserved_bytes=20, device_used_bytes=30, rss_peak_bytes=5,
                             energy_j=2.0, nvml_device={"uuid": "GPU-a"})),
        RankMemory(1, Memory(peak_allocated_bytes=12, peak_reserved_bytes=18, device_used_bytes=None, rss_peak_bytes=7,
                             energy_j=3.0, nvml_device={"uuid": "GPU-b"})),
    ])
    assert (mem.peak_allocated_bytes, mem.peak_reserved_bytes, mem.device_used_bytes) == (12, 20, 30)
    assert mem.energy_j == 5.0 and [r["nvml_device"]["uuid"] for r in mem.per_rank] == ["GPU-a", "GPU-b"]
    empty = Memory()
    merge_ranks(empty, [RankMemory(0, Memory()), RankMemory(1, Memory(energy_j=1.0))])
    assert empty.peak_allocated_bytes is None and empty.energy_j is None


def test_tree_rss_covers_the_children_not_only_the_launcher():
    """The memory ceiling of a data-parallel trial sees the ranks (children of the launcher)."""
    import subprocess
    import time

    import psutil

    from ampbench.launch.process import tree_rss_bytes

    launcher = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'b = bytearray(200 * 2**20); import time; time.sleep(30)'])\n"
        "time.sleep(30)")])
    try:
        deadline = time.monotonic() + 20
        while tree_rss_bytes(launcher.pid) < 150 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert psutil.Process(launcher.pid).memory_info().rss < 100 * 2**20  # the launcher itself is small...
        assert tree_rss_bytes(launcher.pid) >= 150 * 2**20  # ...its child rank is what counts
    finally:
        from ampbench.launch.process import kill_tree

        kill_tree(launcher.pid)
        launcher.wait()


def test_cuda_bus_id_asks_the_cuda_driver_for_the_ordinal(monkeypatch):
    import ctypes

    from ampbench.trackers import cuda

    asked = []

    class Lib:
        def cuInit(self, flags):
            return 0

        def cuDeviceGet(self, ref, ordinal):
            asked.append(ordinal.value)
            ref._obj.value = 40 + ordinal.value
            return 0

        def cuDeviceGetPCIBusId(self, buf, n, dev):
            asked.append(dev.value)
            buf.value = b"0000:3b:00.0"
            return 0

    names = []
    monkeypatch.setenv("FLAGS_selected_gpus", "1")
    monkeypatch.setattr(ctypes, "CDLL", lambda name: (names.append(name), Lib())[1])
    assert cuda.cuda_bus_id() == "0000:3b:00.0" and asked == [1, 41] and names == ["libcuda.so.1"]

    def missing(name):
        raise OSError(name)

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert cuda.cuda_bus_id(0) is None


def test_has_gpu_cheap_reads_nvidia_smi(monkeypatch):
    import subprocess
    import types

    from ampbench.trackers import cuda

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=0, stdout="GPU 0: A100 (UUID: GPU-1)"))
    assert cuda.has_gpu_cheap()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert not cuda.has_gpu_cheap()


def test_allocator_failure_is_recorded_not_zero(toy_suite, tmp_path, gpu, monkeypatch):
    import paddle

    gpu(four_gpus(own_on=0), "0000:1b:00.0")

    def broken(*a):
        raise RuntimeError("allocator stats unavailable")

    monkeypatch.setattr(paddle.device.cuda, "max_memory_allocated", broken)
    t = _run_toy(toy_suite, tmp_path)
    assert t.memory.peak_allocated_bytes is None and "unavailable" in t.memory.errors["allocator"]
    assert t.memory.device_used_bytes == 2 * GIB   # NVML still measured
