"""Advice from structured reasons: every rule's result carries reason codes (`details.reasons`) with its
numbers, and its advice is rendered from them, never from its message, so rewording a message (or a
message that happens to hold "oom", "collapse", "one fp32 seed", "device") cannot change the advice.

The runs are judged by the real `check_run` on run folders written the way the runner writes them.
"""

from __future__ import annotations

from pathlib import Path

from ampbench.commands.check import check_run
from ampbench.config import ModeConfig, Suite
from ampbench.diagnose.advice import advice_for
from ampbench.judge.rules.registry import RULES, rule_for
from ampbench.results.verdicts import RuleResult
from tests.factories import make_run, make_suite, make_trials

# every phrase an advice function used to look for in a lower-cased message, and then some
TRIGGERS = ("oom out of memory collapse loss-scale collapse non-finite skipped (found_inf) one fp32 seed device cpu "
            "inactive on this device custom op list no op ran not device memory not measured too few timeout crashed")


def _mode(suite: Suite, name: str) -> ModeConfig:
    return suite.mode(name)


def judged(tmp_path: Path) -> list[tuple[Suite, RuleResult]]:
    """The results of four real checks that leave most rules not passing: AMP inactive (CPU-like);
    AMP slower, less accurate, on host memory, skipping most steps; one seed each; against a baseline."""
    out: list[tuple[Suite, RuleResult]] = []
    modes = ("fp32", "amp-o1-fp16", "amp-o2-bf16")
    s = make_suite(modes=modes, seeds=(0, 1))
    runs = [(s, make_run(tmp_path / "inactive", s, make_trials(s, amp_active=False)))]
    s3 = make_suite(modes=modes, seeds=(0, 1, 2))
    bad = make_trials(s3, metrics={"fp32": [0.9, 0.91, 0.92], "amp-o1-fp16": [0.9, 0.9, 0.91],
                                   "amp-o2-bf16": [0.6, 0.61, 0.62]},
                      base_time={"fp32": 0.05, "amp-o1-fp16": 0.08, "amp-o2-bf16": 0.05},
                      memory_source="host", found_inf=[True] * 30 + [False] * 30)
    runs.append((s3, make_run(tmp_path / "bad", s3, bad)))
    s1 = make_suite(modes=modes, seeds=(0,))
    runs.append((s1, make_run(tmp_path / "one", s1, make_trials(s1, memory_source="host"))))
    for suite, run in runs:
        for v in check_run(run).verdicts:
            out += [(suite, r) for r in v.rules]
    later = make_run(tmp_path / "later", s3, make_trials(s3, base_time={"fp32": 0.07, "amp-o1-fp16": 0.07,
                                                                         "amp-o2-bf16": 0.07}), run_id="r2")
    for v in check_run(later, baseline=runs[1][1]).verdicts:
        out += [(s3, r) for r in v.rules]
    return out


def test_every_rule_result_carries_its_reason_codes(tmp_path: Path) -> None:
    results = judged(tmp_path)
    assert all(r.details.get("reasons") for _, r in results), [(r.rule, r.status) for _, r in results
                                                              if not r.details.get("reasons")]
    seen = {r.rule for _, r in results}
    assert {"completeness", "amp-active", "accuracy-parity", "baseline-quality", "speedup", "memory", "stability",
            "energy", "history-throughput", "history-metric"} <= seen, seen
    codes = {(r.rule, c) for _, r in results for c in r.details["reasons"]}
    for expected in [("amp-active", "device"), ("memory", "host-memory"), ("accuracy-parity", "seed-sd-unknown"),
                     ("accuracy-parity", "worse"), ("stability", "skipped"), ("speedup", "below"),
                     ("energy", "not-measured")]:
        assert expected in codes, sorted(codes)


def test_rewording_a_message_cannot_change_the_advice(tmp_path: Path) -> None:
    """Every not-passing result of the real checks: the same advice with its message, with no message,
    and with a message made of every phrase advice once looked for."""
    checked = 0
    for suite, r in judged(tmp_path):
        if r.status == "PASS":
            continue
        mode = _mode(suite, r.mode)
        advice = advice_for(r, mode, batch_size=8)
        for text in ("", TRIGGERS, TRIGGERS.upper(), r.message.replace("AMP", "amp").replace(" ", "  ")):
            assert advice_for(r.model_copy(update={"message": text}), mode, batch_size=8) == advice, (r.rule, text)
        checked += 1
    assert checked >= 20


def test_the_codes_not_the_words_decide(tmp_path: Path) -> None:
    """Each rule with advice, given every code any rule emits, answers the same whatever its message says;
    and a code (not the words) is what brings a piece of advice in."""
    codes = sorted({c for _, r in judged(tmp_path) for c in r.details["reasons"]} |
                   {"oom", "timeout", "crashed", "collapse", "nonfinite", "op-lists", "no-evals", "both-missed"})
    o2 = ModeConfig(name="amp-o2-fp16", level="O2", dtype="float16", custom_black_list=["lookup_table_v2"])
    for rule in (x for x in RULES if x.advice is not None):
        for name in rule.labels or (rule.name,):
            for code in codes:
                base = RuleResult(suite="toy", mode=o2.name, rule=name, status="FAIL", message="",
                                  details={"reasons": [code]})
                assert rule_for(name) is rule
                worded = base.model_copy(update={"message": TRIGGERS})
                assert advice_for(worded, o2, batch_size=8) == advice_for(base, o2, batch_size=8), (name, code)
    host = RuleResult(suite="toy", mode=o2.name, rule="memory", status="FAIL", message="not device memory")
    assert not any("host memory" in t for t in advice_for(host, o2))
    coded = host.model_copy(update={"message": "", "details": {"reasons": ["host-memory"]}})
    assert any("host memory" in t for t in advice_for(coded, o2))


