"""`ampbench tune`: the ladder's decisions against simulated outcomes (each failure kind -> the documented
next rung, skips said why, budget and resume honoured), and for real on this CPU: exit 3, AMP inactive."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ampbench.commands import tune as tune_cmd
from ampbench.config import ModeConfig
from ampbench.judge import ladder
from ampbench.results.tune_file import load_tune
from ampbench.results.verdicts import ModeVerdict, RuleResult, combine

O2 = ModeConfig(name="amp", level="O2", dtype="float16")
O1 = ModeConfig(name="amp", level="O1", dtype="float16")


def verdict(**bad: str) -> ModeVerdict:
    """A mode verdict whose named rules (dashes as underscores) have the given status, the rest PASS."""
    names = ["completeness", "amp-active", "stability", "accuracy-parity", "speedup", "memory"]
    rules = [RuleResult(suite="s", mode="amp", rule=n, status=bad.get(n.replace("-", "_"), "PASS"), message=f"{n} msg")
             for n in names]
    return ModeVerdict(suite="s", mode="amp", verdict=combine([r.status for r in rules]), rules=rules)


@pytest.mark.parametrize(("bad", "facts", "kind"), [
    ({}, ladder.Facts(), "pass"),
    ({"amp_active": "INCONCLUSIVE", "speedup": "INCONCLUSIVE"}, ladder.Facts(), "inactive"),
    ({"completeness": "ERROR"}, ladder.Facts(), "error"),
    ({"stability": "FAIL", "accuracy_parity": "FAIL"}, ladder.Facts(), "stability"),
    ({"accuracy_parity": "FAIL", "speedup": "FAIL"}, ladder.Facts(), "parity"),
    ({"speedup": "FAIL"}, ladder.Facts(data_wait_share=0.2), "speed"),
    ({"memory": "INCONCLUSIVE"}, ladder.Facts(), "undecided"),   # too few seeds: no change chases noise
    ({"accuracy_parity": "INCONCLUSIVE"}, ladder.Facts(), "undecided"),
    ({"memory": "FAIL"}, ladder.Facts(), "speed"),
    ({"speedup": "FAIL"}, ladder.Facts(data_wait_share=0.61), "data-bound"),
    ({"speedup": "FAIL"}, ladder.Facts(host_share=0.97, gpu=True), "launch-bound"),
    ({"speedup": "FAIL"}, ladder.Facts(host_share=0.97, gpu=False), "speed"),  # on CPU the host IS the device
])
def test_each_outcome_is_classified_as_its_failure_kind(bad, facts, kind):
    got, reason = ladder.classify(verdict(**bad), facts)
    assert got == kind and reason
    if kind == "data-bound":
        assert "61% of each step waits for data" in reason and "num_workers" in reason


def walk(kind: ladder.Failure, mode: ModeConfig, facts: ladder.Facts) -> list[str]:
    """The rungs one ladder runs, each failing again with the same kind, until it is spent."""
    tried: set[str] = set()
    seen = []
    while True:
        step, _ = ladder.next_rung(kind, mode, facts, tried)
        if step is None:
            return seen
        seen.append(step.rung)
        tried.add(step.rung)
        mode = ladder.apply(mode, step, "amp")


def test_stability_ladder_order_and_changes():
    facts = ladder.Facts(overflow_ops=("exp", "softmax"), bf16_supported=True)
    assert walk("stability", O2, facts) == ["black-list-overflow", "dynamic-scaling", "master-grad", "bf16"]
    step, _ = ladder.next_rung("stability", O2, facts, set())
    assert step is not None and step.changes == {"custom_black_list": ["exp", "softmax"]}
    m = O2
    for _ in range(4):
        s, _ = ladder.next_rung("stability", m, facts, set())
        if s is None:
            break
        m = ladder.apply(m, s, "amp")
    assert m.custom_black_list == ["exp", "softmax"] and m.scaler.decr_every_n_nan_or_inf == 1
    assert m.scaler.init_loss_scaling == 1024.0 and m.master_grad and m.dtype == "bfloat16"


def test_rungs_that_do_not_apply_are_skipped_with_the_reason():
    # O1, no diagnosed ops, no bf16 device: only dynamic scaling applies
    step, skipped = ladder.next_rung("stability", O1, ladder.Facts(), set())
    assert step is not None and step.rung == "dynamic-scaling"
    assert [s.rung for s in skipped] == ["black-list-overflow"] and "diagnose" in skipped[0].skip
    assert walk("stability", O1, ladder.Facts()) == ["dynamic-scaling"]
    _, skipped = ladder.next_rung("stability", ladder.apply(O1, step, "amp"), ladder.Facts(), {"dynamic-scaling"})
    assert {s.rung: s.skip for s in skipped}["master-grad"] == "master_grad applies to O2 only"
    assert "bfloat16" in {s.rung: s.skip for s in skipped}["bf16"]


def test_parity_ladder_goes_to_o1_first_then_black_lists_the_diverging_ops():
    facts = ladder.Facts(diverging_ops=("layer_norm",))
    assert walk("parity", O2, facts) == ["o1", "black-list-diverging"]
    # already O1: the diverging ops first; excluded_layers needs O2
    step, skipped = ladder.next_rung("parity", O1, facts, set())
    assert step is not None and step.changes == {"custom_black_list": ["layer_norm"]}
    assert [s.rung for s in skipped] == ["o1"]
    # at O2 with the O1 rung tried and refused: excluded layers keep Embedding and the norms FP32
    step, _ = ladder.next_rung("parity", O2, ladder.Facts(), {"o1"})
    assert step is not None and step.rung == "excluded-layers" and "Embedding" in step.changes["excluded_layers"]


def test_speed_ladder_order():
    facts = ladder.Facts(max_batch=256)
    # no fp16-allreduce rung (issue 43.4): in dynamic graph O2 is Paddle's half-precision all-reduce
    assert walk("speed", O1, facts) == ["o2-master-weights", "use-promote-off", "max-batch"]
    assert walk("speed", O2, ladder.Facts()) == ["use-promote-off"]  # no probe, one process
    m = ladder.apply(O1, ladder.next_rung("speed", O1, facts, set())[0], "amp")  # type: ignore[arg-type]
    assert m.level == "O2" and m.master_weight is True


def test_stops_have_no_ladder():
    for kind in ladder.STOPS:
        assert ladder.next_rung(kind, O2, ladder.Facts(), set()) == (None, [])


# ---------------------------------------------------------------- the use-case over simulated rungs


class Simulated:
    """Stands in for running and judging a rung (the real path is the CPU test below): each rung's
    verdict comes from a script, and each rung 'costs' `cost_s`."""

    def __init__(self, script: list[Any], cost_s: float = 10.0) -> None:
        self.script, self.cost_s = script, cost_s   # a rung's entry: a dict, or a list of dicts, one per look
        self.ran: list[str] = []
        self.looks: dict[int, list[int]] = {}   # rung -> the seeds per mode at each of its looks

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(tune_cmd, "_short_trial", self.short)
        monkeypatch.setattr(tune_cmd, "_run", self.run)
        monkeypatch.setattr(tune_cmd, "_judge", self.judge)
        monkeypatch.setattr(tune_cmd, "_diagnosed_ops", lambda *a: (("exp",), ()))
        # the bf16 probe (a Paddle child per stability rung, tested for real in test_own_processes.py) answers
        # as on this CPU: the simulated ladders are the same on a machine whose GPU runs bf16
        from ampbench.trackers import device

        monkeypatch.setattr(device, "amp_supported_in_child", lambda *a: False)

    def short(self, folder: Path, doc: Any, mode: ModeConfig, console: Any) -> Any:
        from ampbench.record.models import AmpInfo, Trial

        return Trial(suite="s", workload="toy", mode=mode.name, seed=0, status="ok", amp=AmpInfo(active=True))

    def run(self, run: Any, info: Any, suite: Any, console: Any) -> float:
        self.ran.append(run.path.name)
        return self.cost_s

    def judge(self, doc: Any, folder: Path, index: int, mode: ModeConfig, design: Any = None) -> Any:
        from ampbench.config import Suite

        self.looks[index] = list(design.looks)
        entry = self.script[index]
        bad = entry[min(len(design.looks), len(entry)) - 1] if isinstance(entry, list) else entry
        return verdict(**bad).model_copy(update={"mode": mode.name}), [], Suite.model_validate(doc.config)


def toy_suite(tmp_path: Path) -> Path:
    p = tmp_path / "toy.toml"
    p.write_text('[suite]\nname = "toy"\nworkload = "toy"\nmetric = "accuracy"\n[train]\nsteps = 6\nwarmup_steps = 1\n'
                 '[[modes]]\nname = "fp32"\n[[modes]]\nname = "amp-o2"\nlevel = "O2"\n')
    return p


def test_ladder_runs_until_a_rung_passes_and_prints_the_winner(tmp_path, monkeypatch):
    sim = Simulated([{"stability": "FAIL"}, {"stability": "FAIL"}, {"accuracy_parity": "FAIL"}, {}])
    sim.install(monkeypatch)
    code = tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "out"))
    assert code == 0
    folder = next((tmp_path / "out" / "toy").glob("tune-*"))
    doc = load_tune(folder)
    assert [r.rung for r in doc.rungs] == ["start", "black-list-overflow", "dynamic-scaling", "o1"]
    assert sim.ran == ["rung-0", "rung-1", "rung-2", "rung-3"]
    assert doc.winner == 3 and doc.stopped == "passed every rule"
    md = (folder / "tune.md").read_text()
    assert '```toml\n[[modes]]\nname = "tune-3"\nlevel = "O1"' in md and 'custom_black_list = [\n    "exp",' in md
    # rung 0 planned FP32 and the mode; later rungs only their mode (the FP32 arm is run once)
    plan0 = json.loads((folder / "rung-0" / "run.json").read_text())["plan"]
    plan2 = json.loads((folder / "rung-2" / "run.json").read_text())["plan"]
    assert {p["mode"] for p in plan0} == {"fp32", "amp-o2"} and {p["mode"] for p in plan2} == {"tune-2"}
    from tests.test_schemas import errors

    assert errors("tune", json.loads((folder / "tune.json").read_text())) == []


def test_budget_stops_before_a_rung_that_would_not_fit_and_resume_continues(tmp_path, monkeypatch):
    sim = Simulated([{"stability": "FAIL"}] * 3 + [{}], cost_s=100.0)
    sim.install(monkeypatch)
    opts = tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "out", budget_s=250)
    assert tune_cmd.run_tune(opts) == 1
    folder = next((tmp_path / "out" / "toy").glob("tune-*"))
    doc = load_tune(folder)
    # rung 0 (100 s), rung 1 (estimated 50 s: 200 s), rung 2 would end at 300 s > 250 s
    assert doc.stopped.startswith("budget") and len(doc.rungs) == 2 and doc.pending is not None
    n = len(doc.rungs)
    # --resume with a larger budget: continues at the pending rung, the judged rungs not re-run
    sim.ran.clear()
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=None, resume=folder, budget_s=10_000)) == 0
    assert sim.ran[0] == f"rung-{n}" and "rung-0" not in sim.ran
    assert load_tune(folder).winner == 3


def test_max_rungs_and_data_bound_stop_the_ladder(tmp_path, monkeypatch):
    Simulated([{"stability": "FAIL"}] * 5).install(monkeypatch)
    opts = tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "a", max_rungs=2)
    assert tune_cmd.run_tune(opts) == 1
    doc = load_tune(next((tmp_path / "a" / "toy").glob("tune-*")))
    assert len(doc.rungs) == 2 and doc.stopped.startswith("max-rungs")
    monkeypatch.setattr(ladder, "classify", lambda v, f: ("data-bound", "61% of each step waits for data"))
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "b")) == 1
    doc = load_tune(next((tmp_path / "b" / "toy").glob("tune-*")))
    assert len(doc.rungs) == 1 and doc.stopped.startswith("data-bound: 61%")


def test_an_undecided_rung_spends_seeds_as_until_decided_does(tmp_path, monkeypatch):
    """A rung whose speedup is INCONCLUSIVE gets one more matched seed per look (judge.until: the spread is not
    known, so more can decide it) until it is decided; the seeds stay for later rungs, rung 0 trains FP32 on
    them, and each look is judged at the sequential levels of its looks."""
    from ampbench.results.run_dir import RunDir

    sim = Simulated([[{"speedup": "INCONCLUSIVE"}] * 2 + [{"speedup": "FAIL"}], {}])
    sim.install(monkeypatch)
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "o")) == 0
    folder = next((tmp_path / "o" / "toy").glob("tune-*"))
    doc = load_tune(folder)
    assert doc.config["suite"]["seeds"] == [0, 1, 2] and sim.looks == {0: [1, 2, 3], 1: [3]}
    assert [r.failure for r in doc.rungs] == ["speed", "pass"] and doc.rungs[0].cost_s == 30.0
    assert sorted(RunDir(folder / "rung-0").load_run().planned()) == [
        (m, s) for m in ("amp-o2", "fp32") for s in (0, 1, 2)]
    assert RunDir(folder / "rung-1").load_run().planned() == [("tune-1", s) for s in (0, 1, 2)]


def test_seeds_stop_at_the_budget_and_where_more_cannot_decide(tmp_path, monkeypatch):
    Simulated([{"speedup": "INCONCLUSIVE"}], cost_s=10.0).install(monkeypatch)
    opts = tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "a", budget_s=35.0)
    assert tune_cmd.run_tune(opts) == 3
    doc = load_tune(next((tmp_path / "a" / "toy").glob("tune-*")))
    # 10 s a seed (estimated from the rung so far): seeds 1 and 2 fit in 35 s, a third would not
    assert doc.config["suite"]["seeds"] == [0, 1, 2] and doc.rungs[0].cost_s == 30.0
    assert doc.stopped.startswith("undecided") and "would not fit in --budget" in doc.stopped
    Simulated([{"memory": "INCONCLUSIVE"}]).install(monkeypatch)   # memory: not a rule more seeds decide
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "b")) == 3
    doc = load_tune(next((tmp_path / "b" / "toy").glob("tune-*")))
    assert doc.config["suite"]["seeds"] == [0] and "more seeds cannot decide it" in doc.stopped


def command_suite(tmp_path: Path) -> Path:
    script = Path(__file__).parent / "fixtures" / "command" / "slow_loader.py"
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[suite]\nname = "mine"\nworkload = "command"\nmetric = "accuracy"\nseeds = [0]\n'
                     f'[workload]\ncommand = ["{sys.executable}", "{script}", "--steps", "{{steps}}", "--seed", '
                     f'"{{seed}}", "--out", "{{out}}", "--bs", "{{batch_size}}"]\n'
                     'metric = { preset = "json", json_file = "{out}/metrics.json" }\n'
                     '[train]\nbatch_size = 16\nsteps = 12\nwarmup_steps = 2\ntimeout_s = 120\n'
                     '[[modes]]\nname = "fp32"\n[[modes]]\nname = "amp-o1-fp16"\nlevel = "O1"\nargs = ["--amp", "O1"]\n')
    return suite


def test_a_command_suite_stops_at_the_next_rung_with_the_programs_flags(tmp_path, monkeypatch):
    """The program's precision is in its own flags (the mode's args): ampbench names the next rung's flags
    instead of running a rung that would change nothing."""
    Simulated([{"speedup": "FAIL"}]).install(monkeypatch)
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=command_suite(tmp_path), out_dir=tmp_path / "o")) == 1
    folder = next((tmp_path / "o" / "mine").glob("tune-*"))
    doc = load_tune(folder)
    assert len(doc.rungs) == 1 and doc.stopped.startswith("command suite: the next rung (o2-master-weights)")
    md = (folder / "tune.md").read_text()
    assert "Global.amp_level=O2" in md and "--fp16_opt_level O2" in md and 'level = "O2"' in md


def test_an_injected_command_mode_climbs_the_ladder_itself(tmp_path, monkeypatch):
    """amp = "inject": ampbench's hook applies the mode's AMP, so the next rung (O2 with master weights) is
    run, not handed back as program flags; the winner is written with `amp = "inject"` and the lines to keep."""
    Simulated([{"speedup": "FAIL"}, {}]).install(monkeypatch)
    suite = command_suite(tmp_path)
    suite.write_text(suite.read_text().replace('args = ["--amp", "O1"]', 'amp = "inject"'))
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=suite, out_dir=tmp_path / "o")) == 0
    folder = next((tmp_path / "o" / "mine").glob("tune-*"))
    doc = load_tune(folder)
    assert [r.rung for r in doc.rungs][1:] == ["o2-master-weights"] and doc.stopped == "passed every rule"
    md = (folder / "tune.md").read_text()
    assert 'amp = "inject"' in md and 'level = "O2"' in md and "paddle.amp.decorate(model, optimizer" in md


def test_a_crashed_short_trial_stops_the_ladder_as_an_error(tmp_path, monkeypatch):
    from ampbench.record.models import Trial

    sim = Simulated([{}])
    sim.install(monkeypatch)
    monkeypatch.setattr(tune_cmd, "_short_trial", lambda *a: Trial(suite="s", workload="toy", mode="m", seed=0,
                                                                    status="crashed", error="ImportError: no\nx"))
    assert tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=toy_suite(tmp_path), out_dir=tmp_path / "o")) == 2
    doc = load_tune(next((tmp_path / "o" / "toy").glob("tune-*")))
    assert doc.stopped.startswith("error: the short trial ended crashed: ImportError: no") and sim.ran == []


def test_resume_refuses_a_new_suite(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ampbench.cli", "tune", "resnet", "--resume", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--resume" in r.stderr and "Traceback" not in r.stderr
    r = run_in_process("tune", "--resume", str(tmp_path))    # the real process's exit and stderr: above
    assert r.exit_code == 2 and "tune.json" in r.stderr and "Traceback" not in r.stderr and r.exception is not None
    assert isinstance(r.exception, SystemExit) and len(r.stderr.strip().splitlines()) == 1, r.output


def run_in_process(*args: str):
    """The CLI in this process (typer's CliRunner): these tests are about what the run records, not about
    its process boundary (test_tune_resnet_on_cpu... and tests/test_hostile.py run the real process)."""
    from typer.testing import CliRunner

    from ampbench.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_a_command_suites_winner_is_given_as_the_programs_own_flags():
    mode = ModeConfig(name="w", level="O2", dtype="float16", custom_black_list=["exp", "softmax"], master_grad=True,
                      scaler={"init_loss_scaling": 1024.0, "use_dynamic_loss_scaling": True})
    ocr, nlp = tune_cmd.program_flags(mode)
    assert ocr.endswith("-o Global.use_amp=True Global.amp_level=O2 Global.amp_dtype=float16 Global.scale_loss=1024.0 "
                        "Global.use_dynamic_loss_scaling=True Global.amp_custom_black_list=[exp,softmax]")
    assert nlp.endswith("--fp16 --fp16_opt_level O2 --scale_loss 1024.0 --amp_custom_black_list exp softmax "
                        "--amp_master_grad true")


@pytest.mark.slow
def test_tune_resnet_on_cpu_exits_3_within_3_minutes_saying_why(tmp_path):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ampbench.cli", "tune", "resnet", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=180)
    assert time.monotonic() - t0 < 180
    assert r.returncode == 3, r.stdout + r.stderr
    assert "AMP did not run" in r.stdout and "float32" in r.stdout
    folder = next((tmp_path / "resnet").glob("tune-*"))
    assert load_tune(folder).stopped.startswith("inactive") and (folder / "short").is_dir()
    assert not (folder / "rung-0").exists()  # no long trial after the short one


# ---------------------------------------------------------------- why-not-faster evidence


def test_shape_audit_flags_linear_64_500_not_64_512():
    from paddle import nn

    from ampbench.trackers.shapes import audit

    odd = audit(nn.Sequential(nn.Linear(64, 500), nn.Conv2D(3, 64, 3), nn.Conv2D(3, 60, 3), nn.Conv2D(12, 64, 3)), 30)
    # the stem convs (3 image channels, which no user pads in NCHW) are judged apart (issue 43.7): the one
    # with 64 outputs is fine, the one with 60 is odd for its outputs only
    assert [(f["type"], f["dims"], f["odd_dims"]) for f in odd["odd"]] == [
        ("Linear", [64, 500], [500]), ("Conv2D", [3, 60], [60]), ("Conv2D", [12, 64], [12])]
    assert [f["dims"] for f in odd["stem"]] == [[3, 64], [3, 60]]
    assert odd["batch_ok"] is False and odd["layers"] == 4 and odd["odd_count"] == 3
    fine = audit(nn.Sequential(nn.Linear(64, 512), nn.Conv2D(8, 64, 3)), 32)
    assert fine["odd"] == [] and fine["odd_count"] == 0 and fine["batch_ok"] and fine["layers"] == 2


def _trial(data_s: float, cpu_s: float, active: bool, **amp: Any) -> Any:
    from ampbench.record.models import AmpInfo, StepRecord, Trial

    steps = [StepRecord(step=i, loss=1.0, time_s=0.1, data_s=data_s, cpu_s=cpu_s, samples=8) for i in range(1, 6)]
    return Trial(suite="s", workload="toy", mode="amp", seed=0, status="ok", steps=steps,
                 amp=AmpInfo(active=active, **amp))


def test_causes_are_ranked_with_their_numbers():
    from ampbench.judge import why_slow
    from ampbench.record.models import Interference

    census = {"op_calls": {"matmul_v2": {"float16": 10, "float32": 30}, "cast": {"float32": 40},
                           "elementwise_add": {"float32": 20}}, "white_list": ["matmul_v2"], "black_list": ["exp"]}
    t = _trial(0.061, 0.099, True, level="O1", **census)
    causes = why_slow.rank([t])
    assert [c.kind for c in causes] == ["launch-bound", "data-bound", "casts", "fp32-ops", "unlisted"]
    assert causes[4].text.startswith("20 of 100 op calls are on neither list")
    assert "unlisted" not in [c.kind for c in why_slow.rank([_trial(0.0, 0.01, True, level="O2", **census)])]
    assert causes[1].text.startswith("61% of each step waits for data")
    assert "30 of 100 op calls are white-list ops that still ran in FP32" in causes[3].text
    assert why_slow.op_census(t) == {"total": 100, "low_precision": 10, "casts": 40, "white_list_fp32": 30,
                                     "unlisted": 20}
    idle = _trial(0.0, 0.05, True, level="O2")
    idle.interference = Interference(gpu_busy_pct=35.0)   # NVML: a kernel ran 35% of the window
    assert next(c.text for c in why_slow.rank([idle])).startswith(
        "GPU busy 35% of the window (NVML): the device waits on the host")
    idle.interference = Interference(gpu_busy_pct=80.0)
    assert "gpu-idle" not in [c.kind for c in why_slow.rank([idle])]
    # a mode that ran in FP32 (AMP inactive): no op census finding, every op was FP32 whatever the lists say
    assert not {"fp32-ops", "unlisted", "casts"} & {c.kind for c in why_slow.rank([_trial(0.0, 0.01, False, level="O1",
                                                                                        **census)])}
    # on a CPU (AMP inactive) a busy host is the computation, not a launch bound; a small data wait is not named
    assert why_slow.rank([_trial(0.005, 0.099, False)]) == []


@pytest.mark.slow
def test_a_slow_loader_is_recorded_and_named_by_the_report(tmp_path):
    """For real: the built-in loop under a toy loader that takes 20 ms per batch (steps of ~2 ms)."""
    suite = tmp_path / "slow.toml"
    suite.write_text('[suite]\nname = "slowdata"\nworkload = "toy"\nmetric = "accuracy"\nseeds = [0]\n'
                     '[workload]\nfeatures = 64\nhidden = 500\nfetch_delay_s = 0.02\n'
                     '[train]\nsteps = 12\nwarmup_steps = 2\nbatch_size = 32\n'
                     '[[modes]]\nname = "fp32"\n[[modes]]\nname = "amp-o1"\nlevel = "O1"\n')
    r = run_in_process("run", str(suite), "--out", str(tmp_path / "out"))
    assert r.exit_code == 3, r.output
    from ampbench.results.run_dir import open_run

    run = open_run(next((tmp_path / "out" / "slowdata").iterdir()))
    amp = next(t for t in run.trials if t.mode == "amp-o1")
    assert (amp.data_wait_share() or 0) > 0.5
    assert [f["layer"] for f in amp.shape_audit["odd"]] == ["0", "2"] and amp.shape_audit["batch_ok"]
    report = (run.path / "report.md").read_text()
    assert "of each step waits for data: no precision setting can help" in report
    # the odd shapes are recorded (above); Tensor Core advice cannot apply to this CPU run: left out
    assert "Linear [64, 500]" not in report and "Tensor Cores" not in report


# ---------------------------------------------------------------- end to end on a simulated GPU machine


@pytest.mark.slow
def test_speed_ladder_end_to_end_on_a_simulated_a100(tmp_path, monkeypatch):
    """Real trials (the toy MLP, in this process so the simulated A100 of tests/fake_cuda.py applies), the
    real check rules and the real ladder: a speedup no MLP reaches (min_speedup 100) FAILs at every rung,
    so the speed ladder climbs O1 -> O2 with master weights -> use_promote off and is then spent (no probe,
    one process).  The FP32 arm runs in rung 0 only."""
    from ampbench.commands.run_plan import make_spec
    from ampbench.results.run_dir import open_run
    from ampbench.trial.worker import Events, TrialRunner
    from tests.fake_cuda import install_machine, machines

    install_machine(monkeypatch, machines()["a100"], tmp_path)
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    ran: list[str] = []

    def in_process(run, info, suite, console):
        for m, s in info.planned():
            spec = make_spec(info, suite, run, m, s, None)
            tr = TrialRunner(spec, Events(None))
            tr.run()
            tr.write()
            ran.append(f"{run.path.name}/{m}")
        return 1.0

    monkeypatch.setattr(tune_cmd, "_run", in_process)
    # 8 developers share 2 cores here: the speed rule would (rightly) call every measurement disturbed; the
    # ladder's climb is what this test is about
    monkeypatch.setattr("ampbench.judge.rules.speed._disturbance", lambda *a: None)
    # the simulated A100's kernels run on this CPU, so its host is busy for the whole step: on an idle
    # machine that reads launch-bound (a real stop), which is not what this test is about
    monkeypatch.setattr(ladder, "LAUNCH_BOUND_HOST_SHARE", math.inf)
    suite = tmp_path / "toy.toml"
    suite.write_text('[suite]\nname = "toy"\nworkload = "toy"\nmetric = "accuracy"\nseeds = [0, 1, 2]\n'
                     '[workload]\ntrain_rows = 512\neval_rows = 128\n[train]\nbatch_size = 32\nsteps = 13\noptimizer = { lr = 0.02 }\n'
                     'warmup_steps = 2\n[thresholds]\nmin_speedup = 100.0\nmetric_abs_tol = 1.0\n'
                     '[[modes]]\nname = "fp32"\n[[modes]]\nname = "amp-o1-fp16"\nlevel = "O1"\n')
    code = tune_cmd.run_tune(tune_cmd.TuneOptions(suite_file=suite, out_dir=tmp_path / "out"))
    folder = next((tmp_path / "out" / "toy").glob("tune-*"))
    doc = load_tune(folder)
    assert [r.rung for r in doc.rungs] == ["start", "o2-master-weights", "use-promote-off"], doc.stopped
    assert all(r.failure == "speed" and r.verdict == "FAIL" and r.speedup is not None for r in doc.rungs)
    assert code == 1 and doc.stopped == "speed: every rung of its ladder tried or not applicable"
    assert doc.rungs[2].skipped == [] and open_run(folder / "rung-2").suite.mode("tune-2").use_promote is False
    # FP32 trains in rung 0 only (its 3 seeds, and any seed a later rung spent to decide: tune adds it there)
    fp32 = [r for r in ran if r.endswith("/fp32")]
    assert len(fp32) >= 3 and all(r.startswith("rung-0/") for r in fp32)
    md = (folder / "tune.md").read_text()
    assert "o2\\-master\\-weights" in md or "o2-master-weights" in md


@pytest.mark.slow
def test_a_command_programs_slow_loader_is_recorded_and_named(tmp_path):
    """For real: a plain Paddle script whose DataLoader sleeps 2 ms per sample (16 per batch), under the
    command hook; the data-wait share comes from timing paddle.io.DataLoader's iteration."""
    suite = command_suite(tmp_path)
    r = run_in_process("run", str(suite), "--out", str(tmp_path / "out"))
    assert r.exit_code == 3, r.output
    from ampbench.results.run_dir import open_run

    run = open_run(next((tmp_path / "out" / "mine").iterdir()))
    for t in run.trials:
        assert all(s.data_s is not None and 0 < s.data_s <= s.time_s for s in t.steps), t.key
        assert (t.data_wait_share() or 0) > 0.5, t.key
    assert "of each step waits for data: no precision setting can help" in (run.path / "report.md").read_text()


@pytest.mark.slow
def test_a_command_programs_shapes_and_decorate_order_are_recorded_and_named(tmp_path):
    """For real, under the command hook: the Linear/conv layers read at step 1 (Linear(64, 500) flagged,
    Linear(64, 512) not) and the order of paddle.amp.decorate (O2) and paddle.DataParallel (one process:
    Paddle's DataParallel then runs single-card, and decorate on a CPU returns early, after the hook saw it)."""
    script = Path(__file__).parent / "fixtures" / "command" / "shapes_order.py"
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[suite]\nname = "shapes"\nworkload = "command"\nmetric = "accuracy"\nseeds = [0]\n'
                     f'[workload]\ncommand = ["{sys.executable}", "{script}", "--steps", "{{steps}}", "--seed", '
                     f'"{{seed}}", "--out", "{{out}}", "--bs", "{{batch_size}}"]\n'
                     'metric = { preset = "json", json_file = "{out}/metrics.json" }\n'
                     '[train]\nbatch_size = 16\nsteps = 6\nwarmup_steps = 1\ntimeout_s = 120\n'
                     '[[modes]]\nname = "fp32"\nargs = ["--width", "512"]\n'
                     '[[modes]]\nname = "amp-dp-first"\nlevel = "O2"\nargs = ["--width", "500", "--order", "dp-first"]\n'
                     '[[modes]]\nname = "amp-ok"\nlevel = "O2"\nargs = ["--width", "512", "--order", "decorate-first"]\n')
    r = run_in_process("run", str(suite), "--out", str(tmp_path / "out"))
    assert r.exit_code == 3, r.output
    from ampbench.results.run_dir import open_run

    run = open_run(next((tmp_path / "out" / "shapes").iterdir()))
    t = {x.mode: x for x in run.trials}
    bad = t["amp-dp-first"].shape_audit
    assert [(f["layer"], f["dims"]) for f in bad["odd"]] == [("0", [64, 500]), ("2", [500, 8])]
    assert bad["layers"] == 2 and bad["batch_ok"] is True
    for fine in ("fp32", "amp-ok"):
        assert t[fine].shape_audit["layers"] == 2 and t[fine].shape_audit["odd"] == [], fine
    assert [t[m].amp.decorate_order for m in ("fp32", "amp-dp-first", "amp-ok")] == [
        "", "data-parallel-first", "decorate-first"]
    report = (run.path / "report.md").read_text()
    assert "paddle.amp.decorate ran after paddle.DataParallel" in report
    # the odd shapes are recorded, but Tensor Core advice cannot apply to a CPU run: left out of its report
    assert "Linear [64, 500]" not in report and "Tensor Cores" not in report


def test_bf16_gradients_are_never_cast_to_fp16_a_bf16_fp16_allreduce_mode_is_refused(toy_suite, tmp_path):
    """Issue 43.4: ampbench's fp16 all-reduce casts gradients to float16 unscaled; a bfloat16 mode asking for
    it is refused up front (exit 2, one line naming the file and key), never run."""
    from typer.testing import CliRunner

    from ampbench.cli import app

    suite = toy_suite('[[modes]]\nname = "amp-o2-bf16-ar"\nlevel = "O2"\ndtype = "bfloat16"\nfp16_allreduce = true\n')
    r = CliRunner().invoke(app, ["run", str(suite), "--out", str(tmp_path / "runs")], env={"COLUMNS": "300"})
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert "fp16_allreduce" in lines[0] and str(suite.name) in lines[0] and "bfloat16" in lines[0], lines[0]
    assert not (tmp_path / "runs").exists()
