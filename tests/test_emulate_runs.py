"""Emulated AMP judged for real (issue 56): the rules on emulated trials (hand-made, no Paddle), the suite keys,
and one real run of the toy workload whose float16 mode overflows and whose bfloat16 mode does not.

The numerics rules decide an emulated mode; the device rules say "not measured under emulation"; a suite
that judges numerics alone counts only the former, so an emulated mode can end "PASS (emulated)" (exit 0),
and never a plain PASS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import Suite
from ampbench.core.errors import ConfigError
from ampbench.judge.check import check_trials
from ampbench.record.models import Emulation
from ampbench.results import RunDir
from ampbench.results.verdicts import exit_code
from tests.factories import make_suite, make_trials, plan_of

cli = CliRunner()


def _emulated_suite(judges: str = "all") -> Suite:
    s = make_suite(modes=("fp32", "amp-o1-fp16"), seeds=(0, 1, 2))
    data = s.model_dump(mode="json", by_alias=True)
    data["modes"][1]["emulate"] = True
    data["suite"]["judges"] = judges
    return Suite.model_validate(data)


def _trials(suite: Suite) -> list:
    trials = make_trials(suite, n_steps=30)
    for t in trials:
        if t.mode != "fp32":
            t.amp.requested, t.amp.active, t.amp.emulated = True, False, True
            t.amp.emulation = Emulation(steps=30, op_calls={"matmul_v2": {"low": 30, "float32": 0}})
    return trials


@pytest.mark.parametrize("judges", ["all", "numerics"])
def test_emulated_mode_is_judged_on_numerics_and_never_on_the_device(judges: str) -> None:
    suite = _emulated_suite(judges)
    verdicts = check_trials(suite, _trials(suite), plan_of(suite))
    amp = next(v for v in verdicts if v.mode == "amp-o1-fp16")
    by = {r.rule: r for r in amp.rules}
    assert amp.emulated and all(r.emulated for r in amp.rules)
    assert by["amp-active"].status == "PASS" and "emulated" in by["amp-active"].details["reasons"]
    assert by["accuracy-parity"].status in ("PASS", "FAIL") and by["stability"].status == "PASS"
    for device in ("speedup", "memory"):
        assert by[device].status == "INCONCLUSIVE" and by[device].details["reasons"] == ["emulated"]
        assert "Not measured under emulation" in by[device].message
        assert by[device].counted is (judges == "all")
    if by["accuracy-parity"].status == "PASS":
        # "all": the device results count, so never PASS; "numerics": PASS, shown as emulated, exit 0
        assert amp.verdict == ("INCONCLUSIVE" if judges == "all" else "PASS")
        assert amp.verdict_text == f"{amp.verdict} (emulated)"
        assert exit_code([v.verdict for v in verdicts]) == (3 if judges == "all" else 0)


def test_numerics_fail_under_emulation_is_a_fail() -> None:
    suite = _emulated_suite("numerics")
    trials = _trials(suite)
    for t in trials:
        if t.mode != "fp32":
            t.nonfinite_losses = 3
            for s in t.steps[5:8]:
                s.loss = None
    verdicts = check_trials(suite, trials, plan_of(suite))
    amp = next(v for v in verdicts if v.mode == "amp-o1-fp16")
    assert amp.verdict == "FAIL" and amp.verdict_text == "FAIL (emulated)"
    assert exit_code([v.verdict for v in verdicts]) == 1


def test_suite_keys_refuse_what_cannot_be_emulated(tmp_path: Path) -> None:
    from ampbench.config import load_suite

    base = """
