"""Emulated AMP (issue 56), in process: the formats' known answers, Paddle's per-op rule, and the acceptance
cases of the issue, each checked against an answer taken from the format or from Paddle's own kernels,
never from the emulator's code.

Every test installs the emulator into this process's Paddle and takes it out again (`emu` fixture): the
patches are process-wide, as Paddle's own AMP state is.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from ampbench.trial.emulate import BFLOAT16, FLOAT16, install, uninstall
from ampbench.trial.emulate.policy import Policy


@pytest.fixture
def emu():
    warnings.simplefilter("ignore")
    e = install(paddle)
    try:
        yield e
    finally:
        uninstall(paddle)
    assert not hasattr(paddle.amp, "_ampbench_emulator")   # the process's Paddle is its own again


def _round(values: list[float], dtype: str) -> list[float]:
    t = paddle.to_tensor(values, dtype="float32")
    return paddle.cast(paddle.cast(t, dtype), "float32").numpy().tolist()


# ---------------------------------------------------------------- the formats (IEEE 754 binary16, bfloat16)

def test_float16_thresholds_are_the_formats() -> None:
    assert FLOAT16.max_finite == 65504.0 and FLOAT16.min_subnormal == 2.0 ** -24
    assert FLOAT16.overflow_at == 65520.0 and FLOAT16.flush_at == 2.0 ** -25
    assert FLOAT16.ulp(1.0) == 2.0 ** -10 and FLOAT16.ulp(2.0 ** -20) == 2.0 ** -24
    assert BFLOAT16.max_finite == (2 - 2 ** -7) * 2.0 ** 127 and BFLOAT16.min_subnormal == 2.0 ** -133
    assert BFLOAT16.ulp(1.0) == 2.0 ** -7


def test_paddle_cast_rounds_as_the_formats_define() -> None:
    """Round to nearest even, overflow to inf, subnormals kept down to the smallest, the tie below it to 0:
    the thresholds the emulator counts with are where Paddle's cast really loses the value."""
    h = _round([65504.0, 65519.0, 65520.0, 70000.0, 2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14,
                1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11], "float16")
    assert h[:4] == [65504.0, 65504.0, math.inf, math.inf]
    assert h[4:8] == [2.0 ** -24, 0.0, 2.0 ** -24, 2.0 ** -14]       # subnormal, tie to even 0, up, normal
    assert h[8:] == [1.0, 1 + 2 * 2.0 ** -10]                         # ties to even
    b = _round([70000.0, 2.0 ** -133, 2.0 ** -134, 3.0 * 2.0 ** -134, 3.3961775e38, 1.0e39], "bfloat16")
    assert b[0] == 70144.0 and b[1] == 2.0 ** -133 and b[2] == 0.0 and b[3] == 2.0 ** -132
    assert math.isinf(b[4]) and math.isinf(b[5])


def test_counts_match_where_the_cast_loses_values() -> None:
    from ampbench.trial.emulate.counts import lost_values

    xs = np.array([1.0, 65519.0, 65520.0, -7e4, np.inf, 0.0, 2.0 ** -25, -2.0 ** -26, 2.0 ** -24, np.nan],
                  dtype=np.float32)
    r = np.array(_round(xs.tolist(), "float16"), dtype=np.float32)
    over = int(np.sum(np.isinf(r) & np.isfinite(xs)))
    under = int(np.sum((r == 0) & (xs != 0) & ~np.isnan(xs)))
    assert lost_values(xs, FLOAT16) == (over, under) == (2, 2)
    assert lost_values(xs, BFLOAT16) == (0, 0)


# ---------------------------------------------------------------- Paddle's rule, Paddle's lists

def test_policy_is_paddles_per_op_rule() -> None:
    """amp_utils.h GetAmpDestDtype: white low, black float32, gray promotes (O1; O2 with use_promote), O2
    without promotion runs everything but the black list low."""
    p = Policy("O1", "float16", frozenset({"matmul_v2"}), frozenset({"softmax"}))
    assert p.low("matmul_v2", [False]) and not p.low("softmax", [True])
    assert p.low("relu", [True]) and not p.low("elementwise_add", [True, False])
    o2 = Policy("O2", "float16", frozenset(), frozenset({"lookup_table_v2"}), use_promote=False)
    assert o2.low("elementwise_add", [True, False]) and not o2.low("lookup_table_v2", [True])
    od = Policy("OD", "bfloat16", frozenset({"conv2d"}), frozenset())
    assert od.low("conv2d", [False]) and not od.low("relu", [True])


