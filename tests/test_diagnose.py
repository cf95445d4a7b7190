"""`ampbench diagnose`: comparing FP32/AMP op dumps, and naming a planted NaN source first."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ampbench.commands.diagnose import run_diagnose
from ampbench.config import ConfigError, ModeConfig, Suite
from ampbench.core.opstat import OpStat
from ampbench.diagnose.compare import black_list_candidates, classify, compare_dumps, condense
from ampbench.results.diagnosis_file import DiagnosisFile, Finding, Tolerances, load_diagnosis
from ampbench.trial.precision import default_lists, known_op_names
from tests.factories import make_run


def st(op: str, mx: float, mn: float = 0.0, mean: float | None = None, dtype: str = "fp32", numel: int = 100,
       zeros: int = 0, nan: int = 0, inf: int = 0) -> OpStat:
    return OpStat(op=op, dtype=dtype, numel=numel, max=mx, min=mn, mean=(mx + mn) / 2 if mean is None else mean,
                  num_nan=nan, num_inf=inf, num_zero=zeros, error=bool(nan or inf))


TOL = Tolerances()


@pytest.mark.parametrize(("ref", "amp", "fp16", "kind"), [
    (st("matmul", 2.0, -1.0), st("matmul", 2.001, -1.0, dtype="fp16"), True, None),      # rounding noise
    (st("matmul", 2.0, -1.0), st("matmul", 2.2, -1.0, dtype="fp16"), True, "diverged"),  # 10% off
    (st("matmul", 2.0), st("matmul", math.inf, inf=3, dtype="fp16"), True, "amp-nonfinite"),
    (st("exp", math.inf, inf=1), st("exp", math.inf, inf=1), True, "fp32-nonfinite"),
    (st("exp", 1e5), st("exp", 1e5), True, "fp16-range"),       # FP32 path beyond 65504 (AMP inactive)
    (st("exp", 1e5), st("exp", 1e5), False, None),              # bfloat16 has float32's range
    (st("exp_grad", 1e5), st("exp_grad", 1e5), True, None),     # only forward outputs are range-checked
    (st("relu", 1.0, zeros=10), st("relu", 1.0, zeros=60, dtype="fp16"), True, "underflow"),
])
def test_classify(ref: OpStat, amp: OpStat, fp16: bool, kind: str | None) -> None:
    assert classify(ref, amp, fp16, TOL)[0] == kind


def test_compare_dumps_matches_ops_per_step_and_call_order_and_unscales_gradients() -> None:
    ref = [(1, st("matmul", 1.0)), (1, st("matmul", 5.0)), (1, st("matmul_grad", 0.01)), (2, st("matmul", 1.0))]
    amp = [(1, st("cast", 1.0, dtype="fp16")), (1, st("matmul", 1.0, dtype="fp16")),
           (1, st("matmul", 5.0, dtype="fp16")), (1, st("matmul_grad", 0.01 * 1024, dtype="fp16")),
           (2, st("matmul", 1.3, dtype="fp16"))]
    findings, matched = compare_dumps(ref, amp, fp16=True, scales={1: 1024.0})
    assert matched == 4  # the cast has no FP32 partner
    assert [(f.step, f.op, f.kind, f.index) for f in findings] == [(2, "matmul", "diverged", 5)]
    assert findings[0].rel_diff == pytest.approx(0.3)
    # Without dividing out the loss scale the gradient would look 1024x off.
    unscaled, _ = compare_dumps(ref, amp, fp16=True, scales=None)
    assert ("matmul_grad", "diverged") in {(f.op, f.kind) for f in unscaled}


def test_condense_keeps_the_first_output_of_each_op_and_counts_the_rest() -> None:
    f = [Finding(index=i, step=1, phase="forward", op=op, kind="amp-nonfinite") for i, op in
         enumerate(["exp", "add", "exp", "add", "add"], start=1)]
    out = condense(f)
    assert [(x.op, x.index, x.count) for x in out] == [("exp", 1, 2), ("add", 2, 3)]


def test_black_list_candidates_use_legacy_names_and_skip_fp32_problems() -> None:
    mode = ModeConfig(name="amp-o1-fp16", level="O1", dtype="float16")
    fs = [Finding(index=1, step=1, phase="forward", op="exp", kind="fp32-nonfinite"),
          Finding(index=2, step=1, phase="forward", op="cast", kind="amp-nonfinite"),
          Finding(index=3, step=1, phase="forward", op="add", kind="amp-nonfinite"),
          Finding(index=4, step=1, phase="forward", op="softmax", kind="fp16-range"),
          Finding(index=5, step=1, phase="backward", op="matmul_grad", kind="amp-nonfinite")]
    paddle_black = set(default_lists("float16", "O1")["black"])
    new, already = black_list_candidates(fs, mode, known=known_op_names(), paddle_black=paddle_black)
    assert new == ["elementwise_add"]   # dumps say `add`; custom lists need the legacy name
    assert already == ["softmax"]       # Paddle's default black list for float16 O1 already has it


def test_diagnose_refuses_fp32_and_unknown_modes(tmp_path: Path) -> None:
    suite = Suite.model_validate({
        "suite": {"name": "toy", "workload": "toy", "metric": "accuracy", "seeds": [0]},
        "train": {"steps": 4, "warmup_steps": 1}, "modes": [{"name": "fp32"}, {"name": "amp", "level": "O1"}],
    })
    run = make_run(tmp_path, suite, [])
    with pytest.raises(ConfigError, match="compares an AMP mode against fp32"):
        run_diagnose(run, mode="fp32")
    with pytest.raises(ConfigError, match="unknown mode"):
        run_diagnose(run, mode="amp-o2")


@pytest.mark.slow
def test_diagnose_names_the_planted_nan_source_first(tmp_path: Path, cache_env: Path) -> None:
    """Acceptance: a layer that overflows for large inputs; diagnose (FP32 path on CPU) names its exp first."""
    suite = Suite.model_validate({
        "suite": {"name": "toynan", "workload": "toy", "metric": "accuracy", "seeds": [0, 1]},
        "workload": {"train_rows": 128, "eval_rows": 32, "nan_above": 1.0},
        "train": {"batch_size": 32, "steps": 20, "warmup_steps": 2},
        "modes": [{"name": "fp32"}, {"name": "amp-o1-fp16", "level": "O1", "dtype": "float16"}],
    })
    run = make_run(tmp_path, suite, [])
    code = run_diagnose(run, mode="amp-o1-fp16", steps=2)
    assert code == 1  # ops flagged

    doc = load_diagnosis(run)
    assert isinstance(doc, DiagnosisFile)
    d = doc.modes["amp-o1-fp16"]
    assert d.trials == {"fp32": "ok", "amp-o1-fp16": "ok"} and d.seed == 0 and d.ops_compared > 0
    first = d.findings[0]
    assert (first.op, first.phase, first.step, first.kind) == ("exp", "forward", 1, "fp32-nonfinite")
    assert first.amp_nan_inf is not None and first.amp_nan_inf[1] > 0      # Inf, not yet NaN
    assert [f.op for f in d.findings[:3]] == ["exp", "subtract", "add"]    # then inf - inf = NaN spreads
    assert "AMP inactive on this device" in d.inactive_note
    assert d.paddle_infinite_op_types[:1] == ["exp"]  # Paddle's compare_accuracy agrees
    assert d.black_list_candidates == []               # an FP32 overflow is not AMP's to fix
    assert (run / d.files["workbook"]).stat().st_size > 0

    md = (run / "diagnosis.md").read_text()
    assert "AMP inactive on this device" in md and "| 5 | 1 | forward | exp |" in md
    raw = json.loads((run / "diagnosis.json").read_text())
    assert raw["schema"] == "ampbench.diagnosis/1" and raw["modes"]["amp-o1-fp16"]["findings"][0]["op"] == "exp"
