"""ampbench.judge.stats: margins, loss trends and the loss-scale collapse detector."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from ampbench.judge import stats


def test_parity_margin_uses_seed_sd_or_abs_tol():
    vals = [0.90, 0.93, 0.91]
    m = stats.parity_margin(vals, abs_tol=0.01, sigma_k=2.0)
    assert m.sd == pytest.approx(statistics.stdev(vals))
    assert m.value == pytest.approx(2 * statistics.stdev(vals)) and m.source == "sigma"
    assert stats.parity_margin([0.9, 0.9001], 0.01, 2.0).source == "abs_tol"
    one = stats.parity_margin([0.9], 0.01, 2.0)
    assert one.value == 0.01 and one.sd is None and "one seed" in one.source


def test_pooled_sd_matches_manual():
    g1, g2 = [1.0, 2.0, 4.0], [10.0, 11.0]
    sd, df = stats.pooled_sd([g1, g2, [5.0]])
    ss = sum((x - np.mean(g1)) ** 2 for x in g1) + sum((x - np.mean(g2)) ** 2 for x in g2)
    assert df == 3 and sd == pytest.approx(np.sqrt(ss / 3))
    assert stats.pooled_sd([[1.0], [2.0]]) == (None, 0)


def test_worse_by_respects_goal():
    assert stats.worse_by(0.8, 0.9, "max") == pytest.approx(0.1)
    assert stats.worse_by(0.8, 0.9, "min") == pytest.approx(-0.1)


def test_loss_fell():
    assert stats.loss_fell([2.0, 1.8, 1.5, 1.2, 1.0, 0.9, 0.8, 0.7])[0]
    assert not stats.loss_fell([1.0] * 8)[0]
    assert not stats.loss_fell([2.0, 1.5, 1.0, float("nan")])[0]
    assert not stats.loss_fell([1.0])[0]


# ---------------------------------------------------------------- loss-scale collapse


def _series(n: int, events: dict[int, float], start: float = 32768.0) -> list[float]:
    """Scale per step 1..n: multiply by events[step] at that step."""
    out, s = [], start
    for i in range(1, n + 1):
        s *= events.get(i, 1.0)
        out.append(s)
    return out


def test_no_collapse_when_startup_halvings_settle_and_loss_falls():
    n = 80
    scales = _series(n, {i: 0.5 for i in range(2, 12)})  # 10 halvings at start-up, then stable
    loss = [3.0 if i < 12 else 3.0 * np.exp(-(i - 12) / 20) for i in range(1, n + 1)]
    assert stats.find_scale_collapse(list(range(1, n + 1)), scales, loss, floor=1.0, halvings=8) is None


def test_collapse_found_where_it_began_not_at_an_earlier_isolated_overflow():
    n = 60
    steps = list(range(1, n + 1))
    scales = _series(n, {14: 0.5, **{i: 0.5 for i in range(30, 61)}})
    loss = [2.0 * np.exp(-i / 20) if i < 30 else 2.0 * np.exp(-29 / 20) for i in steps]
    c = stats.find_scale_collapse(steps, scales, loss, floor=1.0, halvings=8)
    assert c is not None and c.began_step == 30 and c.kind == "halvings" and c.detected_step == 37
    # With a huge halving budget the floor catches it instead, still dated to step 30.
    c2 = stats.find_scale_collapse(steps, scales, loss, floor=1.0, halvings=100)
    assert c2 is not None and c2.kind == "floor" and c2.began_step == 30 and c2.scale < 1.0


def test_recovery_resets_the_count_and_nan_scale_is_a_collapse():
    n = 40
    steps = list(range(1, n + 1))
    ev = {i: 0.5 for i in range(5, 10)} | {12: 2.0} | {i: 0.5 for i in range(15, 19)}  # 5 + 4, with a recovery
    flat = [1.0] * n
    assert stats.find_scale_collapse(steps, _series(n, ev), flat, floor=1.0, halvings=8) is None
    scales = _series(n, {})
    scales[20] = float("nan")
    c = stats.find_scale_collapse(steps, scales, flat, floor=1.0, halvings=8)
    assert c is not None and c.kind == "floor" and c.detected_step == 21
    assert stats.find_scale_collapse(steps, [None] * n, flat, 1.0, 8) is None
