"""The `slow` marker is truthful: tests/conftest.py fails an unmarked test whose child processes used more
than SLOW_CHILD_CPU_S CPU seconds, so `pytest -m "not slow"` is the quick tier it claims to be.

Checked on a real pytest run in a subprocess (itself over the limit, so marked slow): an unmarked test
that burns CPU in a child fails with the instruction to mark it; the same test marked passes; an unmarked
test whose child does nothing passes; a slow module-scoped fixture counts toward the first test using it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BURN = "import subprocess, sys\nBURN = [sys.executable, '-c', 'import time\\nt=time.process_time()\\nwhile time.process_time()-t<0.6: pass']\n"
CASES = BURN + """
import pytest

@pytest.fixture(scope="module")
def shared():
    subprocess.run(BURN, check=True)

def test_unmarked_burner():
    subprocess.run(BURN, check=True)

@pytest.mark.slow
def test_marked_burner():
    subprocess.run(BURN, check=True)

def test_unmarked_idle_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_first_user_of_a_slow_fixture(shared):
    pass

def test_second_user_of_a_slow_fixture(shared):
    pass
"""


@pytest.mark.slow
def test_an_unmarked_test_that_runs_a_costly_child_fails(tmp_path: Path) -> None:
    # the real hooks, with the bar lowered to 0.4 CPU s so each burner child costs 0.6 s, not 3.5
    (tmp_path / "conftest.py").write_text("import tests.conftest\ntests.conftest.SLOW_CHILD_CPU_S = 0.4\n"
                                          "from tests.conftest import (pytest_fixture_setup, pytest_runtest_makereport,"
                                          " pytest_runtest_setup)  # noqa: F401\n")
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["slow: x"]\n')
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                       check=False, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "ERROR test_cases.py::test_unmarked_burner" in out and "mark it @pytest.mark.slow" in out, out
    assert "ERROR test_cases.py::test_first_user_of_a_slow_fixture" in out, out
    assert "ERROR test_cases.py::test_second_user_of_a_slow_fixture" in out and "costly fixture" in out, out
    assert "PASSED test_cases.py::test_marked_burner" in out, out
    assert "PASSED test_cases.py::test_unmarked_idle_child" in out, out
