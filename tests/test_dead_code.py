"""No dead code (vulture at 60% confidence, pyproject [tool.vulture] + vulture_whitelist.py), and no
suite key that nothing reads: a retired key is refused in a suite file, yet older run folders that
recorded it still open."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.config import ConfigError
from ampbench.results import open_run
from ampbench.results.run_dir import RETIRED_CONFIG_KEYS
from ampbench.workloads.suites import load_suite
from tests.factories import make_run, make_suite, make_trials

ROOT = Path(__file__).resolve().parents[1]


def vulture(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vulture", *args], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=300)


@pytest.mark.slow
def test_vulture_finds_no_dead_code() -> None:
    out = vulture(ROOT)  # paths, confidence and ignore rules from pyproject.toml
    assert out.returncode == 0 and not out.stdout.strip(), (
        "dead code (delete it, or add the name to vulture_whitelist.py with its reason):\n"
        f"{out.stdout}{out.stderr}")


@pytest.mark.slow
def test_vulture_run_this_way_sees_a_dead_function(tmp_path: Path) -> None:
    """The check can fail: the same configuration over a copy with one unused function reports it."""
    shutil.copytree(ROOT / "ampbench", tmp_path / "ampbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "vulture_whitelist.py", tmp_path / "vulture_whitelist.py")
    units = tmp_path / "ampbench" / "core" / "units.py"
    units.write_text(units.read_text(encoding="utf-8") + "\n\ndef never_called_anywhere() -> int:\n    return 1\n",
                     encoding="utf-8")
    out = vulture(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr  # vulture's "dead code found"
    assert "ampbench/core/units.py" in out.stdout and "never_called_anywhere" in out.stdout


def test_whitelist_lines_each_say_why() -> None:
    lines = [ln for ln in (ROOT / "vulture_whitelist.py").read_text(encoding="utf-8").splitlines()
             if ln.startswith("_.")]
    bare = [ln for ln in lines if "#" not in ln and not ln.startswith("_.history_alpha")]
    assert lines and not bare, f"whitelist entries without a reason: {bare}"


@pytest.mark.parametrize(("section", "key"), RETIRED_CONFIG_KEYS)
def test_a_retired_key_in_a_suite_is_refused_naming_it(toy_suite, section: str, key: str) -> None:
    """No model keeps a field for a retired key: it is refused in one line saying it is retired and what to do."""
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: retired: nothing read it .*; drop the key"):
        load_suite(toy_suite(), overrides=[f"{section}.{key}=1"])


def test_a_run_that_recorded_retired_keys_still_opens_with_the_same_suite(tmp_path: Path) -> None:
    suite = make_suite(seeds=(0,))
    run = make_run(tmp_path, suite, make_trials(suite, n_steps=4))
    info_path = run / "run.json"
    doc = json.loads(info_path.read_text(encoding="utf-8"))
    for section, key in RETIRED_CONFIG_KEYS:  # what an earlier version wrote
        doc["config"].setdefault(section, {})[key] = 7
    info_path.write_text(json.dumps(doc), encoding="utf-8")
    opened = open_run(run)
    assert opened.suite == suite and opened.suite.config_hash() == suite.config_hash()
    kept = json.loads(info_path.read_text(encoding="utf-8"))["config"]
    assert kept["train"]["log_every"] == 7  # the file itself is not rewritten
