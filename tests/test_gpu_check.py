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
