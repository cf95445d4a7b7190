"""Time to target: the first eval at which a held-out metric reaches a value."""

from __future__ import annotations

import math

import pytest

from ampbench.record.target import first_reach, reached
from ampbench.results import EvalRecord


def _evals(*points: tuple[int, float, dict[str, float]]) -> list[EvalRecord]:
    return [EvalRecord(step=s, wall_s=w, metrics=m) for s, w, m in points]


CURVE = _evals(
    (100, 10.0, {"auc": 0.61, "logloss": 0.60}),
    (200, 20.5, {"auc": 0.70, "logloss": 0.55}),
    (300, 31.0, {"auc": 0.69, "logloss": 0.52}),  # dips after first reaching 0.70
    (400, 41.5, {"auc": 0.74, "logloss": 0.50}),
)


def test_first_reach_max_goal_takes_the_first_eval_at_or_above() -> None:
    r = first_reach(CURVE, "auc", 0.70, "max")
    assert r == {"metric": "auc", "value": 0.70, "goal": "max", "reached": True, "step": 200,
                 "wall_s": 20.5, "best": 0.74, "evals": 4}


def test_first_reach_min_goal() -> None:
    r = first_reach(CURVE, "logloss", 0.52, "min")
    assert (r["reached"], r["step"], r["wall_s"], r["best"]) == (True, 300, 31.0, 0.50)


def test_not_reached_reports_best_and_no_time() -> None:
    r = first_reach(CURVE, "auc", 0.80, "max")
    assert r["reached"] is False and r["step"] is None and r["wall_s"] is None
    assert r["best"] == pytest.approx(0.74)


def test_unsorted_evals_are_ordered_by_step() -> None:
    r = first_reach(list(reversed(CURVE)), "auc", 0.70, "max")
    assert r["step"] == 200


def test_nan_never_reaches_and_is_not_best() -> None:
    ev = _evals((10, 1.0, {"auc": math.nan}), (20, 2.0, {"auc": 0.55}))
    r = first_reach(ev, "auc", 0.5, "max")
    assert r["step"] == 20 and r["best"] == 0.55
    assert not reached(math.nan, 0.0, "min")


def test_no_evals() -> None:
    r = first_reach([], "auc", 0.7, "max")
    assert r["reached"] is False and r["best"] is None and r["evals"] == 0


def test_missing_metric_is_an_error_naming_what_exists() -> None:
    with pytest.raises(ValueError, match=r"'acc'.*step 100.*auc, logloss"):
        first_reach(CURVE, "acc", 0.7, "max")


def test_bad_goal() -> None:
    with pytest.raises(ValueError, match="goal"):
        first_reach(CURVE, "auc", 0.7, "up")  # type: ignore[arg-type]