[suite]
name = "t"
workload = "toy"
metric = "accuracy"
{suite_extra}
[[modes]]
name = "fp32"
[[modes]]
name = "amp"
level = "{level}"
emulate = true
{mode_extra}
"""
    def load(level: str = "O1", suite_extra: str = "", mode_extra: str = "") -> Suite:
        p = tmp_path / "s.toml"
        p.write_text(base.format(level=level, suite_extra=suite_extra, mode_extra=mode_extra))
        return load_suite(p).suite

    assert load().mode("amp").emulate and load(suite_extra='judges = "numerics"').suite.judges == "numerics"
    with pytest.raises(ConfigError, match="emulate = true needs level O1 or O2"):
        load(level="O0")
    with pytest.raises(ConfigError, match="judges"):
        load(suite_extra='judges = "speed"')
    # the experiment's hash: emulated is another experiment, a suite without the key keeps its hash
    assert load().config_hash() != load(mode_extra="").model_copy(update={"modes": [
        m.model_copy(update={"emulate": False}) for m in load().modes]}).config_hash()


@pytest.mark.slow
def test_real_toy_run_emulated_float16_overflows_bfloat16_does_not(toy_suite, tmp_path: Path, cache_env) -> None:
    """Logits' gradients of ~1e5 (loss x 1e7): past float16's 65504, within bfloat16's range.  The float16
    mode's scaler skips steps and halves its scale until they fit (stability FAIL, exit 1); the bfloat16
    mode trains.  Both are emulated on this CPU, and every output says so."""
    suite = toy_suite(body="""
[suite]
name = "toy"
workload = "toy"
metric = "accuracy"
seeds = [0]
judges = "numerics"

[workload]
train_rows = 512
eval_rows = 128
loss_factor = 1e7

[train]
batch_size = 32
steps = 30
warmup_steps = 2
timeout_s = 300

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
dtype = "float16"
emulate = true

