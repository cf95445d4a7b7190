"""`ampbench import paddleocr|paddlenlp` on config files written here in PaddleOCR's and
PaddleNLP's documented formats: the suites validate, carry the AMP settings and flags, name every
key they cannot honour, refuse unsupported architectures with exit 2, and run (cpu, shortened)."""

import json
from pathlib import Path

import pytest
import tomllib
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.importers.paddlenlp import import_paddlenlp, parse_cli_args
from ampbench.importers.paddleocr import PADDLEOCR_AMP_FLAGS, import_paddleocr
from ampbench.workloads.suites import load_suite

FIX = Path(__file__).parent / "fixtures"
MV3 = FIX / "paddleocr" / "det_mv3_db_global_amp.yml"   # AMP through Global.use_amp (PaddleOCR >= 2.5)
MV3_AMP = FIX / "paddleocr" / "det_mv3_db_amp.yml"      # PaddleOCR's own file: a top-level AMP section
MV3_STOCK = FIX / "paddleocr" / "det_mv3_db.yml"        # stock: AMP on nowhere
R50 = FIX / "paddleocr" / "det_r50_vd_db_amp.yml"
NLP = FIX / "paddlenlp" / "trainer_args_fp16_o2.json"
cli = CliRunner()


def run_cli(*args):
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


def _mode(suite, name):
    return next(m for m in suite["modes"] if m["name"] == name)


def test_global_use_amp_config_becomes_a_suite(tmp_path):
    out = tmp_path / "mv3.toml"
    r = run_cli("import", "paddleocr", str(MV3), "--synthetic-data", "-o", str(out))
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(out.read_text())
    wl = raw["workload"]
    assert (wl["backbone"], wl["backbone_scale"], wl["fpn_channels"], wl["image_size"]) == ("MobileNetV3", 0.5, 256, 640)
    assert wl["loss"] == {"main_loss_type": "DiceLoss", "balance_loss": True, "alpha": 5.0, "beta": 10.0, "ohem_ratio": 3.0}
    assert (wl["det_thresh"], wl["box_thresh"], wl["max_candidates"]) == (0.3, 0.6, 1000)
    assert raw["train"]["batch_size"] == 16
    assert raw["train"]["optimizer"]["schedule"] == "cosine" and raw["train"]["optimizer"]["lr_warmup_steps"] == 126
    amp = _mode(raw, "amp-o2-fp16")
    assert amp["scaler"] == {"enable": True, "init_loss_scaling": 1024.0, "use_dynamic_loss_scaling": True}
    assert amp["custom_black_list"] == ["reduce_mean", "sigmoid"] and amp["flags"] == PADDLEOCR_AMP_FLAGS
    assert [m["name"] for m in raw["modes"]] == ["fp32", "amp-o2-fp16"]
    for profile in ("default", "cpu"):
        assert load_suite(out, profile=profile).suite.mode("amp-o2-fp16").flags == PADDLEOCR_AMP_FLAGS
    assert "not honoured: Global.pretrained_model" in r.output
    assert "Train.dataset.transforms[2].IaaAugment" in r.output


def test_defaults_follow_paddleocr_when_amp_keys_are_absent(tmp_path):
    text = MV3.read_text()
    for key in ("amp_level", "amp_dtype", "scale_loss", "use_dynamic_loss_scaling", "amp_custom_black_list"):
        text = "\n".join(line for line in text.splitlines() if not line.strip().startswith(key + ":"))
    cfg = tmp_path / "c.yml"
    cfg.write_text(text)
    amp = _mode(import_paddleocr(cfg, synthetic=True).suite, "amp-o2-fp16")     # amp_level default O2
    assert amp["dtype"] == "float16"
    assert amp["scaler"] == {"enable": True, "init_loss_scaling": 1.0, "use_dynamic_loss_scaling": False}


def test_unknown_keys_are_named(tmp_path):
    cfg = tmp_path / "c.yml"
    cfg.write_text(MV3.read_text().replace("Global:\n", "Global:\n  fancy_new_switch: 3\n  seed: 11\n")
                   .replace("  ohem_ratio: 3\n", "  ohem_ratio: 3\n  gamma_extra: 2\n") + "\nExtraSection: {a: 1}\n")
    r = run_cli("import", "paddleocr", str(cfg), "--synthetic-data")
    assert r.exit_code == 0, r.output
    suite_text = r.output.split("\nnot honoured:", 1)[0]
    assert tomllib.loads(suite_text)["suite"]["seeds"] == [11]     # Global.seed is honoured
    for key in ("Global.fancy_new_switch", "Loss.gamma_extra", "(top level).ExtraSection"):
        assert f"not honoured: {key}" in r.output
        assert f"#   {key}:" in r.output  # and in the suite's header


