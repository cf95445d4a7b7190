"""A command mode's `amp = "inject"` (issue 44): ampbench's start-up hook applies AMP itself to a program
that has no AMP switch, through Paddle's own APIs, and the trial records it as injected.

The program (tests/fixtures/command/no_amp_train.py) reads Paddle's own AMP state from inside its model's
forward (amp_guard's arguments, paddle.amp.auto_cast.amp_state(), and the dygraph tracer's level and op
lists) and spies on paddle.amp.GradScaler.scale/step: what it writes is Paddle's state, never ampbench's
flag. On this CPU build Paddle itself keeps AMP off (amp_guard sets level O0, GradScaler disables
itself), so the mode is INCONCLUSIVE (exit 3); with the place check that CPU lacks replaced
(fake_amp_place.py) the tracer runs at the asked level and the scaler's dynamic scaling and skipped
steps reach the record.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "command"
SCRIPT = FIXTURES / "no_amp_train.py"
cli = CliRunner()

INJECT = """
[[modes]]
name = "amp-o1-fp16"
level = "O1"
amp = "inject"
custom_black_list = ["relu"]
scaler = { init_loss_scaling = 1024.0 }
"""


def suite(tmp_path: Path, modes: str = INJECT, args: str = "", script: Path = SCRIPT) -> Path:
    text = f"""
[suite]
name = "inj"
workload = "command"
metric = "accuracy"
seeds = [0]

