"""A seed's FP32 and AMP arms measured on two nodes, or at once on one device, are not a pair (issue 46,
item 5): the paired rules (speedup, memory, energy) read INCONCLUSIVE with a reason code, never PASS or
FAIL, unless `[suite] pairs` accepts it; side by side on twin devices (run --devices) stays judged.
Hand-made trials (tests/factories.py); the real trials are in tests/test_worker.py and test_command.py."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.diagnose.advice import advice_for
from ampbench.judge.check import check_trials
from ampbench.judge.rules import advice_kit as kit
from ampbench.record.models import Interference, SlurmJob, Trial
from tests.factories import make_suite, make_trials, plan_of

AMP = "amp-o1-fp16"
T0 = 1_700_000_000.0


def _suite(pairs: str | None = None, **th: Any):
    suite = make_suite(min_speedup=1.3, min_memory_reduction=0.3, **th)
    if pairs is None:
        return suite
    return suite.model_copy(update={"suite": suite.suite.model_copy(update={"pairs": pairs})})


def _trials(suite, amp_time: float = 0.03) -> list[Trial]:
    """fp32 and AMP of every seed, one after the other on one host: the in-place pairs a run records."""
    out = make_trials(suite, metrics={"fp32": [0.88, 0.90, 0.92], AMP: [0.88, 0.90, 0.92]},
                      base_time={"fp32": 0.05, AMP: amp_time}, peak={"fp32": 10 << 30, AMP: 6 << 30})
    order = sorted(out, key=lambda t: (t.seed, t.mode != "fp32"))
    for i, t in enumerate(order):
        t.host, t.started_unix, t.ended_unix = "node-a", T0 + 10 * i, T0 + 10 * i + 9
    return out


def _paired(suite, trials: list[Trial]) -> dict[str, Any]:
    v = next(v for v in check_trials(suite, trials, plan_of(suite)) if v.mode == AMP)
    return {r.rule: r for r in v.rules if r.rule in ("speedup", "memory")}


def _seed(trials: list[Trial], mode: str, seed: int) -> Trial:
    return next(t for t in trials if t.mode == mode and t.seed == seed)


def test_pairs_in_place_are_judged_and_files_without_a_record_are_not_refused():
    suite = _suite()
    trials = _trials(suite)
    r = _paired(suite, trials)
    assert r["speedup"].status == "PASS" and r["memory"].status == "PASS", r
    for t in trials:   # a file written before host and times were recorded: nothing to refuse
        t.host, t.started_unix, t.ended_unix = "", None, None
    r = _paired(suite, trials)
    assert r["speedup"].status == "PASS" and not {"different-nodes", "overlapped"} & set(r["speedup"].details["reasons"])


def test_a_pair_on_two_nodes_is_held_back_unless_the_suite_accepts_any_node():
    suite = _suite()
    trials = _trials(suite)
    _seed(trials, AMP, 1).slurm = SlurmJob(job_id="51", node="node-b")   # Slurm's node name wins over the host
    r = _paired(suite, trials)
    for name in ("speedup", "memory"):
        assert r[name].status == "INCONCLUSIVE", r[name].message
        assert "different-nodes" in r[name].details["reasons"]
        assert r[name].details["apart"] == ["seed 1: fp32 ran on node-a, amp-o1-fp16 on node-b"]
        assert "Held back from PASS" in r[name].message and 'pairs = "any-node"' in r[name].message
        tips = advice_for(r[name], suite.mode(AMP))
        assert tips == [kit.APART] and "one node, one after the other" in tips[0]   # the measurement, not O2
    accepted = _suite("any-node")
    r = _paired(accepted, trials)
    assert r["speedup"].status == "PASS" and r["memory"].status == "PASS"


def test_a_fail_is_held_back_too():
    suite = _suite()
    trials = _trials(suite, amp_time=0.05)   # AMP no faster: speedup FAIL when in place
    assert _paired(suite, trials)["speedup"].status == "FAIL"
    a = _seed(trials, AMP, 0)
    a.host = "node-z"
    r = _paired(suite, trials)["speedup"]
    assert r.status == "INCONCLUSIVE" and "Held back from FAIL" in r.message


@pytest.mark.parametrize("devices,pairs,refused", [
    ((None, None), "same-node", True),          # CPU or nothing recorded: one slot, they competed
    ((None, None), "any-node", True),           # two nodes accepted, one device shared still not
    ((None, None), "any", False),
    ((["0"], ["0"]), "same-node", True),        # pinned to the same device
    ((["0"], ["1"]), "same-node", False),       # run --devices: twin devices of one node, by design
    (("GPU-aaa", "GPU-aaa"), "same-node", True),   # NVML's UUID: the same GPU
    (("GPU-aaa", "GPU-bbb"), "same-node", False),
])
def test_arms_at_once_are_refused_only_when_they_shared_a_device(devices, pairs, refused):
    suite = _suite(pairs)
    trials = _trials(suite)
    ref, amp = _seed(trials, "fp32", 2), _seed(trials, AMP, 2)
    amp.started_unix, amp.ended_unix = ref.started_unix + 4, ref.ended_unix + 4   # 5 s at the same time
    for t, d in zip((ref, amp), devices):
        if isinstance(d, list):
            t.interference = Interference(devices=d)
        elif isinstance(d, str):
            t.memory.nvml_device = {"uuid": d, "index": 0}
    r = _paired(suite, trials)["speedup"]
    assert (r.status == "INCONCLUSIVE") == refused, r.message
    assert ("overlapped" in r.details["reasons"]) == refused
    if refused:
        assert r.details["apart"] == ["seed 2: fp32 and amp-o1-fp16 ran at the same time for 5.0 s on one device "
                                      "of node-a"]


def test_a_bad_pairs_value_exits_2_naming_the_file_and_key(tmp_path, toy_suite):
    path = toy_suite().read_text().replace('seeds = [0]', 'seeds = [0]\npairs = "nearby"')
    suite = tmp_path / "bad.toml"
    suite.write_text(path)
    out = tmp_path / "runs"
    r = CliRunner().invoke(app, ["run", str(suite), "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bad.toml" in lines[0] and "suite.pairs" in lines[0] and "same-node" in lines[0], lines
    assert not out.exists()


# ---------------------------------------------------------------- history comparisons (issue 62)

def _history(suite, trials: list[Trial], base: list[Trial], tmp_path, **kw: Any):
    """`check` of `trials` against the run folder of `base` (--baseline), through the verb's own path."""
    from ampbench.commands.check import check_run
    from tests.factories import make_run

    cur = make_run(tmp_path / "cur", suite, trials, run_id="cur")
    ref = make_run(tmp_path / "ref", suite, base, run_id="ref")
    return check_run(cur, baseline=ref, **kw)


