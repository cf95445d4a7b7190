"""Op micro-benchmarks: where AMP's speed comes from, op by op (FP32 vs `paddle.amp.auto_cast` O1).

White-list ops (matmul, conv2d, linear) are the ones auto_cast runs in float16/bfloat16 and where
Tensor Cores pay off; gelu is on neither list in Paddle 3.3 ("gray": it follows its input's dtype,
so from a float32 input it stays float32); black-list ops (softmax, batch_norm, layer_norm,
reduce_mean) stay in float32 for accuracy, so under AMP they cost the same plus any casts.  Each op gets a
pytest-benchmark group with an `fp32` and an `amp` row; the timed function synchronises the device
so GPU kernels are measured, not their launch.  Forward only, no autograd.

Shapes: realistic ones (ResNet-50 stage 1, BERT-base) on GPU; on CPU the same layouts scaled down
to a few milliseconds per call so `tox -e bench` takes a minute or two.  Run with
`tox -e bench` (writes results/bench/ops.json) or `pytest benchmarks --benchmark-only`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

LOW = ("float16", "bfloat16")
# Paddle warns on every CPU auto_cast that it has no effect; the summary says so once.
pytestmark = pytest.mark.filterwarnings("ignore:amp_guard can only be enabled:UserWarning")


@dataclass(frozen=True)
class OpCase:
    name: str                 # what the benchmark is called
    paddle_op: str            # the op name Paddle's AMP lists use
    amp_list: str             # "white" (low precision under O1), "black" (kept in float32), "gray" (follows input)
    cpu_shape: tuple[int, ...]
    gpu_shape: tuple[int, ...]
    build: Callable[[Any, tuple[int, ...]], Callable[[], Any]]  # (paddle, shape) -> zero-arg op call


def _matmul(paddle: Any, s: tuple[int, ...]) -> Callable[[], Any]:
    m, k, n = s
    a, b = paddle.randn([m, k]), paddle.randn([k, n])
    return lambda: paddle.matmul(a, b)


def _conv2d(paddle: Any, s: tuple[int, ...]) -> Callable[[], Any]:
    n, c, h, w = s
    conv, x = paddle.nn.Conv2D(c, c, 3, padding=1), paddle.randn([n, c, h, w])
    return lambda: conv(x)


def _linear(paddle: Any, s: tuple[int, ...]) -> Callable[[], Any]:
    b, t, d = s
    lin, x = paddle.nn.Linear(d, d), paddle.randn([b, t, d])
    return lambda: lin(x)


def _unary(fn_name: str) -> Callable[[Any, tuple[int, ...]], Callable[[], Any]]:
    def build(paddle: Any, s: tuple[int, ...]) -> Callable[[], Any]:
        x = paddle.randn(list(s))
        fn = {"gelu": paddle.nn.functional.gelu, "softmax": lambda v: paddle.nn.functional.softmax(v, axis=-1),
              "reduce_mean": lambda v: paddle.mean(v, axis=-1)}[fn_name]
        return lambda: fn(x)

    return build


def _batch_norm(paddle: Any, s: tuple[int, ...]) -> Callable[[], Any]:
    bn, x = paddle.nn.BatchNorm2D(s[1]), paddle.randn(list(s))
    return lambda: bn(x)  # training mode: batch statistics, as in a training step


def _layer_norm(paddle: Any, s: tuple[int, ...]) -> Callable[[], Any]:
    ln, x = paddle.nn.LayerNorm(s[-1]), paddle.randn(list(s))
    return lambda: ln(x)


CASES = [
    OpCase("matmul", "matmul_v2", "white", (256, 512, 512), (4096, 4096, 4096), _matmul),
    OpCase("conv2d", "conv2d", "white", (2, 32, 56, 56), (32, 64, 56, 56), _conv2d),
    OpCase("linear", "matmul_v2", "white", (4, 64, 768), (32, 128, 768), _linear),
    OpCase("gelu", "gelu", "gray", (4, 128, 768), (32, 128, 3072), _unary("gelu")),
    OpCase("softmax", "softmax", "black", (4, 12, 128, 128), (32, 12, 128, 128), _unary("softmax")),
    OpCase("batch_norm", "batch_norm", "black", (4, 64, 56, 56), (32, 64, 56, 56), _batch_norm),
    OpCase("layer_norm", "layer_norm", "black", (4, 128, 768), (32, 128, 768), _layer_norm),
    OpCase("reduce_mean", "reduce_mean", "black", (4, 128, 768), (32, 128, 768), _unary("reduce_mean")),
]


@pytest.mark.parametrize("precision", ["fp32", "amp"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op(benchmark: Any, bench_env: Any, case: OpCase, precision: str) -> None:
    import contextlib

    import numpy as np
    import paddle

    from ampbench.trackers import device

    paddle.seed(0)
    shape = case.gpu_shape if bench_env.gpu else case.cpu_shape
    op = case.build(paddle, shape)

    def autocast() -> Any:
        if precision == "fp32":
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(enable=True, level="O1", dtype=bench_env.dtype)

    sync = device.synchronizer(bench_env.gpu)  # chosen once: no device query inside the timed call

    def timed() -> Any:
        with paddle.no_grad(), autocast():
            out = op()
        if sync is not None:
            sync()  # inside the timed function: measure the kernels, not their launch
        return out

    out = timed()  # evidence of the path taken: the output dtype under this precision
    out_dtype = str(out.dtype).replace("paddle.", "")
    benchmark.group = case.name
    benchmark.extra_info.update({
        "op": case.paddle_op, "amp_list": case.amp_list, "shape": list(shape), "precision": precision,
        "out_dtype": out_dtype, "amp_dtype": bench_env.dtype, "amp_active": bench_env.amp_active,
        "device": bench_env.device, "note": bench_env.note,
    })
    result = benchmark.pedantic(timed, rounds=bench_env.rounds, warmup_rounds=1, iterations=1)

    assert np.isfinite(result.astype("float32").numpy()).all(), f"{case.name} produced non-finite output"
    if precision == "fp32" or not bench_env.amp_active:
        assert out_dtype == "float32", f"{case.name}: expected the float32 path, got {out_dtype}"
    elif case.amp_list == "white":
        assert out_dtype in LOW, f"{case.name} is on the white list but ran in {out_dtype} under auto_cast"