def test_custom_lists_merge_by_paddles_rule(emu) -> None:
    """A custom black op leaves the white list (auto_cast._update_list): matmul black-listed stays float32."""
    x, w = paddle.ones([2, 2]), paddle.full([2, 2], 40000.0)
    with paddle.amp.auto_cast(level="O1", dtype="float16", custom_black_list=["matmul_v2"]):
        y = paddle.matmul(x, w)
    assert np.isfinite(y.numpy()).all() and emu.calls["matmul_v2"] == [0, 1]
    with paddle.amp.auto_cast(level="O1", dtype="float16"):
        y = paddle.matmul(x, w)
    assert np.isinf(y.numpy()).all() and emu.calls["matmul_v2"] == [1, 1]
    with pytest.raises(ValueError, match="overlap"), \
            paddle.amp.auto_cast(custom_white_list=["relu"], custom_black_list=["relu"]):   # Paddle's own error
        pass


def test_gray_op_promotes_to_float32_when_any_input_is_float32(emu) -> None:
    a, big = paddle.ones([3]), paddle.full([3], 70000.0)
    with paddle.amp.auto_cast(level="O1", dtype="float16"):
        low = paddle.matmul(a.reshape([1, 3]), a.reshape([3, 1]))   # white: a float16 value
        mixed = low + big        # gray, one float32 input: float32, 70001 kept
        both = low + low         # gray, float16 inputs: float16
    assert float(mixed.numpy().ravel()[0]) == 70003.0 and getattr(both, "_ampbench_low", None) == "float16"


# ---------------------------------------------------------------- the acceptance cases

def _linear(out_value: float) -> paddle.nn.Layer:
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 2), paddle.nn.ReLU())
    with paddle.no_grad():
        model[0].weight.set_value(paddle.full([4, 2], out_value / 4))
        model[0].bias.set_value(paddle.zeros([2]))
    return model


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_linear_output_beyond_65504_overflows_in_float16_in_that_layer(emu, dtype: str) -> None:
    model = _linear(80000.0)
    with paddle.amp.auto_cast(level="O1", dtype=dtype):
        y = model(paddle.ones([3, 4]))
    rec = emu.record()
    if dtype == "float16":
        assert np.isinf(y.numpy()).all()
        assert rec["first_overflow"] == {"step": 1, "phase": "forward", "layer": "0", "op": "linear_v2"}
        assert [(r["layer"], r["type"], r["overflow"]) for r in rec["layers"]] == [("0", "Linear", 6)]
    else:
        assert float(y.numpy()[0, 0]) == 79872.0 and rec["totals"]["overflow"] == 0   # 80000 in bfloat16


def test_overflow_with_a_scaler_is_a_skipped_step_and_a_halved_scale(emu) -> None:
    model = _linear(80000.0)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    before = model[0].weight.numpy().copy()
    scaler = paddle.amp.GradScaler(init_loss_scaling=1024.0)
    assert scaler.is_enable()    # Paddle's own scaler, enabled on a CPU by the emulation
    with paddle.amp.auto_cast(level="O1", dtype="float16"):   # logits of inf: a NaN loss and NaN gradients
        loss = paddle.nn.functional.cross_entropy(model(paddle.ones([3, 4])), paddle.to_tensor([0, 1, 0]))
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert bool(scaler._found_inf) and float(scaler._scale) == 512.0
    assert np.array_equal(model[0].weight.numpy(), before)    # the step was skipped
    assert emu.record()["first_overflow"]["layer"] == "0"


def _tiny_grad_step(emu, scaling: float | None) -> tuple[np.ndarray, dict]:
    """d loss / d w = 2^-26 for every weight: below float16's smallest subnormal 2^-24."""
    model = paddle.nn.Linear(2, 1, bias_attr=False)
    with paddle.no_grad():
        model.weight.set_value(paddle.ones([2, 1]))
    opt = paddle.optimizer.SGD(learning_rate=0.0, parameters=model.parameters())
    with paddle.amp.auto_cast(level="O1", dtype="float16"):
        out = model(paddle.ones([1, 2]))
    loss = out.sum() * 2.0 ** -26
    if scaling is None:
        loss.backward()
    else:
        scaler = paddle.amp.GradScaler(init_loss_scaling=scaling)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    return model.weight.grad.numpy().ravel(), emu.record()["totals"]


def test_gradients_below_2_pow_24_vanish_without_loss_scaling(emu) -> None:
    grad, totals = _tiny_grad_step(emu, None)
    assert grad.tolist() == [0.0, 0.0] and totals["grad_underflow"] >= 1


def test_gradients_below_2_pow_24_survive_with_loss_scaling(emu) -> None:
    grad, totals = _tiny_grad_step(emu, 2.0 ** 16)
    assert grad.tolist() == [2.0 ** -26, 2.0 ** -26] and totals["grad_underflow"] == 0


