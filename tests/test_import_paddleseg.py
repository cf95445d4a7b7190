"""`ampbench import paddleseg CONFIG --repo CHECKOUT` (issue 60): PaddleSeg's own tools/train.py as its users run
it: its AMP switches (--precision fp16 --amp_level O1/O2; injected where a train.py lacks them), the batch passed
through (--batch_size {batch_size}), the checkout first on PYTHONPATH (ahead of an installed paddleseg), mIoU from
its own [EVAL] line, and --synthetic-data in its Dataset format.  A stand-in checkout is written here (what the
importer reads: tools/train.py's flags, paddleseg/, a config with a `_base_`, its data); PaddleSeg's real trainer
runs in tests/test_command_acceptance.py when AMPBENCH_PADDLESEG_REPO names a checkout.  The toolkits' shared
needs (importers/toolkit.py) are checked across every toolkit import here too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomllib
import yaml
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import load_suite
from ampbench.importers.paddleseg_command import resolve

cli = CliRunner()

TRAIN_PY = '''# PaddleSeg's tools/train.py, its flags only (not run by these tests)
parser.add_argument("--config")
parser.add_argument("--batch_size", type=int)
{precision}{level}'''
BASE = {"batch_size": 4, "iters": 1000,
        "train_dataset": {"type": "Dataset", "dataset_root": "data/seg", "train_path": "data/seg/train.txt",
                          "num_classes": 2, "mode": "train",
                          "transforms": [{"type": "Resize", "target_size": [256, 256]}, {"type": "Normalize"}]},
        "val_dataset": {"type": "Dataset", "dataset_root": "data/seg", "val_path": "data/seg/val.txt",
                        "num_classes": 2, "mode": "val", "transforms": [{"type": "Normalize"}]},
        "optimizer": {"type": "SGD", "momentum": 0.9}, "loss": {"types": [{"type": "CrossEntropyLoss"}], "coef": [1]}}
MODEL = {"_base_": "../_base_/seg.yml", "batch_size": 2,
         "model": {"type": "BiSeNetV2", "num_classes": 2,
                   "backbone": {"type": "STDC1", "pretrained": "https://example.invalid/stdc1.tar.gz"}}}


def seg_checkout(root: Path, precision: bool = True, level: bool = True) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "train.py").write_text(TRAIN_PY.format(
        precision='parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])\n' if precision else "",
        level='parser.add_argument("--amp_level", default="O1", choices=["O1", "O2"])\n' if level else ""))
    (root / "paddleseg").mkdir()
    (root / "configs" / "_base_").mkdir(parents=True)
    (root / "configs" / "bisenet").mkdir()
    (root / "configs" / "_base_" / "seg.yml").write_text(yaml.safe_dump(BASE))
    (root / "configs" / "bisenet" / "bisenet.yml").write_text(yaml.safe_dump(MODEL))
    (root / "data" / "seg").mkdir(parents=True)
    for name in ("train.txt", "val.txt"):
        (root / "data" / "seg" / name).write_text("a.png a_label.png\n")
    return root


CONFIG = "configs/bisenet/bisenet.yml"


def run(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "250"})


def imported(tmp_path: Path, *more: str, repo: Path | None = None) -> dict:
    repo = repo or seg_checkout(tmp_path / "seg")
    out = tmp_path / "seg.toml"
    r = run("import", "paddleseg", CONFIG, "--repo", str(repo), "-o", str(out), *more)
    assert r.exit_code == 0, r.output
    for profile in ("default", "cpu"):
        load_suite(out, profile)   # every check `ampbench run` makes
    return tomllib.loads(out.read_text())


def test_its_own_trainer_with_its_own_amp_switches_the_batch_and_the_checkout_first(tmp_path):
    s = imported(tmp_path)
    repo = str((tmp_path / "seg").resolve())
    w = s["workload"]
    cmd = w["command"]
    assert cmd[1:5] == ["tools/train.py", "--config", str(Path(repo) / CONFIG), "--device"] and cmd[5] == "gpu"
    pairs = dict(zip(cmd[2::2], cmd[3::2], strict=False))
    assert cmd[cmd.index("--batch_size") + 1] == "{batch_size}" and cmd[cmd.index("--iters") + 1] == "{steps}"
    assert "--do_eval" in cmd and cmd[cmd.index("--save_interval") + 1] == "{steps}" and pairs
    assert w["cwd"] == repo and w["env"] == {"PYTHONPATH": repo} and w["metric"] == {"preset": "paddleseg"}
    assert s["suite"]["metric"] == "mIoU" and s["train"]["batch_size"] == 2     # the model config's, over its _base_
    modes = {m["name"]: m for m in s["modes"]}
    assert modes["fp32"]["args"] == ["--precision", "fp32"]
    assert modes["amp-o1-fp16"]["args"] == ["--precision", "fp16", "--amp_level", "O1"]
    assert modes["amp-o2-fp16"]["args"] == ["--precision", "fp16", "--amp_level", "O2"]
    assert all("amp" not in m for m in modes.values())
    assert s["profiles"]["cpu"]["workload"]["command"][5] == "cpu"
    notes = " ".join(s["suite"]["notes"])
    assert "PYTHONPATH" in notes and "model.backbone.pretrained downloaded by PaddleSeg at start-up" in notes


@pytest.mark.parametrize(("precision", "level", "injected"), [(False, False, {"amp-o1-fp16", "amp-o2-fp16"}),
                                                              (True, False, {"amp-o2-fp16"})])
def test_a_train_py_without_its_amp_switches_gets_them_injected(tmp_path, precision, level, injected):
    repo = seg_checkout(tmp_path / "seg", precision=precision, level=level)
    s = imported(tmp_path, repo=repo)
    modes = {m["name"]: m for m in s["modes"]}
    assert {n for n, m in modes.items() if m.get("amp") == "inject"} == injected
    for name in injected:
        assert not modes[name].get("args")     # no --precision fp16 beside ampbench's own AMP
    if precision:
        assert modes["amp-o1-fp16"]["args"] == ["--precision", "fp16"]


def test_what_its_trainer_reads_is_checked_in_one_line(tmp_path):
    repo = seg_checkout(tmp_path / "seg")
    shutil.rmtree(repo / "data")
    r = run("import", "paddleseg", CONFIG, "--repo", str(repo))
    assert r.exit_code == 2 and "train_dataset.dataset_root: data/seg: no such folder" in r.output, r.output
    assert "--synthetic-data" in r.output and "Traceback" not in r.output
    r = run("import", "paddleseg", CONFIG, "--repo", str(tmp_path))
    assert r.exit_code == 2 and "not a PaddleSeg checkout: tools/train.py and paddleseg/ not found" in r.output
    (repo / "configs" / "_base_" / "seg.yml").write_text(yaml.safe_dump({"_base_": "../bisenet/bisenet.yml"}))
    r = run("import", "paddleseg", CONFIG, "--repo", str(repo))
    assert r.exit_code == 2 and "_base_" in r.output and "cycle" in r.output


def test_no_pretrained_sets_its_weights_none_through_its_opts(tmp_path):
    s = imported(tmp_path, "--no-pretrained")
    cmd = s["workload"]["command"]
    assert cmd[cmd.index("--opts") + 1:] == ["model.backbone.pretrained=None"]
    assert cmd.index("--opts") > cmd.index("--log_iters")   # its nargs list last: the modes' flags end it


def test_synthetic_data_is_its_dataset_format_over_the_users_config(tmp_path):
    repo = seg_checkout(tmp_path / "seg")
    shutil.rmtree(repo / "data")        # the config's own data is not needed
    s = imported(tmp_path, "--synthetic-data", "--no-pretrained", repo=repo)
    wrapper = Path(s["workload"]["command"][3])
    assert wrapper.parent == tmp_path / "seg-data" and wrapper.is_file()
    cfg = resolve(wrapper, str(wrapper))   # as PaddleSeg merges it: the user's config under ours
    assert cfg["model"]["type"] == "BiSeNetV2" and cfg["model"]["num_classes"] == 2
    assert cfg["optimizer"] == BASE["optimizer"]
    for split, mode in (("train_dataset", "train"), ("val_dataset", "val")):
        ds = cfg[split]
        assert ds["type"] == "Dataset" and ds["mode"] == mode and ds["transforms"] == BASE[split]["transforms"]
        root = Path(ds["dataset_root"])
        lines = Path(ds[f"{mode}_path"]).read_text().splitlines()
        assert lines and all(len(x.split(" ")) == 2 for x in lines)
        import numpy as np
        from PIL import Image

        for line in lines:
            img, lab = (root / p for p in line.split(" "))
            assert Image.open(img).mode == "RGB" and Image.open(lab).mode == "L"
            assert set(np.unique(np.asarray(Image.open(lab)))) <= {0, 1}
    assert "data: --synthetic-data" in " ".join(s["suite"]["notes"])


@pytest.mark.parametrize("toolkit", ["paddleocr", "paddleclas", "paddleseg", "paddlerec"])
def test_every_toolkit_import_puts_its_checkout_first_and_passes_the_batch(tmp_path, toolkit):
    """The importers' shared needs (importers/toolkit.py): the checkout ahead of an installed copy on PYTHONPATH
    (the PyPI paddleseg 2.8.0 `setup.sh --test` installs shadowed a checkout), and `{batch_size}` in the command."""
    from tests.test_command_inject import CLS_CONFIG, REC_CHECKOUTS, _clas_checkout, _rec_copy

    fix = Path(__file__).parent / "fixtures"
    if toolkit == "paddleocr":
        repo, config = fix / "paddleocr_checkout", fix / "paddleocr" / "det_mv3_db.yml"
    elif toolkit == "paddleclas":
        repo, config = _clas_checkout(tmp_path / "clas"), CLS_CONFIG
    elif toolkit == "paddleseg":
        repo, config = seg_checkout(tmp_path / "seg"), Path(CONFIG)
    else:
        repo, config = _rec_copy(REC_CHECKOUTS[0].values[0], tmp_path / "rec"), Path("models/rank/deepfm/config.yaml")
    out = tmp_path / "s.toml"
    more = ["--no-pretrained"] if toolkit in ("paddleocr", "paddleclas") else []
    r = run("import", toolkit, str(config), "--repo", str(repo), "-o", str(out), *more)
    assert r.exit_code == 0, r.output
    w = tomllib.loads(out.read_text())["workload"]
    assert w["env"]["PYTHONPATH"] == str(repo.resolve())
    assert any("{batch_size}" in a for a in w["command"])
    assert "decided: PYTHONPATH: " in r.output
