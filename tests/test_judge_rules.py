"""Rules added for issue 13/17: interference evidence, time-to-target, the seed planner, typed `observed`."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.commands.check import check_run
from ampbench.config import TargetConfig
from ampbench.judge.check import check_trials
from ampbench.judge.planner import plan_run
from ampbench.results import EvalRecord, Interference
from tests.factories import GPU_ENV, StepNoise, make_run, make_suite, make_trials, plan_of

AMP = "amp-o1-fp16"
METRICS = {"fp32": [0.88, 0.90, 0.92], AMP: [0.88, 0.90, 0.92]}


def _pair(tmp_path, slowdown: float, cur_share: float, base_share: float = 1.0, cur_others: float | None = None,
          base_others: float = 0.1, cores: int = 0, **thresholds):
    suite = make_suite(**thresholds)
    noise = StepNoise(trial_sd=0.005)
    env = GPU_ENV.model_copy(update={"cpu_count": cores})
    base = make_trials(suite, rng=np.random.default_rng(1), noise=noise, n_steps=80, metrics=METRICS, env=env,
                       interference=Interference(cpu_share=base_share, others_cpu=base_others))
    cur = make_trials(suite, rng=np.random.default_rng(2), noise=noise, n_steps=80, metrics=METRICS, env=env,
                      base_time={"fp32": 0.05 / (1 - slowdown), AMP: 0.05 / (1 - slowdown)},
                      interference=Interference(cpu_share=cur_share, others_cpu=cur_others))
    return make_run(tmp_path / "b", suite, base), make_run(tmp_path / "c", suite, cur)


def _hist(rep, mode="fp32"):
    v = next(v for v in rep.verdicts if v.mode == mode)
    return next(r for r in v.rules if r.rule == "history-throughput")


def test_lost_cpu_share_explaining_a_slowdown_is_a_disturbed_measurement(tmp_path):
    b, c = _pair(tmp_path, 0.40, cur_share=0.55)
    rep = check_run(c, baseline=b)
    h = _hist(rep)
    assert h.status == "INCONCLUSIVE" and h.message.startswith("Measurement disturbed")
    assert "CPU share 0.55 vs 1.00" in h.message and h.details["disturbed"] is True
    assert any("measurement disturbed" in n for n in rep.notes) and rep.exit_code == 3


def test_equal_cpu_share_with_lower_throughput_is_still_a_regression(tmp_path):
    b, c = _pair(tmp_path, 0.40, cur_share=1.0)
    h = _hist(check_run(c, baseline=b))
    assert h.status == "FAIL" and "disturbed" not in h.message.lower()


def test_other_processes_busier_beside_the_slow_run_is_evidence(tmp_path):
    b, c = _pair(tmp_path, 0.20, cur_share=1.0, cur_others=1.2)
    h = _hist(check_run(c, baseline=b))
    assert h.status == "INCONCLUSIVE" and "other processes used 1.20 CPU cores" in h.message


def test_a_saturated_machine_is_a_disturbed_measurement_even_with_equal_neighbours(tmp_path):
    b, c = _pair(tmp_path, 0.20, cur_share=1.0, cur_others=1.6, base_others=1.6, cores=2)
    h = _hist(check_run(c, baseline=b))
    assert h.status == "INCONCLUSIVE" and "kept 1.60 of the machine's 2 cores busy" in h.message
    b, c = _pair(tmp_path / "x", 0.20, cur_share=1.0, cur_others=0.3, base_others=0.3, cores=2)
    assert _hist(check_run(c, baseline=b)).status == "FAIL"  # a quiet machine: a regression


def test_a_program_that_mostly_waits_is_not_disturbed_by_the_machines_load(tmp_path):
    """A program sleeping most of each step (CPU share 0.06-0.10 on both sides) is 35% slower on a saturated
    machine: its share fell only because its wait grew, and load cannot slow a sleep 35%: a regression, as the
    sleep-bound bisect/pr-check programs on a loaded CI showed; a CPU-bound program starved to a share of 0.5
    beside busy loops (its baseline's share 1.0) is still a disturbed measurement."""
    b, c = _pair(tmp_path, 0.35, cur_share=0.065, base_share=0.10, cur_others=1.72, base_others=0.2, cores=2)
    h = _hist(check_run(c, baseline=b))
    assert h.status == "FAIL" and "disturbed" not in h.message.lower(), h.message
    b, c = _pair(tmp_path / "x", 0.35, cur_share=0.5, base_share=1.0, cur_others=1.5, base_others=0.2, cores=2)
    assert _hist(check_run(c, baseline=b)).message.startswith("Measurement disturbed")


def test_a_suite_that_judges_despite_load_notes_the_evidence_and_decides(tmp_path):
    """thresholds.history_withhold_disturbed = false (a sleeping test program on a shared runner): the same
    saturated pair is FAILed on its figures with the load evidence noted, not withheld; disturbed stays false."""
    b, c = _pair(tmp_path, 0.20, cur_share=1.0, cur_others=1.6, base_others=1.6, cores=2,
                 history_withhold_disturbed=False)
    h = _hist(check_run(c, baseline=b))
    assert h.status == "FAIL" and h.details["disturbed"] is False, h.message
    assert "Note: measurement disturbed (this run or its baseline, each weighed alike: other processes kept 1.60" in h.message
    assert "history_withhold_disturbed = false" in h.message


def _target_trials(suite, reach_amp: bool, reach_ref: bool = True):
    trials = make_trials(suite, metrics=METRICS)
    out = []
    for t in trials:
        reach = reach_amp if t.mode == AMP else reach_ref
        secs = 10.0 + t.seed + (0 if t.mode == "fp32" else -2.0)
        evals = [EvalRecord(step=10, wall_s=secs / 2, metrics={"accuracy": 0.5}),
                 EvalRecord(step=20, wall_s=secs, metrics={"accuracy": 0.9 if reach else 0.6})]
        out.append(t.model_copy(update={"evals": evals}))
    return out


@pytest.mark.parametrize("reach_amp, reach_ref, expected", [(True, True, "PASS"), (False, True, "FAIL"),
                                                             (False, False, "INCONCLUSIVE")])
def test_time_to_target_rule(reach_amp, reach_ref, expected):
    suite = make_suite()
    suite = suite.model_copy(update={"train": suite.train.model_copy(
        update={"target": TargetConfig(metric="accuracy", value=0.85)})})
    verdicts = check_trials(suite, _target_trials(suite, reach_amp, reach_ref), plan_of(suite))
    r = next(r for r in verdicts[1].rules if r.rule == "time-to-target")
    assert r.status == expected, r.message
    if expected == "PASS":
        # FP32 10/11/12 s, AMP 8/9/10 s: the ratio of geometric means, with an interval
        want = float(np.exp(np.mean(np.log([8, 9, 10])) - np.mean(np.log([10, 11, 12]))))
        assert r.observed == pytest.approx(want, rel=1e-4) and r.details["ci_low"] < want < r.details["ci_high"]
    assert all(x.rule != "time-to-target" for x in verdicts[0].rules)  # fp32 is the reference


def test_observed_is_a_number_or_an_object_never_a_string(tmp_path):
    b, c = _pair(tmp_path, 0.0, cur_share=1.0)
    rep = check_run(c, baseline=b)
    for v in rep.verdicts:
        for r in v.rules:
            assert r.observed is None or isinstance(r.observed, (int, float, dict)), (r.rule, r.observed)


def test_planner_and_plan_cli(tmp_path):
    suite = make_suite()
    trials = make_trials(suite, metrics={"fp32": [0.80, 0.84, 0.88], AMP: [0.80, 0.84, 0.88]},
                         noise=StepNoise(trial_sd=0.05), rng=np.random.default_rng(3))
    run = make_run(tmp_path, suite, trials)
    rows = {(r.mode, r.rule): r for r in plan_run(run)}
    parity = rows[(AMP, "accuracy-parity")]
    assert parity.spread == pytest.approx(0.04 / np.sqrt(1), rel=0.01) and parity.seeds_needed is not None
    assert parity.seeds_needed > 3  # a seed sd of 4 points with 3 seeds does not show non-inferiority
    hist = rows[("fp32", "history-throughput")].seeds_needed  # None: beyond the planner's 64
    assert hist is None or hist > rows[(AMP, "speedup")].seeds_needed
    res = CliRunner().invoke(app, ["plan", str(run)])
    assert res.exit_code == 0 and "accuracy-parity" in res.output and "seeds needed" in res.output
