"""Shared fixtures: tiny suite files for the toy workload (a trial takes ~3 s, mostly Paddle's import)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Compile ampbench's own modules once, in the controller, where the environment says not to write
    bytecode (PYTHONDONTWRITEBYTECODE=1, set on this project's machines): otherwise every one of the
    ~600 processes the suite starts (trial workers, CLI subprocesses, programs under the hook) compiles
    the modules it imports from source, ~0.2 CPU s each on a clean clone. The .pyc files land in the
    checkout's ignored __pycache__/ folders; nothing outside the checkout is written."""
    if sys.flags.dont_write_bytecode and not hasattr(config, "workerinput"):
        import compileall

        compileall.compile_dir(str(ROOT / "ampbench"), quiet=1, workers=1)
    benchmarks_off_under_xdist(config)
    interruptible_children()
    if hasattr(config.option, "loadscopereorder"):   # xdist: files in the order below, not by their test count
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test files longest first (tests/file_seconds.json, measured: scripts/test_file_seconds.py), each
    file's tests in their own order.  Why: `--dist loadfile` hands whole files to the workers in this order;
    xdist's own order (most tests first) left the Slurm files (few tests, minutes of waiting) for the end, one
    worker's long tail.  A file not listed keeps its place after the listed ones."""
    import json

    try:
        seconds = json.loads((ROOT / "tests" / "file_seconds.json").read_text())
    except (OSError, ValueError):
        return
    items.sort(key=lambda item: -float(seconds.get(item.path.name, 0.0)))


def interruptible_children() -> None:
    """A test suite started in the background of a non-interactive shell (`cmd &`, nohup) inherits SIGINT
    ignored, and so does every process it starts: Python installs no KeyboardInterrupt handler for a signal
    ignored at its start, so the tests that press Ctrl-C on ampbench (a real SIGINT to a run, a bisect, a
    Slurm wait, publish --serve) saw nothing happen and timed out (16 of them in a CI run started with `&`).
    Pytest's processes take SIGINT back (Python's own handler), so the processes they start begin with it at
    its default. A suite started in the foreground is unchanged."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def benchmarks_off_under_xdist(config: pytest.Config) -> None:
    """pytest-benchmark turns itself off under xdist, and says so with a PytestBenchmarkWarning in every process
    (8 lines of a `-n 3` run, each an alarm about nothing): turned off here first, it has nothing to say.
    Its own pytest_configure runs last (trylast), after this one."""
    if hasattr(config.option, "benchmark_disable") and (
            config.getoption("dist", "no") != "no" or os.environ.get("PYTEST_XDIST_WORKER")):
        config.option.benchmark_disable = True

TOY_SUITE = """
[suite]
name = "toy"
workload = "toy"
metric = "accuracy"
seeds = [0]

[workload]
train_rows = 512
eval_rows = 128

[train]
batch_size = 32
steps = 12
warmup_steps = 2
timeout_s = 120

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
dtype = "float16"
custom_black_list = ["embedding"]
"""


@pytest.fixture
def toy_suite(tmp_path: Path):
    """Write a toy suite (optionally with extra TOML appended) and return its path."""

    def make(extra: str = "", body: str = TOY_SUITE, name: str = "toy.toml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(body) + "\n" + textwrap.dedent(extra))
        return p

    return make


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("AMPBENCH_CACHE", str(d))
    return d


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder as the current directory, its own cache, AMPBENCH_FAULT cleared."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AMPBENCH_FAULT", raising=False)
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def run_dir(work: Path) -> Path:
    """A finished two-seed run folder made by the factories (no paddle, no training)."""
    from tests.factories import make_run, make_suite, make_trials

    s = make_suite(seeds=(0, 1))
    return make_run(work / "runs", s, make_trials(s, n_steps=20, config_hash=s.config_hash()))


# The `slow` marker, kept truthful: a test whose child processes (trial workers, the CLI, a program under
# the hook) used more CPU than SLOW_CHILD_CPU_S must be marked slow, so `-m "not slow"` is the quick tier it
# claims to be.  CPU seconds of reaped children (getrusage), not wall time: a loaded machine does not move it.
# A trial worker or a program under the hook costs at least 3 CPU s (one Paddle import alone is 2.3 here:
# 1.94 user + 0.38 sys, then training), so any test that starts one is caught. Below the bar: CLI
# subprocesses and the static tools (1.4-2.5 CPU s, varying across machines and runs), and children that
# an earlier test left and this one reaps (getrusage charges them to whoever reaps them): a bar at the
# tools' own cost failed unmarked tests on some runs and not others.
SLOW_CHILD_CPU_S = 3.0


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Fail the teardown of an unmarked test whose children used over SLOW_CHILD_CPU_S (a module-scoped
    fixture's runs count towards the first test that uses it), or that uses a fixture that did."""
    outcome = yield
    rep = outcome.get_result()
    if call.when != "teardown" or item.get_closest_marker("slow") is not None:
        return
    used = _children_cpu() - _START.get(item.nodeid, _children_cpu())
    costly = sorted(set(getattr(item, "fixturenames", ())) & _SLOW_FIXTURES)
    if (used > SLOW_CHILD_CPU_S or costly) and rep.passed:
        rep.outcome = "failed"
        why = f"uses the costly fixture(s) {costly}" if costly else f"its child processes used {used:.1f} CPU s"
        rep.longrepr = (f"{item.nodeid}: {why} (> {SLOW_CHILD_CPU_S} CPU s): "
                        "mark it @pytest.mark.slow (pyproject's `slow` marker)")


_START: dict[str, float] = {}
_SLOW_FIXTURES: set[str] = set()   # fixtures whose setup's children used over the limit: every user is slow


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    start = _children_cpu()
    yield
    if _children_cpu() - start > SLOW_CHILD_CPU_S:
        _SLOW_FIXTURES.add(fixturedef.argname)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _START[item.nodeid] = _children_cpu()
