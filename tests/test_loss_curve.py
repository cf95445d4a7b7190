"""The loss plot's curve joins a trial's losses across steps whose loss was not read (a command
trial's hook samples it on short steps), so sampled losses still draw a line; a non-finite loss
stays a gap."""

from __future__ import annotations

import math

from ampbench.report import plots as P
from tests.factories import make_trial


def test_losses_not_read_are_joined_and_a_non_finite_one_is_a_gap() -> None:
    loss = [4.0, 3.0, 2.0, 1.0, 0.5, 0.25]
    a = make_trial(mode="fp32", seed=0, loss=[2 * v for v in loss], times=[0.05] * 6, warmup=0)
    b = make_trial(mode="fp32", seed=1, loss=loss, times=[0.05] * 6, warmup=0)
    for s in a.steps:
        if s.step % 2 == 0:   # seed 0: only odd steps read, with stale values that must not show
            s.loss, s.loss_seen = 100.0, False
    b.steps[3].loss = None   # seed 1: a non-finite loss at step 4
    x, mean, lo, hi = P._curve([a, b])
    assert list(x) == [1, 2, 3, 4, 5, 6]
    # seed 0 at step 2 is its line from 8.0 (step 1) to 4.0 (step 3); nothing beyond its last read
    assert (lo[1], hi[1]) == (3.0, 6.0) and math.isnan(P._curve([a])[1][5])
    # seed 1's non-finite step 4 is a gap in its own row, not joined over: only seed 0's line is there
    assert lo[3] == hi[3] == mean[3] == (4.0 + 1.0) / 2 and (lo[4], hi[4]) == (0.5, 1.0)
