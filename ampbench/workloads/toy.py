"""A tiny MLP on a seeded synthetic classification task: the harness's own test workload.

Small enough that a trial takes a second or two, so tests can exercise the real runner,
worker, subprocess isolation and resume without a real model.  Also docs/suites.md's example of
how little a workload needs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ampbench.config.suite import StrictInt
from ampbench.workloads.base import Batch, Workload, WorkloadParams, bundled, shuffled_indices


class ToyParams(WorkloadParams):
    features: StrictInt = Field(16, ge=1)
    hidden: StrictInt = Field(32, ge=1)
    classes: StrictInt = Field(4, ge=2)
    train_rows: StrictInt = Field(2048, ge=16)
    eval_rows: StrictInt = Field(512, ge=16)
    # Test hooks: multiply the loss by this factor (1e38 overflows fp32 -> non-finite loss).
    loss_factor: float = 1.0
    # Test hook (planted NaN source): a layer after the hidden ReLU that is the identity for
    # activations below this value and NaN above it (its exp overflows float32 there).
    nan_above: float | None = Field(None, gt=0)
    # Test hook (a slow data loader): seconds each training batch takes to arrive, as a loader that
    # cannot keep up (Paddle #42436); the trial's data-wait share shows it
    fetch_delay_s: float = Field(0.0, ge=0, le=10)


@bundled
class ToyWorkload(Workload[ToyParams]):
    name = "toy"
    Params = ToyParams
    metric_goals: ClassVar[dict[str, str]] = {"accuracy": "max", "eval_loss": "min"}

    @classmethod
    def train_rows(cls, params: ToyParams) -> int | None:
        return params.train_rows

    def prepare(self) -> None:
        p = self.params
        rng = np.random.RandomState(1234)  # the dataset is fixed; seeds change init and order only
        w = rng.randn(p.features, p.classes).astype("float32")
        x = rng.randn(p.train_rows + p.eval_rows, p.features).astype("float32")
        y = (x @ w + 0.5 * rng.randn(len(x), p.classes)).argmax(1).astype("int64")
        self.x_train, self.y_train = x[: p.train_rows], y[: p.train_rows]
        self.x_eval, self.y_eval = x[p.train_rows:], y[p.train_rows:]

    def build_model(self) -> Any:
        from paddle import nn

        p = self.params
        planted = [_nan_above_layer(p.nan_above)] if p.nan_above else []
        return nn.Sequential(nn.Linear(p.features, p.hidden), nn.ReLU(), *planted, nn.Linear(p.hidden, p.classes))

    def train_batches(self, seed: int, batch_size: int) -> Iterator[Batch]:
        for idx in shuffled_indices(len(self.x_train), batch_size, seed):
            if self.params.fetch_delay_s:
                time.sleep(self.params.fetch_delay_s)
            yield Batch(inputs=(self.x_train[idx], self.y_train[idx]), samples=len(idx))

    def loss(self, model: Any, batch: Batch) -> Any:
        import paddle
        import paddle.nn.functional as F

        x, y = batch.inputs
        logits = model(paddle.to_tensor(x))
        loss = F.cross_entropy(logits.astype("float32"), paddle.to_tensor(y))
        f = self.params.loss_factor
        return loss * f if f != 1.0 else loss

    def evaluate(self, model: Any) -> dict[str, float]:
        import paddle
        import paddle.nn.functional as F

        with paddle.no_grad():
            logits = model(paddle.to_tensor(self.x_eval)).astype("float32")
            loss = float(F.cross_entropy(logits, paddle.to_tensor(self.y_eval)))  # Tensor.__float__: item()
            acc = float((logits.argmax(1).numpy() == self.y_eval).mean())
        return {"accuracy": acc, "eval_loss": loss}


def _nan_above_layer(threshold: float) -> Any:
    """h + (e - e) with e = exp(88.73 * h / threshold): exactly h while exp stays finite, NaN where
    h > threshold (exp overflows float32 to inf, inf - inf = NaN). The `exp` op is the NaN source."""
    import paddle
    from paddle import nn

    class NanAbove(nn.Layer):
        def forward(self, h: Any) -> Any:
            e = paddle.exp(h * (88.73 / threshold))
            return h + (e - e)

    return NanAbove()
