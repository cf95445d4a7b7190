"""What to try when a rule does not pass: concrete changes, with the exact TOML lines.

`advice_for(rule_result, mode_config, diagnosis=None)` returns markdown strings for the report:
each names a change, why it may help, and the line(s) to put in that mode's `[[modes]]` entry of the
suite file (or the table it names).  A diagnosis from `ampbench diagnose` makes the black-list advice
name the ops that actually overflowed.  No advice claims to fix anything: each is something to try,
then re-run and re-check.
"""

from __future__ import annotations

from typing import Any

from ampbench.config import ModeConfig
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.advice_kit import scaler_line, toml_line
from ampbench.judge.rules.registry import rule_for
from ampbench.results.diagnosis_file import ModeDiagnosis, mode_diagnosis
from ampbench.results.verdicts import RuleResult

__all__ = ["advice_for", "diagnosis_advice", "scaler_line", "toml_line"]


def _diag(diagnosis: Any, mode: ModeConfig) -> ModeDiagnosis | None:
    return mode_diagnosis(diagnosis, mode.name)


def advice_for(rule_result: RuleResult, mode_config: ModeConfig, diagnosis: Any = None,
               batch_size: int | None = None) -> list[str]:
    """Advice for one rule of one mode (empty for PASS), from the rule's own `advice`.

    `diagnosis`: the mode's ModeDiagnosis, the run's DiagnosisFile, or their JSON (diagnosis.json).
    `batch_size`: the mode's effective batch size, for exact batch-size lines (optional).
    """
    if rule_result.status == "PASS":
        return []
    rule = rule_for(rule_result.rule)
    if rule is None or rule.advice is None:
        return []
    if kit.reasons(rule_result) & kit.APART_CODES:   # held back by judge/rules/pairs.py: the measurement first
        return [kit.APART] + ([kit.INACTIVE] if rule_result.informational else [])
    return rule.advice(rule_result, mode_config, _diag(diagnosis, mode_config), batch_size)


def diagnosis_advice(mode_config: ModeConfig, diagnosis: Any) -> list[str]:
    """What to try given only a diagnosis (for diagnosis.md): black-list, O1, bfloat16, scaler."""
    diag = _diag(diagnosis, mode_config)
    if diag is None or not diag.findings:
        return []
    if not diag.amp_active:
        tips = [t for t in kit.black_list(mode_config, diag)]
        if tips and diag.black_list_candidates:
            tips = [t + " (from the FP32 path's float16-range check: AMP did not run here)" if "custom_black_list" in t
                    else t for t in tips]
        return tips
    out = kit.black_list(mode_config, diag)
    if any(f.kind in ("amp-nonfinite", "fp16-range", "diverged") for f in diag.findings):
        out += kit.o1(mode_config) + kit.bf16(mode_config)
    if any(f.kind == "underflow" for f in diag.findings):
        out += kit.scaler_for_underflow(mode_config, diag)
    return list(dict.fromkeys(out))