def _history_rules(rep) -> dict[str, Any]:
    return {v.mode: next(r for r in v.rules if r.rule == "history-throughput") for v in rep.verdicts}


def test_a_baseline_measured_on_another_node_is_refused_unless_allowed(tmp_path):
    from ampbench.core.errors import ResultsError
    from ampbench.results.baselines import load_baseline, save_baseline
    from tests.factories import make_run

    suite = _suite()
    here, there = _trials(suite), _trials(suite)
    for t in there:
        t.host = "node-b"
    with pytest.raises(ResultsError, match=r"not comparable: different node node-b \(baseline\) vs node-a \(this run\)"):
        _history(suite, here, there, tmp_path / "refused")
    rep = _history(suite, here, there, tmp_path / "allowed", allow_mismatch=True)
    assert any("different suite/config/device/node" in n for n in rep.notes)
    # a saved baseline file keeps where its trials ran, so it is refused alike; a file without nodes is not
    saved = save_baseline(make_run(tmp_path / "b", suite, there, run_id="b"), tmp_path / "b.json")
    assert load_baseline(saved).nodes() == {"node-b"}
    from ampbench.commands.check import check_run
    cur = make_run(tmp_path / "c", suite, here, run_id="c")
    with pytest.raises(ResultsError, match="different node"):
        check_run(cur, baseline=saved)
    old = saved.read_text().replace('"node": "node-b"', '"node": ""')
    (tmp_path / "old.json").write_text(old)
    assert check_run(cur, baseline=tmp_path / "old.json").verdicts


def test_history_lines_of_other_nodes_stay_out_of_the_pooled_series(tmp_path):
    from ampbench.commands.check import check_run
    from ampbench.commands.history import summarize_run_dir
    from ampbench.results.history import history_file
    from tests.factories import make_run

    suite = _suite()
    lines = []
    for i, host in enumerate(["node-a", "node-b", "node-a", "node-b", "node-a"]):
        ts = _trials(suite)
        for t in ts:
            t.host = host
        lines.append(summarize_run_dir(make_run(tmp_path / "h", suite, ts, run_id=f"h{i}")))
    hist = tmp_path / "hist"
    hist.mkdir()
    history_file(hist, suite.suite.name).write_text("".join(x.to_line() + "\n" for x in lines))
    rep = check_run(make_run(tmp_path / "cur", suite, _trials(suite), run_id="cur"), history=hist)
    assert rep.baseline.startswith("history: the 3 run(s)"), rep.baseline   # h0, h2, h4: node-a's
    assert any("2 history run(s) of this suite, config and device left out: measured on another node" in n
               for n in rep.notes), rep.notes


def test_trials_of_different_seeds_side_by_side_on_one_device_hold_the_history_comparison_back(tmp_path):
    """Seeds 0 and 1 ran at the same time on one CPU (a Slurm array task per seed on one node, say): each measured
    the other, so the run's throughput against the baseline's is not judged; in sequence it is."""
    suite = _suite()
    base = _trials(suite)
    calm = _history_rules(_history(suite, _trials(suite), base, tmp_path / "calm"))
    assert {r.status for r in calm.values()} == {"PASS"}, {m: r.message for m, r in calm.items()}
    crowded = _trials(suite)
    for t in crowded:
        if t.seed == 1:   # seed 1's arms moved onto seed 0's
            t.started_unix, t.ended_unix = t.started_unix - 20, t.ended_unix - 20
    held = _history_rules(_history(suite, crowded, base, tmp_path / "crowded"))
    for mode, r in held.items():
        assert r.status == "INCONCLUSIVE" and "overlapped" in r.details["reasons"], (mode, r.message)
        assert r.message.startswith("Held back from PASS: trials of this run ran side by side on one device")
        assert any("seed 1" in x and "seed 0" in x for x in r.details["crowded"]), r.details["crowded"]
    accepted = _suite(pairs="any")
    ok = _history_rules(_history(accepted, crowded, base, tmp_path / "any"))
    assert {r.status for r in ok.values()} == {"PASS"}
