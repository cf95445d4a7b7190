"""The command hook on a GPU build (issue 30, items 4-7): a user program run with the hook, in a process
that looks like Paddle's GPU build (tests/fake_cuda.py: Paddle's own set_device, get_device,
synchronize and get_device_name run over stand-ins for what the CPU build lacks), and on CPU for real.

The fake is installed before the hook installs itself, as a GPU build is there at `import paddle`: the
program starts without AMPBENCH_HOOK_SOCKET (site's import of the hook does nothing), imports paddle,
installs the machine, then sets AMPBENCH_HOOK_SOCKET (the worker's channel) and imports the hook again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ampbench.trial.command_record import EventReader
from ampbench.workloads.command import HOOK_DIR
from tests.fake_cuda import GIB

ROOT = Path(__file__).resolve().parent.parent
STEPS = 6

PROGRAM = r'''
import importlib, os, sys
from pathlib import Path
import paddle
from _pytest.monkeypatch import MonkeyPatch
from tests.fake_cuda import CudaPlace, Machine, a100_gpus, install_machine

case, tmp = sys.argv[1], Path(sys.argv[2])
machine = Machine("two", a100_gpus(2), gpu_names=["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"],
                  paddle_version="2.6.2" if case == "paddle26" else "3.3.1", reset_api=case != "paddle26")
inst = install_machine(MonkeyPatch(), machine, tmp)
paddle.CUDAPlace = CudaPlace   # the GPU build's place class (the hook binds its sync to a place it makes)
os.environ["AMPBENCH_HOOK_SOCKET"] = os.environ.pop("TEST_HOOK_SOCKET")   # the hook connects now
import sitecustomize
importlib.reload(sitecustomize)          # the hook installs now, over the GPU build

paddle.set_device({"gpu1": "gpu:1", "cpu": "cpu"}.get(case, "gpu"))   # after the imports, as scripts do
m = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=m.parameters())
for i in range(int(sys.argv[3])):
    if case == "eval" and i == 3:        # a mid-run evaluation holding far more than training
        m.eval(); inst.cuda.spike(40 * 2**30); m.train()
    if case == "resets" and i == 3:      # this training step's forward holds 30 GiB
        inst.cuda.spike(30 * 2**30)
    m(paddle.ones([4, 8])).mean().backward()
    if case == "resets":                 # the program logs its peak and resets it, before its update
        paddle.device.cuda.reset_max_memory_allocated()
        paddle.device.cuda.reset_max_memory_reserved()
    opt.step()
    opt.clear_grad()
if case == "eval":                       # a final evaluation after the last step
    m.eval(); inst.cuda.spike(50 * 2**30)
print("synced", sorted(set(inst.synced)), "asked", sorted({a for a in inst.devices_asked}))
'''

# CPU, for real: the host allocator's peak, an evaluation and the end's work holding 256 MiB each
CPU_PROGRAM = r'''
import sys
import paddle
m = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=m.parameters())
for i in range(int(sys.argv[1])):
    if i == 3:
        m.eval(); big = paddle.ones([64, 1024, 1024]); del big; m.train()
    m(paddle.ones([4, 8])).mean().backward()
    opt.step()
    opt.clear_grad()
m.eval(); big = paddle.ones([64, 1024, 1024]); del big   # final evaluation / saving after the last step
'''

# CPU, for real: a training step holding 256 MiB, then the program's own reset of the host allocator's peak
CPU_RESET_PROGRAM = r'''
import sys
import paddle
m = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=m.parameters())
for i in range(int(sys.argv[1])):
    loss = m(paddle.ones([4, 8])).mean()
    if i == 3:
        big = paddle.ones([64, 1024, 1024]); del big
    loss.backward()
    paddle.base.core.host_memory_stat_reset_peak_value("Allocated", 0)   # its own log's reset
    opt.step()
    opt.clear_grad()
'''


def hooked(tmp_path: Path, program: str, args: list[str], hook_at_start: bool) -> tuple[EventReader, str]:
    """The program under the hook, reporting on a channel as a trial's worker opens it: at start (as a
    trial does), or (hook_at_start=False) only once the program has installed its simulated machine.
    The channel is pumped as the worker pumps it (trial/command.py `_pump`): a process whose device event
    says GPU is told the worker's NVML word through ProgramGpu (no NVML in this process: `none`), as a
    trial's is; a channel that never answered left each GPU program waiting out NVML_WAIT_S (30 s) at the
    window's opening."""
    from ampbench.trial.command_gpu import ProgramGpu
    from tests.test_command import hook_channel

    (tmp_path / "p.py").write_text(program)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOK_DIR), str(ROOT)]), "AMPBENCH_HOOK_WARMUP": "1"}
    env.pop("AMPBENCH_HOOK_SOCKET", None)
    with hook_channel() as channel:
        env.update({k if hook_at_start else "TEST_HOOK_SOCKET": v for k, v in channel.env().items()})
        p = subprocess.Popen([sys.executable, str(tmp_path / "p.py"), *args], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        reader, gpu = EventReader(channel), ProgramGpu(p.pid, ack=channel.reply)
        try:
            with ThreadPoolExecutor(1) as ex:
                out = ex.submit(p.communicate, timeout=180)
                while not out.done():
                    reader.poll()
                    gpu.see(reader.procs.values())
                    time.sleep(0.05)
                stdout, stderr = out.result()
        finally:
            gpu.stop()
            if p.poll() is None:
                p.kill()
    assert p.returncode == 0, stdout + stderr
    reader.poll()
    return reader, stdout


CASES = ("gpu1", "cpu", "paddle26", "eval", "resets")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict:
    """Every program at once (each is a fresh process: most of its time is Paddle's import)."""
    def go(case: str):
        d = tmp_path_factory.mktemp(case)
        return hooked(d, PROGRAM, [case, str(d), str(STEPS)], hook_at_start=False)

    tmp_path_factory.getbasetemp()   # made once here: mktemp from several threads would race to make it
    with ThreadPoolExecutor(len(CASES) + 2) as ex:
        futures = {c: ex.submit(go, c) for c in CASES}
        cpu = ex.submit(lambda: hooked(tmp_path_factory.mktemp("host"), CPU_PROGRAM, [str(STEPS)], True))
        cpu_reset = ex.submit(lambda: hooked(tmp_path_factory.mktemp("hreset"), CPU_RESET_PROGRAM, [str(STEPS)], True))
        return {**{c: f.result() for c, f in futures.items()}, "host": cpu.result(), "host-resets": cpu_reset.result()}


def run_case(cases: dict, case: str):
    reader, out = cases[case]
    (proc,) = reader.stepping()
    assert len(proc.steps) == STEPS
    return proc, out


@pytest.mark.slow
def test_6_the_gpu_is_named_at_the_first_step_not_at_import(cases):
    """set_device("gpu:1") after `import paddle`: GPU 1 is named (name, bus id), synced and measured."""
    proc, out = run_case(cases, "gpu1")
    assert proc.device.device == "gpu" and proc.device.device_name == "NVIDIA H100 80GB HBM3"
    assert proc.device.pci_bus_id == "0000:08:00.0"        # a100_gpus(2)[1]'s, through the CUDA driver
    assert proc.device.cuda_uuid == "a1000001-0000-0000-0000-000000000000"   # its own UUID (a MIG instance's)
    assert proc.device.ordinal == 1
    assert "synced [1] asked [(1,)]" in out                   # every sync and allocator read on GPU 1
    assert proc.memory.source == "cuda" and proc.memory.peak_allocated == 900 * 2**20


@pytest.mark.slow
def test_7_a_cpu_place_program_on_a_cuda_build_is_not_broken_by_the_steps_sync(cases):
    """Paddle's synchronize() raises TypeError off a CUDAPlace: the hook syncs nothing for a CPU program."""
    proc, out = run_case(cases, "cpu")
    assert proc.device.device == "cpu" and proc.device.device_name is None
    assert "synced []" in out and not proc.errors
    assert proc.memory.source == "host"


@pytest.mark.slow
def test_4_paddle_26_reports_a_null_window_peak_with_the_reason(cases):
    from ampbench.trial.command_record import memory_of

    proc, _ = run_case(cases, "paddle26")
    assert proc.memory.peak_allocated is None and proc.memory.peak_reserved is None
    assert "reset_max_memory" in proc.memory.error and "2.6.2" in proc.memory.error
    mem = memory_of(cases["paddle26"][0], 0)          # the trial's record, as the built-in workloads write it
    assert mem.peak_allocated_bytes is None and "reset_max_memory" in mem.errors["allocator"]


@pytest.mark.slow
def test_5_gpu_peaks_leave_out_evaluations_and_what_runs_after_the_last_step(cases):
    proc, _ = run_case(cases, "eval")
    assert proc.memory.peak_allocated == 900 * 2**20 and proc.memory.peak_reserved == 1200 * 2**20
    assert proc.memory.peak_allocated < 40 * GIB
    assert proc.memory.evaluations == 1            # item 9: the reserved peak's note (the final one is after)


@pytest.mark.slow
def test_5_host_peak_on_cpu_leaves_out_evaluations_and_the_end_for_real(cases):
    proc, _ = run_case(cases, "host")
    assert proc.device.device == "cpu" and proc.memory.source == "host"
    assert 0 < proc.memory.peak_allocated < 256 * 2**20      # 256 MiB were held only outside the window


SCALER_PROGRAM = r'''
import importlib, os, sys
from pathlib import Path
import paddle
from _pytest.monkeypatch import MonkeyPatch
from tests.fake_cuda import Machine, a100_gpus, install_machine

how, tmp = sys.argv[1], Path(sys.argv[2])
install_machine(MonkeyPatch(), Machine("one", a100_gpus(1)), tmp)
os.environ["AMPBENCH_HOOK_SOCKET"] = os.environ.pop("TEST_HOOK_SOCKET")
import sitecustomize
importlib.reload(sitecustomize)
paddle.set_device("gpu")
m = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=m.parameters())
scaler = paddle.amp.GradScaler(init_loss_scaling=1024, incr_every_n_steps=1)   # doubles after every good step
for i in range(int(sys.argv[3])):
    with paddle.amp.auto_cast(level="O1", dtype="float16"):   # the global AMP dtype GradScaler.scale() asks
        loss = m(paddle.ones([4, 8])).mean()
    scaled = scaler.scale(loss)
    scaled.backward()
    if how == "minimize":
        scaler.minimize(opt, scaled)     # Paddle's minimize updates the scale inside (grad_scaler.py _update)
    else:
        scaler.step(opt)
        scaler.update()
    opt.clear_grad()
'''


@pytest.mark.slow
@pytest.mark.parametrize("how", ["minimize", "step"])
def test_the_loss_scale_series_is_the_scale_each_step_used_with_minimize_too(tmp_path, how):
    """Issue 43.6: GradScaler.minimize() updates the scale before it returns, so the scale read at the step's
    end was the next step's; the hook keeps the scale tensor scale() used (update() replaces it, never writes
    it in place), so both loops record 1024, 2048, 4096, ..."""
    reader, _ = hooked(tmp_path, SCALER_PROGRAM, [how, str(tmp_path), str(STEPS)], hook_at_start=False)
    (proc,) = reader.stepping()
    assert [ev.scale for ev in proc.steps] == [1024.0 * 2**i for i in range(STEPS)]


@pytest.mark.slow
def test_the_window_peak_survives_the_programs_own_resets(cases):
    """Issue 58.4: a program that resets the allocator's peaks for its own logs (after backward, before its
    update) left the window only the peak since its last reset; the hook folds the peak before each reset."""
    proc, _ = run_case(cases, "resets")
    assert proc.memory.peak_allocated >= 30 * GIB and proc.memory.peak_reserved >= 30 * GIB
    host, _ = run_case(cases, "host-resets")
    assert host.memory.source == "host" and host.memory.peak_allocated >= 256 * 2**20