@pytest.mark.parametrize("old,new,reason", [
    ("  algorithm: DB\n", "  algorithm: EAST\n", "algorithm 'EAST'"),
    ("    name: MobileNetV3\n", "    name: PPLCNetV3\n", "PPLCNetV3"),
    ("    model_name: large\n", "    model_name: small\n", "only MobileNetV3 large"),
    ("    name: DBFPN\n", "    name: RSEFPN\n", "RSEFPN"),
    ("  main_loss_type: DiceLoss\n", "  main_loss_type: DiceFocalLoss\n", "DiceFocalLoss"),
])
def test_unsupported_architecture_exits_2_with_the_reason(tmp_path, old, new, reason):
    cfg = tmp_path / "c.yml"
    cfg.write_text(MV3.read_text().replace(old, new, 1))
    r = run_cli("import", "paddleocr", str(cfg), "--synthetic-data")
    assert r.exit_code == 2
    assert reason in r.output and "c.yml" in r.output and "Traceback" not in r.output


def _paddleocr_data(root: Path) -> None:
    """A tiny set in PaddleOCR's layout under root/train_data/text_localization."""
    from ampbench.workloads.dbnet.data import SceneTextSpec, write_dataset

    d = root / "train_data" / "text_localization"
    write_dataset(SceneTextSpec(images=6, image_size=96, lines=(1, 2), text_height=(0.15, 0.25)), d)
    lines = (d / "label.txt").read_text().splitlines()
    (d / "label.txt").rename(d / "train_label.txt")
    (d / "test_label.txt").write_text("\n".join(lines[:2]) + "\n")


def test_r50_config_reads_label_files_and_checks_them(tmp_path, monkeypatch):
    pytest.importorskip("skimage")
    monkeypatch.chdir(tmp_path)
    r = run_cli("import", "paddleocr", str(R50), "-o", "r50.toml")
    # no data here: the suite still validates and runs, on synthetic text, and says so loudly
    assert r.exit_code == 0, r.output
    assert "label files not found" in r.output and "train_label.txt" in r.output
    assert tomllib.loads(Path("r50.toml").read_text())["workload"]["dataset"]["kind"] == "synthetic-scene-text"
    assert "# Decided: data: label files not found" in Path("r50.toml").read_text()
    _paddleocr_data(tmp_path)
    r = run_cli("import", "paddleocr", str(R50), "-o", "r50.toml")
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(Path("r50.toml").read_text())
    ds = raw["workload"]["dataset"]
    assert ds["kind"] == "paddleocr" and ds["ratio_list"] == [1.0]
    assert ds["train_label"] == ["./train_data/text_localization/train_label.txt"]
    assert (raw["workload"]["backbone"], raw["workload"]["backbone_layers"], raw["workload"]["box_thresh"]) == ("ResNet_vd", 50, 0.7)
    assert raw["train"]["optimizer"]["weight_decay"] == 0.0001
    amp = _mode(raw, "amp-o1-bf16")
    assert amp["custom_white_list"] == ["conv2d"] and amp["scaler"]["init_loss_scaling"] == 1.0
    assert raw["train"]["steps"] == 1  # epoch_num 1 x ceil(6 images / 16)
    (tmp_path / "train_data" / "text_localization" / "images" / "000001.jpg").unlink()
    r = run_cli("import", "paddleocr", str(R50), "-o", "r50.toml")   # a listed image is gone: exit 2
    assert r.exit_code == 2 and "train_label.txt line 2" in r.output and "000001.jpg" in r.output


