"""Issue 43.1: op names in every spelling Paddle prints (eager's legacy names, PIR's `pd_op.*` under
`paddle.jit.to_static`) are compared with op lists through one normaliser (core/opstat.py), with one cast
list.  A real to_static command program on this CPU build is AMP inactive, never amp-active PASS."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ampbench.core.opstat import (
    CAST_OPS,
    PHI_TO_LEGACY,
    by_forward_op,
    canonical_op,
    forward_op,
    is_cast,
    on_list,
)
from ampbench.trackers.opstats import low_precision_calls
from tests.test_command import run, suite_text, trials, write

STATIC = Path(__file__).parent / "fixtures" / "command" / "to_static_train.py"


def test_the_phi_to_legacy_table_is_paddles_own_op_compat_map():
    """The copy in core is exactly the inverse of what the installed Paddle ships (op_compat.yaml)."""
    from paddle.incubate.autograd.phi_ops_map import op_map

    paddles = {v["phi_name"]: legacy for legacy, v in op_map.items() if v["phi_name"] != legacy}
    assert PHI_TO_LEGACY == paddles


@pytest.mark.parametrize("name,canonical,forward", [
    ("pd_op.cast", "cast", "cast"), ("pd_op.cast_", "cast_", "cast"), ("cast_grad", "cast_grad", "cast"),
    ("pd_op.matmul", "matmul_v2", "matmul_v2"), ("pd_op.matmul_grad", "matmul_v2_grad", "matmul_v2"),
    ("pd_op.legacy_matmul", "matmul", "matmul"),          # phi names differ both ways
    ("pd_op.mean", "reduce_mean", "reduce_mean"), ("mean", "mean", "mean"),
    ("pd_op.embedding", "lookup_table_v2", "lookup_table_v2"), ("pd_op.add_", "elementwise_add_", "elementwise_add"),
    ("pd_op.conv2d_grad", "conv2d_grad", "conv2d"), ("pd_op.matmul_double_grad", "matmul_v2_double_grad", "matmul_v2"),
    ("matmul_v2", "matmul_v2", "matmul_v2"), ("conv2d", "conv2d", "conv2d"),   # eager names stay
])
def test_names_are_normalised_once(name, canonical, forward):
    assert canonical_op(name) == canonical and forward_op(name) == forward
    assert canonical_op(canonical) == canonical      # idempotent: a normalised name is left alone


def test_one_cast_list_covers_every_spelling():
    for n in ("cast", "cast_", "transfer_dtype", "pd_op.cast", "pd_op.cast_", "cast_grad", "pd_op.cast_grad"):
        assert is_cast(n), n
    assert not is_cast("pd_op.conv2d") and CAST_OPS == {"cast", "transfer_dtype"}
    calls = {"pd_op.cast": {"float16": 4}, "pd_op.conv2d": {"float16": 2}, "conv2d_grad": {"float16": 3}}
    assert low_precision_calls(calls) == 5
    assert low_precision_calls(calls, {"conv2d"}) == 5 and low_precision_calls(calls, {"matmul_v2"}) == 0
    assert on_list("pd_op.matmul", {"matmul_v2"}) and not on_list("pd_op.legacy_matmul", {"matmul_v2"})
    assert by_forward_op({"pd_op.matmul": {"float16": 2}, "matmul_v2_grad": {"float16": 1}}) == \
        {"matmul_v2": {"float16": 3}}


def test_the_judge_counts_no_pir_cast_as_evidence():
    from ampbench.judge.rules.amp import _op_counts
    from ampbench.record.models import Trial

    t = Trial.model_validate({"suite": "s", "workload": "command", "status": "ok", "mode": "amp", "seed": 0, "amp": {
        "op_calls": {"pd_op.cast": {"float16": 8, "float32": 8}, "pd_op.conv2d": {"float32": 4}}}})
    assert _op_counts([t]) == (0, 20)


@pytest.mark.slow
def test_a_to_static_command_program_on_a_cpu_build_is_amp_inactive_never_pass(tmp_path):
    """The real program, the real hook and CLI: its ops are PIR's (`pd_op.*`), its float16 `pd_op.cast`
    runs in every mode; AMP is a no-op on this CPU build, so the AMP mode is INCONCLUSIVE (exit 3)."""
    out = tmp_path / "runs"
    cmd = f'["{sys.executable}", "{STATIC}", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"]'
    r = run("run", str(write(tmp_path, suite_text(command=cmd, workload_extra="loss_every_steps = 1"))),
            "--out", str(out))
    ts = trials(out)
    amp = ts["amp-o1-fp16__seed0"]["amp"]
    assert ts["amp-o1-fp16__seed0"]["status"] == "ok", ts["amp-o1-fp16__seed0"]["error"]
    assert amp["op_calls"]["pd_op.cast"]["float16"] > 0        # the fp16 cast really ran, under its PIR name
    assert amp["op_calls"]["pd_op.conv2d"]["float32"] > 0 and "pd_op.matmul" in amp["op_calls"]
    assert amp["requested"] and not amp["active"] and amp["inactive_code"] == "device", amp
    assert "conv2d" in amp["effective_white_list"] and "matmul_v2" in amp["effective_white_list"]
    check = json.loads(next(out.glob("mine/*/check.json")).read_text())
    rows = [r for v in check["verdicts"] for r in v["rules"] if r["rule"] == "amp-active"]
    assert rows and all(v["status"] == "INCONCLUSIVE" for v in rows), rows
    assert r.exit_code == 3, r.output


def test_the_op_census_compares_with_the_effective_lists_not_the_custom_ones_only():
    """Issue 43.5: Paddle's own white-list ops that ran in fp16 are not "on neither list"; the lists are
    the ones auto_cast applied (defaults + custom, Paddle's _update_list), recorded by the worker."""
    from ampbench.config import ModeConfig
    from ampbench.judge import why_slow
    from ampbench.record.models import AmpInfo, Trial
    from ampbench.trial.precision import Precision

    mode = ModeConfig.model_validate({"name": "amp", "level": "O1", "dtype": "float16",
                                      "custom_black_list": ["conv2d"], "custom_white_list": ["reduce_mean"]})
    described = Precision.build(mode).describe()
    white, black = described["effective_white_list"], described["effective_black_list"]
    assert "matmul_v2" in white and "linear_v2" in white and "reduce_mean" in white   # defaults + custom white
    assert "conv2d" in black and "conv2d" not in white and "reduce_mean" not in black  # Paddle's merge rule
    calls = {"pd_op.matmul": {"float16": 30}, "matmul_v2_grad": {"float16": 30}, "linear_v2": {"float16": 20},
             "pd_op.conv2d": {"float32": 10}, "relu": {"float32": 10}, "pd_op.cast": {"float16": 5}}
    t = Trial(suite="s", workload="toy", mode="amp", seed=0, status="ok",
              amp=AmpInfo(active=True, level="O1", op_calls=calls, white_list=["reduce_mean"], black_list=["conv2d"],
                          effective_white_list=white, effective_black_list=black))
    c = why_slow.op_census(t)
    assert c == {"total": 105, "low_precision": 80, "casts": 5, "white_list_fp32": 0, "unlisted": 10}, c
    old = t.model_copy(deep=True)          # a file written before the effective lists were recorded
    old.amp.effective_white_list, old.amp.effective_black_list = [], []
    assert why_slow.op_census(old)["unlisted"] == 90          # what the custom lists alone said
