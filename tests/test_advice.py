"""Advice for failed rules: the right suggestions per rule, and every TOML line valid for the mode."""

from __future__ import annotations

import re
from typing import Any

import pytest
import tomllib

from ampbench.config import ModeConfig
from ampbench.diagnose.advice import advice_for, diagnosis_advice, toml_line
from ampbench.results.diagnosis_file import DiagnosisFile, Finding, ModeDiagnosis
from ampbench.results.verdicts import RuleResult

O2 = ModeConfig(name="amp-o2-fp16", level="O2", dtype="float16", custom_black_list=["lookup_table_v2"],
                scaler={"init_loss_scaling": 1024.0})
O1_BF16 = ModeConfig(name="amp-o1-bf16", level="O1", dtype="bfloat16")
MODE_KEYS = set(ModeConfig.model_fields)


def rule(name: str, status: str = "FAIL", message: str = "", observed: Any = None, **extra: Any) -> RuleResult:
    return RuleResult(suite="toy", mode="m", rule=name, status=status, observed=observed, message=message, **extra)


def diag(candidates: list[str] | None = None, findings: list[Finding] | None = None, **kw: Any) -> ModeDiagnosis:
    kw.setdefault("amp_active", True)
    return ModeDiagnosis(mode="amp-o2-fp16", seed=0, steps=3, batch_size=8,
                         black_list_candidates=candidates or [], findings=findings or [], **kw)


def toml_snippets(lines: list[str]) -> list[dict[str, Any]]:
    """Every `key = value` in backticks, parsed as TOML (raises if any is not valid TOML)."""
    out = []
    for line in lines:
        for snippet in re.findall(r"`([A-Za-z_]+ = [^`]+)`", line):
            out.append(tomllib.loads(snippet))
    return out


def assert_applicable(mode: ModeConfig, lines: list[str]) -> list[dict[str, Any]]:
    """Each mode-level snippet, applied to the mode, still validates as a ModeConfig."""
    snippets = toml_snippets(lines)
    for snip in snippets:
        if set(snip) <= MODE_KEYS:
            ModeConfig.model_validate({**mode.model_dump(), **snip})
    return snippets


COLLAPSE = rule("stability", message="amp__seed0: loss-scale collapse began at step 12: scale halved 8 times",
                observed={"nonfinite_losses": 0, "max_skipped_fraction": 0.4, "collapse_began_step": 12},
                details={"reasons": ["skipped", "collapse"]})


def test_pass_gets_no_advice() -> None:
    assert advice_for(rule("speedup", status="PASS"), O2) == []


def test_loss_scale_collapse_with_a_diagnosis() -> None:
    d = diag(["elementwise_add"], [Finding(index=4, step=1, phase="forward", op="add", kind="amp-nonfinite")],
             counts={"amp-nonfinite": 1})
    tips = advice_for(COLLAPSE, O2, d)
    snippets = assert_applicable(O2, tips)
    assert {"custom_black_list": ["lookup_table_v2", "elementwise_add"]} in snippets  # merged, not replaced
    assert {"level": "O1"} in snippets and {"dtype": "bfloat16"} in snippets
    scaler = next(s["scaler"] for s in snippets if "scaler" in s)
    assert scaler["init_loss_scaling"] == 4096.0 and scaler["decr_every_n_nan_or_inf"] == 2
    assert any("cannot stop the forward overflow" in t for t in tips)  # honest about what scaling can do


def test_without_a_diagnosis_the_advice_says_how_to_get_one() -> None:
    tips = advice_for(COLLAPSE, O2)
    assert any("ampbench diagnose RUN_DIR --mode amp-o2-fp16" in t for t in tips)
    assert not any("cannot stop" in t for t in tips)


def test_diagnosis_json_forms_are_accepted() -> None:
    d = diag(["elementwise_add"])
    as_file = DiagnosisFile(suite="toy", run_dir="x", modes={"amp-o2-fp16": d}).model_dump(mode="json", by_alias=True)
    from_file = advice_for(COLLAPSE, O2, as_file)
    assert from_file == advice_for(COLLAPSE, O2, d.model_dump(mode="json")) == advice_for(COLLAPSE, O2, d)


