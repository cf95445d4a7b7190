"""Click-through-rate metrics: exact ROC AUC (ties counted half) and log loss.

Exact, not binned: the suite's parity margin is an AUC delta of 0.001, finer than the error of
a histogram AUC such as Paddle's `paddle.metric.Auc` (num_thresholds = 4095 by default: 4096
buckets).  Pure numpy/scipy, no paddle.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def _binary(labels: np.ndarray | list, n: int) -> np.ndarray:
    y = np.asarray(labels).ravel()
    if y.shape[0] != n:
        raise ValueError(f"labels ({y.shape[0]}) and scores ({n}) differ in length")
    ok = (y == 0) | (y == 1)
    if not ok.all():
        raise ValueError(f"labels must be 0 or 1; found {np.unique(y[~ok])[:5].tolist()}")
    return y.astype(bool)


def auc(labels: np.ndarray | list, scores: np.ndarray | list) -> float:
    """Probability that a random positive scores above a random negative (ties count 1/2).

    Mann-Whitney U from average ranks: O(n log n), exact for any number of tied scores.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = _binary(labels, s.shape[0])
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or inf; the model diverged?")
    n_pos = int(y.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"AUC needs both classes; got {n_pos} positives and {n_neg} negatives")
    ranks = rankdata(s)  # average rank for ties
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def log_loss_from_logits(labels: np.ndarray | list, logits: np.ndarray | list) -> float:
    """Mean binary cross-entropy computed from logits: stable where sigmoid saturates."""
    z = np.asarray(logits, dtype=np.float64).ravel()
    y = _binary(labels, z.shape[0])
    # -log sigmoid(z) = softplus(-z); -log(1 - sigmoid(z)) = softplus(z)
    return float(np.mean(np.logaddexp(0.0, np.where(y, -z, z))))
