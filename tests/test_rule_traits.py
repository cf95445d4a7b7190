"""Rules declare what the other verbs need of them (issue 42): whether more seeds decide a result and which
planner row sizes it, tune's failure kind, the outcome table's cause, bisect's kind, the figure it gives.

The declarations live on the rule objects (judge/rules/traits.py); until, the planner, tune's ladder, the
outcome table, check's notes, bisect and the summary read them from the registry.  So no module outside
judge/rules decides by a rule's name (an AST scan for a comparison with, or a lookup of, a literal result
name: nothing to list), result names are a type mypy checks (`ResultName`), and a rule added to the registry
is planned, given seeds, classified, joined and searched without editing any of them.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from ampbench.config import REFERENCE_MODE, ConfigError
from ampbench.judge import ladder, until
from ampbench.judge.planner import plan_for
from ampbench.judge.rules import registry
from ampbench.judge.rules.context import Ctx, Rule, amp_only
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.judge.rules.traits import PlanSize, Result, Seeding
from ampbench.results.verdicts import ModeVerdict, RuleResult, combine
from tests.factories import make_suite, make_trials

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ampbench"
RULES_DIR = PKG / "judge" / "rules"
AMP = "amp-o1-fp16"

def result_names() -> set[str]:
    return {r.name for r in registry.results()}


LOOKUPS = {"result", "rule_for", "declared", "emits"}   # the registry's and a rule's lookups by result name
RULE_ATTRS = {"rule", "name"}                          # RuleResult.rule, Result.name: a result's name


def _names_a_result(node: ast.AST) -> bool:
    """The expression reads a result's name (`r.rule`, `res.name`, anywhere inside it)."""
    return any(isinstance(n, ast.Attribute) and n.attr in RULE_ATTRS for n in ast.walk(node))


