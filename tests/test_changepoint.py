"""History as a series (judge.changepoint): a planted step is named by its commit range, noise is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ampbench.judge import changepoint as cp


def history(levels: list[float], sd: float = 0.02, seed: int = 0, config_at: int | None = None,
            ci: float = 0.01) -> list[dict]:
    """History lines (the RunSummary fields the analysis reads): two modes, one sha per run."""
    rng = np.random.default_rng(seed)
    out = []
    for i, lv in enumerate(levels):
        modes = {}
        for m, base in (("fp32", 1000.0), ("amp-o1-fp16", 1600.0)):
            v = base * math.exp(lv + rng.normal(0, sd))
            modes[m] = {"samples_per_s": v, "samples_per_s_ci": [v * (1 - ci), v * (1 + ci)], "verdict": "PASS"}
        out.append({"run_id": f"r{i:02d}", "git_sha": f"{i:02d}" + "a" * 38, "started": f"2026-11-{i + 1:02d}",
                    "config_hash": "sha256:b" if config_at is not None and i >= config_at else "sha256:a",
                    "confidence": 0.95, "modes": modes})
    return out


def test_planted_8_percent_step_is_named_by_commit_range():
    levels = [0.0] * 12 + [math.log(0.92)] * 10
    found = cp.all_steps(history(levels, sd=0.02, seed=1))
    assert {s.mode for s in found} == {"fp32", "amp-o1-fp16"}
    for s in found:
        assert (s.before, s.after) == (11, 12) and s.change < 0
        assert s.change == pytest.approx(-0.08, abs=0.025)
        assert s.commit_range() == "11aaaaaaaa..12aaaaaaaa" and "r11" in s.describe()


def test_pure_noise_marks_nothing():
    marked = sum(bool(cp.all_steps(history([0.0] * 30, sd=0.02, seed=s))) for s in range(100))
    assert marked <= 2  # two modes x 100 series of 30 runs


def test_noisier_history_still_finds_the_step_but_not_noise():
    levels = [0.0] * 15 + [math.log(0.92)] * 15
    hits = sum(any(abs(s.after - 15) <= 1 for s in cp.steps(history(levels, sd=0.03, seed=s), "fp32"))
               for s in range(40))
    assert hits >= 0.6 * 40  # ~78% measured at 3% noise per run (within one run of the true step)


def test_a_config_change_is_not_a_regression():
    levels = [0.0] * 10 + [math.log(0.6)] * 10  # steps 5 -> 12: a different experiment
    h = history(levels, config_at=10, seed=2)
    assert cp.all_steps(h) == []
    assert [c.index for c in cp.config_changes(h)] == [10]


def test_drift_from_unchanged_runs_with_a_floor_while_short():
    h = history([0.0] * 8, sd=0.03, seed=3, ci=0.001)
    d = cp.drift(h)
    assert d.pairs == 7 and d.sd >= cp.RUN_DRIFT_SD and d.estimate is not None
    long = cp.drift(history([0.0] * 60, sd=0.03, seed=4, ci=0.001))
    # per run sd 3% -> sd of a difference ~4.2%
    assert long.pairs >= cp.DRIFT_MIN_PAIRS and long.sd == pytest.approx(0.03 * math.sqrt(2), rel=0.3)
    quiet = cp.drift(history([0.0] * 60, sd=0.001, seed=5, ci=0.001))
    assert quiet.sd == cp.DRIFT_FLOOR and quiet.floored
    # a step is not drift: the pair across it is left out
    stepped = cp.drift(history([0.0] * 30 + [math.log(0.8)] * 30, sd=0.01, seed=6, ci=0.001))
    assert stepped.sd < 0.03