[[modes]]
name = "amp-o2-bf16"
level = "O2"
dtype = "bfloat16"
emulate = true
""")
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(suite), "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert "amp-o1-fp16 FAIL (emulated)" in r.output and "† emulated AMP" in r.output
    run = RunDir(next(p for p in (out / "toy").iterdir() if p.is_dir()))
    trials = {t.mode: t for t in run.load_trials()}
    assert all(t.status == "ok" for t in trials.values())
    fp16, bf16 = trials["amp-o1-fp16"], trials["amp-o2-bf16"]
    assert fp16.amp.emulated and bf16.amp.emulated and not trials["fp32"].amp.emulated
    assert fp16.skipped_steps > 0 and bf16.skipped_steps == 0
    e16, e_bf = fp16.amp.emulation, bf16.amp.emulation
    assert e16 is not None and e_bf is not None
    assert e16.totals["grad_overflow"] > 0 and e16.first_overflow is not None
    assert e16.first_overflow["step"] == 1 and e16.first_overflow["phase"] == "backward"
    assert e_bf.totals["overflow"] == e_bf.totals["grad_overflow"] == 0
    assert e_bf.decorated and e_bf.low_params == 4 and e_bf.op_calls["linear_v2"]["low"] > 0
    check = json.loads((run.path / "check.json").read_text())
    modes = {v["mode"]: v for v in check["verdicts"]}
    assert modes["amp-o1-fp16"]["emulated"] and modes["amp-o1-fp16"]["verdict"] == "FAIL"
    stab = next(x for x in modes["amp-o1-fp16"]["rules"] if x["rule"] == "stability")
    assert stab["status"] == "FAIL" and stab["emulated"]
    assert stab["details"]["first_overflow"]["step"] == 1 and "the first value past its range was in layer" in stab["message"]
    speed = next(x for x in modes["amp-o2-bf16"]["rules"] if x["rule"] == "speedup")
    assert speed["status"] == "INCONCLUSIVE" and not speed["counted"]
    report = (run.path / "report.md").read_text()
    assert "FAIL (emulated)" in report and "†" in report and "Where values were lost" in report
    import pandas as pd

    rows = pd.read_csv(run.path / "summary.csv").set_index("mode")
    assert bool(rows.loc["amp-o1-fp16", "amp_emulated"]) and not bool(rows.loc["fp32", "amp_emulated"])


@pytest.mark.slow
def test_a_program_of_ones_own_runs_emulated_its_own_amp_and_injected_amp(tmp_path: Path, cache_env) -> None:
    """tests/fixtures/command/tiny_train.py: `--amp O1` is its own auto_cast + GradScaler; without it the hook
    injects O2 bfloat16 (decorate, auto_cast).  With emulate = true both are emulated in the program's process
    (the hook installs trial/emulate before the program's first AMP call) and recorded from its events."""
    import sys

    script = Path(__file__).parent / "fixtures" / "command" / "tiny_train.py"
    suite = tmp_path / "suite.toml"
    suite.write_text(f"""
[suite]
name = "own"
workload = "command"
metric = "accuracy"
seeds = [0]
judges = "numerics"

[workload]
command = ["{sys.executable}", "{script}", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"]
metric = {{ preset = "json", json_file = "{{out}}/metrics.json" }}

[train]
batch_size = 16
steps = 12
warmup_steps = 2
timeout_s = 300

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
emulate = true
args = ["--amp", "O1"]

[[modes]]
name = "amp-o2-bf16"
level = "O2"
dtype = "bfloat16"
amp = "inject"
emulate = true
""")
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(suite), "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code in (0, 1, 3), r.output
    run = RunDir(next(p for p in (out / "own").iterdir() if p.is_dir()))
    trials = {t.mode: t for t in run.load_trials()}
    assert all(t.status == "ok" for t in trials.values()), {k: t.error for k, t in trials.items()}
    own, injected = trials["amp-o1-fp16"], trials["amp-o2-bf16"]
    for t in (own, injected):
        assert t.amp.emulated and t.amp.emulation is not None and t.amp.emulation.steps == 12
        assert t.amp.emulation.op_calls["linear_v2"]["low"] >= 24   # two Linear layers a step
    assert own.skipped_steps == 0 and own.steps[0].loss_scale == 1024.0   # the program's own GradScaler, enabled
    assert injected.amp.emulation.decorated and injected.amp.emulation.low_params == 4
    assert injected.amp.injected["applied"][0]["decorated"] is True
    check = json.loads((run.path / "check.json").read_text())
    assert all(v["emulated"] for v in check["verdicts"] if v["mode"] != "fp32")
    assert "(emulated)" in r.output


# ---------------------------------------------------------------- selftest's fidelity check (GPU fakes)

FIDELITY = """
[[modes]]
name = "amp-o1-fp16-emulated"
level = "O1"
dtype = "float16"
emulate = true

[[modes]]
name = "amp-o2-bf16"
level = "O2"
dtype = "bfloat16"

[[modes]]
name = "amp-o2-bf16-emulated"
level = "O2"
dtype = "bfloat16"
emulate = true
"""


def _fidelity_trials(monkeypatch, tmp_path: Path, toy_suite, machine_name: str) -> list:
    """Each real mode and its emulated twin on a simulated GPU (tests/fake_cuda.py: Paddle's GPU build over a
    stubbed driver; its 'real' kernels are this CPU's float32 ones, so what is compared is the check's logic,
    never a fidelity figure: that needs a GPU, docs/emulation.md)."""
    from tests.fake_cuda import install_machine, machines
    from tests.test_gpu_machines import run_toy

    install_machine(monkeypatch, machines()[machine_name], tmp_path)
    suite = toy_suite(FIDELITY)
    return [run_toy(suite, tmp_path / "fid", m) for m in
            ("amp-o1-fp16", "amp-o1-fp16-emulated", "amp-o2-bf16", "amp-o2-bf16-emulated")]


def test_selftest_fidelity_compares_each_real_mode_with_its_emulated_twin(monkeypatch, tmp_path, toy_suite) -> None:
    from ampbench.commands.selftest import fidelity_checks, machine_facts

    trials = _fidelity_trials(monkeypatch, tmp_path, toy_suite, "a100")
    assert not hasattr(paddle_amp(), "_ampbench_emulator")   # each in-process trial took its patches out again
    by = {t.mode: t for t in trials}
    assert by["amp-o1-fp16"].amp.active and by["amp-o1-fp16-emulated"].amp.emulated
    results = {r.subject: r for r in fidelity_checks(trials, machine_facts())}
    assert set(results) == {"toy/amp-o1-fp16", "toy/amp-o2-bf16"}
    assert all(r.ok for r in results.values()), results
    assert "loss rel. diff median" in results["toy/amp-o1-fp16"].detail
    # a planted disagreement: the emulated twin skipped steps the real run did not
    for s in by["amp-o1-fp16-emulated"].steps[:3]:
        s.found_inf = True
    bad = {r.subject: r for r in fidelity_checks(trials, machine_facts())}["toy/amp-o1-fp16"]
    assert bad.ok is False and "skipped 0 real vs 3 emulated" in bad.detail


def test_selftest_fidelity_is_na_where_the_gpu_has_no_such_amp(monkeypatch, tmp_path, toy_suite) -> None:
    from ampbench.commands.selftest import fidelity_checks, machine_facts

    trials = _fidelity_trials(monkeypatch, tmp_path, toy_suite, "v100")   # compute capability 7.0: no bfloat16
    results = {r.subject: r for r in fidelity_checks(trials, machine_facts())}
    assert results["toy/amp-o2-bf16"].ok is None and "compute capability 7.0" in results["toy/amp-o2-bf16"].detail
    assert results["toy/amp-o1-fp16"].ok is True


def paddle_amp():
    import paddle

    return paddle.amp


@pytest.mark.slow
def test_paddlerec_trainer_through_its_import_runs_emulated(tmp_path: Path, cache_env) -> None:
    """`ampbench import paddlerec` (the PaddleRec-shaped stand-in of tests/fixtures/paddlerec_checkout, which has
    no AMP switch) writes a cpu-emulated profile; its injected O1 float16 mode then runs emulated in the trainer's
    own process, judged on numerics and marked emulated."""
    checkout = Path(__file__).parent / "fixtures" / "paddlerec_checkout"
    suite_file = tmp_path / "rec.toml"
    r = cli.invoke(app, ["import", "paddlerec", "models/rank/deepfm/config.yaml", "--repo", str(checkout),
                         "-o", str(suite_file)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "cpu-emulated" in r.output, r.output
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(suite_file), "--profile", "cpu-emulated", "--mode", "amp-o1-fp16", "--out", str(out)],
                   env={"COLUMNS": "200"})
    assert r.exit_code in (0, 1, 3) and "amp-o1-fp16 " in r.output and "(emulated)" in r.output, r.output
    run = RunDir(next(out.glob("*/*")))
    trials = {t.mode: t for t in run.load_trials()}
    assert all(t.status == "ok" for t in trials.values()), {k: t.error for k, t in trials.items()}
    amp = trials["amp-o1-fp16"].amp
    assert amp.emulated and amp.injected["applied"][0]["models"] == ["DeepFMLayer"]
    assert amp.emulation is not None and amp.emulation.op_calls["lookup_table_v2"]["low"] == 0   # black-listed
    assert sum(c["low"] for c in amp.emulation.op_calls.values()) > 0
    check = json.loads((run.path / "check.json").read_text())
    verdict = next(v for v in check["verdicts"] if v["mode"] == "amp-o1-fp16")
    assert verdict["emulated"] and next(x for x in verdict["rules"] if x["rule"] == "amp-active")["status"] == "PASS"


# The data each trial prepares and evaluates, cut to what 4 steps and a decided verdict need (CI's CPU time: the
# profiles' own sizes made a resnet trial ~14 CPU s, 10 of them evaluating 1000 images; now ~4 s).  Nothing
# asserted reads the metric's value; every trial still prepares, trains, evaluates and is judged.
SMALL_DATA = {"resnet": ("workload.dataset.limit=200",),
              "bert": ("workload.dataset.max_train_rows=512", "workload.dataset.max_eval_rows=64"),
              "ocr": ("workload.dataset.images=16", "workload.dataset.eval_images=4")}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet", "ctr", "bert", "ocr"])
def test_bundled_suites_cpu_emulated_profile_runs_and_judges_numerics(name: str, tmp_path: Path, cache_env) -> None:
    """Each bundled suite's cpu-emulated profile, cut to a few steps and one seed: every trial ok and emulated,
    amp-active PASS as emulated (never INCONCLUSIVE for lack of AMP), stability decided, speed and memory
    not measured under emulation (and not counted), the report marking the emulated figures."""
    extra = {"bert": "paddleformers", "ocr": "paddleocr"}.get(name)
    if extra:
        pytest.importorskip(extra)
    out = tmp_path / "runs"
    sets = ["train.steps=4", "train.warmup_steps=1", "train.eval_every=0", *SMALL_DATA.get(name, ())]
    r = cli.invoke(app, ["run", name, "--profile", "cpu-emulated", "--seeds", "0", "--out", str(out),
                         *(a for kv in sets for a in ("--set", kv))], env={"COLUMNS": "200"})
    assert r.exit_code in (0, 1, 3), r.output
    run = RunDir(next((out / name).iterdir()))
    trials = run.load_trials()
    assert {t.mode for t in trials} == {"fp32", "amp-o1-fp16", "amp-o2-bf16"}
    assert all(t.status == "ok" for t in trials), {t.key: t.error for t in trials}
    check = json.loads((run.path / "check.json").read_text())
    for v in (v for v in check["verdicts"] if v["mode"] != "fp32"):
        rules = {x["rule"]: x for x in v["rules"]}
        assert v["emulated"] and rules["amp-active"]["status"] == "PASS", rules["amp-active"]
        assert rules["stability"]["status"] in ("PASS", "FAIL")
        for device in ("speedup", "memory"):
            assert rules[device]["details"]["reasons"] == ["emulated"] and not rules[device]["counted"]
    report = (run.path / "report.md").read_text()
    assert "(emulated)" in report and "†" in report and "Where values were lost (emulated AMP)" in report


def test_an_emulated_mode_whose_program_never_entered_auto_cast_is_not_a_pass() -> None:
    suite = _emulated_suite("numerics")
    trials = _trials(suite)
    for t in trials:
        if t.mode != "fp32":
            t.amp.emulation = Emulation(steps=30, op_calls={"matmul_v2": {"low": 0, "float32": 30}})
    amp = next(v for v in check_trials(suite, trials, plan_of(suite)) if v.mode == "amp-o1-fp16")
    active = next(r for r in amp.rules if r.rule == "amp-active")
    assert active.status == "INCONCLUSIVE" and active.details["reasons"] == ["no-evidence"]
    assert amp.verdict == "INCONCLUSIVE"


def test_more_seeds_are_never_added_for_what_emulation_does_not_measure() -> None:
    """run --until-decided: an emulated mode's speedup (INCONCLUSIVE, not measured) asks for no seed."""
    from ampbench.judge.until import needs

    suite = _emulated_suite("all")
    verdicts = check_trials(suite, _trials(suite), plan_of(suite))
    asked = [n for n in needs(verdicts, [], seeds=3, max_seeds=12) if n.rule in ("speedup", "memory")]
    assert asked and all(not n.more_seeds_help and "emulation" in n.why for n in asked)


def test_where_values_were_lost_sums_a_modes_trials_and_names_the_worst_layer_first() -> None:
    """diagnose/emulated.py (read by `ampbench diagnose` and report.md): layers summed over seeds, worst first,
    the earliest first overflow with its seed, and the advice for a float16 overflow."""
    from ampbench.diagnose.emulated import advice, mode_losses
    from ampbench.diagnose.render import _emulated_lines
    from ampbench.record.models import EmulatedLayer
    from ampbench.results.diagnosis_file import ModeDiagnosis

    suite = _emulated_suite()
    trials = _trials(suite)
    amp = [t for t in trials if t.mode == "amp-o1-fp16"]
    for t, step in zip(amp, (7, 3, 5)):
        assert t.amp.emulation is not None
        t.amp.emulation.layers = [EmulatedLayer(layer="fc1", type="Linear", grad_underflow=2),
                                  EmulatedLayer(layer="head", type="Linear", grad_overflow=10)]
        t.amp.emulation.first_overflow = {"step": step, "phase": "backward", "layer": "head", "op": "linear_v2"}
    m = mode_losses("amp-o1-fp16", trials)
    assert m is not None and [(r.layer, r.grad_overflow, r.grad_underflow) for r in m.layers] == [
        ("head", 30, 0), ("fc1", 0, 6)]
    assert m.first_overflow == {"step": 3, "phase": "backward", "layer": "head", "op": "linear_v2", "seed": 1}
    tips = advice(m)
    assert "layer head (Linear) overflowed float16" in tips[0] and "flushed to zero" in tips[1]
    assert mode_losses("fp32", trials) is None
    diag = ModeDiagnosis(mode="amp-o1-fp16", seed=1, steps=3, batch_size=8, emulated=True,
                         emulated_layers=m.layers, emulated_first_overflow=m.first_overflow, emulated_advice=tips)
    text = "\n".join(_emulated_lines(diag))
    assert "step 3 (backward), layer `head`, op `linear_v2`, seed 1" in text and "| `head` | Linear | 0 | 0 | 30 |" in text


def test_dashboard_runs_table_marks_an_emulated_mode_not_as_inactive_amp() -> None:
    """`ampbench publish`'s runs table: an emulated mode's verdict reads "(emulated)", not "(AMP inactive)", and its
    throughput and memory carry the mark and its legend (they are the emulation's, not AMP's); a mode whose AMP was
    really inactive still reads "(AMP inactive)", and an fp32 row is unmarked."""
    from ampbench.report.publish import _runs_table

    fp32 = {"mode": "fp32", "samples_per_s": 1000.0, "peak_bytes": 2 ** 30, "verdict": "NOT_CHECKED"}
    emulated = {"mode": "amp-o1-fp16", "amp_requested": True, "amp_emulated": True, "level": "O1",
                "dtype": "float16", "samples_per_s": 400.0, "peak_bytes": 2 ** 31, "verdict": "PASS"}
    inactive = {**emulated, "mode": "amp-o2-bf16", "amp_emulated": False, "verdict": "INCONCLUSIVE"}
    entry = {"run_id": "night-1", "started": "2026-12-01T02:00:00+00:00",
             "modes": {"fp32": fp32, "amp-o1-fp16": emulated, "amp-o2-bf16": inactive}}
    html = _runs_table([entry], {}, False)
    table, legend = html.split("</table>")
    rows = {r.split("<code>")[1].split("</code>")[0]: r for r in table.split("<tr>") if "<code>" in r}
    assert "PASS</span> (emulated)" in rows["amp-o1-fp16"] and "inactive" not in rows["amp-o1-fp16"]
    assert rows["amp-o1-fp16"].count("†") == 2          # samples/s and peak memory
    assert "(AMP inactive)" in rows["amp-o2-bf16"] and "†" not in rows["amp-o2-bf16"]
    assert "†" not in rows["fp32"] and legend.startswith("<p>† emulated AMP")
    from ampbench.report.dashboard_interactive import _hover_rows

    assert _hover_rows([entry], "amp-o1-fp16")[0][2] == "PASS (emulated)"
    assert _hover_rows([entry], "amp-o2-bf16")[0][2] == "INCONCLUSIVE"


def test_an_emulated_stability_fail_names_the_layer_and_op_that_overflowed_first() -> None:
    """Where the emulated numerics broke comes from the trials' own record (no diagnose re-run): the stability
    FAIL names the earliest first overflow over the seeds, and its advice keeps that op in float32 with the TOML
    line to paste, merged with the mode's own black list."""
    from ampbench.judge.rules.stability import advise_stability

    suite = _emulated_suite("numerics")
    trials = _trials(suite)
    for t in trials:
        if t.mode != "fp32":
            t.nonfinite_losses = 2
            for s in t.steps[4:6]:
                s.loss = None
            assert t.amp.emulation is not None
            t.amp.emulation.first_overflow = {"step": 9 - t.seed, "phase": "backward", "layer": f"head{t.seed}",
                                              "op": "linear_v2"}
    amp = next(v for v in check_trials(suite, trials, plan_of(suite)) if v.mode == "amp-o1-fp16")
    stab = next(r for r in amp.rules if r.rule == "stability")
    assert stab.status == "FAIL" and stab.details["first_overflow"]["seed"] == 2   # step 7: the earliest
    assert "layer head2 (op linear_v2, backward of step 7, seed 2)" in stab.message
    tips = advise_stability(stab, suite.mode("amp-o1-fp16"), None, None)
    assert "`custom_black_list = [" in tips[0] and '"linear_v2"' in tips[0] and "re-runs" not in tips[0]
    # an fp32 reference run's stability FAIL (no emulation record) keeps the diagnose advice
    plain = stab.model_copy(update={"details": {"reasons": ["nonfinite"]}})
    assert "ampbench diagnose" in advise_stability(plain, suite.mode("amp-o1-fp16"), None, None)[0]


def test_compare_json_rows_and_the_pr_comment_mark_an_emulated_modes_timing(tmp_path: Path) -> None:
    """`compare --format json` (its rows) and pr-check's comment: an emulated mode's samples/s is the emulation's,
    so its row says emulated and its comment line says "not an AMP timing"; the fp32 row is unmarked."""
    from ampbench.commands.compare import two_run_doc
    from ampbench.report.pr_comment import Side, pr_comment
    from tests.factories import make_run

    suite = _emulated_suite()
    base, head = (make_run(tmp_path, suite, _trials(suite), run_id=rid) for rid in ("base", "head"))
    doc = two_run_doc([head, base])
    marked = {(r.mode, r.role): r.emulated for r in doc.rows}
    assert marked == {("fp32", "current"): False, ("fp32", "other"): False,
                      ("amp-o1-fp16", "current"): True, ("amp-o1-fp16", "other"): True}
    assert json.loads(doc.model_dump_json(by_alias=True))["rows"][0]["emulated"] in (True, False)
    text = pr_comment(doc, Side("a" * 40, "head"), Side("b" * 40, "base"), "toy", "No significant change.")
    lines = {ln.split("|")[1].strip(): ln for ln in text.splitlines() if ln.startswith("| `")}
    assert "not an AMP timing" in lines["`amp-o1-fp16` (emulated: not an AMP timing)"]
    assert "emulated" not in lines["`fp32`"]


def test_a_numerics_only_pass_under_emulation_is_read_back_as_the_verdict_of_record(tmp_path: Path) -> None:
    """`check --recorded`, report and history append verify check.json against its trials (judge/recorded.py):
    an emulated mode's device results are shown and not counted under judges = "numerics", so its recorded
    "PASS (emulated)" is the verdict its counted rules give, not a forged one; a device result edited to count
    changes nothing judged again, and an edit of the verdict over a counted FAIL is still refused."""
    from tests.factories import make_run

    suite = _emulated_suite("numerics")
    trials = _trials(suite)
    for t in trials:
        t.config_hash = suite.config_hash()
    run = make_run(tmp_path / "runs", suite, trials)
    r = cli.invoke(app, ["check", str(run)], env={"COLUMNS": "200"})
    doc = json.loads((run / "check.json").read_text())
    amp = next(v for v in doc["verdicts"] if v["mode"] == "amp-o1-fp16")
    assert amp["verdict"] == "PASS" and amp["emulated"], r.output   # the factory's equal metrics: parity passes
    assert r.exit_code == 0 and any(not x["counted"] for x in amp["rules"])
    again = cli.invoke(app, ["check", str(run), "--recorded"], env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert cli.invoke(app, ["report", str(run)]).exit_code == 0
    stab = next(x for x in amp["rules"] if x["rule"] == "stability")
    stab["status"] = "FAIL"
    (run / "check.json").write_text(json.dumps(doc))
    edited = cli.invoke(app, ["check", str(run), "--recorded"], env={"COLUMNS": "200"})
    assert edited.exit_code == 2 and "amp-o1-fp16 is recorded PASS" in edited.output
