"""Clustered trial levels (judge.clusters) are named, with the CPUs, and a plain spread is not."""

from __future__ import annotations

import numpy as np

from ampbench.judge import clusters
from ampbench.judge.check import check_trials
from ampbench.record.models import Interference
from tests.factories import make_suite, make_trial, plan_of


def test_two_clusters_are_found_and_a_normal_spread_is_not():
    rng = np.random.default_rng(0)
    fast, slow = np.log(14000), np.log(10500)
    arm_a = [fast + rng.normal(0, 0.01) for _ in range(3)] + [slow + rng.normal(0, 0.01) for _ in range(2)]
    arm_b = [fast + 0.1 + rng.normal(0, 0.01) for _ in range(2)] + [slow + 0.1 + rng.normal(0, 0.01)
                                                                    for _ in range(3)]
    cpus = [[[0]] * 3 + [[1]] * 2, [[0]] * 2 + [[1]] * 3]
    found = clusters.find([arm_a, arm_b], cpus)
    assert found is not None and abs(found.gap - (fast - slow)) < 0.03 and found.sizes == (5, 5)
    assert found.cpus == ([1], [0]) and "CPU 1" in found.describe() and "--affinity" in found.describe()
    misses = sum(clusters.find([list(rng.normal(0, 0.05, 5)), list(rng.normal(0, 0.05, 5))]) is not None
                 for _ in range(200))
    assert misses <= 6  # a normal 5% spread is rarely called clustered (0.75% measured)


def test_the_speedup_rule_says_when_trial_levels_cluster():
    suite = make_suite(seeds=[0, 1, 2, 3])
    trials = []
    for m in ("fp32", "amp-o1-fp16"):
        for s in range(4):
            slow = s % 2 == 1
            t = [0.05 * (1.33 if slow else 1.0) * (0.7 if m != "fp32" else 1.0)] * 40
            trials.append(make_trial(m, s, times=t, interference=Interference(main_cpus=[1 if slow else 0])))
    rules = {r.rule: r for v in check_trials(suite, trials, plan_of(suite)) for r in v.rules}
    d = rules["speedup"].details
    assert d["clustered"] and "CPU 1" in d["clustered"] and "trial levels cluster" in rules["speedup"].message