@pytest.mark.parametrize("master", [False, True])
def test_o2_without_master_weights_loses_updates_below_half_an_ulp(emu, master: bool) -> None:
    """w = 1 (float16 ulp 2^-10): SGD with lr x grad = 2^-12 < ulp/2 leaves w at 1 without master weights;
    with them the float32 master accumulates the updates and w moves."""
    model = paddle.nn.Linear(1, 1, bias_attr=False)
    with paddle.no_grad():
        model.weight.set_value(paddle.ones([1, 1]))
    opt = paddle.optimizer.SGD(learning_rate=2.0 ** -12, parameters=model.parameters())
    model, opt = paddle.amp.decorate(models=model, optimizers=opt, level="O2", dtype="float16", master_weight=master)
    for _ in range(8):
        with paddle.amp.auto_cast(level="O2", dtype="float16"):
            out = model(paddle.ones([1, 1]))
        (out.sum() * -1.0).backward()   # grad -1: each update +2^-12
        opt.step()
        opt.clear_grad()
        emu.end_step()
    w = float(model.weight.numpy().ravel()[0])
    lost = emu.record()["totals"]["lost_updates"]
    if master:
        assert w == 1 + 8 * 2.0 ** -12 and lost == 0    # the master; the float16 copy reads 1 + 2^-9
    else:
        assert w == 1.0 and lost == 8


def test_dynamic_loss_scale_follows_paddles_kernel_step_by_step(emu) -> None:
    """The emulated trial's scale trajectory is Paddle's GradScaler's; checked against what Paddle's own
    update_loss_scaling_ kernel computes from the same found_inf sequence."""
    from paddle import _C_ops

    model = paddle.nn.Linear(2, 1)
    opt = paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0 ** 10, incr_every_n_steps=3, decr_every_n_nan_or_inf=2,
                                   incr_ratio=2.0, decr_ratio=0.5)
    pattern = [False, False, False, True, False, True, True, True, True, False, False, False, False]
    scale, good, bad = (paddle.to_tensor([2.0 ** 10]), paddle.to_tensor([0], dtype="int32"),
                        paddle.to_tensor([0], dtype="int32"))
    for bad_step in pattern:
        with paddle.amp.auto_cast(level="O1", dtype="float16"):
            loss = model(paddle.ones([1, 2])).sum() * (float("inf") if bad_step else 1.0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        _, scale, good, bad = _C_ops.update_loss_scaling_([paddle.zeros([1])], paddle.to_tensor([bad_step]), scale,
                                                         good, bad, 3, 2, 2.0, 0.5, False)
        assert float(scaler._scale) == float(scale), pattern


def test_the_record_crosses_the_hooks_wire_unchanged_and_a_forged_one_is_dropped(emu) -> None:
    """A command trial's emulator record goes through record/wire.py's checks (trial/emulate/record.py)."""
    from ampbench.record import wire, wire_read
    from ampbench.record.models import Emulation
    from ampbench.trial.emulate.record import event, from_event

    model = _linear(80000.0)
    with paddle.amp.auto_cast(level="O1", dtype="float16"):
        model(paddle.ones([3, 4]))
    rec = emu.record()
    bad = wire_read.Malformed()
    checked = wire_read.validate({wire.KIND: "emulation", **event(rec)}, bad)
    assert len(checked) == 1 and isinstance(checked[0], wire.EmulationEvent) and bad.count == 0
    sent = {k: v for k, v in vars(checked[0]).items() if v is not None}
    assert Emulation.model_validate(from_event(sent)) == Emulation.model_validate(rec)
    forged = {wire.KIND: "emulation", **event(rec), "layers": [["0", "Linear", -1, 0, 0, 0, 0]]}
    assert wire_read.validate(forged, bad) == [] and bad.count == 1   # a negative count drops the event whole


@pytest.mark.parametrize("dtype,low", [("float16", 2), ("bfloat16", 4)])
def test_o2_stores_low_the_parameters_paddles_decorate_would_cast(emu, dtype: str, low: int) -> None:
    """Paddle's need_keep_fp32: BatchNorm always float32, LayerNorm float32 for float16 only; excluded layers too."""
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.LayerNorm(4), paddle.nn.BatchNorm1D(4))
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    paddle.amp.decorate(models=model, optimizers=opt, level="O2", dtype=dtype)
    assert emu.record()["low_params"] == low
    other = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.Embedding(10, 4))
    paddle.amp.decorate(models=other, level="O2", dtype=dtype, excluded_layers=[paddle.nn.Embedding])
    assert emu.record()["low_params"] == low + 2   # the Linear's two; the excluded Embedding's table stays float32
