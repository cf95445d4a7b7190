"""ampbench in pytest, where Paddle projects keep their checks: a fixture, a marker and suites as tests.

Registered by the package (`pytest11` entry point `ampbench`), so installing ampbench is enough:

- the `ampbench` fixture runs a suite (a bundled name or a suite file) or opens a run folder and hands back
  its verdicts: `ampbench.run("toy").assert_passed()` fails the test with the verdict's own text;
- `@pytest.mark.ampbench("toy", seeds="0,1", set=["train.steps=200"])` with the `ampbench_result` fixture:
  the marked suite run once per session for those options;
- `pytest --ampbench-suite toy --ampbench-suite suites/mine.toml` (or the `ampbench_suites` ini list): each
  suite one test item, `ampbench::<suite>`, failing with the verdict's text when a mode FAILs (with
  `--ampbench-strict`, also when one is INCONCLUSIVE), as `ampbench run` would exit 1.

Each run is a real `ampbench run` (engine.execute: every trial in its own process), its folder under
`--ampbench-out` (default: pytest's temporary folder), its output in the test's captured stdout. The module
imports only pytest until a suite is asked for: every pytest session of a machine with ampbench installed
loads it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ampbench.results.verdicts import CheckReport

MARKER = "ampbench(suite, profile=None, modes=None, seeds=None, set=None): the suite the `ampbench_result` " \
         "fixture runs for this test (once per session for the same options)"


@dataclass
class SuiteResult:
    """One judged run: its folder, the check report and the exit code `ampbench run` would give."""

    run_dir: Path
    report: CheckReport
    output: str = ""      # what the run printed (the outcome table, one line per trial)

    @property
    def exit_code(self) -> int:
        return self.report.exit_code

    @property
    def verdicts(self) -> dict[str, str]:
        """mode -> PASS / FAIL / INCONCLUSIVE / ERROR."""
        return {v.mode: v.verdict for v in self.report.verdicts}

    def failures(self, strict: bool = False) -> list[str]:
        """The verdict's text of every mode that did not pass: `mode VERDICT: rule STATUS: message` per rule
        that decided it (INCONCLUSIVE only when `strict`)."""
        bad = ("FAIL", "ERROR", "INCONCLUSIVE") if strict else ("FAIL", "ERROR")
        out = []
        for v in self.report.verdicts:
            if v.verdict in bad:
                out += [f"{v.mode} {v.verdict}: {r.rule} {r.status}: {' '.join(r.message.split())}"
                        for r in v.reasons if r.status in bad]
        return out

    def summary_line(self) -> str:
        modes = ", ".join(f"{m} {s}" for m, s in self.verdicts.items())
        return f"{self.report.suite}: {modes} -> exit {self.exit_code} ({self.run_dir})"

    def assert_passed(self, strict: bool = False) -> None:
        """Fail the calling test with the verdict's text when a mode FAILs or ERRs (strict: or is INCONCLUSIVE),
        as `ampbench run` exits 1 or 2 (with --strict, also 3)."""
        failed = self.failures(strict)
        if failed:
            pytest.fail("\n".join([self.summary_line(), *failed]), pytrace=False)


@dataclass
class AmpBench:
    """The `ampbench` fixture: runs suites into `out` and opens run folders."""

    out: Path
    cache: dict[tuple[Any, ...], SuiteResult] = field(default_factory=dict)

    def run(self, suite: str | Path, *, profile: str | None = None, modes: list[str] | None = None,
            seeds: str | list[int] | None = None, set: list[str] | None = None) -> SuiteResult:
        """`ampbench run SUITE` (a bundled name or a suite file) with these options; a bad suite or option
        fails the test with ampbench's one-line message."""
        from ampbench.commands.check import recorded_check
        from ampbench.commands.run import Output, Policies, RunRequest
        from ampbench.commands.run import run as run_verb
        from ampbench.core.errors import UserError
        from ampbench.core.names import new_run_id
        from ampbench.core.terminal import TerminalConsole

        seed_text = ",".join(map(str, seeds)) if isinstance(seeds, list) else seeds
        run_id = new_run_id()
        request = RunRequest(suite_file=Path(suite), profile=profile, modes=tuple(modes or ()), seeds=seed_text,
                             overrides=tuple(set or ()), out_dir=self.out, run_id=run_id)
        policies = Policies(output=Output(report=False, status_every=0))
        buf = io.StringIO()
        try:
            run_verb(request, policies, [], TerminalConsole(file=buf, width=160, no_color=True))
        except UserError as e:
            pytest.fail(f"ampbench: {e}", pytrace=False)
        print(buf.getvalue(), end="")   # into the test's captured output
        found = sorted(self.out.glob(f"*/{run_id}"))
        if not found:
            pytest.fail(f"ampbench: {suite}: the run wrote no run folder\n{buf.getvalue()}", pytrace=False)
        return SuiteResult(found[0], recorded_check(found[0]), buf.getvalue())

    def load(self, run_dir: str | Path, baseline: str | Path | None = None) -> SuiteResult:
        """A run folder judged now (against `baseline` when given: `check --baseline`), as `ampbench check`."""
        from ampbench.commands.check import check_run
        from ampbench.core.errors import UserError

        try:
            return SuiteResult(Path(run_dir), check_run(Path(run_dir), baseline=baseline))
        except UserError as e:
            pytest.fail(f"ampbench: {e}", pytrace=False)

    def cached(self, suite: str | Path, **options: Any) -> SuiteResult:
        """`run`, once per session for the same suite and options (the marker's runs)."""
        key = (str(suite), *sorted((k, repr(v)) for k, v in options.items()))
        if key not in self.cache:
            self.cache[key] = self.run(suite, **options)
        return self.cache[key]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ampbench", "AMP checks with ampbench")
    group.addoption("--ampbench-suite", action="append", default=[], metavar="SUITE",
                    help="run this suite (a bundled name or a suite file) as a test item; repeatable")
    group.addoption("--ampbench-out", default=None, metavar="DIR",
                    help="where the suites' run folders go (default: pytest's temporary folder)")
    group.addoption("--ampbench-strict", action="store_true", default=False,
                    help="an INCONCLUSIVE mode fails its suite's test too (as `ampbench run --strict`)")
    parser.addini("ampbench_suites", "suites run as test items (as --ampbench-suite)", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


_SESSION_KEY = pytest.StashKey[AmpBench]()


def _session_bench(config: pytest.Config) -> AmpBench:
    """One `AmpBench` a session (its cache shared by every test), its folder --ampbench-out or a temporary one."""
    if _SESSION_KEY not in config.stash:
        given = config.getoption("ampbench_out")
        out = Path(given) if given else config._tmp_path_factory.mktemp("ampbench")  # type: ignore[attr-defined]  # reason: pytest's tmp_path plugin sets it
        config.stash[_SESSION_KEY] = AmpBench(out)
    return config.stash[_SESSION_KEY]


@pytest.fixture
def ampbench(request: pytest.FixtureRequest) -> AmpBench:
    """Run a suite or open a run folder: `ampbench.run("toy").assert_passed()`."""
    return _session_bench(request.config)


@pytest.fixture
def ampbench_result(request: pytest.FixtureRequest) -> SuiteResult:
    """The judged run of the suite the test's `@pytest.mark.ampbench(...)` names (once per session)."""
    marker = request.node.get_closest_marker("ampbench")
    if marker is None or not marker.args:
        pytest.fail("ampbench_result: mark the test @pytest.mark.ampbench(SUITE, ...) to name the suite it runs",
                    pytrace=False)
    return _session_bench(request.config).cached(marker.args[0], **marker.kwargs)


class SuiteItem(pytest.Item):
    """One suite run as a test (--ampbench-suite / ampbench_suites)."""

    def __init__(self, *, suite: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite

    def runtest(self) -> None:
        result = _session_bench(self.config).run(self.suite)
        failed = result.failures(strict=self.config.getoption("ampbench_strict"))
        if failed:
            raise SuiteFailed("\n".join([result.summary_line(), *failed]))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, SuiteFailed | pytest.fail.Exception):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.suite, None, f"ampbench::{self.suite}"


class SuiteFailed(AssertionError):
    """A suite's verdict: its text is the failure message, no traceback."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """One item per suite asked for, after the collected tests."""
    suites = [*config.getoption("ampbench_suite"), *config.getini("ampbench_suites")]
    for suite in dict.fromkeys(suites):
        items.append(SuiteItem.from_parent(session, name=f"ampbench::{suite}", nodeid=f"ampbench::{suite}", suite=suite))
