"""Precision modes -> Paddle calls, op-name checks and op dtype evidence (CPU: AMP inactive)."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from ampbench.config import ModeConfig
from ampbench.trial.precision import (
    Precision,
    collect_op_dtypes,
    low_precision_calls,
    parse_op_stats,
    unknown_op_names,
)


def test_unknown_op_names_flags_embedding_not_lookup_table():
    assert unknown_op_names(["embedding", "lookup_table_v2", "matmul_v2", "softmax"]) == ["embedding"]


def test_parse_op_stats_and_low_precision_count():
    parsed = parse_op_stats({"matmul_v2": "3,0,1,0", "softmax": "0,2,0,0"})
    assert parsed["matmul_v2"] == {"float16": 3, "bfloat16": 0, "float32": 1, "other": 0}
    assert low_precision_calls(parsed) == 5
    assert low_precision_calls({**parsed, "cast": {"float16": 7}}) == 5  # casts are no evidence


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_modes_run_and_cpu_evidence_is_fp32(level):
    paddle.seed(0)
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 2))
    opt = paddle.optimizer.Adam(parameters=model.parameters())
    prec = Precision.build(ModeConfig(name="m", level=level, custom_black_list=["embedding"]))
    model, opt = prec.prepare(model, opt)
    w0 = model[0].weight.numpy().copy()
    with collect_op_dtypes() as counts:
        with prec.autocast():
            loss = model(paddle.randn([3, 4])).mean()
        prec.backward(loss)
        out = prec.outcome(prec.step(opt))
    assert counts["matmul_v2"]["float32"] == 2 and low_precision_calls(counts) == 0
    assert not prec.scaler_enabled and out.loss_scale is None  # Paddle disables the scaler on CPU
    assert not np.allclose(w0, model[0].weight.numpy())        # but the optimizer did step
    d = prec.describe()
    assert d["requested"] and d["level"] == level and d["unknown_op_names"] == ["embedding"]


def test_fp32_mode_has_no_autocast_and_no_scaler():
    prec = Precision.build(ModeConfig(name="fp32"))
    m = paddle.nn.Linear(2, 2)
    o = paddle.optimizer.SGD(parameters=m.parameters())
    assert prec.prepare(m, o) == (m, o) and prec.scaler is None
    assert prec.describe()["dtype"] == "float32"


def test_excluded_layers_validated_and_passed_to_decorate():
    from ampbench.config import ModeConfig as M

    with pytest.raises(ValueError, match="only applies to level O2"):
        M(name="m", level="O1", excluded_layers=["Embedding"])
    with pytest.raises(ValueError, match="not a paddle.nn layer class name"):
        M(name="m", level="O2", excluded_layers=["lookup_table_v2"])
    prec = Precision.build(M(name="m", level="O2", excluded_layers=["Embdding"]))
    m = paddle.nn.Embedding(10, 4)
    with pytest.raises(ValueError, match="Embdding"):
        prec.prepare(m, paddle.optimizer.SGD(parameters=m.parameters()))
    prec = Precision.build(M(name="m", level="O2", excluded_layers=["Embedding"]))
    model, _ = prec.prepare(m, paddle.optimizer.SGD(parameters=m.parameters()))
    assert model.weight.dtype == paddle.float32


def test_sparse_embedding_with_live_scaler_is_refused(monkeypatch):
    prec = Precision.build(ModeConfig(name="m", level="O1"))
    prec.scaler = type("LiveScaler", (), {"_enable": True})()  # stands in for a GPU's enabled scaler
    model = paddle.nn.Sequential(paddle.nn.Embedding(10, 4, sparse=True))
    with pytest.raises(ValueError, match="cannot unscale sparse gradients"):
        prec.check_model(model)
    prec.check_model(paddle.nn.Sequential(paddle.nn.Embedding(10, 4)))  # dense is fine