[workload]
command = ["{sys.executable}", "{script}", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"{args}]
metric = {{ preset = "json", json_file = "{{out}}/metrics.json" }}

[train]
batch_size = 16
steps = 12
warmup_steps = 2
timeout_s = 300

[[modes]]
name = "fp32"
{modes}"""
    p = tmp_path / "suite.toml"
    p.write_text(text)
    return p


def run(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


def run_dir(out: Path) -> Path:
    return next(out.glob("inj/*"))


def trial(out: Path, key: str) -> dict:
    return json.loads((run_dir(out) / "trials" / f"{key}.json").read_text())


def seen(out: Path, key: str) -> dict:
    return json.loads((run_dir(out) / "outputs" / key / "amp_seen.json").read_text())


@pytest.mark.slow
def test_an_injected_mode_runs_the_forward_under_paddles_auto_cast_and_the_loss_through_a_grad_scaler(tmp_path):
    out = tmp_path / "runs"
    r = run("run", str(suite(tmp_path)), "--out", str(out))
    assert r.exit_code == 3, r.output    # AMP inactive on a CPU: INCONCLUSIVE, never PASS
    fp32, amp = trial(out, "fp32__seed0"), trial(out, "amp-o1-fp16__seed0")
    assert fp32["status"] == amp["status"] == "ok", (fp32["error"], amp["error"])
    # Paddle's own state inside the forward: amp_guard entered with the mode's level, dtype and custom list
    rows = seen(out, "amp-o1-fp16__seed0")["steps"]
    assert len(rows) == 12
    for row in rows:
        assert row["amp_state"] == {"enable": True, "level": "O1", "dtype": "float16"}
        assert "relu" in row["black"] and "relu" not in row["white"] and "matmul_v2" in row["white"]
        assert row["tracer_level"] == "AmpLevel.O0"   # Paddle's CPU build turns it off itself
        assert row["loss_scaled"] and row["out_dtype"] == "paddle.float32"
    assert [row["scaler_steps"] for row in rows] == list(range(1, 13))   # every step through GradScaler.step
    assert seen(out, "amp-o1-fp16__seed0")["outside_forward"] is None    # auto_cast left after the forward
    assert seen(out, "amp-o1-fp16__seed0")["scaler_enabled"] is False    # Paddle disabled it on CPU
    # the reference is untouched
    assert all(r["amp_state"] is None and not r["loss_scaled"] and r["scaler_steps"] == 0
               for r in seen(out, "fp32__seed0")["steps"])
    assert fp32["amp"]["injected"] == {}
    # recorded as injected, judged as AMP inactive: never an FP32 run called AMP
    inj = amp["amp"]["injected"]
    assert inj["by"] == "ampbench" and inj["applied"] == [
        {"optimizer": "Adam", "models": ["Net"], "level": "O1", "dtype": "float16", "decorated": False,
         "scaler": True, "scaler_enabled": False}]
    assert amp["amp"]["requested"] and not amp["amp"]["active"] and amp["amp"]["inactive_code"] == "device"
    # issue 58.5: the mode's own list is recorded, merged by the program's Paddle; never as the program's calls
    assert amp["amp"]["black_list"] == ["relu"] and "relu" in amp["amp"]["effective_black_list"]
    assert "relu" not in amp["amp"]["effective_white_list"] and amp["amp"]["program"] == {}
    assert 'ampbench applied it (amp = "inject")' in amp["amp"]["inactive_reason"]
    check = json.loads((run_dir(out) / "check.json").read_text())
    verdicts = {v["mode"]: v["verdict"] for v in check["verdicts"]}
    assert verdicts["amp-o1-fp16"] == "INCONCLUSIVE" and check["exit_code"] == 3
    report = (run_dir(out) / "report.md").read_text()
    assert "## AMP applied by ampbench" in report
    assert "+ with paddle.amp.auto_cast(level='O1', dtype='float16', custom_black_list=['relu']):" in report
    assert "+ scaler = paddle.amp.GradScaler(init_loss_scaling=1024.0)" in report


@pytest.mark.slow
def test_with_the_place_check_a_cpu_lacks_replaced_the_tracer_runs_at_the_asked_level_and_skips_are_recorded(
        tmp_path):
    """fake_amp_place.py: Paddle's own amp_guard and GradScaler run as on a GPU. A first scale of 3e38
    overflows the gradients: Paddle skips that step and divides the scale; the record has both, and the
    stability rule judges the skipped step."""
    modes = """
[[modes]]
name = "amp-o1-fp16"
level = "O1"
amp = "inject"
scaler = { init_loss_scaling = 3.0e38, decr_ratio = 1e-30 }
"""
    out = tmp_path / "runs"
    r = run("run", str(suite(tmp_path, modes, args=', "--fake-gpu-place"')), "--out", str(out), "--mode",
            "amp-o1-fp16")
    assert r.exit_code == 1 and "skipped for Inf gradients" in r.output, r.output   # the judge saw the skip
    amp = trial(out, "amp-o1-fp16__seed0")
    assert amp["status"] == "ok", amp["error"]
    rows = seen(out, "amp-o1-fp16__seed0")["steps"]
    assert all(row["tracer_level"] == "AmpLevel.O1" and row["tracer_dtype"] == "float16" for row in rows)
    assert seen(out, "amp-o1-fp16__seed0")["scaler_enabled"] is True
    steps = amp["steps"]
    assert steps[0]["found_inf"] and steps[0]["loss_scale"] == pytest.approx(3.0e38)
    assert not steps[1]["found_inf"] and steps[1]["loss_scale"] == pytest.approx(3.0e8)
    assert amp["skipped_steps"] >= 1
    assert amp["amp"]["injected"]["applied"][0]["scaler_enabled"] is True
    assert not amp["amp"]["active"]   # the C++ auto-cast casts GPU tensors only: still no low-precision op


@pytest.mark.slow
def test_a_program_that_applies_amp_itself_is_refused_in_one_line(tmp_path):
    out = tmp_path / "runs"
    r = run("run", str(suite(tmp_path, args=', "--own-amp"')), "--out", str(out))
    amp = trial(out, "amp-o1-fp16__seed0")
    assert amp["status"] == "crashed"
    assert amp["error"].startswith('amp = "inject" refused: the program already applies AMP itself (it calls '
                                   "paddle.amp.auto_cast/amp_guard with enable=True)")
    assert "\n" not in amp["error"] and "Traceback" not in amp["error"]
    assert trial(out, "fp32__seed0")["status"] == "ok"
    assert 'amp = "inject" refused' in r.output


@pytest.mark.parametrize("body,key,reason", [
    ('[[modes]]\nname = "inj"\nlevel = "O0"\namp = "inject"\n', "modes", 'amp = "inject" needs level O1 or O2'),
    ('[[modes]]\nname = "inj"\nlevel = "O1"\namp = "yes"\n', "amp", "'program' or 'inject'"),
    ('[[modes]]\nname = "inj"\nlevel = "O1"\namp = "inject"\n[workload]\n', "modes (inj).amp", "instrument = true"),
])
def test_an_injected_mode_without_amp_to_apply_is_refused_up_front(tmp_path, body, key, reason):
    out = tmp_path / "runs"
    p = suite(tmp_path, body.replace("[workload]\n", ""))
    if "[workload]" in body:   # the hook off: nothing could apply it
        p.write_text(p.read_text().replace("[train]", "instrument = false\n\n[train]", 1))
    r = run("run", str(p), "--out", str(out))
    assert r.exit_code == 2, r.output
    assert key in r.output and reason in r.output and "Traceback" not in r.output
    assert not out.exists()


def test_inject_is_refused_for_a_built_in_workload(tmp_path, toy_suite):
    p = toy_suite(body=toy_suite().read_text().replace('level = "O1"', 'level = "O1"\namp = "inject"'))
    r = run("run", str(p), "--out", str(tmp_path / "runs"))
    assert r.exit_code == 2 and "modes (amp-o1-fp16).amp" in r.output, r.output


def test_the_amp_key_leaves_existing_suites_hashes_alone():
    from ampbench.config.suite import Suite

    base = {"suite": {"name": "x", "workload": "command", "metric": "m"},
            "modes": [{"name": "fp32"}, {"name": "a", "level": "O1"}]}
    explicit = {**base, "modes": [{"name": "fp32"}, {"name": "a", "level": "O1", "amp": "program"}]}
    injected = {**base, "modes": [{"name": "fp32"}, {"name": "a", "level": "O1", "amp": "inject"}]}
    h = Suite.model_validate(base).config_hash()
    assert Suite.model_validate(explicit).config_hash() == h
    assert Suite.model_validate(injected).config_hash() != h
    again = Suite.model_validate(Suite.model_validate(injected).model_dump(mode="json"))   # run.json round trip
    assert again.modes[1].amp_by == "inject" and again.config_hash() != h


@pytest.mark.slow
def test_epochs_alone_carry_train_steps_to_a_program_that_counts_epochs(tmp_path):
    """PaddleRec's trainer takes `runner.epochs`, not steps: `{epochs}` with [workload.program] is how
    train.steps reaches it (the placeholder table), with no {steps} and no stop_after_steps; the program
    runs whole epochs, at least train.steps steps. The fp32-only run's advice names amp = "inject"."""
    p = suite(tmp_path, modes="")
    text = p.read_text().replace('"--steps", "{steps}", ', '"--epochs", "{epochs}", "--samples", "64", ')
    text = text.replace("[train]", "[workload.program]\nepochs = 1\nsamples = 64\n\n[train]")
    text = text.replace("steps = 12", "steps = 14")
    p.write_text(text)
    out = tmp_path / "runs"
    r = run("run", str(p), "--out", str(out))
    assert r.exit_code == 3, r.output
    fp32 = trial(out, "fp32__seed0")
    assert fp32["status"] == "ok", fp32["error"]
    assert len(fp32["steps"]) == 16   # {epochs} = ceil(14 / 4 steps an epoch) = 4 whole epochs
    check = json.loads((run_dir(out) / "check.json").read_text())
    said = " ".join(rule["message"] for v in check["verdicts"] for rule in v["rules"] if rule["rule"] == "amp-compared")
    assert 'amp = "inject"' in said and "level = \"O1\" and the program's own AMP switch" in said, said


def test_the_fp32_only_advice_of_a_built_in_suite_is_unchanged(tmp_path, toy_suite):
    from ampbench.config.loading import load_suite
    from ampbench.judge.rules.compared import rule_amp_compared

    class C:   # the rule reads only these of its context
        is_ref, plan = True, [("fp32", 0)]

        def rule(self, *args, **kwargs):
            return args[4]

    C.suite = load_suite(toy_suite()).suite
    C.suite = C.suite.model_copy(update={"modes": [m for m in C.suite.modes if m.name == "fp32"]})
    assert rule_amp_compared(C())[0].endswith('level = "O1" or "O2"). FP32 alone says nothing about AMP.')


@pytest.mark.slow
def test_checkpoint_saves_inside_steps_are_left_out_like_evaluations_and_named_by_the_cross_check(tmp_path):
    """paddle.save of 48 MiB after every 4th step: without the hook's save timing the next step carried
    it (PaddleClas's post-evaluation save, PaddleRec's epoch-end one). The program's own rate over whole
    intervals counts the saves; the cross-check says so, with the time it measured."""
    p = suite(tmp_path, modes="", args=', "--save-every", "4", "--save-mib", "48", "--ips-every", "4"')
    text = p.read_text().replace('json_file = "{out}/metrics.json" }',
                                 'json_file = "{out}/metrics.json", throughput_pattern = \'ips: (\\S+) samples/s\' }')
    p.write_text(text.replace("steps = 12", "steps = 16"))
    out = tmp_path / "runs"
    r = run("run", str(p), "--out", str(out))
    assert r.exit_code == 3, r.output
    t = trial(out, "fp32__seed0")
    assert t["status"] == "ok", t["error"]
    left = t["workload_info"]["left_out"]
    assert left["saves"] == 3 and left["saves_s"] > 0   # saved after steps 4, 8, 12: charged to 5, 9, 13
    per_save = left["saves_s"] / left["saves"]
    times = {s["step"]: s["time_s"] for s in t["steps"]}
    assert all(times[k] < 0.5 * per_save for k in (5, 9, 13)), ({k: times[k] for k in (4, 5, 6, 8, 9, 10, 12, 13, 14)}, per_save)   # not in the step
    assert "checkpoint save(s) (paddle.save" in left["note"]
    check = t["workload_info"]["throughput_check"]
    assert not check["agrees"] and "checkpoint save" in check["cause"] and "batch_size" not in check["cause"]
    assert abs(check["ratio_with_left_out"] - 1) <= check["tolerance"]
    report = (run_dir(out) / "report.md").read_text()
    assert "counts the evaluations and checkpoint saves inside the steps" in report


REC = Path(__file__).parent / "fixtures" / "paddlerec_checkout"   # a stand-in written here (README.md there)
REAL_REC = os.environ.get("AMPBENCH_PADDLEREC_REPO")
REC_CHECKOUTS = [pytest.param(REC, id="stand-in"), pytest.param(
    Path(REAL_REC or "."), id="paddlerec", marks=pytest.mark.skipif(
        not REAL_REC, reason="AMPBENCH_PADDLEREC_REPO does not name a PaddleRec checkout to run its own trainer"))]


def _rec_copy(checkout: Path, to: Path) -> Path:
    """What `import paddlerec` reads of a checkout (tools/, the DeepFM model folder), copied to edit."""
    for part in ("tools", "models/rank/deepfm"):
        shutil.copytree(checkout / part, to / part, symlinks=True)
    return to


@pytest.mark.parametrize("checkout", REC_CHECKOUTS)
def test_import_paddlerec_checks_what_its_trainer_reads_in_one_line(tmp_path, checkout):
    rec = _rec_copy(checkout, tmp_path / "rec")
    cfg = rec / "models" / "rank" / "deepfm" / "config.yaml"
    assert 'train_data_dir: "data/sample_data/train"' in cfg.read_text() and "  use_gpu: False\n" in cfg.read_text()
    cfg.write_text(cfg.read_text().replace('train_data_dir: "data/sample_data/train"', 'train_data_dir: "data/none"'))
    r = run("import", "paddlerec", "models/rank/deepfm/config.yaml", "--repo", str(rec))
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "runner.train_data_dir" in lines[0] and "no such folder" in lines[0]
    cfg.write_text(cfg.read_text().replace("  use_gpu: False\n", ""))
    r = run("import", "paddlerec", str(cfg), "--repo", str(rec))
    assert r.exit_code == 2 and "runner.use_gpu" in r.output and "casts to the config's own type" in r.output
    r = run("import", "paddlerec", str(cfg), "--repo", str(tmp_path))
    assert r.exit_code == 2 and "not a PaddleRec checkout" in r.output


@pytest.mark.slow
@pytest.mark.parametrize("checkout", REC_CHECKOUTS)
def test_paddlerec_trainer_from_import_to_verdict_with_amp_injected(tmp_path, checkout):
    """`ampbench import paddlerec` on a PaddleRec-shaped tools/trainer.py and DeepFM, which have no AMP
    switch (the stand-in here; PaddleRec's own trainer when AMPBENCH_PADDLEREC_REPO names a checkout):
    every trial ok, the AUC the one in its own `epoch: N done` line, samples/s within the suite's
    tolerance of its own `ips` lines, the injected mode recorded as injected, exit 3 on CPU."""
    suite_file = tmp_path / "rec.toml"
    r = run("import", "paddlerec", "models/rank/deepfm/config.yaml", "--repo", str(checkout), "-o", str(suite_file))
    assert r.exit_code == 0, r.output
    text = suite_file.read_text()
    assert '"runner.epochs={epochs}"' in text and 'amp = "inject"' in text and "samples = 80" in text
    out = tmp_path / "runs"
    r = run("run", str(suite_file), "--profile", "cpu", "--mode", "amp-o1-fp16", "--out", str(out))
    assert r.exit_code == 3, r.output
    runs = next(out.glob("*/*"))
    for key in ("fp32__seed0", "amp-o1-fp16__seed0"):
        t = json.loads((runs / "trials" / f"{key}.json").read_text())
        assert t["status"] == "ok", t["error"]
        assert len(t["steps"]) == 40    # 12 asked: one whole epoch of 80 samples at batch 2
        log = (runs / "logs" / f"{key}.log").read_text()
        done = [ln for ln in log.splitlines() if "epoch: 0 done, auc: " in ln]
        assert done and t["metrics"]["auc"] == pytest.approx(float(done[-1].split("auc: ")[1].split(",")[0]))
        check = t["workload_info"]["throughput_check"]
        assert check["agrees"], check
    amp = json.loads((runs / "trials" / "amp-o1-fp16__seed0.json").read_text())["amp"]
    assert amp["injected"]["applied"][0]["models"] == ["DeepFMLayer"] and not amp["active"]
    report = (runs / "report.md").read_text()   # the mode run, and not the bf16 one --mode left out
    assert "Mode `amp-o1-fp16`: ampbench's start-up hook applied" in report and "amp-o1-bf16" not in report


CLS_CONFIG = Path(__file__).parent / "fixtures" / "paddleclas" / "ResNet50.yaml"   # written here, ResNet50.yaml-shaped


def _clas_checkout(root: Path) -> Path:
    """What `import paddleclas` looks at in a checkout: tools/train.py, ppcls/ and ResNet50.yaml's data."""
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "train.py").write_text("# PaddleClas's trainer (not run by this test)\n")
    (root / "ppcls").mkdir()
    data = root / "dataset" / "ILSVRC2012"
    data.mkdir(parents=True)
    for name in ("train_list.txt", "val_list.txt"):
        (data / name).write_text("train/a.jpg 0\n")
    return root


