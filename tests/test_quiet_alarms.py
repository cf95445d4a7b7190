"""Alarms that are not (issue 61): each silenced where it starts, and shown to fail when it comes back."""

from __future__ import annotations

import warnings

import pytest

from tests.conftest import benchmarks_off_under_xdist

pytest_plugins = ["pytester"]


class _Quiet:
    @staticmethod
    def pytest_configure(config: pytest.Config) -> None:
        benchmarks_off_under_xdist(config)


@pytest.mark.parametrize("quiet", [True, False])
def test_no_benchmark_warning_in_an_xdist_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                quiet: bool) -> None:
    """In an xdist worker (PYTEST_XDIST_WORKER set) pytest-benchmark warns that it is off, once per process;
    the test suite's conftest turns it off first, so nothing is said (without it, the warning is back)."""
    pytest.importorskip("pytest_benchmark")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    pytester.makepyfile("def test_x():\n    pass\n")
    with warnings.catch_warnings(record=True) as got:   # warned while configuring: not the inner session's
        warnings.simplefilter("always")
        r = pytester.runpytest_inprocess(plugins=[_Quiet()] if quiet else [])   # pytest-benchmark: autoloaded
    r.assert_outcomes(passed=1)
    said = [str(w.message) for w in got if type(w.message).__name__ == "PytestBenchmarkWarning"]
    assert bool(said) is not quiet, said
