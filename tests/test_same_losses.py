"""scripts/same_losses.py: the refactoring check says identical only when every step's loss is."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "gpu_run"


def _run(a: Path, b: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "same_losses.py"), str(a), str(b)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_identical_copies_pass_and_one_changed_loss_fails(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(FIXTURE, a)
    shutil.copytree(FIXTURE, b)
    r = _run(a, b)
    assert r.returncode == 0 and "DIFFER" not in r.stdout and "identical" in r.stdout, r.stdout + r.stderr
    f = next((b / "trials").glob("fp32__seed0.json"))
    t = json.loads(f.read_text())
    t["steps"][3]["loss"] = t["steps"][3]["loss"] + 1e-9
    f.write_text(json.dumps(t))
    r = _run(a, b)
    assert r.returncode == 1 and "fp32__seed0" in r.stdout and "DIFFER" in r.stdout, r.stdout + r.stderr