def decisions_by_name(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of each place that decides by a literal result name: one compared with a result's name
    (`r.rule == "speedup"`, `"memory" in {v.rule ...}`), looked up in the registry (`result("energy")`), or a
    table of rules (two or more strings, every one a result name: `SEEDED = ("speedup", "accuracy-parity")`).
    A lone string that only equals a result name (an event kind, a failure kind, a field) decides nothing."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            literal = [p for p in parts if isinstance(p, ast.Constant) and p.value in names]
            if literal and any(_names_a_result(p) for p in parts if p not in literal):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if fn in LOOKUPS and any(isinstance(a, ast.Constant) and a.value in names for a in node.args):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):   # a table of rules (before issue 42)
            items = [k for k in (node.keys if isinstance(node, ast.Dict) else node.elts)
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(items) >= 2 and all(k.value in names for k in items):
                found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_no_module_outside_the_rules_decides_by_a_rule_name() -> None:
    """What a rule is (seeded, tune's kind, the outcome's cause, bisect's kind, its figure) is declared on
    its rule object and read through judge.rules.registry: no module outside judge/rules compares a result's
    name with a literal one or looks one up by a literal.  Inside the rules every name is a `ResultName`
    constant (mypy refuses a bare string: test_result_names_are_a_type_mypy_checks), so a rename is one line
    and nothing here is keyed by module or function: moving code breaks no list."""
    names = result_names()
    found = [f"ampbench/{path.relative_to(PKG).as_posix()}:{line}: {code}"
             for path in sorted(PKG.rglob("*.py")) if RULES_DIR not in path.parents
             for line, code in decisions_by_name(path.read_text(encoding="utf-8"), names)]
    assert not found, ("modules that decide by a rule's name (declare it on the rule: judge/rules/traits.py, "
                       "and read it through judge.rules.registry):\n" + "\n".join(found))


def test_the_check_sees_a_decision_by_name() -> None:
    source = ("if r.rule == 'speedup':\n    pass\n"
              "x = 'memory' in {v.rule for v in vs}\n"
              "k = registry.result('energy').tune\n"
              "SEEDED = ('speedup', 'accuracy-parity')\n"
              "CHECKS = {'trial-ok': 1, 'energy': 2, 'memory': 3}\n"
              "ok = kind == 'stability' or ev.KIND == 'memory' or row['speedup'] > 1\n")   # no result's name read
    names = {"speedup", "memory", "energy", "stability", "accuracy-parity"}
    assert sorted(line for line, _ in decisions_by_name(source, names)) == [1, 3, 4, 5]   # not 6: not all rules


@pytest.mark.slow
def test_result_names_are_a_type_mypy_checks(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A result is named by a `ResultName` where a rule emits or declares it: mypy refuses a bare string, a
    typo among them, and accepts the rule's constant."""
    import os
    import subprocess
    import sys

    probe = tmp_path / "probe.py"
    probe.write_text("from ampbench.judge.rules.context import Ctx\n"
                     "from ampbench.judge.rules.speed import SPEEDUP_NAME\n"
                     "from ampbench.judge.rules.traits import Result\n\n\n"
                     "def f(c: Ctx) -> None:\n"
                     "    c.rule('speedupp', 'PASS', None, None, 'm')\n"
                     "    Result('speedup')\n"
                     "    c.rule(SPEEDUP_NAME, 'PASS', None, None, 'm')\n", encoding="utf-8")
    store = getattr(request.config, "cache", None)  # the mypy cache test_types keeps (absent: a cold run)
    cache = ["--cache-dir", str(store.mkdir("mypy"))] if store is not None else []
    out = subprocess.run([sys.executable, "-m", "mypy", str(probe), *cache], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    errors = [ln for ln in out.stdout.splitlines() if ": error:" in ln]
    assert [ln.split(":")[1] for ln in errors] == ["7", "8"], out.stdout
    assert all('expected "ResultName"' in ln for ln in errors), out.stdout


def test_the_declarations_are_the_tables_they_replace() -> None:
    """The registry's declarations say what the hard-coded tables said before issue 42."""
    results = {r.name: r for r in registry.results()}
    seeded = {n for n, r in results.items() if r.seeds is not None}
    assert seeded == {"speedup", "accuracy-parity", "history-throughput", "history-metric"}
    assert {n: r.seeds.sized_by for n, r in results.items() if r.seeds and r.seeds.sized_by} == \
        {"history-metric": "accuracy-parity"}
    assert {n for n, r in results.items() if r.seeds and r.seeds.effect} == {"speedup", "history-throughput"}
    assert {n: r.tune for n, r in results.items() if r.tune} == {
        "amp-active": "inactive", "completeness": "error", "stability": "stability", "accuracy-parity": "parity",
        "speedup": "speed", "memory": "speed"}
    assert {n for n, r in results.items() if r.outcome == "cause"} == {"amp-active"}
    assert registry.bisectable() == {"accuracy-parity": "in-run", "speedup": "in-run", "memory": "in-run",
                                     "history-throughput": "history", "history-metric": "history",
                                     "history-memory": "history"}
    assert {n: r.figure for n, r in results.items() if r.figure} == {
        "speedup": "speedup", "memory": "memory_reduction", "accuracy-parity": "metric_delta",
        "history-throughput": "history_change", "time-to-target": "time_to_target"}
    assert {n for n, r in results.items() if r.interval} == {"speedup", "memory", "accuracy-parity",
                                                             "time-to-target"}   # a claim's figures (issue 60)
    assert HISTORY_THROUGHPUT in results


def test_the_docs_table_is_rendered_from_the_declarations() -> None:
    """The generated docs/reference/rules.md holds `traits_table()`, one row per result name in registry order."""
    table = registry.traits_table()
    assert table in (ROOT / "docs" / "reference" / "rules.md").read_text(encoding="utf-8")
    assert [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]] == [r.name for r in registry.results()]
    assert "| history-metric | yes, sized by accuracy-parity's row | - | - | history | - |" in table


def test_the_bisect_cli_offers_the_bisectable_results() -> None:
    """`bisect --rule`'s help lists what the rule objects declare bisectable; its default is history-throughput."""
    from ampbench.cli import verbs

    opt = inspect.signature(verbs.bisect).parameters["rule"].default
    assert opt.default == HISTORY_THROUGHPUT
    assert set(opt.help.split("|")) == set(registry.bisectable())


# ---------------------------------------------------------------- a new rule, declared, seen everywhere


def _warmup(c: Ctx) -> list[RuleResult]:
    return [c.rule("warmup-share", "INCONCLUSIVE", 0.1, 0.05, "warm-up share not decided"),
            c.rule("warmup-tail", "INCONCLUSIVE", 0.1, 0.05, "tail not decided")]


def _plan_warmup(suite, mode: str, ok) -> PlanSize | None:
    return None if mode == REFERENCE_MODE else PlanSize(0.04, "a warm-up share of 5%", 5)


NEW = Rule("warmup", _warmup, amp_only, results=(
    Result("warmup-share", seeds=Seeding(plan=_plan_warmup), tune="parity", bisect="in-run", figure="metric_delta"),
    Result("warmup-tail", seeds=Seeding(sized_by="warmup-share"), outcome="cause", bisect="history"),
))


@pytest.fixture
def with_new_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "RULES", (*registry.RULES, NEW))


def _mode_verdict(*results: tuple[str, str, bool]) -> ModeVerdict:
    rules = [RuleResult(suite="toy", mode=AMP, rule=name, status=status, observed=0.25, message=f"{name} said so",
                        informational=info) for name, status, info in results]
    return ModeVerdict(suite="toy", mode=AMP, verdict=combine([r.status for r in rules]), rules=rules)


@pytest.mark.usefixtures("with_new_rule")
def test_a_new_seeded_rule_is_planned_and_asks_for_seeds_without_editing_until_or_the_planner() -> None:
    s = make_suite(seeds=(0, 1, 2))
    rows = plan_for(s, make_trials(s))
    mine = [r for r in rows if r.rule == "warmup-share"]
    assert [(r.mode, r.seeds_needed, r.effect) for r in mine] == [(AMP, 5, "a warm-up share of 5%")]
    assert {r.rule for r in rows} == {"warmup-share", "speedup", "accuracy-parity", "history-throughput"}
    v = _mode_verdict(("warmup-share", "INCONCLUSIVE", False), ("warmup-tail", "INCONCLUSIVE", False))
    needs = until.needs([v], rows, 3, 12)
    assert [(n.rule, n.more_seeds_help) for n in needs] == [("warmup-share", True), ("warmup-tail", True)]
    assert "the planner needs 5 seeds" in needs[1].why        # sized by warmup-share's row
    assert not until.want_more(until.needs([v], rows, 3, 4))  # beyond the cap of 4
    unplanned = RuleResult(suite="toy", mode=AMP, rule="warmup-other", status="INCONCLUSIVE", message="m")
    assert until.needs([ModeVerdict(suite="toy", mode=AMP, verdict="INCONCLUSIVE", rules=[unplanned])], rows, 3, 12) == []


@pytest.mark.usefixtures("with_new_rule")
def test_a_new_rule_is_classified_joined_searched_and_figured_from_its_declaration(tmp_path: Path) -> None:
    from ampbench.commands.bisect import _check_rule

    failed = _mode_verdict(("speedup", "FAIL", False), ("warmup-share", "FAIL", False))
    assert ladder.classify(failed, ladder.Facts())[0] == "parity"   # parity comes before speed
    assert registry.figures(failed) == {"speedup": 0.25, "metric_delta": 0.25}
    s = make_suite(seeds=(0, 1))
    assert _check_rule(s, "warmup-share", []) == [AMP]               # in-run: the AMP modes
    assert _check_rule(s, "warmup-tail", []) == ["fp32", AMP]        # history: every mode
    with pytest.raises(ConfigError, match="warmup-tail"):
        _check_rule(s, "time-to-target", [])                          # not declared bisectable: refused, listed
    from ampbench.judge.check import _notes

    cause = _mode_verdict(("warmup-tail", "FAIL", False), ("speedup", "INCONCLUSIVE", True))
    assert any("AMP inactive" in n for n in _notes([cause]))


@pytest.mark.usefixtures("with_new_rule")
def test_a_new_cause_is_the_outcome_line_informational_results_join(tmp_path: Path) -> None:
    from ampbench.report import outcome

    class Suite:
        def mode(self, name: str) -> None:
            raise KeyError(name)   # no advice: each line is its result's first sentence

    view = SimpleNamespace(suite=Suite(), check=SimpleNamespace(verdicts=[_mode_verdict(
        ("warmup-tail", "FAIL", False), ("speedup", "INCONCLUSIVE", True), ("memory", "INCONCLUSIVE", True))]))
    steps = outcome.next_steps(view)  # type: ignore[arg-type]  # a stand-in with what next_steps reads
    assert len(steps) == 1 and steps[0].causes == ((AMP, "warmup-tail", "FAIL"),)
    assert steps[0].covered == ("speedup", "memory")
