"""The pytest plugin (issue 61): a Paddle project's own tests fail with the verdict's text when a rule FAILs.

The quick tests drive the plugin through pytester in process (`-p ampbench.pytest_plugin`, entry-point
autoload off so an installed copy is not registered twice) on run folders the factories write; the slow ones
run the toy suite for real: in process through pytester, and in a fresh project whose ampbench is
pip-installed (no `-p`: the package's `pytest11` entry point loads the plugin) in a real pytest subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
import tomllib

from tests.factories import make_run, make_suite, make_trials

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parent.parent
PLUGIN = ("-p", "ampbench.pytest_plugin")


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester with only the plugin asked for (an installed ampbench's entry point would register it twice)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester


def parity_runs(root: Path) -> tuple[Path, Path]:
    """(a run whose AMP mode loses 20 points of accuracy: accuracy-parity FAILs, one that matches FP32)."""
    suite = make_suite(("fp32", "amp-o1-fp16"), seeds=(0, 1, 2))
    bad = make_run(root, suite, make_trials(suite, metrics={"fp32": [0.9, 0.91, 0.9], "amp-o1-fp16": [0.7, 0.71, 0.7]}),
                   run_id="bad")
    good = make_run(root, suite, make_trials(suite), run_id="good")
    return bad, good


def test_the_fixture_fails_a_test_with_the_verdicts_text(isolated: pytest.Pytester, tmp_path: Path) -> None:
    bad, good = parity_runs(tmp_path)
    isolated.makepyfile(f"""
        def test_amp_parity(ampbench):
            ampbench.load({str(bad)!r}).assert_passed()

        def test_a_run_without_a_fail_passes(ampbench):
            result = ampbench.load({str(good)!r})
            result.assert_passed()
            assert result.verdicts == {{"fp32": "PASS", "amp-o1-fp16": "INCONCLUSIVE"}} and result.exit_code == 3

        def test_strict_fails_on_inconclusive(ampbench):
            ampbench.load({str(good)!r}).assert_passed(strict=True)
    """)
    r = isolated.runpytest(*PLUGIN)
    r.assert_outcomes(passed=1, failed=2)
    text = r.stdout.str()
    assert "toy: fp32 PASS, amp-o1-fp16 FAIL -> exit 1" in text
    assert "amp-o1-fp16 FAIL: accuracy-parity FAIL: AMP mean accuracy 0.7033 vs FP32 0.9033" in text
    assert "Traceback" not in text and "def test_amp_parity" not in text   # the verdict, not the test's code
    assert "amp-o1-fp16 INCONCLUSIVE: speedup INCONCLUSIVE: " in text          # strict


def test_a_bad_suite_fails_in_one_line_and_listed_suites_are_items(isolated: pytest.Pytester) -> None:
    isolated.makepyfile("""
        def test_typo(ampbench):
            ampbench.run("resnt")
    """)
    r = isolated.runpytest(*PLUGIN)
    r.assert_outcomes(failed=1)
    assert "ampbench: resnt: suite file not found" in r.stdout.str() and "did you mean resnet?" in r.stdout.str()
    isolated.makeini("[pytest]\nampbench_suites = resnet\n")
    listed = isolated.runpytest(*PLUGIN, "--collect-only", "-q", "--ampbench-suite", "toy")
    assert listed.ret == 0
    assert "ampbench::toy" in listed.stdout.str() and "ampbench::resnet" in listed.stdout.str()


def test_the_marker_runs_its_suite_once_a_session(isolated: pytest.Pytester, tmp_path: Path) -> None:
    """Two tests marked with the same suite and options share one run; the fixture names the marker it needs."""
    bad, _ = parity_runs(tmp_path)
    isolated.makeconftest(f"""
        import pytest

        import ampbench.pytest_plugin as plugin
        CALLS = []

        def fake_run(self, suite, **options):
            CALLS.append((suite, options))
            return self.load({str(bad)!r})

        @pytest.fixture(autouse=True)
        def _fake(monkeypatch):   # undone after each test: the plugin module outlives this in-process run
            monkeypatch.setattr(plugin.AmpBench, "run", fake_run)

        def pytest_sessionfinish(session):
            print("runs:", CALLS)
    """)
    isolated.makepyfile("""
        import pytest

        @pytest.mark.ampbench("toy", seeds="0,1", set=["train.steps=50"])
        def test_verdicts(ampbench_result):
            assert ampbench_result.verdicts["amp-o1-fp16"] == "FAIL"

        @pytest.mark.ampbench("toy", seeds="0,1", set=["train.steps=50"])
        def test_fails(ampbench_result):
            ampbench_result.assert_passed()

        def test_unmarked(ampbench_result):
            pass
    """)
    r = isolated.runpytest(*PLUGIN, "-s")
    r.assert_outcomes(passed=1, failed=1, errors=1)   # the unmarked test: an error in its fixture
    out = r.stdout.str()
    assert "runs: [('toy', {'seeds': '0,1', 'set': ['train.steps=50']})]" in out   # once, with the marker's options
    assert "mark the test @pytest.mark.ampbench(SUITE, ...)" in out


# ---------------------------------------------------------------- the real path


def diverging_toy(folder: Path) -> Path:
    """The bundled toy suite with a learning rate that sends the FP32 loss to infinity (stability FAILs),
    FP32 only, 2 seeds, 60 steps: a real FAIL in a few CPU seconds."""
    from ampbench.config.bundled import bundled_suites

    doc = tomllib.loads(Path(bundled_suites()["toy"]).read_text(encoding="utf-8"))
    doc["suite"]["name"] = "toy-diverging"
    doc["modes"] = [m for m in doc["modes"] if m["name"] == "fp32"]
    doc["train"].update(steps=60, warmup_steps=5, optimizer={"name": "sgd", "lr": 1e30})
    path = folder / "diverging.toml"
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_real_run_in_process_fails_with_the_stability_sentence(isolated: pytest.Pytester) -> None:
    suite = diverging_toy(isolated.path)
    isolated.makepyfile(f"""
        def test_amp(ampbench):
            ampbench.run({str(suite)!r}, seeds="0,1").assert_passed()
    """)
    r = isolated.runpytest(*PLUGIN)
    r.assert_outcomes(failed=1)
    assert "toy-diverging: fp32 FAIL -> exit 1" in r.stdout.str()
    assert "fp32 FAIL: stability FAIL: " in r.stdout.str()


def _pip_install(dest: Path, work: Path) -> None:
    """ampbench pip-installed (no dependencies: they are this interpreter's) into `dest`, built from a copy of
    the source so no build folder lands in the repository."""
    src = work / "src"
    shutil.copytree(REPO / "ampbench", src / "ampbench", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-compile",
                    "--disable-pip-version-check", "--target", str(dest), str(src)], check=True, timeout=300,
                   capture_output=True, text=True)


@pytest.mark.slow
def test_a_fresh_project_that_pip_installs_ampbench(tmp_path: Path) -> None:
    """The acceptance: a 10-line test file in a project of its own, ampbench pip-installed, plain `pytest`
    (the entry point loads the plugin): the toy suite runs and the test fails with the verdict's sentence; the
    same suite listed in the project's ini is a test item failing alike."""
    site, project = tmp_path / "site", tmp_path / "project"
    project.mkdir()
    _pip_install(site, tmp_path)
    assert "ampbench = ampbench.pytest_plugin" in next(site.glob("ampbench-*.dist-info/entry_points.txt")).read_text()
    suite = diverging_toy(project)
    (project / "test_amp.py").write_text(
        "import pytest\n\n\n"
        "def test_amp_does_not_break_training(ampbench):\n"
        "    result = ampbench.run('diverging.toml', seeds='0,1')\n"
        "    result.assert_passed()\n")
    (project / "pytest.ini").write_text(f"[pytest]\nampbench_suites = {suite.name}\n")
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
                                                                "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS",
                                                                "CI", "BUILD_NUMBER")},
           "PYTHONPATH": str(site), "COLUMNS": "200"}   # CI/BUILD_NUMBER unset: pytest on CI prints whole messages
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ampbench-out", "runs"],
                       cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    summary = [ln for ln in out.splitlines() if ln.startswith("FAILED ")]
    assert len(summary) == 2 and "2 failed" in out, out
    assert summary[0].startswith("FAILED test_amp.py::test_amp_does_not_break_training - Failed: toy-diverging: fp32 "
                                 "FAIL -> exit 1"), summary
    assert summary[1].startswith("FAILED ampbench::diverging.toml - toy-diverging: fp32 FAIL -> exit 1"), summary
    assert out.count("fp32 FAIL: stability FAIL: ") == 2, out   # each failure's text: the rule's sentence
    assert str(site / "ampbench") in subprocess.run(
        [sys.executable, "-c", "import ampbench; print(ampbench.__file__)"], cwd=project, env=env,
        capture_output=True, text=True, check=True).stdout   # the installed copy ran, not the repository's