@pytest.mark.slow
def test_imported_suite_runs_on_cpu_and_records_flags(tmp_path, monkeypatch):
    pytest.importorskip("paddleocr")
    pytest.importorskip("skimage")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    _paddleocr_data(tmp_path)
    assert run_cli("import", "paddleocr", str(MV3), "-o", "mv3.toml").exit_code == 0
    r = run_cli("run", "mv3.toml", "--profile", "cpu", "--set", "train.steps=3", "--set", "train.warmup_steps=1",
                "--set", "workload.image_size=64", "--out", "runs", "--no-report")
    assert r.exit_code in (0, 3), r.output
    trials = {p.name: json.loads(p.read_text()) for p in Path("runs").glob("*/*/trials/*.json")}
    assert {t["status"] for t in trials.values()} == {"ok"} and len(trials) == 2
    amp = trials["amp-o2-fp16__seed0.json"]
    assert amp["flags"]["FLAGS_max_inplace_grad_add"] == 8
    assert "FLAGS_cudnn_batchnorm_spatial_persistent" in amp["flags"]   # None on a CPU build
    assert trials["fp32__seed0.json"]["flags"] == {}


def test_paddlenlp_args_json_becomes_the_bert_suite(tmp_path):
    out = tmp_path / "bert.toml"
    r = run_cli("import", "paddlenlp", str(NLP), "-o", str(out))
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(out.read_text())
    assert raw["workload"]["source"] == "paddleformers" and raw["workload"]["max_seq_len"] == 64
    assert raw["suite"]["seeds"] == [7]
    t = raw["train"]
    assert (t["batch_size"], t["steps"]) == (32, 400)
    assert t["optimizer"] == {"name": "adamw", "lr": 5e-05, "weight_decay": 0.01, "schedule": "linear",
                              "lr_warmup_steps": 50, "grad_clip_norm": 1.0}
    amp = _mode(raw, "amp-o2-fp16")
    assert amp["scaler"] == {"enable": True, "init_loss_scaling": 32768.0, "use_dynamic_loss_scaling": True}
    assert amp["custom_black_list"] == ["reduce_sum", "softmax_with_cross_entropy"]
    assert amp["custom_white_list"] == ["lookup_table"]
    assert amp["master_grad"] is True   # amp_master_grad at O2 -> decorate(master_grad=True)
    assert [m["name"] for m in raw["profiles"]["cpu"]["modes"]] == ["fp32", "amp-o2-fp16"]
    for profile in ("default", "cpu"):
        load_suite(out, profile=profile)
    for key in ("model_name_or_path", "num_train_epochs"):
        assert f"not honoured: {key}" in r.output
    assert "not honoured: amp_master_grad" not in r.output
    assert "output_dir" not in r.output  # no effect on the numbers: not listed


def test_paddlenlp_cli_args_match_the_json():
    args = json.loads(NLP.read_text())
    text = " ".join(f"--{k} {' '.join(v) if isinstance(v, list) else v}" for k, v in args.items() if v is not True)
    text += " " + " ".join(f"--{k}" for k, v in args.items() if v is True)
    one = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in args.items()}
    assert parse_cli_args(text) == one     # one value after a list option reads as a scalar, as on a CLI
    assert import_paddlenlp(one, "--args").suite == import_paddlenlp(args, "x.json").suite | {
        "suite": import_paddlenlp(one, "--args").suite["suite"]}
    a = import_paddlenlp(parse_cli_args("--bf16 --scale_loss=1024"), "--args").suite
    m = _mode(a, "amp-o1-bf16")   # fp16_opt_level default O1
    assert m["dtype"] == "bfloat16" and m["scaler"]["init_loss_scaling"] == 1024.0
    # no fp16/bf16: O1 and O2 float16 with the Trainer's defaults, never an fp32-only suite
    none = import_paddlenlp({}, "--args")
    assert [x["name"] for x in none.suite["modes"]] == ["fp32", "amp-o1-fp16", "amp-o2-fp16"]
    assert {x["scaler"]["init_loss_scaling"] for x in none.suite["modes"][1:]} == {32768.0}
    assert "neither fp16 nor bf16" in none.suite["suite"]["notes"][0]


def test_paddlenlp_bad_input_exits_2(tmp_path):
    bad = tmp_path / "a.json"
    bad.write_text("{not json")
    r = run_cli("import", "paddlenlp", str(bad))
    assert r.exit_code == 2 and "a.json" in r.output and "not valid JSON" in r.output
    r = run_cli("import", "paddlenlp", "--args", "--fp16 --bf16")
    assert r.exit_code == 2 and "fp16/bf16" in r.output
    r = run_cli("import", "paddlenlp")
    assert r.exit_code == 2 and "exactly one" in r.output


