"""Trial-level inference (judge/inference.py): the numbers the verdicts rest on, checked against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ampbench.judge import inference


def test_diff_bounds_are_the_pooled_two_sample_t_interval():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 0.2, 4), rng.normal(0.7, 0.2, 5)
    got = {k: float(v[0]) for k, v in inference.diff_bounds_batch(a[None], b[None], 0.95).items()}
    res = sps.ttest_ind(a, b, equal_var=True)
    ci = res.confidence_interval(0.95)
    assert got["estimate"] == pytest.approx(a.mean() - b.mean())
    assert (got["low"], got["high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    one = sps.ttest_ind(a, b, equal_var=True, alternative="greater").confidence_interval(0.95)
    assert got["lower"] == pytest.approx(one.low) and got["df"] == 7


def test_log_ratio_bounds_come_back_on_the_ratio_scale():
    num, den = [110.0, 112.0, 108.0], [100.0, 101.0, 99.0]
    b = inference.log_ratio_bounds(num, den, 0.95)
    geo = math.exp(np.mean(np.log(num)) - np.mean(np.log(den)))
    assert b.estimate == pytest.approx(geo) and b.low < b.lower < b.estimate < b.upper < b.high
    assert 1.05 < b.low  # a clear 10% difference with 1% spread is shown


@pytest.mark.parametrize("lower, upper, expected", [(1.1, 1.3, "PASS"), (0.8, 0.95, "FAIL"), (0.9, 1.1, "INCONCLUSIVE")])
def test_three_outcomes(lower, upper, expected):
    assert inference.decide_batch(np.array([lower]), np.array([upper]), 1.0)[0] == expected
    flipped = {"PASS": "FAIL", "FAIL": "PASS", "INCONCLUSIVE": "INCONCLUSIVE"}[expected]
    # lower-is-better: a bound pair entirely above the threshold is a demonstrated failure
    assert inference.decide_batch(np.array([lower]), np.array([upper]), 1.0, higher_is_better=False)[0] == flipped


def test_parity_margin_keeps_its_meaning_and_uses_both_arms():
    ref = np.array([[0.80, 0.81, 0.79]])
    amp = np.array([[0.80, 0.80, 0.80]])
    r = inference.parity_batch(ref, amp, abs_tol=0.01, sigma_k=2.0, confidence=0.95)
    sd = math.sqrt((np.var(ref, ddof=1) * 2 + 0) / 4)  # pooled over both arms
    assert r["margin"][0] == pytest.approx(max(0.01, 2 * sd))
    big = inference.parity_batch(ref, amp - 0.05, 0.01, 2.0, 0.95)
    assert big["status"][0] == "FAIL" and r["status"][0] == "PASS"
    lower_better = inference.parity_batch(ref, amp + 0.05, 0.01, 2.0, 0.95, goal="min")
    assert lower_better["status"][0] == "FAIL"


def test_seeds_needed_grows_with_spread_and_is_none_without_one():
    small = inference.seeds_needed(0.01, 0.05, 0.95)
    big = inference.seeds_needed(0.04, 0.05, 0.95)
    assert small is not None and big is not None and inference.MIN_TRIALS <= small < big
    assert inference.seeds_needed(None, 0.05, 0.95) is None
    assert inference.seeds_needed(1.0, 0.05, 0.95, max_seeds=10) is None


def test_paired_ratio_interval_and_pairs_for_a_2_percent_claim():
    """Per-pair ratios with a 10% spread: the interval holds the truth and says many pairs are needed."""
    rng = np.random.default_rng(3)
    den = np.exp(rng.normal(0, 0.2, 7))  # each pair's machine level varies a lot, shared by both sides
    num = den * 0.97 * np.exp(rng.normal(0, 0.10, 7))
    r = inference.paired_ratio(num, den, claim=0.02)
    assert r.low < 0.97 < r.high and r.pairs == 7
    assert r.pairs_for_claim is not None and r.pairs_for_claim > 50
    tight = inference.paired_ratio(den * 0.97 * np.exp(rng.normal(0, 0.005, 7)), den, claim=0.02)
    assert tight.pairs_for_claim <= 3 and tight.high - tight.low < 0.02
    assert "needs" in r.text(0.02) and inference.paired_ratio([1.0], [1.0]).pairs_for_claim is None
