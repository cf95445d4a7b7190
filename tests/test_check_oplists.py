"""The op-lists rule: a suite's custom white/black lists must really take effect (op dtype evidence)."""

from __future__ import annotations

from ampbench.config import Suite
from ampbench.judge.check import check_trials
from tests.factories import make_suite, make_trials, plan_of


def suite_with_lists(black: list[str], white: list[str] | None = None) -> Suite:
    base = make_suite(seeds=(0,)).model_dump(mode="json")
    base["modes"][1]["custom_black_list"] = black
    base["modes"][1]["custom_white_list"] = white or []
    return Suite.model_validate(base)


def op_lists_rule(suite: Suite, ops: dict[str, dict[str, int]], unknown: list[str] | None = None, active=True):
    trials = make_trials(suite)
    for t in trials:
        if t.mode != "fp32":
            t.amp.op_calls = ops
            t.amp.active = active
            t.amp.unknown_op_names = unknown or []
    verdicts = {v.mode: v for v in check_trials(suite, trials, plan_of(suite))}
    return next(r for r in verdicts["amp-o1-fp16"].rules if r.rule == "op-lists")


def test_black_listed_embedding_kept_fp32_passes():
    r = op_lists_rule(suite_with_lists(["lookup_table_v2"]),
                      {"lookup_table_v2": {"float16": 0, "float32": 4}, "matmul_v2": {"float16": 8, "float32": 0}})
    assert r.status == "PASS"


def test_black_listed_op_running_fp16_fails_and_names_it():
    r = op_lists_rule(suite_with_lists(["lookup_table_v2"]),
                      {"lookup_table_v2": {"float16": 4, "float32": 0}, "matmul_v2": {"float16": 8, "float32": 0}})
    assert r.status == "FAIL" and "black-listed lookup_table_v2 ran in low precision" in r.message


def test_white_listed_op_never_low_precision_fails():
    r = op_lists_rule(suite_with_lists([], ["softmax"]),
                      {"softmax": {"float16": 0, "float32": 3}, "matmul_v2": {"float16": 8, "float32": 0}})
    assert r.status == "FAIL" and "white-listed softmax" in r.message


def test_unknown_op_name_is_inconclusive_with_hint():
    r = op_lists_rule(suite_with_lists(["embedding"]), {"matmul_v2": {"float16": 8, "float32": 0}},
                      unknown=["embedding"])
    assert r.status == "INCONCLUSIVE" and "lookup_table_v2" in r.message and "embedding" in r.message


def test_inactive_amp_cannot_verify_lists():
    r = op_lists_rule(suite_with_lists(["lookup_table_v2"]),
                      {"lookup_table_v2": {"float16": 0, "float32": 4}}, active=False)
    assert r.status == "INCONCLUSIVE" and "cannot be verified" in r.message


def test_no_rule_without_custom_lists():
    suite = make_suite(seeds=(0,))
    verdicts = check_trials(suite, make_trials(suite), plan_of(suite))
    assert all(r.rule != "op-lists" for v in verdicts for r in v.rules)


def test_memory_not_judged_when_amp_runs_a_larger_batch():
    """The seed's 'AMP lets batch 32 fit' mode: more memory than FP32 at batch 8 is expected."""
    suite = make_suite(seeds=(0,), min_memory_reduction=0.3)
    trials = make_trials(suite, peak={"fp32": 8 << 30, "amp-o1-fp16": 12 << 30})
    for t in trials:
        t.batch_size = 8 if t.mode == "fp32" else 32
    v = {v.mode: v for v in check_trials(suite, trials, plan_of(suite))}["amp-o1-fp16"]
    mem = next(r for r in v.rules if r.rule == "memory")
    assert mem.status == "PASS" and "Not judged, batch sizes differ" in mem.message
    for t in trials:
        t.batch_size = 8
    v = {v.mode: v for v in check_trials(suite, trials, plan_of(suite))}["amp-o1-fp16"]
    assert next(r for r in v.rules if r.rule == "memory").status == "FAIL"