def test_paddleocr_amp_section_format_is_read(tmp_path):
    """PaddleOCR's own configs/det/det_mv3_db_amp.yml keeps AMP in a top-level section (no Global.use_amp)."""
    out = tmp_path / "amp.toml"
    r = run_cli("import", "paddleocr", str(MV3_AMP), "--synthetic-data", "-o", str(out))
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(out.read_text())
    assert [m["name"] for m in raw["modes"]] == ["fp32", "amp-o1-fp16"]
    amp = _mode(raw, "amp-o1-fp16")
    assert amp["scaler"] == {"enable": True, "init_loss_scaling": 1024.0, "use_dynamic_loss_scaling": True}
    assert "(top level).AMP" not in r.output and "AMP section" in r.output
    assert raw["thresholds"]["min_baseline_metric"] == 0.3
    suite = load_suite(out, profile="cpu").suite
    assert suite.thresholds.min_baseline_metric == 0.3
    assert any("top-level AMP section" in n for n in suite.suite.notes)


def test_stock_config_without_amp_still_gets_amp_modes_and_says_so(tmp_path):
    out = tmp_path / "stock.toml"
    r = run_cli("import", "paddleocr", str(MV3_STOCK), "-o", str(out))
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(out.read_text())
    assert [m["name"] for m in raw["modes"]] == ["fp32", "amp-o1-fp16", "amp-o2-fp16"]
    assert _mode(raw, "amp-o2-fp16")["master_weight"] is True
    decided = [ln for ln in r.output.splitlines() if ln.startswith("decided: ")]
    assert any("turns AMP on nowhere" in ln for ln in decided)
    assert any("synthetic scene text" in ln for ln in decided)       # label files not found from here
    assert any(ln.startswith("decided: not honoured:") for ln in decided)
    assert "# Decided: modes: fp32, amp-o1-fp16, amp-o2-fp16" in out.read_text()


def test_import_decisions_reach_report_md(tmp_path):
    from ampbench.report.header import suite_notes
    from ampbench.results import RunInfo

    imp = import_paddleocr(MV3_STOCK, synthetic=True)
    info = RunInfo(suite="s", suite_file="s.toml", profile="cpu", run_id="r", config_hash="", plan=[{"mode": "fp32", "seed": 0}],
                   config={"suite": imp.suite["suite"]})
    notes = suite_notes(info)
    assert any(n.startswith("modes: fp32, amp-o1-fp16, amp-o2-fp16") for n in notes)


# ---------------------------------------------------------------- --repo: a command suite running their tools/train.py

CHECKOUT = FIX / "paddleocr_checkout"
V3 = FIX / "paddleocr" / "ch_PP-OCRv3_det_student.yml"
V4 = FIX / "paddleocr" / "PP-OCRv4_mobile_det.yml"


@pytest.mark.parametrize("cfg", [V3, V4])
def test_pp_ocr_v3_v4_configs_give_a_command_suite_with_repo(tmp_path, cfg):
    assert run_cli("import", "paddleocr", str(cfg), "--synthetic-data").exit_code == 2   # no translation for RSEFPN
    out = tmp_path / "s.toml"
    r = run_cli("import", "paddleocr", str(cfg), "--repo", str(CHECKOUT), "-o", str(out))
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(out.read_text())
    wl = raw["workload"]
    assert wl["command"][1:4] == ["tools/train.py", "-c", str(cfg.resolve())] and wl["cwd"] == str(CHECKOUT.resolve())
    assert wl["command"][4] == "-o" and "Global.seed={seed}" in wl["command"] and wl["stop_after_steps"] is True
    modes = {m["name"]: m for m in raw["modes"]}
    assert modes["fp32"]["args"] == ["Global.use_amp=False"]
    assert "Global.use_amp=True" in modes["amp-o2-fp16"]["args"] and "Global.amp_level=O2" in modes["amp-o2-fp16"]["args"]
    assert set(modes) == {"fp32", "amp-o1-fp16", "amp-o2-fp16"}      # AMP on nowhere: O1 and O2
    assert raw["thresholds"]["min_baseline_metric"] == 0.3
    for profile in ("default", "cpu"):
        assert load_suite(out, profile=profile).suite.suite.workload == "command"
    assert "decided: program:" in r.output and "not honoured" not in r.output


