"""Rules declare what the other verbs need of them (issue 42): whether more seeds decide a result and which
planner row sizes it, tune's failure kind, the outcome table's cause, bisect's kind, the figure it gives.

The declarations live on the rule objects (judge/rules/traits.py); until, the planner, tune's ladder, the
outcome table, check's notes, bisect and the summary read them from the registry.  So no module outside
judge/rules spells a rule's name (an AST scan, with every exception named and its reason), and a rule added
to the registry is planned, given seeds, classified, joined and searched without editing any of them.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
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

# (module, enclosing function or class, literal) -> why a string equal to a result name is not a rule's name
ALLOWED: dict[tuple[str, str, str], str] = {
    ("cli.py", "bisect", "history-throughput"):
        "the --rule default: the CLI imports no rule at start; test_the_bisect_cli_offers_the_bisectable_results "
        "holds it to HISTORY_THROUGHPUT",
    ("commands/selftest.py", "<module>", "amp-active"): "a selftest check's name (the GPU low-precision calls)",
    ("commands/selftest.py", "<module>", "energy"): "a selftest check's name (NVML energy)",
    ("commands/selftest.py", "_check_trial", "amp-active"): "a selftest check's name",
    ("commands/selftest.py", "_check_trial", "energy"): "a selftest check's name",
    ("commands/tune.py", "_facts", "stability"): "tune's failure kind (judge.ladder.Failure), not the rule",
    ("commands/tune.py", "_step", "stability"): "tune's failure kind (judge.ladder.Failure), not the rule",
    ("commands/tune.py", "_numbers", "speedup"): "the rung record's field (results.tune_file.RungRecord)",
    ("commands/tune.py", "write_tune_md", "speedup"): "tune.md's column header",
    ("record/models.py", "<module>", "op-lists"): "a trial's amp.inactive_code",
    ("record/wire.py", "<module>", "memory"): "the worker's memory event",
    ("judge/changepoint.py", "Step.describe", "speedup"): "a history step's direction, in words",
    ("judge/ladder.py", "<module>", "stability"): "tune's failure kind and its ladder",
    ("judge/ladder.py", "classify", "stability"): "tune's failure kind (declared by the rule's `tune`)",
    ("report/dashboard_interactive.py", "_speedup", "speedup"): "the run summary's speedup field",
    ("report/dashboard_plots.py", "_speedup_panel", "speedup"): "the run summary's speedup field",
    ("report/publish.py", "_steps_html", "speedup"): "a history step's direction, in words",
    ("trackers/driver_facts.py", "_window", "energy"): "a driver fact's name",
    ("trial/command_record.py", "<module>", "memory"): "the hook's memory event kind (_TAKERS: one taker per kind)",
    ("trial/finish.py", "amp_evidence", "op-lists"): "a trial's amp.inactive_code",
    ("trial/replicas.py", "Replicas.finish", "memory"): "a rank's record key",
    ("workloads/command/hook/_ampbench_hook/peaks.py", "Peaks.event", "memory"): "the hook's memory event",
}


def result_names() -> set[str]:
    return {r.name for r in registry.results()}


def _skipped(tree: ast.AST) -> set[int]:
    """Docstrings, `help=` texts and f-string parts: prose, not keys."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            out.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "help" or isinstance(node, ast.JoinedStr):
            out |= {id(n) for n in ast.walk(node)}
    return out


def spelled(source: str, names: set[str]) -> Iterator[tuple[str, str, int]]:
    """(enclosing scope, literal, line) of each string constant equal to one of `names`."""
    tree = ast.parse(source)
    skip = _skipped(tree)

    def visit(node: ast.AST, scope: list[str]) -> Iterator[tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from visit(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value in names \
                    and id(child) not in skip:
                yield ".".join(scope) or "<module>", child.value, child.lineno
            yield from visit(child, scope)
    yield from visit(tree, [])


def scan(names: set[str]) -> dict[tuple[str, str, str], list[int]]:
    found: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(PKG.rglob("*.py")):
        if RULES_DIR in path.parents or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PKG).as_posix()
        for scope, name, line in spelled(path.read_text(encoding="utf-8"), names):
            found.setdefault((rel, scope, name), []).append(line)
    return found


def test_no_module_outside_the_rules_spells_a_rule_name() -> None:
    """What a rule is (seeded, tune's kind, the outcome's cause, bisect's kind, its figure) is declared on
    its rule object: a string equal to a result name anywhere in ampbench/ outside judge/rules is either
    named in ALLOWED with why it is something else, or a decision that belongs on the rule.  An ALLOWED
    entry that no longer occurs is dropped, so the list stays the list of exceptions there are."""
    found = scan(result_names())
    spelled_out = {f"ampbench/{k[0]}:{lines[0]} ({k[1]}): {k[2]!r}" for k, lines in found.items() if k not in ALLOWED}
    assert not spelled_out, ("modules that know rules by name (declare it on the rule: judge/rules/traits.py, and "
                             "read it through judge.rules.registry):\n" + "\n".join(sorted(spelled_out)))
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED entries no longer found (drop them): {stale}"


def test_the_scan_sees_a_rule_name_spelled() -> None:
    """The scan can fail: a comparison, a collection, a .get and a default are found; a docstring, help
    text and an f-string are not."""
    source = '''
"""speedup is a docstring"""
SEEDED = ("speedup", "accuracy-parity")


def classify(r, bad, rule="memory"):
    """accuracy-parity here is prose."""
    opt(help="history-metric")
    print(f"speedup {r}")
    if r.rule == "amp-active":
        return bad.get("stability")
'''
    got = {(scope, name) for scope, name, _ in spelled(source, result_names())}
    assert got == {("<module>", "speedup"), ("<module>", "accuracy-parity"), ("classify", "memory"),
                   ("classify", "amp-active"), ("classify", "stability")}, got


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
        "history-throughput": "history_change"}
    assert HISTORY_THROUGHPUT in results


def test_the_docs_table_is_rendered_from_the_declarations() -> None:
    """docs/checks.md holds `traits_table()`, one row per result name in registry order."""
    table = registry.traits_table()
    assert table in (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    assert [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]] == [r.name for r in registry.results()]
    assert "| history-metric | yes, sized by accuracy-parity's row | - | - | history | - |" in table


def test_the_bisect_cli_offers_the_bisectable_results() -> None:
    """`bisect --rule`'s help lists what the rule objects declare bisectable; its default is history-throughput."""
    from ampbench import cli

    opt = inspect.signature(cli.bisect).parameters["rule"].default
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
