"""Exact AUC and log loss against scikit-learn's reference implementations on random data."""

from __future__ import annotations

import numpy as np
import pytest

from ampbench.workloads.ctr.metrics import auc, log_loss_from_logits

metrics = pytest.importorskip("sklearn.metrics")


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_sklearn_on_random_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3000))
    y = (rng.random(n) < rng.uniform(0.05, 0.6)).astype(int)
    y[:2] = [0, 1]
    s = rng.normal(size=n) + y * rng.uniform(0, 2)
    assert auc(y, s) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_auc_with_heavy_ties_matches_sklearn(seed: int) -> None:
    # few distinct scores: most pairs are tied and must count 1/2 each
    rng = np.random.default_rng(100 + seed)
    y = rng.integers(0, 2, 2000)
    s = np.round(rng.random(2000) + 0.3 * y, 1)
    assert len(np.unique(s)) < 20
    assert auc(y, s) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)


def test_auc_known_values() -> None:
    assert auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    assert auc([0, 1], [0.5, 0.5]) == 0.5  # a tie is half a win
    assert auc([0, 1, 1], [3, 2, 1]) == 0.0
    assert auc(np.array([1.0, 0.0]), np.array([2.0, 1.0], dtype=np.float32)) == 1.0


def test_auc_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="both classes"):
        auc([1, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="0 or 1"):
        auc([0, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN"):
        auc([0, 1], [0.1, float("nan")])
    with pytest.raises(ValueError, match="length"):
        auc([0, 1, 1], [0.1, 0.2])


def test_log_loss_matches_sklearn() -> None:
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 1000)
    z = rng.normal(scale=3, size=1000)
    p = 1 / (1 + np.exp(-z))
    ref = metrics.log_loss(y, p)
    assert log_loss_from_logits(y, z) == pytest.approx(ref, rel=1e-6)


def test_log_loss_from_logits_stays_finite_where_sigmoid_saturates() -> None:
    # z = 800 rounds sigmoid to exactly 1.0; the logit form still gives the exact loss
    assert log_loss_from_logits([0], [800.0]) == pytest.approx(800.0)
    assert log_loss_from_logits([1], [800.0]) == pytest.approx(0.0, abs=1e-12)