def test_repo_must_be_a_paddleocr_checkout(tmp_path):
    r = run_cli("import", "paddleocr", str(V3), "--repo", str(tmp_path))
    assert r.exit_code == 2 and "tools/train.py not found" in r.output


@pytest.mark.slow
def test_command_suite_from_repo_runs_their_train_py_with_the_modes_overrides(tmp_path):
    out = tmp_path / "s.toml"
    r = run_cli("import", "paddleocr", str(MV3_AMP), "--repo", str(CHECKOUT), "--no-pretrained", "-o", str(out))
    assert r.exit_code == 0, r.output
    r = run_cli("run", str(out), "--profile", "cpu", "--out", str(tmp_path / "runs"), "--no-report")
    assert r.exit_code == 3, r.output                       # AMP inactive on CPU
    trials = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/*/trials/*.json")}
    assert set(trials) == {"fp32__seed0", "amp-o1-fp16__seed0"}
    for key, t in trials.items():
        assert t["status"] == "ok", t["error"]
        assert len(t["steps"]) == 12 and "hmean" in t["metrics"]   # ended by the hook; their eval after step 11
        log = next((tmp_path / "runs").glob(f"*/*/logs/{key}.log")).read_text()
        amp = key.startswith("amp")
        assert f"use_amp={amp}" in log and ("scale_loss=1024.0" in log) == amp and "batch=2" in log


@pytest.mark.slow
def test_paddlenlp_script_import_runs_the_users_trainer_script(tmp_path):
    pytest.importorskip("paddleformers")
    script = FIX / "command" / "trainer_text_cls.py"
    out = tmp_path / "s.toml"
    r = run_cli("import", "paddlenlp", "--script", str(script), "--args",
                "--bf16 --fp16_opt_level O1 --max_steps 8 --per_device_train_batch_size 16 --seed 3 "
                "--logging_steps 4 --save_strategy no --report_to none --disable_tqdm true "
                "--metric_for_best_model accuracy", "-o", str(out))
    assert r.exit_code == 0, r.output
    raw = tomllib.loads(out.read_text())
    assert raw["suite"]["metric"] == "eval_accuracy" and raw["suite"]["seeds"] == [3]
    assert "--max_steps" in raw["workload"]["command"] and "{steps}" in raw["workload"]["command"]
    assert "--bf16" not in raw["workload"]["command"]
    assert _mode(raw, "amp-o1-bf16")["args"] == ["--bf16", "--fp16_opt_level", "O1"]
    r = run_cli("run", str(out), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.exit_code == 3, r.output
    trials = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/*/trials/*.json")]
    assert len(trials) == 2 and all(t["status"] == "ok" and len(t["steps"]) == 8 for t in trials)
    assert all("eval_accuracy" in t["metrics"] for t in trials)


@pytest.mark.parametrize("where", ["global_off", "section"])
def test_amp_dtype_bfloat16_gives_bf16_modes_in_both_formats(tmp_path, where):
    """ch_PP-OCRv2_det_cml.yml: `use_amp: False, amp_level: O2, amp_dtype: bfloat16` (AMP off, the dtype
    named); the older `AMP:` section with amp_dtype. Both import as bf16 modes, never float16."""
    import yaml

    cfg = yaml.safe_load(MV3_STOCK.read_text() if where == "global_off" else MV3_AMP.read_text())
    if where == "global_off":
        cfg["Global"].update(use_amp=False, amp_level="O2", amp_dtype="bfloat16")
    else:
        cfg["AMP"]["amp_dtype"] = "bfloat16"
    path = tmp_path / "c.yml"
    path.write_text(yaml.safe_dump(cfg))
    want = ["fp32", "amp-o1-bf16", "amp-o2-bf16"] if where == "global_off" else ["fp32", "amp-o1-bf16"]
    for extra in (["--synthetic-data"], ["--repo", str(CHECKOUT), "--no-pretrained"]):
        out = tmp_path / f"s{len(extra)}.toml"
        r = run_cli("import", "paddleocr", str(path), *extra, "-o", str(out))
        assert r.exit_code == 0, r.output
        raw = tomllib.loads(out.read_text())
        assert [m["name"] for m in raw["modes"]] == want and all(m["dtype"] == "bfloat16" for m in raw["modes"][1:])
        if "--repo" in extra:
            assert "Global.amp_dtype=bfloat16" in _mode(raw, "amp-o1-bf16")["args"]