def test_a_new_rule_is_its_module_and_one_registry_line(tmp_path: Path, monkeypatch) -> None:
    """Acceptance: adding a verdict rule touches the rule and the registry (plus its test). A rule defined
    here and appended to `registry.RULES` is judged by `ampbench check`, decides the outcome table's row,
    gets its own next step from its advice, and lands in check.json: no table, outcome or advice edit."""
    import json

    from typer.testing import CliRunner

    from ampbench.cli import app
    from ampbench.judge.rules import registry
    from ampbench.judge.rules.context import Ctx, Rule, amp_only

    def rule_warmup(c: Ctx) -> list[RuleResult]:
        share = c.suite.train.warmup_steps / c.suite.train.steps
        return [c.rule("warmup-share", "FAIL", share, 0.05, f"warm-up is {share:.1%} of the steps",
                       reasons=["long-warmup"], share=share)]

    def advise_warmup(r: RuleResult, m: ModeConfig, diag: object, batch_size: int | None) -> list[str]:
        return ["Measure more steps: cut `warmup_steps` in `[train]`."] if "long-warmup" in r.details["reasons"] else []

    monkeypatch.setattr(registry, "RULES", (*registry.RULES, Rule("warmup-share", rule_warmup, amp_only,
                                                                   advice=advise_warmup)))
    s = make_suite(seeds=(0, 1, 2))
    run = make_run(tmp_path, s, make_trials(s))
    r = CliRunner().invoke(app, ["check", str(run)], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    row = next(line for line in r.output.splitlines() if line.startswith("| amp-o1-fp16"))
    assert "FAIL" in row and "warmup-share" in row, r.output
    assert "warmup-share FAIL (amp-o1-fp16) -> Measure more steps: cut `warmup_steps`" in " ".join(r.output.split())
    saved = json.loads((run / "check.json").read_text())
    got = [x for v in saved["verdicts"] for x in v["rules"] if x["rule"] == "warmup-share"]
    assert got and got[0]["details"]["reasons"] == ["long-warmup"]


def test_the_codes_are_an_enumerated_type_and_the_docs_table_is_rendered_from_it(tmp_path: Path) -> None:
    """Every code the real checks emit is a `Reason` its rule declares; every registered rule's results are
    declared; a trial's every end state is a completeness code; the generated docs/reference/rules.md holds
    `reason_codes_table()` (a hand-written page may quote it in a generated block)."""
    from typing import get_args

    from ampbench.judge.rules.reasons import Reason
    from ampbench.judge.rules.registry import reason_codes_table, results
    from ampbench.record.models import Status as TrialStatus

    DECLARED = {r.name: frozenset(c.value for c, _ in r.reasons) for r in results()}   # on each rule's Result
    for _, r in judged(tmp_path):
        assert set(r.details["reasons"]) <= DECLARED[r.rule], (r.rule, r.details["reasons"])
        assert all(type(c) is str for c in r.details["reasons"])   # check.json holds plain strings
    assert {name for rule in RULES for name in (rule.labels or (rule.name,))} <= set(DECLARED)
    assert all(DECLARED.values()), [n for n, codes in DECLARED.items() if not codes]   # every result declares
    ends = {s for s in get_args(TrialStatus) if s != "ok"}
    assert ends | {f"reference-{s}" for s in ends} <= DECLARED["completeness"]
    assert set().union(*DECLARED.values()) == {c.value for c in Reason}   # no code declared by no rule
    docs = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "rules.md").read_text(encoding="utf-8")
    assert reason_codes_table() in docs


def test_a_code_its_rule_does_not_declare_is_refused() -> None:
    """A typo in a registered rule's code would silently drop the advice that reads it: `Rule.run` (how check
    runs every rule) refuses a code its result does not declare; a result declaring none is not checked."""
    import pytest

    from ampbench.judge.rules.context import Ctx, Rule
    from ampbench.judge.rules.memory import MEMORY, MEMORY_NAME
    from ampbench.judge.rules.reasons import Reason

    s = make_suite(seeds=(0,))
    c = Ctx(s, "amp-o1-fp16", [("fp32", 0), ("amp-o1-fp16", 0)], {}, None, "")

    def emitting(*codes: object, results: tuple = MEMORY.results) -> Rule:
        return Rule("memory", lambda c: [c.rule(MEMORY_NAME, "FAIL", 0.0, 0.1, "m", reasons=list(codes))],
                    results=results)

    assert emitting(Reason.HOST_MEMORY).run(c)[0].details["reasons"] == ["host-memory"]
    with pytest.raises(ValueError, match="host-memroy"):
        emitting("host-memroy").run(c)
    with pytest.raises(ValueError, match="shown"):
        emitting("shown").run(c)   # another rule's code
    assert emitting("long-warmup", results=()).run(c)[0].details["reasons"] == ["long-warmup"]
