"""The regression checker on hand-built trial sets: each rule, injected regressions, baselines,
bad files and the terminal table.  No paddle, no subprocess."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from rich.console import Console

from ampbench.commands.check import check_run
from ampbench.judge.check import check_trials
from ampbench.report.console import print_rules
from ampbench.results import ResultsError
from ampbench.results.baselines import DEFAULT_BASELINE_DIR, load_baseline, save_baseline
from ampbench.results.verdicts import load_check
from tests.factories import CPU_ENV, StepNoise, make_run, make_suite, make_trial, make_trials, plan_of

AMP = "amp-o1-fp16"
FP32_METRICS = [0.88, 0.90, 0.92]  # seed sd 0.02 -> margin max(0.01, 2 x 0.02) = 0.04
SD = 0.02


def rules_of(verdicts, mode=AMP):
    v = next(v for v in verdicts if v.mode == mode)
    return v, {r.rule: r for r in v.rules}


def good_set(suite=None, **kw):
    suite = suite or make_suite()
    kw.setdefault("metrics", {"fp32": FP32_METRICS, AMP: FP32_METRICS})
    kw.setdefault("base_time", {"fp32": 0.05, AMP: 0.03})
    kw.setdefault("peak", {"fp32": 10 << 30, AMP: 6 << 30})
    return suite, make_trials(suite, **kw)


def test_all_good_passes_with_numbers_in_every_rule():
    suite, trials = good_set(make_suite(min_speedup=1.3, min_memory_reduction=0.3))
    verdicts = check_trials(suite, trials, plan_of(suite))
    assert [v.mode for v in verdicts] == ["fp32", AMP]
    v, r = rules_of(verdicts)
    assert v.verdict == "PASS", [x.message for x in v.rules if x.status != "PASS"]
    assert set(r) == {"completeness", "amp-active", "baseline-quality", "accuracy-parity", "speedup", "memory",
                      "stability"}
    assert r["speedup"].observed > 1.3 and "CI [" in r["speedup"].message
    assert r["memory"].observed == pytest.approx(0.4) and "CUDA allocator" in r["memory"].message
    assert r["accuracy-parity"].threshold == pytest.approx(2 * SD)
    for x in v.rules:
        assert x.message.endswith(".") and x.threshold is not None, x


# ---------------------------------------------------------------- accuracy parity


@pytest.mark.parametrize("goal", ["max", "min"])
@pytest.mark.parametrize("k_sigma, expected", [(16.0, "FAIL"), (6.0, "INCONCLUSIVE"), (3.0, "INCONCLUSIVE"),
                                               (0.2, "PASS")])
def test_parity_injected_drop_in_sigma_units(goal, k_sigma, expected):
    """Non-inferiority with 3 seeds a side (margin 2 sigma), no history: worse by 16 sigma -> the drop beyond the
    margin is shown, beyond a run effect the seeds share too (FAIL); by 6 sigma -> shown by the seeds, not beyond
    that run effect (INCONCLUSIVE, run-effect-unknown, issue 55); by 3 sigma -> beyond the margin but not shown
    (INCONCLUSIVE, seeds needed said); by 0.2 sigma -> non-inferiority shown (PASS); for 'lower is better' too."""
    sign = -1 if goal == "max" else 1
    amp = [m + sign * k_sigma * SD for m in FP32_METRICS]
    suite, trials = good_set(make_suite(goal=goal), metrics={"fp32": FP32_METRICS, AMP: amp})
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    p = r["accuracy-parity"]
    assert p.status == expected, p.message
    assert p.observed == pytest.approx(k_sigma * SD)
    word = {"FAIL": "drop beyond the margin is shown", "INCONCLUSIVE": "more seeds decide it", "PASS": "non-inferiority shown"}
    assert (word[expected] if k_sigma != 6.0 else "check --history with 3 or more earlier runs") in p.message
    assert ("run-effect-unknown" in p.details["reasons"]) == (k_sigma == 6.0)
    assert p.details["lower"] < p.observed < p.details["upper"]
    assert ("lower is better" if goal == "min" else "higher is better") in p.message


def test_parity_better_than_fp32_is_not_a_regression_but_is_said():
    amp = [m + 3 * SD for m in FP32_METRICS]
    suite, trials = good_set(metrics={"fp32": FP32_METRICS, AMP: amp})
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["accuracy-parity"].status == "PASS" and "numerics differ" in r["accuracy-parity"].message


def test_one_seed_is_below_the_minimum_and_every_rule_using_it_says_so():
    suite = make_suite(seeds=[0])
    _, trials = good_set(suite, metrics={"fp32": [0.90], AMP: [0.885]})
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    p = r["accuracy-parity"]
    assert p.status == "INCONCLUSIVE" and p.threshold == 0.01 and "needs 2 per mode, 1 ran" in p.message
    for name in ("accuracy-parity", "speedup", "memory"):
        assert "One seed" in r[name].message, r[name].message
    assert r["speedup"].status == "INCONCLUSIVE" and r["speedup"].observed > 1


def test_parity_nan_metric_fails_and_missing_metric_is_inconclusive():
    suite, trials = good_set()
    trials[3].metrics["accuracy"] = float("nan")  # amp seed 0
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["accuracy-parity"].status == "FAIL" and f"{AMP}__seed0" in r["accuracy-parity"].message
    suite, trials = good_set()
    trials[0].metrics.clear()
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["accuracy-parity"].status == "INCONCLUSIVE" and "fp32__seed0" in r["accuracy-parity"].message


def test_baseline_quality_gates_parity():
    suite, trials = good_set(make_suite(min_baseline_metric=0.95))
    v, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["baseline-quality"].status == "INCONCLUSIVE" and "below min_baseline_metric 0.95" in r[
        "baseline-quality"].message
    assert r["accuracy-parity"].status == "INCONCLUSIVE" and v.verdict == "INCONCLUSIVE"
    # FP32 loss that never falls: parity cannot mean anything either.
    suite, trials = good_set(make_suite(), loss=lambda i: 1.0)
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["baseline-quality"].status == "INCONCLUSIVE" and "did not fall" in r["baseline-quality"].message
    assert r["accuracy-parity"].status == "INCONCLUSIVE"


# ---------------------------------------------------------------- amp-active, completeness


def test_inactive_amp_is_inconclusive_never_pass_but_numbers_are_reported(tmp_path):
    suite, trials = good_set(amp_active=False)
    run = make_run(tmp_path, suite, trials)
    rep = check_run(run)
    v, r = rules_of(rep.verdicts)
    assert v.verdict == "INCONCLUSIVE" and rep.exit_code == 3
    assert r["amp-active"].status == "INCONCLUSIVE" and "CPU: AMP is a no-op" in r["amp-active"].message
    for name in ("accuracy-parity", "speedup", "memory"):
        assert r[name].status == "INCONCLUSIVE" and r[name].informational and r[name].observed is not None
        assert r[name].message.startswith("Informational (AMP inactive)")
    assert check_run(run, strict=True).exit_code == 1
    assert any("inactive" in n for n in rep.notes)


def test_completeness_missing_crashed_oom_and_reference_failures():
    suite, trials = good_set()
    plan = plan_of(suite)
    # missing AMP trial -> INCONCLUSIVE
    v, r = rules_of(check_trials(suite, [t for t in trials if t.key != f"{AMP}__seed2"], plan))
    assert r["completeness"].status == "INCONCLUSIVE" and f"{AMP}__seed2 is missing" in r["completeness"].message
    # crashed -> ERROR, exit 2 path
    bad = [t.model_copy(update={"status": "crashed", "error": "Traceback\nRuntimeError: CUDA error"})
           if t.key == f"{AMP}__seed1" else t for t in trials]
    v, r = rules_of(check_trials(suite, bad, plan))
    assert v.verdict == "ERROR" and "crashed: RuntimeError: CUDA error" in r["completeness"].message
    # oom of the AMP mode -> FAIL naming the trial
    bad = [t.model_copy(update={"status": "oom"}) if t.key == f"{AMP}__seed0" else t for t in trials]
    v, r = rules_of(check_trials(suite, bad, plan))
    assert v.verdict == "FAIL" and r["completeness"].trials == [f"{AMP}__seed0"]
    # fp32 timed out -> fp32 FAIL, AMP INCONCLUSIVE (nothing to compare against)
    bad = [t.model_copy(update={"status": "timeout"}) if t.key == "fp32__seed0" else t for t in trials]
    verdicts = check_trials(suite, bad, plan)
    assert rules_of(verdicts, "fp32")[0].verdict == "FAIL"
    v, r = rules_of(verdicts)
    assert r["completeness"].status == "INCONCLUSIVE" and "reference fp32__seed0" in r["completeness"].message


def test_completeness_seeds_must_match_across_modes():
    suite, trials = good_set()
    plan = [p for p in plan_of(suite) if p != (AMP, 2)] + [(AMP, 7)]
    trials = [t for t in trials if t.key != f"{AMP}__seed2"] + [make_trial(AMP, 7)]
    v, r = rules_of(check_trials(suite, trials, plan))
    assert v.verdict == "ERROR" and "seeds differ" in r["completeness"].message


# ---------------------------------------------------------------- speedup, memory


def test_speedup_lower_bound_against_threshold():
    suite, trials = good_set(make_suite(min_speedup=1.5), base_time={"fp32": 0.05, AMP: 0.05 / 1.3})
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    s = r["speedup"]
    assert s.status == "FAIL" and s.details["upper"] < 1.5 and "below it, shown" in s.message
    suite, trials = good_set(make_suite(min_speedup=1.5), base_time={"fp32": 0.05, AMP: 0.05 / 1.8})
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["speedup"].status == "PASS" and r["speedup"].details["estimate"] == pytest.approx(1.8, rel=0.05)


def test_speedup_accounts_for_batch_size_per_mode():
    """AMP runs batch 32 at the same step time as FP32 batch 8: 4x samples/s."""
    suite = make_suite()
    trials = []
    for t in make_trials(suite, base_time={"fp32": 0.05, AMP: 0.05}):
        if t.mode == AMP:
            t = make_trial(AMP, t.seed, times=[s.time_s for s in t.steps], samples=32)
        trials.append(t)
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["speedup"].details["estimate"] == pytest.approx(4.0, rel=0.1) and "AMP batch [32]" in r["speedup"].message


def test_memory_reduction_and_source():
    suite, trials = good_set(make_suite(min_memory_reduction=0.3), peak={"fp32": 10 << 30, AMP: 9 << 30})
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["memory"].status == "FAIL" and r["memory"].observed == pytest.approx(0.1)
    suite, trials = good_set(memory_source="host", amp_active=False)
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert "host allocator" in r["memory"].message and "AMP is inactive anyway" in r["memory"].message


# ---------------------------------------------------------------- stability


def test_nonfinite_loss_and_skipped_steps_fail():
    suite, trials = good_set()
    t = trials[4]  # amp seed 1
    t.steps[20].loss = None  # the worker writes a non-finite loss as null
    t.steps[30].loss = float("inf")
    t.steps[10].found_inf = t.steps[11].found_inf = t.steps[12].found_inf = True
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    s = r["stability"]
    assert s.status == "FAIL" and s.trials == [f"{AMP}__seed1"]
    assert "2 non-finite loss(es), first at step 21" in s.message and "3 of 60 steps skipped" in s.message


def test_loss_scale_collapse_fails_at_the_step_it_began():
    n, began = 60, 30
    steps = range(1, n + 1)
    scale, scales, infs = 32768.0, [], []
    for i in steps:
        inf = i == 14 or i >= began  # an isolated overflow at 14, then the scaler chases overflows
        scale = scale / 2 if inf else scale
        scales.append(scale)
        infs.append(inf)
    loss = [2.0 * math.exp(-min(i, began - 1) / 20) for i in steps]
    suite, trials = good_set()
    trials = [make_trial(AMP, 1, times=[0.03] * n, loss=loss, loss_scale=scales, found_inf=infs)
              if t.key == f"{AMP}__seed1" else t for t in trials]
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    s = r["stability"]
    assert s.status == "FAIL" and s.observed["collapse_began_step"] == began
    assert f"collapse began at step {began}" in s.message


def test_healthy_dynamic_scaler_passes():
    n = 60
    scales = [65536.0 / 2 ** min(i, 3) for i in range(n)]  # 3 start-up halvings, then stable
    suite, trials = good_set(make_suite(max_skipped_fraction=0.06))
    trials = [make_trial(t.mode, t.seed, times=[0.03] * n, loss_scale=scales,
                         found_inf=[1 <= i <= 3 for i in range(n)]) if t.mode == AMP else t for t in trials]
    _, r = rules_of(check_trials(suite, trials, plan_of(suite)))
    assert r["stability"].status == "PASS", r["stability"].message


# ---------------------------------------------------------------- history (baseline)


def _history_pair(tmp_path, slowdown: float, seed: int = 0, **kw):
    """A baseline run and a current run of the same noise model, current slower by `slowdown`."""
    suite = make_suite()
    noise = StepNoise(trial_sd=0.0)
    base = make_trials(suite, base_time={"fp32": 0.05, AMP: 0.03}, rng=np.random.default_rng(seed),
                       noise=noise, n_steps=120, metrics={"fp32": FP32_METRICS, AMP: FP32_METRICS})
    cur = make_trials(suite, base_time={"fp32": 0.05, AMP: 0.03 / (1 - slowdown)}, noise=noise,
                      rng=np.random.default_rng(seed + 100), n_steps=120, **kw)
    b = make_run(tmp_path / "base", suite, base)
    c = make_run(tmp_path / "cur", suite, cur)
    return suite, b, c


def test_history_flags_10_percent_slowdown_not_1_percent_noise(tmp_path):
    _, b, c = _history_pair(tmp_path / "a", 0.10)
    rep = check_run(c, baseline=b)
    _v, r = rules_of(rep.verdicts)
    h = r["history-throughput"]
    assert h.status == "FAIL" and h.observed == pytest.approx(-0.10, abs=0.03) and "is demonstrated" in h.message
    assert rules_of(rep.verdicts, "fp32")[1]["history-throughput"].status == "PASS"
    _, b, c = _history_pair(tmp_path / "b", 0.01)
    _v, r = rules_of(check_run(c, baseline=b).verdicts)
    assert r["history-throughput"].status == "PASS" and "no slowdown beyond 5%" in r["history-throughput"].message


def test_history_metric_drift_and_memory_growth(tmp_path):
    drop = [m - 6 * SD for m in FP32_METRICS]
    _, b, c = _history_pair(tmp_path, 0.0, metrics={"fp32": FP32_METRICS, AMP: drop},
                            peak={"fp32": 1 << 30, AMP: int(1.2 * (1 << 30))})
    _v, r = rules_of(check_run(c, baseline=b).verdicts)
    assert r["history-metric"].status == "FAIL" and r["history-metric"].observed == pytest.approx(6 * SD)
    assert r["history-memory"].status == "FAIL" and r["history-memory"].observed == pytest.approx(0.2)


def test_baseline_file_roundtrip_gives_same_history_as_run_folder(tmp_path, monkeypatch):
    _, b, c = _history_pair(tmp_path, 0.10)
    monkeypatch.chdir(tmp_path)
    path = save_baseline(b, None)
    assert path == DEFAULT_BASELINE_DIR / "nvidia-test-gpu-24gb" / "toy.json"
    data = json.loads(path.read_text())
    assert data["schema"] == "ampbench.baseline/1" and data["device"] == "nvidia-test-gpu-24gb"
    t0 = data["modes"]["fp32"][0]
    assert len(t0["step_time_s"]) == 115 and t0["samples"] == 8 and t0["metric"] == FP32_METRICS[0]
    from_file = rules_of(check_run(c, baseline=path).verdicts)[1]["history-throughput"]
    from_dir = rules_of(check_run(c, baseline=DEFAULT_BASELINE_DIR).verdicts)[1]["history-throughput"]
    from_run = rules_of(check_run(c, baseline=b).verdicts)[1]["history-throughput"]
    assert from_file.observed == pytest.approx(from_run.observed, rel=1e-4) == from_dir.observed
    assert from_file.status == from_run.status == "FAIL"
    assert load_baseline(b / "run.json").suite == "toy"


def test_baseline_mismatch_refused_unless_allowed(tmp_path):
    _, b, c = _history_pair(tmp_path, 0.0)
    other = make_suite(min_speedup=1.2)  # a different config hash
    o = make_run(tmp_path / "other", other, make_trials(other))
    with pytest.raises(ResultsError, match="config_hash"):
        check_run(c, baseline=o)
    rep = check_run(c, baseline=o, allow_mismatch=True)
    h = rules_of(rep.verdicts)[1]["history-throughput"]
    assert h.message.startswith("[baseline mismatch allowed: config_hash")
    assert any("--allow-mismatch" in n for n in rep.notes)
    # the note follows the comparison, not the message's words (issue 42): a message that reads like it,
    # from a comparable baseline, adds no note, and the mismatched run's note survives a reworded message
    from ampbench.judge.check import _notes

    worded = [v.model_copy(update={"rules": [r.model_copy(update={"message": "[baseline mismatch allowed: x] "})
                                             for r in v.rules]}) for v in check_run(c, baseline=b).verdicts]
    assert not any("--allow-mismatch" in n for n in _notes(worded))
    plain = [v.model_copy(update={"rules": [r.model_copy(update={"message": ""}) for r in v.rules]})
             for v in rep.verdicts]
    assert any("--allow-mismatch" in n for n in _notes(plain, mismatched=True))
    cpu = make_suite()
    cpu_run = make_run(tmp_path / "cpu", cpu, make_trials(cpu, env=CPU_ENV))
    with pytest.raises(ResultsError, match="device"):
        check_run(c, baseline=cpu_run)


# ---------------------------------------------------------------- files, exit codes, table


def test_check_run_writes_check_json_and_exit_codes(tmp_path):
    suite, trials = good_set(make_suite(min_speedup=1.3))
    run = make_run(tmp_path, suite, trials)
    rep = check_run(run)
    assert rep.exit_code == 0
    again = load_check(run / "check.json")
    assert again.exit_code == 0 and len(again.verdicts) == 2
    entries = [(r.mode, r.rule) for v in again.verdicts for r in v.rules]
    assert len(entries) == len(set(entries))  # one entry per mode x rule
    suite, trials = good_set(make_suite(min_speedup=3.0))
    assert check_run(make_run(tmp_path / "x", suite, trials)).exit_code == 1


def test_bad_files_raise_results_error_naming_the_file(tmp_path):
    suite, trials = good_set()
    run = make_run(tmp_path, suite, trials)
    f = run / "trials" / f"{AMP}__seed1.json"
    f.write_text(f.read_text()[:200])  # truncated
    with pytest.raises(ResultsError, match=str(f.name)):
        check_run(run)
    f.write_text(json.dumps({"schema": "something/else", "x": 1}))
    with pytest.raises(ResultsError, match="not an ampbench file"):
        check_run(run)
    alien = make_trial(AMP, 1, suite="other")
    f.write_text(json.dumps(alien.to_json()))
    with pytest.raises(ResultsError, match="suite 'other'"):
        check_run(run)
    f.write_text(json.dumps(make_trial(AMP, 2).to_json()))
    with pytest.raises(ResultsError, match="named"):
        check_run(run)
    (run / "run.json").write_text("{")
    with pytest.raises(ResultsError, match="run.json"):
        check_run(run)


def test_cli_exits_2_with_the_file_named(tmp_path):
    from typer.testing import CliRunner

    from ampbench.cli import app

    suite, trials = good_set()
    run = make_run(tmp_path, suite, trials)
    (run / "trials" / "fp32__seed0.json").write_text('{"schema": "ampbench.trial/1", "suite": ')
    res = CliRunner().invoke(app, ["check", str(run)])
    assert res.exit_code == 2 and "fp32__seed0.json" in res.output


@pytest.mark.parametrize("width", [80, 160])
def test_print_rules_table(tmp_path, width):
    suite, trials = good_set(amp_active=False)
    rep = check_run(make_run(tmp_path, suite, trials))
    buf = io.StringIO()
    print_rules(rep, Console(file=buf, width=width, force_terminal=True, color_system=None))
    text = buf.getvalue()
    for word in ("accuracy-parity", "speedup", "stability", "INCONCLUSIVE*", "Informational"):
        assert word in text
    assert ("observed" in text) == (width >= 120)


def test_print_rules_plain_when_not_a_terminal_keeps_names_whole_and_markup_literal(tmp_path):
    name = "amp-o1-fp16-with-a-rather-long-mode-name"
    suite = make_suite(modes=("fp32", name))
    trials = make_trials(suite, metrics={"fp32": FP32_METRICS, name: FP32_METRICS})
    trials[-1] = trials[-1].model_copy(update={"status": "crashed", "error": "OSError: /data/[bold]x[/bold] missing"})
    rep = check_run(make_run(tmp_path, suite, trials))
    for console in (Console(file=io.StringIO(), width=60, force_terminal=False),
                    Console(file=io.StringIO(), width=200, force_terminal=True, color_system=None)):
        print_rules(rep, console)
        text = console.file.getvalue()
        assert "/data/[bold]x[/bold] missing" in text
    plain = Console(file=io.StringIO(), width=60, force_terminal=False)
    print_rules(rep, plain)
    lines = plain.file.getvalue().splitlines()
    assert any(ln.startswith(name) and "speedup" in ln for ln in lines) and "…" not in plain.file.getvalue()


def test_load_baseline_errors_name_the_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="no baseline for suite 'toy'"):
        load_baseline(tmp_path / "empty", suite="toy")
    bad = tmp_path / "b.json"
    bad.write_text('{"schema": "ampbench.baseline/1", "suite": ')
    with pytest.raises(ResultsError, match="b.json"):
        load_baseline(bad)
    with pytest.raises(ResultsError, match="not found"):
        load_baseline(tmp_path / "nope.json")
