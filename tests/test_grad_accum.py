"""Gradient accumulation in the worker's train loop (in-process, toy MLP: no batch-dependent layers).

With AMP inactive, k micro-batches of b must give the weights of one batch of k*b (the toy's
data stream yields the same samples: k*b divides the epoch).  With a live GradScaler (the
test-only CPU trick of the `live_scaler` fixture below) the scaler must act once per optimizer step, not once per micro-batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ampbench.results import RunDir
from ampbench.workloads.toy import ToyParams, ToyWorkload
from tests.test_worker import spec_for

B, K, STEPS = 16, 4, 5
REAL_BUILD = ToyWorkload.build_model


def train(suite: Path, run: RunDir, mode: str, batch: int, accum: int, monkeypatch) -> tuple[dict, object]:
    """One trial in this process; returns the trained weights and the trial."""
    from ampbench.trial.worker import Events, TrialRunner

    built: list = []

    def capture(self):  # keep a handle on the model the worker trains
        built.append(REAL_BUILD(self))
        return built[-1]

    monkeypatch.setattr(ToyWorkload, "build_model", capture)
    spec = spec_for(suite, run, mode=mode, name=f"{mode}-b{batch}-k{accum}",
                    overrides=[f"train.batch_size={batch}", f"train.grad_accum={accum}", f"train.steps={STEPS}",
                               "train.warmup_steps=1", "train.eval_every=0",
                               # SGD, not Adam: Adam is blind to a gradient off by a constant factor
                               'train.optimizer={name = "sgd", lr = 0.5}'])
    tr = TrialRunner(spec, Events(None))
    tr.run()
    assert tr.trial.status == "ok", tr.trial.error
    return {k: v.numpy().astype("float64") for k, v in built[0].state_dict().items()}, tr.trial


@pytest.fixture
def live_scaler(monkeypatch):
    """Let Paddle's GradScaler arithmetic run on CPU (tests only): it disables itself off GPU only when
    `in_dynamic_mode()` is true at construction, so that check is patched."""
    import paddle
    import paddle.amp.grad_scaler as gs

    with paddle.amp.auto_cast(dtype="float16"):
        pass
    monkeypatch.setattr(gs, "in_dynamic_mode", lambda: False)


@pytest.mark.parametrize("mode", ["fp32", "amp-o1-fp16"])
def test_k_micro_batches_equal_one_big_batch(toy_suite, tmp_path, monkeypatch, mode):
    suite, run = toy_suite(), RunDir(tmp_path / "run")
    small, t_small = train(suite, run, mode, B, K, monkeypatch)
    big, t_big = train(suite, run, mode, B * K, 1, monkeypatch)
    assert not t_small.amp.active                       # CPU: AMP inactive, numerics stay float32
    assert t_small.grad_accum == K and t_small.batch_size == B
    assert [s.samples for s in t_small.steps] == [B * K] * STEPS == [s.samples for s in t_big.steps]
    assert small.keys() == big.keys()
    for name in small:
        np.testing.assert_allclose(small[name], big[name], rtol=1e-4, atol=1e-6, err_msg=name)
    # the comparison means something only if training moved the weights
    init = _init_weights(run)
    moved = max(float(np.abs(small[n] - init[n]).max()) for n in small)
    assert moved > 1e-3
    # the recorded loss of a step is the mean over its micro-batches: the big batch's loss
    np.testing.assert_allclose([s.loss for s in t_small.steps], [s.loss for s in t_big.steps], rtol=1e-5)


def _init_weights(run: RunDir) -> dict:
    """The seed-0 initial weights, built as the worker builds them."""
    import paddle

    from ampbench.trial.worker import seed_everything
    from ampbench.workloads.base import WorkloadContext

    wl = ToyWorkload(WorkloadContext(params=ToyParams(train_rows=512, eval_rows=128), batch_size=B, steps=1, seed=0,
                                     cache_dir=run.path))
    seed_everything(0)
    paddle.set_device("cpu")
    return {k: v.numpy().astype("float64") for k, v in REAL_BUILD(wl).state_dict().items()}


def test_live_scaler_equal_weights_and_one_update_per_step(toy_suite, tmp_path, monkeypatch, live_scaler):
    """Scaled micro-batch losses, one unscale + step + scale update per k micro-batches."""
    suite, run = toy_suite(), RunDir(tmp_path / "run")
    small, t_small = train(suite, run, "amp-o1-fp16", B, K, monkeypatch)
    big, t_big = train(suite, run, "amp-o1-fp16", B * K, 1, monkeypatch)
    assert t_small.amp.scaler_enabled and t_big.amp.scaler_enabled
    assert [s.loss_scale for s in t_small.steps] == [65536.0] * STEPS
    assert t_small.skipped_steps == 0
    for name in small:
        np.testing.assert_allclose(small[name], big[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_overflow_skips_counted_per_optimizer_step(toy_suite, tmp_path, monkeypatch, live_scaler):
    """Every micro-batch overflows (loss x 1e38): STEPS skipped optimizer steps (not STEPS*K), the
    scale halves once per step, and the weights never move."""
    body = toy_suite().read_text().replace("eval_rows = 128", "eval_rows = 128\nloss_factor = 1e38")
    suite, run = toy_suite(body=body, name="overflow.toml"), RunDir(tmp_path / "run")
    init = _init_weights(run)
    after, t = train(suite, run, "amp-o1-fp16", B, K, monkeypatch)
    assert t.skipped_steps == STEPS and all(s.found_inf for s in t.steps)
    assert [s.loss_scale for s in t.steps] == [65536.0 / 2**i for i in range(STEPS)]
    for name in after:
        np.testing.assert_array_equal(after[name], init[name])
