"""Alpha-spending boundaries of run --until-decided (judge.sequential)."""

from __future__ import annotations

import numpy as np
import pytest

from ampbench.judge import sequential


def test_boundaries_match_the_published_lan_demets_values():
    """Five equally spaced looks, one-sided alpha 0.025 (gsDesign's sfLDOF / sfLDPocock tables)."""
    fr = tuple(i / 5 for i in range(1, 6))
    obf = sequential.z_bounds(fr, 0.025, "obf")
    assert obf == pytest.approx((4.8769, 3.3569, 2.6803, 2.2898, 2.0310), abs=2e-3)
    poc = sequential.z_bounds(fr, 0.025, "pocock")
    assert poc == pytest.approx((2.4380, 2.4268, 2.4101, 2.3966, 2.3859), abs=3e-3)


@pytest.mark.parametrize("kind", ["obf", "pocock"])
def test_crossing_probability_over_all_looks_is_alpha(kind):
    """Monte Carlo of the score process with unequal looks: P(cross at any look) = alpha under the null."""
    fr = (0.25, 0.4, 0.55, 0.8, 1.0)
    c = np.array(sequential.z_bounds(fr, 0.01, kind))
    rng = np.random.default_rng(1)
    inc = rng.normal(0, 1, (400_000, len(fr))) * np.sqrt(np.diff((0, *fr)))
    z = np.cumsum(inc, axis=1) / np.sqrt(fr)
    crossed = (z >= c).any(axis=1).mean()
    assert crossed == pytest.approx(0.01, abs=0.0006)
    assert ((z >= c).cumsum(axis=1)[:, 0] > 0).mean() == pytest.approx(sequential.spent(0.01, 0.25, kind), abs=6e-4)


def test_fixed_design_and_a_single_look_decide_at_the_plain_levels():
    assert sequential.levels(0.95, 0.01) == pytest.approx((0.95, 0.99))
    one = sequential.Design(looks=[8], max_seeds=8)
    assert sequential.levels(0.95, 0.01, one) == pytest.approx((0.95, 0.99), abs=1e-6)


def test_early_looks_are_stricter_and_a_repeated_look_spends_nothing_new():
    d3 = sequential.Design(looks=[3], max_seeds=12)
    d3b = sequential.Design(looks=[3, 3], max_seeds=12)
    p, f = sequential.levels(0.95, 0.01, d3)
    assert p > 0.95 and f > 0.99
    assert sequential.levels(0.95, 0.01, d3b) == pytest.approx((p, f))
    # against a fixed baseline, information grows more slowly: the same look is less strict
    assert sequential.levels(0.95, 0.01, d3, baseline_trials=3)[1] < f


def test_information_fractions_must_increase():
    with pytest.raises(ValueError):
        sequential.z_bounds((0.5, 0.4), 0.01)
