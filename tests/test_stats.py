"""ampbench.judge.stats: bootstrap, rank test, margins and the loss-scale collapse detector,
cross-checked against scipy.stats where scipy has the same procedure."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from scipy import stats as sps

from ampbench.judge import stats


def _rates(rng: np.random.Generator, n: int, level: float, sd: float = 0.05) -> np.ndarray:
    return level * np.exp(rng.normal(0, sd, n))


def test_bootstrap_matches_scipy_percentile_bootstrap_for_one_trial_per_side():
    rng = np.random.default_rng(1)
    a, b = _rates(rng, 150, 160.0), _rates(rng, 150, 100.0)
    ours = stats.bootstrap_median_ratio([a], [b], confidence=0.95, resamples=4000, seed=7)
    ref = sps.bootstrap((a, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                        vectorized=True, paired=False, n_resamples=4000, method="percentile",
                        confidence_level=0.95, random_state=np.random.default_rng(3))
    assert ours.estimate == pytest.approx(np.median(a) / np.median(b))
    # Different random streams: endpoints agree to Monte Carlo error (well under 1% here).
    assert ours.low == pytest.approx(ref.confidence_interval.low, rel=0.006)
    assert ours.high == pytest.approx(ref.confidence_interval.high, rel=0.006)
    assert ours.low < ours.estimate < ours.high


def test_bootstrap_is_reproducible_and_seed_dependent():
    rng = np.random.default_rng(2)
    a, b = [_rates(rng, 80, 150.0)], [_rates(rng, 80, 100.0)]
    one = stats.bootstrap_median_ratio(a, b, resamples=500, seed=11)
    assert one == stats.bootstrap_median_ratio(a, b, resamples=500, seed=11)
    assert one != stats.bootstrap_median_ratio(a, b, resamples=500, seed=12)
    # Chunking must not change the answer's distribution much (same seed, tiny chunks).
    chunked = stats.bootstrap_median_ratio(a, b, resamples=500, seed=11, chunk=1000)
    assert chunked.low == pytest.approx(one.low, rel=0.02)


def test_two_stage_bootstrap_carries_trial_to_trial_variation():
    """Three seeds whose levels differ by a few percent: the interval must be wider than a bootstrap
    that pretends all steps are exchangeable (scipy on the pooled steps)."""
    rng = np.random.default_rng(3)
    amp = [_rates(rng, 100, lvl, sd=0.02) for lvl in (150.0, 156.0, 144.0)]
    ref = [_rates(rng, 100, lvl, sd=0.02) for lvl in (100.0, 104.0, 96.0)]
    ours = stats.bootstrap_median_ratio(amp, ref, resamples=2000, seed=0)
    pooled = sps.bootstrap((np.concatenate(amp), np.concatenate(ref)),
                           lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                           vectorized=True, n_resamples=2000, method="percentile", random_state=0)
    width = ours.high - ours.low
    pooled_width = pooled.confidence_interval.high - pooled.confidence_interval.low
    assert width > 1.5 * pooled_width


def test_bootstrap_rejects_empty_groups():
    with pytest.raises(ValueError):
        stats.bootstrap_median_ratio([np.array([])], [np.array([1.0])])


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
