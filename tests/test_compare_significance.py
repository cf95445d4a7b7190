"""`ampbench compare` decides (issue 45): every change is marked significant or not by the statistics of
`check --baseline` (its history-throughput rule, applied both ways), disturbed runs are marked, and
`--fail-above PCT` gives a CI an exit code.

Runs made by the factories have known step times (no interference recorded, GPU-like); the real-path
test runs the toy suite twice (FP32, 3 seeds, real workers; the CLI in process), plants a slowdown in a copy
of one run and compares it through the real CLI process."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.judge.run_change import changes
from ampbench.results.run_dir import open_run
from tests.factories import make_run, make_suite, make_trials

REPO = Path(__file__).resolve().parent.parent
cli = CliRunner()
MODES = ("fp32", "amp-o1-fp16")


def invoke(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "250"})


def pair(root: Path, slow: float = 1.0, seed: int = 0, seeds: int = 3) -> tuple[Path, Path]:
    """(current, other): the same code unless `slow` scales every step time of the current run."""
    suite = make_suite(MODES, seeds=tuple(range(seeds)))
    rng = np.random.default_rng(seed)
    base = {"fp32": 0.05, "amp-o1-fp16": 0.04}
    other = make_run(root, suite, make_trials(suite, base_time=base, rng=rng), run_id=f"other{seed}")
    cur = make_run(root, suite, make_trials(suite, base_time={m: t * slow for m, t in base.items()}, rng=rng),
                   run_id=f"cur{seed}")
    return cur, other


def test_identical_code_marks_nothing_and_fail_above_passes(tmp_path):
    cur, other = pair(tmp_path)
    r = invoke("compare", str(cur), str(other), "--fail-above", "10")
    assert r.exit_code == 0, r.output
    assert "Significant" in r.output and "yes," not in r.output
    assert len(re.findall(r"\] \| no +\|", r.output)) == len(MODES), r.output   # one change, then the mark
    assert "no mode significantly slower by more -> exit 0" in r.output


def test_a_planted_20pct_slowdown_is_marked_and_fails_above_10(tmp_path):
    cur, other = pair(tmp_path, slow=1.25)   # every step 25% longer: throughput -20%
    r = invoke("compare", str(cur), str(other), "--fail-above", "10")
    assert r.exit_code == 1, r.output
    assert len(re.findall(r"-(?:19|20|21)\.\d% \[[^]]+\] \| yes, slower", r.output)) == len(MODES), r.output
    assert "significantly slower: fp32, amp-o1-fp16 -> exit 1" in r.output
    # above the change: not a failure (a 20% slowdown is not one beyond 25%)
    assert invoke("compare", str(cur), str(other), "--fail-above", "25").exit_code == 0
    # the other way round it is a speed-up, marked, and never a failure
    back = invoke("compare", str(other), str(cur), "--fail-above", "10")
    # +25% up to the trials' noise: the run's figure is its trials' median (judge.gate, issue 62), each mode's own
    # level even where the AMP/FP32 ratio decided (unchanged: both modes slowed alike)
    assert back.exit_code == 0 and len(re.findall(r"\+2[2-8]\.\d% \[[^]]+\] \| yes, faster", back.output)) == len(MODES), \
        back.output


def test_two_seeds_cannot_be_significant_and_say_why(tmp_path):
    cur, other = pair(tmp_path, slow=1.25, seeds=2)
    r = invoke("compare", str(cur), str(other), "--fail-above", "10")
    assert r.exit_code == 0 and "yes," not in r.output, r.output
    assert "2 trials on a side: a significant change needs 3" in r.output


def test_compare_and_check_baseline_are_one_model(tmp_path):
    """For every mode, compare's "slower" is exactly check --baseline's history-throughput FAIL."""
    for slow, seed in ((1.0, 1), (1.25, 2), (1.06, 3), (0.8, 4)):
        cur, other = pair(tmp_path, slow=slow, seed=seed)
        marks = changes(open_run(cur), open_run(other))
        assert invoke("check", str(cur), "--baseline", str(other)).exit_code in (0, 1, 3)
        check = json.loads(next(cur.glob("check-vs-*.json")).read_text())
        status = {r["mode"]: r["status"] for v in check["verdicts"] for r in v["rules"]
                  if r["rule"] == "history-throughput"}
        assert {m: c.mark == "slower" for m, c in marks.items()} == {m: s == "FAIL" for m, s in status.items()}, \
            (slow, marks, status)


def test_error_rates_by_simulation(tmp_path):
    """Through the rule code: 30 pairs of identical code, 30 with a 20% slowdown (3 seeds, 2 modes each)."""
    false = hits = 0
    for i in range(30):
        same = changes(*map(open_run, pair(tmp_path / "same", seed=100 + i)))
        false += sum(c.significant for c in same.values())
        slow = changes(*map(open_run, pair(tmp_path / "slow", slow=1.25, seed=200 + i)))
        hits += sum(c.mark == "slower" for c in slow.values())
    assert false <= 1, false            # of 60 unchanged modes (the rule's FAIL level is 1% a direction)
    assert hits >= 54, hits             # of 60 planted slowdowns


def test_fail_above_is_refused_where_nothing_is_judged(tmp_path):
    cur, other = pair(tmp_path)
    r = invoke("compare", str(cur), str(other), "--format", "csv", "--fail-above", "10")
    assert r.exit_code == 2 and "--fail-above" in r.output and "Traceback" not in r.output


# ---------------------------------------------------------------- the real path


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AMPBENCH_FAULT",)}
    return {**env, "PYTHONPATH": str(REPO), "AMPBENCH_CACHE": str(tmp_path / "cache"), "COLUMNS": "250"}


def _ampbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ampbench.cli", *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=600, check=False)


def _plant(run: Path, dest: Path, factor: float) -> Path:
    """A copy of a real run whose every step took `factor` times as long (its manifest left out: the
    records are changed on purpose, and open_run refuses records changed behind a manifest)."""
    shutil.copytree(run, dest)
    (dest / "manifest.json").unlink(missing_ok=True)
    for p in (dest / "trials").glob("*.json"):
        doc = json.loads(p.read_text())
        for s in doc["steps"]:
            s["time_s"] *= factor
        p.write_text(json.dumps(doc))
    info = json.loads((dest / "run.json").read_text())
    info["run_id"] = dest.name
    (dest / "run.json").write_text(json.dumps(info))
    return dest


@pytest.mark.slow
def test_real_runs_identical_code_and_a_planted_slowdown(tmp_path):
    # one mode (FP32, 3 seeds) a run: compare judges each mode alone, and the factory tests above cover two
    runs = tmp_path / "runs"
    for _ in range(2):   # the runs in process (their trials are real worker processes)
        r = cli.invoke(app, ["run", "toy", "--out", str(runs), "--seeds", "0,1,2", "--mode", "fp32", "--set",
                             "train.steps=200", "--no-report", "--status-every", "0"],
                       env={"COLUMNS": "250", "AMPBENCH_CACHE": str(tmp_path / "cache"), "AMPBENCH_FAULT": None})
        assert r.exit_code == 3, r.output
    a, b = sorted(p for p in (runs / "toy").iterdir() if p.is_dir())
    same = invoke("compare", str(b), str(a), "--fail-above", "10")   # in process; the planted one is a real one
    assert same.exit_code in (0, 3), same.output                    # 3 only when disturbed beyond 10%
    assert "yes," not in same.output, same.output                   # nothing significant
    assert "Significant" in same.output
    # the plant: run b again with every step 25% longer (its own trials, so the change is exactly -20%;
    # against run a it would ride on the two runs' own difference, which this machine makes large)
    planted = _plant(b, runs / "toy" / "planted-slow", 1.25)
    slow = _ampbench(tmp_path, "compare", str(planted), str(b), "--fail-above", "10")
    marks = changes(open_run(planted), open_run(b))
    for mode, c in marks.items():
        assert c.change is not None and -0.21 < c.change < -0.19, (mode, c)   # the plant, measured
        # a real 20% slowdown is marked slower, unless this shared machine's own records explain it away,
        # or its trials spread so widely that the interval still reaches a change under 5%
        assert c.mark in ("slower", "disturbed") or (c.mark == "not significant" and c.ci_high is not None
                                                     and c.ci_high > 1 - c.min_change), (mode, c)
        assert (f"{mode}: disturbed: Measurement disturbed" in slow.stdout) == (c.mark == "disturbed")
    marked = {c.mark for c in marks.values()}
    assert slow.returncode == (1 if "slower" in marked else 3 if "disturbed" in marked else 0), slow.stdout


def test_a_disturbed_slowdown_is_marked_and_advised_to_rerun_not_to_change_anything(tmp_path):
    """The current run's trials saw other processes keep 1.6 of 2 cores busy: compare marks the change
    disturbed (not significant) and exits 3 with --fail-above; check --baseline's next step is to re-run
    on a quiet machine, not to compare library versions (which its own "measurement disturbed" contradicts)."""
    from ampbench.record.models import Env, Interference

    suite = make_suite(MODES, seeds=(0, 1, 2))
    rng = np.random.default_rng(11)
    base = {"fp32": 0.05, "amp-o1-fp16": 0.04}
    quiet = Interference(cpu_share=0.98, others_cpu=0.1)
    busy = Interference(cpu_share=0.97, others_cpu=1.6)
    env = Env(paddle="3.3.1", device="gpu:0", device_name="NVIDIA Test GPU 24GB", cuda="12.6", cpu_count=2)
    other = make_run(tmp_path, suite, make_trials(suite, base_time=base, rng=rng, interference=quiet, env=env),
                     run_id="quiet")
    cur = make_run(tmp_path, suite, make_trials(suite, base_time={m: t * 1.25 for m, t in base.items()}, rng=rng,
                                                interference=busy, env=env), run_id="busy")
    r = invoke("compare", str(cur), str(other), "--fail-above", "10")
    assert r.exit_code == 3, r.output
    assert len(re.findall(r"-\d+\.\d% \[[^]]+\] \| no \(disturbed\)", r.output)) == len(MODES), r.output
    assert "yes," not in r.output
    assert ("fp32: disturbed: Measurement disturbed (this run or its baseline, each weighed alike: other processes "
            "kept 1.60 of the machine's 2 cores busy beside this run") in r.output
    chk = invoke("check", str(cur), "--baseline", str(other))
    text = " ".join(chk.output.split())
    assert "history-throughput INCONCLUSIVE" in text and "Re-run on a quiet machine" in text, chk.output
    assert "Compare this run's environment" not in text
