"""scripts/gpu_check.sh, the device check for the day a GPU is lent: on this CPU machine it says
plainly that there is no GPU (exit 3); against the simulated A100 (the real nvidia-ml-py over a stub
driver, tests/fake_nvml.py) its in-process NVML facts run through the same code a GPU would."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_without_a_gpu_it_says_so_in_one_line_and_exits_3():
    from ampbench.trackers.cuda import has_gpu_cheap

    if has_gpu_cheap():
        pytest.skip("a GPU is visible here")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                         timeout=120, env=env, check=False)
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.strip().splitlines() == ["no GPU here (no nvidia-smi GPU, no /dev/nvidia*): nothing to measure "
                                               "(exit 3)"]
    assert "Traceback" not in out.stderr
    hidden = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py")], capture_output=True, text=True,
                            timeout=120, env={**env, "CUDA_VISIBLE_DEVICES": "-1"}, check=False)
    assert hidden.returncode == 3 and "nothing to measure" in hidden.stdout


def test_on_the_simulated_a100_the_nvml_facts_read_ok(monkeypatch, tmp_path, capsys):
    from tests.fake_cuda import install_machine, machines

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    install_machine(monkeypatch, machines()["a100"], tmp_path)
    monkeypatch.setattr(check, "_work", lambda paddle, seconds: time.sleep(seconds))   # CPU matmuls prove nothing
    # the facts that need a second real process on the GPU (a child holding memory, a fresh NVML) cannot run here
    monkeypatch.setattr(check, "_child", lambda *a: (None, "needs a real GPU"))
    monkeypatch.setattr(check, "_identity_under_cvd", lambda uuid: (None, "needs a real GPU"))
    code = check.main()
    lines = {ln.split()[1]: ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln[:4] in ("ok  ", "n/a ", "FAIL")}
    for fact in ("identity", "nvml-device", "driver", "nvml-self", "energy", "clocks", "synchronize"):
        assert lines.get(fact) == "ok", (fact, lines)
    assert set(lines) >= {"identity-cvd", "nvml-child", "allocator-reset"} and code in (0, 1)


def test_the_wrapper_is_shellcheck_clean():
    import shutil

    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):   # CI installs it (setup.sh --test)
            pytest.fail("shellcheck not installed in CI")
        pytest.skip("shellcheck not installed")
    r = subprocess.run(["shellcheck", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------- a GPU machine without Paddle (issue 43.2)

BOOT = """
import ctypes, importlib.util, runpy, sys
root, target, machine, nodes = sys.argv[1:5]
assert importlib.util.find_spec("paddle") is None, "paddle must be hidden from this interpreter"
from tests.fake_cuda import FakeLibCuda, machines
from tests.fake_nvml import make_pynvml
m = machines()[machine]
sys.modules["pynvml"] = make_pynvml(m.gpus, m.driver, library=m.nvml)   # the real nvidia-ml-py, stub driver
lib, real = FakeLibCuda(m), ctypes.CDLL
ctypes.CDLL = lambda name, *a, **k: lib if name == "libcuda.so.1" else real(name, *a, **k)
from ampbench.trackers import cuda
cuda.DEVICE_NODES, cuda.PROC_GPUS = nodes + "/nvidia[0-9]*", nodes + "/none/*"
sys.argv = [target, *sys.argv[5:]]
if target.endswith(".py"):
    runpy.run_path(target, run_name="__main__")
else:
    runpy.run_module(target, run_name="__main__")
"""


def _no_paddle_interpreter(tmp_path: Path) -> Path:
    """A folder holding every installed package but Paddle, for `python -S` (no site-packages, no .pth)."""
    import site

    shadow = tmp_path / "site"
    shadow.mkdir()
    for sp in site.getsitepackages():
        for entry in Path(sp).iterdir():
            if entry.name.lower().startswith("paddle") or entry.name.endswith(".pth"):
                continue
            if not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry)
    return shadow


def _run_without_paddle(tmp_path: Path, target: str, *args: str, machine: str = "a100"):
    from tests.fake_cuda import machines

    shadow = _no_paddle_interpreter(tmp_path)
    nodes = tmp_path / "dev"
    nodes.mkdir()
    for g in machines()[machine].gpus:
        (nodes / f"nvidia{g.index}").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES",
                                                              "NVIDIA_VISIBLE_DEVICES")}
    env |= machines()[machine].env | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(shadow)]), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-S", "-c", BOOT, str(ROOT), target, machine, str(nodes), *args],
                          capture_output=True, text=True, timeout=240, env=env, check=False)


@pytest.mark.parametrize("machine", ["a100", "mig"])
def test_without_paddle_the_check_says_so_in_one_line_measures_the_driver_and_exits_3(tmp_path, machine):
    out = _run_without_paddle(tmp_path, str(ROOT / "scripts" / "gpu_check.py"), machine=machine)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("paddle is not installed in this interpreter: ModuleNotFoundError"), lines
    assert sum("paddle is not installed" in ln for ln in lines) == 1
    facts = {ln.split()[1]: ln for ln in lines[1:]}
    assert facts["driver"].startswith("ok") and facts["nvml-list"].startswith("ok")
    assert facts["nvml-device"].startswith("ok") and facts["energy"].startswith("ok"), facts
    assert facts["processes"].startswith("ok") and "nvmlDeviceGetComputeRunningProcesses_v3" in facts["processes"]
    if machine == "mig":   # the instance CUDA_VISIBLE_DEVICES names, found through NVML alone
        assert "MIG on" in facts["nvml-list"] and facts["mig"].startswith("ok   mig") and "MIG instance MIG-" in \
            facts["mig"], facts["mig"]
    else:
        assert "not a MIG instance" in facts["mig"] and "'matched_by': 'pci_bus_id'" in facts["nvml-device"]


@pytest.mark.slow
def test_without_paddle_selftest_says_so_in_one_line_and_exits_3(tmp_path):
    out = _run_without_paddle(tmp_path, "ampbench.cli", "selftest", "--out", str(tmp_path / "st"))
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("paddle is not installed in this interpreter:"), lines
    assert any(ln.startswith("ok   driver") for ln in lines) and any(ln.startswith("ok   energy") for ln in lines)
    assert not (tmp_path / "st" / "runs").exists()      # nothing run
