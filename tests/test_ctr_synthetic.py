"""The synthetic Criteo-like generator: determinism, Criteo-like shape, known oracle AUC."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from ampbench.workloads.ctr.metrics import auc
from ampbench.workloads.ctr.synthetic import SyntheticSource, SyntheticSpec

SMALL = {"vocab": 500, "eval_rows": 4000}


@pytest.fixture(scope="module")
def source() -> SyntheticSource:
    return SyntheticSource(SyntheticSpec(**SMALL))


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in
               [(a.dense, b.dense), (a.sparse, b.sparse), (a.label, b.label), (a.prob, b.prob)])


def test_same_seed_same_rows_in_a_fresh_source(source: SyntheticSource) -> None:
    other = SyntheticSource(SyntheticSpec(**SMALL))
    assert _same(source.eval_arrays(), other.eval_arrays())
    it1, it2 = source.train_batches(3, 256), other.train_batches(3, 256)
    for _ in range(3):
        assert _same(next(it1), next(it2))


def test_seeds_and_data_seed_change_rows(source: SyntheticSource) -> None:
    a = next(source.train_batches(0, 256))
    b = next(source.train_batches(1, 256))
    assert not np.array_equal(a.sparse, b.sparse)
    other = SyntheticSource(SyntheticSpec(**SMALL, data_seed=7))
    assert not np.array_equal(other.eval_arrays().sparse, source.eval_arrays().sparse)


def test_threads_do_not_change_the_stream() -> None:
    one = SyntheticSource(SyntheticSpec(**SMALL)).train_batches(5, 128)
    four = SyntheticSource(SyntheticSpec(**SMALL, threads=3)).train_batches(5, 128)
    for _ in range(8):
        assert _same(next(one), next(four))


def test_streaming_rows_are_fresh_and_pool_rows_repeat() -> None:
    stream = SyntheticSource(SyntheticSpec(**SMALL)).train_batches(0, 64)
    first = [next(stream).dense.tobytes() for _ in range(8)]
    assert len(set(first)) == 8
    pooled = SyntheticSource(SyntheticSpec(**SMALL, train_rows=128)).train_batches(0, 64)
    rows = np.concatenate([next(pooled).dense for _ in range(4)])  # two epochs of 128 rows
    assert len(np.unique(rows, axis=0)) <= 128


def test_criteo_like_layout(source: SyntheticSource) -> None:
    ev = source.eval_arrays()
    assert ev.dense.shape == (4000, 13) and ev.dense.dtype == np.float32
    assert ev.sparse.shape == (4000, 26) and ev.sparse.dtype == np.int64
    assert ev.sparse.min() >= 0 and ev.sparse.max() < 500
    assert (ev.dense >= 0).all()  # log1p of non-negative counts
    assert set(np.unique(ev.label)) == {0.0, 1.0}
    assert abs(ev.label.mean() - 0.25) < 0.03  # the requested click rate


def test_ids_are_long_tailed(source: SyntheticSource) -> None:
    col = source.eval_arrays().sparse[:, 0]
    counts = np.sort(np.bincount(col, minlength=500))[::-1]
    assert counts[:10].sum() > 0.25 * counts.sum()  # a few ids dominate...
    assert (counts > 0).sum() > 200  # ...over a long tail of rare ones
    top = set(np.argsort(np.bincount(col, minlength=500))[::-1][:10].tolist())
    assert top != set(range(10))  # popular ids are scattered over the table, as hashing does


def test_labels_follow_the_hidden_probability(source: SyntheticSource) -> None:
    ev = source.eval_arrays()
    lo, hi = ev.prob < np.quantile(ev.prob, 0.2), ev.prob > np.quantile(ev.prob, 0.8)
    assert ev.label[hi].mean() > ev.label[lo].mean() + 0.3
    # calibration: empirical click rate matches the mean true probability
    assert abs(ev.label.mean() - ev.prob.mean()) < 0.02


def test_oracle_auc_is_the_ceiling(source: SyntheticSource) -> None:
    ev = source.eval_arrays()
    oracle = source.oracle_auc()
    assert 0.75 < oracle < 0.88
    assert oracle == auc(ev.label, ev.prob)
    rng = np.random.default_rng(0)
    noisy = ev.prob + rng.normal(scale=0.2, size=len(ev))  # a worse model
    assert auc(ev.label, noisy) < oracle - 0.02
    assert abs(auc(ev.label, rng.random(len(ev))) - 0.5) < 0.03


def test_signal_controls_the_oracle() -> None:
    weak = SyntheticSource(SyntheticSpec(**SMALL, signal=0.7)).oracle_auc()
    strong = SyntheticSource(SyntheticSpec(**SMALL, signal=2.5)).oracle_auc()
    assert weak + 0.1 < strong


def test_spec_validation() -> None:
    with pytest.raises(ValidationError, match="3 sizes for 26"):
        SyntheticSpec(vocab=[10, 10, 10])
    with pytest.raises(ValidationError, match="at least 2"):
        SyntheticSpec(vocab=1)
    with pytest.raises(ValueError, match="smaller than the batch"):
        next(SyntheticSource(SyntheticSpec(**SMALL, train_rows=10)).train_batches(0, 64))