def test_parity_in_bf16_suggests_float16_not_bf16() -> None:
    tips = advice_for(rule("accuracy-parity", message="AMP mean accuracy 0.8 vs FP32 0.9"), O1_BF16, diag())
    snippets = assert_applicable(O1_BF16, tips)
    assert {"dtype": "float16"} in snippets and {"dtype": "bfloat16"} not in snippets
    assert {"level": "O1"} not in snippets  # already O1


def test_parity_underflow_suggests_a_larger_scale() -> None:
    d = diag(findings=[Finding(index=9, step=1, phase="backward", op="matmul_grad", kind="underflow")])
    tips = advice_for(rule("accuracy-parity", message="... with one FP32 seed ...",
                                details={"reasons": ["seed-sd-unknown"]}), O2, d)
    scaler = next(s["scaler"] for s in assert_applicable(O2, tips) if "scaler" in s)
    assert scaler["init_loss_scaling"] == 4096.0 and scaler["incr_every_n_steps"] <= 500
    assert any("flushed to zero" in t for t in tips) and any("add seeds" in t for t in tips)


def test_many_skipped_steps_without_collapse_suggest_a_lower_start() -> None:
    big = ModeConfig(name="amp", level="O1", dtype="float16", scaler={"init_loss_scaling": 2.0**20})
    r = rule("stability", message="amp__seed0: 9 of 40 steps skipped (found_inf), 22.5% > 2.0%",
             observed={"nonfinite_losses": 0, "collapse_began_step": None}, details={"reasons": ["skipped"]})
    scaler = next(s["scaler"] for s in assert_applicable(big, advice_for(r, big)) if "scaler" in s)
    assert scaler["init_loss_scaling"] == 32768.0


def test_informational_rules_get_no_toml() -> None:
    r = rule("speedup", message="Informational (AMP inactive): ...", informational=True)
    tips = advice_for(r, O2)
    assert len(tips) == 1 and "inactive" in tips[0] and toml_snippets(tips) == []


def test_speed_memory_and_oom_advice_is_concrete() -> None:
    o1 = ModeConfig(name="amp", level="O1", dtype="float16")
    speed = advice_for(rule("speedup", message="speedup 1.1 < 1.5"), o1, batch_size=16)
    assert {"level": "O2"} in assert_applicable(o1, speed) and {"batch_size": 32} in toml_snippets(speed)
    mem = advice_for(rule("memory", message="reduction 5% < 30%"), O2)
    assert {"master_weight": False} in assert_applicable(O2, mem)
    oom = advice_for(rule("completeness", status="FAIL", message="amp__seed0 ended 'oom'", details={"reasons": ["oom"]}),
                     o1, batch_size=16)
    assert {"batch_size": 8} in assert_applicable(o1, oom)


def test_amp_inactive_on_cpu_and_bf16_hint() -> None:
    tips = advice_for(rule("amp-active", status="INCONCLUSIVE", message="AMP inactive on this device (cpu)",
                           details={"reasons": ["device"]}), O1_BF16)
    assert any("run the suite on a GPU" in t for t in tips) and {"dtype": "float16"} in toml_snippets(tips)


def test_diagnosis_advice_on_cpu_says_amp_did_not_run() -> None:
    d = diag(["elementwise_add"], [Finding(index=3, step=1, phase="forward", op="add", kind="fp16-range")],
             amp_active=False)
    tips = diagnosis_advice(O2, d)
    assert tips and "AMP did not run here" in tips[0]
    assert diagnosis_advice(O2, diag()) == []  # nothing flagged, nothing to try


@pytest.mark.parametrize("value", [True, 3, 1.5, "O1", ["a", "b"], {"x": 1}, 'a"\nthresholds = 1'])
def test_toml_line_reads_back_as_the_value(value: Any) -> None:
    """Advice lines go through tomli-w: whatever the value, the line parses back to exactly it."""
    import tomllib

    line = toml_line("key", value)
    assert line.startswith("`") and line.endswith("`") and "\n" not in line
    assert tomllib.loads(line.strip("`")) == {"key": value}
