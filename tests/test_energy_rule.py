"""The energy rule (judge/rules/energy.py): J/sample AMP vs FP32, decided on trial-level bounds."""

from __future__ import annotations

import numpy as np
import pytest

from ampbench.judge.check import check_trials
from tests.factories import make_suite, make_trials, plan_of


def _energy_rule(j_per_sample: dict[str, list[float | None]], amp_active: bool = True):
    suite = make_suite(seeds=(0, 1, 2, 3))
    trials = make_trials(suite, rng=np.random.default_rng(1), amp_active=None if amp_active else False)
    for t in trials:
        t.memory.energy_j_per_sample = j_per_sample[t.mode][t.seed]
    verdicts = check_trials(suite, trials, plan_of(suite))
    amp = next(v for v in verdicts if v.mode == "amp-o1-fp16")
    return [r for r in amp.rules if r.rule == "energy"]


@pytest.mark.parametrize(("amp", "status"), [([0.50, 0.52, 0.49, 0.51], "PASS"),
                                             ([1.40, 1.45, 1.38, 1.42], "FAIL"),
                                             ([0.70, 1.40, 0.90, 1.25], "INCONCLUSIVE")])
def test_energy_per_sample_is_judged_at_the_trial_level(amp, status):
    rules = _energy_rule({"fp32": [1.0, 1.02, 0.98, 1.01], "amp-o1-fp16": amp})
    assert [r.status for r in rules] == [status]
    assert rules[0].details["estimate"] == pytest.approx(np.exp(np.mean(np.log(amp)) - np.mean(np.log([1.0, 1.02, 0.98, 1.01]))), rel=1e-4)


def test_no_energy_on_a_gpu_gives_no_line_and_on_cpu_an_inconclusive_one():
    none: dict[str, list[float | None]] = {"fp32": [None] * 4, "amp-o1-fp16": [None] * 4}
    assert _energy_rule(none) == []  # GPU without NVML's energy counter: nothing to decide, nothing said
    cpu = _energy_rule(none, amp_active=False)
    assert [r.status for r in cpu] == ["INCONCLUSIVE"] and "not measured" in cpu[0].message


def test_the_energy_rule_is_self_contained():
    """One module, one registry line: the registry finds its judge, its advice and its label."""
    from ampbench.diagnose.advice import advice_for
    from ampbench.judge.rules.registry import RULES, rule_for

    assert rule_for("energy") in RULES and rule_for("energy").advice is not None
    rules = _energy_rule({"fp32": [1.0, 1.02, 0.98, 1.01], "amp-o1-fp16": [1.40, 1.45, 1.38, 1.42]})
    suite = make_suite(seeds=(0, 1, 2, 3))
    tips = advice_for(rules[0], suite.mode("amp-o1-fp16"))
    assert tips and "speedup" in tips[0] and "`level = \"O2\"`" in tips[0]