def test_import_paddleclas_turns_amp_on_its_way_and_evaluates_inside_the_steps(tmp_path):
    import tomllib

    from ampbench.workloads.suites import load_suite

    repo = _clas_checkout(tmp_path / "clas")
    out = tmp_path / "clas.toml"
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo), "--no-pretrained", "-o", str(out))
    assert r.exit_code == 0, r.output
    s = tomllib.loads(out.read_text())
    cmd = s["workload"]["command"]
    pairs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-o"]
    assert {"Global.epochs=1", "Global.iter_per_epoch={steps}", "Global.eval_during_train=True",
            "DataLoader.Train.sampler.batch_size={batch_size}", "Global.device=gpu", "Arch.pretrained=False",
            "Global.seed={seed}", "Global.output_dir={out}"} <= set(pairs)
    assert "stop_after_steps" not in s["workload"] and s["workload"]["metric"]["preset"] == "paddleclas"
    modes = {m["name"]: m for m in s["modes"]}
    assert modes["fp32"]["args"] == ["-o", "AMP.use_amp=False"]
    o1 = modes["amp-o1-fp16"]["args"]
    assert o1[:4] == ["-o", "AMP.use_amp=True", "-o", "AMP.level=O1"] and "AMP.scale_loss=128.0" in o1
    assert "amp-o2-fp16" in modes and s["suite"]["metric"] == "top1"
    assert "Global.device=cpu" in s["profiles"]["cpu"]["workload"]["command"]
    for profile in ("default", "cpu"):   # every check `ampbench run` makes before a trial passes
        assert load_suite(out, profile).suite.train.steps in (300, 12)


def test_import_paddleclas_checks_its_data_and_weights_in_one_line(tmp_path):
    repo = _clas_checkout(tmp_path / "clas")
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo))
    assert r.exit_code == 0, r.output      # Arch.pretrained: True: PaddleClas downloads them itself
    (repo / "dataset" / "ILSVRC2012" / "val_list.txt").unlink()
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo))
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "DataLoader.Eval.dataset.cls_label_path" in lines[0]
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(tmp_path))
    assert r.exit_code == 2 and "not a PaddleClas checkout" in r.output
