"""`ampbench import paddleclas|paddlerec --synthetic-data` (issue 44): a small data set in the toolkit's own
format, written by ampbench beside the suite file, that the toolkit's own readers take.

The PaddleRec half reads the written samples through the checkout's own reader (criteo_reader.py of the
stand-in here, or of PaddleRec itself when AMPBENCH_PADDLEREC_REPO names a checkout); the PaddleClas half
decodes the images as its DecodeImage does (cv2.imdecode) and checks its ImageNet list format. The whole
run on the real trainers is in docs/command.md ("Acceptance on the toolkits' own trainers").
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from ampbench.workloads.suites import load_suite
from tests.test_command_inject import CLS_CONFIG, REC_CHECKOUTS, _clas_checkout, _rec_copy, run


def _o_values(cmd: list[str]) -> dict[str, str]:
    """PaddleClas's repeated `-o K=V` / PaddleRec's one `-o K=V ...` list, as a dict."""
    return dict(a.split("=", 1) for a in cmd if "=" in a and not a.startswith("-"))


def test_paddleclas_synthetic_data_is_its_imagenet_list_format_and_replaces_the_configs_data(tmp_path):
    cv2 = pytest.importorskip("cv2", reason="PaddleClas's DecodeImage is cv2.imdecode (opencv: the ocr extra)")
    repo = _clas_checkout(tmp_path / "clas")
    shutil.rmtree(repo / "dataset")     # the config's own data is absent: only --synthetic-data can run it
    out = tmp_path / "suites" / "r50.toml"
    out.parent.mkdir()
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo), "--no-pretrained", "--synthetic-data",
            "-o", str(out))
    assert r.exit_code == 0, r.output
    s = tomllib.loads(out.read_text())
    for cmd in (s["workload"]["command"], s["profiles"]["cpu"]["workload"]["command"]):
        o = _o_values(cmd)
        for split, listed, n in (("Train", "train_list.txt", 16), ("Eval", "val_list.txt", 8)):
            root = Path(o[f"DataLoader.{split}.dataset.image_root"])
            labels = Path(o[f"DataLoader.{split}.dataset.cls_label_path"])
            assert root.is_absolute() and root.parent == out.parent / "r50-data" and labels == root / listed
            lines = labels.read_text().splitlines()
            assert len(lines) == n
            for line in lines:   # ImageNetDataset: `path label`, the path joined to image_root
                path, label = line.split(" ")
                img = cv2.imdecode(np.frombuffer((root / path).read_bytes(), dtype="uint8"), 1)
                assert img.shape == (64, 64, 3) and 0 <= int(label) < 4
    assert {int(ln.split()[1]) for ln in (root / "val_list.txt").read_text().splitlines()} == {0, 1, 2, 3}
    for profile in ("default", "cpu"):   # every check `ampbench run` makes before a trial passes
        load_suite(out, profile)
    first = (out.parent / "r50-data" / "paddleclas-16-8-c4-64px" / "train" / "0000.jpg").read_bytes()
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo), "--no-pretrained", "--synthetic-data",
            "-o", str(out.parent / "again.toml"))
    assert r.exit_code == 0 and (out.parent / "again-data" / "paddleclas-16-8-c4-64px" / "train" /
                                 "0000.jpg").read_bytes() == first   # generated, deterministic


def test_synthetic_data_needs_a_suite_file_and_refuses_a_linked_data_folder(tmp_path):
    import yaml

    repo = _clas_checkout(tmp_path / "clas")
    two = tmp_path / "two.yaml"   # labels 0-3 would be out of a 2-class model's range
    cfg = yaml.safe_load(CLS_CONFIG.read_text())
    cfg["Arch"]["class_num"] = 2
    two.write_text(yaml.safe_dump(cfg))
    r = run("import", "paddleclas", str(two), "--repo", str(repo), "--synthetic-data", "-o", str(tmp_path / "t.toml"))
    assert r.exit_code == 2 and "Arch.class_num" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo), "--synthetic-data")
    assert r.exit_code == 2 and "give -o SUITE.toml" in r.output and len(r.output.strip().splitlines()) == 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "s-data").symlink_to(elsewhere)
    r = run("import", "paddleclas", str(CLS_CONFIG), "--repo", str(repo), "--synthetic-data", "-o",
            str(tmp_path / "s.toml"))
    assert r.exit_code == 2 and "s-data" in r.output and "Traceback" not in r.output, r.output
    assert not any(elsewhere.iterdir()) and not (tmp_path / "s.toml").exists()


def _reader(checkout: Path):
    spec = importlib.util.spec_from_file_location("criteo_reader", checkout / "models/rank/deepfm/criteo_reader.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Config(dict):
    """PaddleRec's config object: dotted keys through .get (tools/utils/utils_single.load_yaml)."""


@pytest.mark.parametrize("checkout", REC_CHECKOUTS)
def test_paddlerec_synthetic_data_is_read_by_the_checkouts_own_criteo_reader(tmp_path, checkout):
    import yaml

    rec = _rec_copy(checkout, tmp_path / "rec")
    shutil.rmtree(rec / "models" / "rank" / "deepfm" / "data")
    out = tmp_path / "deepfm.toml"
    r = run("import", "paddlerec", "models/rank/deepfm/config.yaml", "--repo", str(rec), "--synthetic-data",
            "-o", str(out))
    assert r.exit_code == 0, r.output
    s = tomllib.loads(out.read_text())
    data = Path(_o_values(s["profiles"]["cpu"]["workload"]["command"])["runner.train_data_dir"])
    assert data.is_absolute() and data.is_dir() and s["workload"]["program"]["samples"] == 80
    cfg = yaml.safe_load((rec / "models/rank/deepfm/config.yaml").read_text())
    flat = _Config({f"{sec}.{k}": v for sec, body in cfg.items() if isinstance(body, dict) for k, v in body.items()})
    rows = list(iter(_reader(rec).RecDataset([str(p) for p in sorted(data.iterdir())], flat)))
    assert len(rows) == 80
    labels = np.array([int(np.asarray(row[0]).ravel()[0]) for row in rows])
    assert 0.2 < labels.mean() < 0.8     # both classes: an AUC can be computed
    sparse_max = max(int(np.max(np.asarray(x))) for row in rows for x in row[1:-1] if np.asarray(x).dtype.kind == "i")
    assert sparse_max < cfg["hyper_parameters"]["sparse_feature_number"]
    assert all(np.asarray(row[-1]).shape == (13,) for row in rows)   # the dense block
    for profile in ("default", "cpu"):
        load_suite(out, profile)


def test_paddlerec_synthetic_data_is_refused_for_a_reader_of_another_format(tmp_path):
    rec = _rec_copy(REC_CHECKOUTS[0].values[0], tmp_path / "rec")
    cfg = rec / "models" / "rank" / "deepfm" / "config.yaml"
    cfg.write_text(cfg.read_text().replace('train_reader_path: "criteo_reader"', 'train_reader_path: "my_reader"'))
    (cfg.parent / "my_reader.py").write_text("")
    r = run("import", "paddlerec", str(cfg), "--repo", str(rec), "--synthetic-data", "-o", str(tmp_path / "x.toml"))
    assert r.exit_code == 2 and "runner.train_reader_path" in r.output and "Criteo format" in r.output, r.output


REAL_CLAS = os.environ.get("AMPBENCH_PADDLECLAS_REPO")


@pytest.mark.slow
@pytest.mark.skipif(not REAL_CLAS, reason="AMPBENCH_PADDLECLAS_REPO does not name a PaddleClas checkout to run its "
                    "own trainer (AMPBENCH_PADDLECLAS_PYTHON: an interpreter with its requirements)")
def test_paddleclas_own_trainer_from_import_to_verdict_on_synthetic_data(tmp_path):
    """PaddleClas's unmodified tools/train.py on ResNet18.yaml and --synthetic-data, fp32 and O1: every
    trial ok, its AMP switched on its way (the log's `use_amp : True`), top1 its own last [Eval] line, the
    step times those of its own batch_cost, exit 3 on CPU."""
    out = tmp_path / "r18.toml"
    r = run("import", "paddleclas", "ppcls/configs/ImageNet/ResNet/ResNet18.yaml", "--repo", REAL_CLAS,
            "--python", os.environ.get("AMPBENCH_PADDLECLAS_PYTHON", sys.executable), "--no-pretrained",
            "--synthetic-data", "-o", str(out))
    assert r.exit_code == 0, r.output
    runs = tmp_path / "runs"
    r = run("run", str(out), "--profile", "cpu", "--mode", "amp-o1-fp16", "--out", str(runs))
    assert r.exit_code == 3, r.output
    folder = next(runs.glob("*/*"))
    for key, amp in (("fp32__seed0", "False"), ("amp-o1-fp16__seed0", "True")):
        t = json.loads((folder / "trials" / f"{key}.json").read_text())
        assert t["status"] == "ok", t["error"]
        log = (folder / "logs" / f"{key}.log").read_text()
        assert re.findall(r"use_amp : (\w+)", log) == [amp]
        top1 = re.findall(r"\[Eval\]\[Epoch \d+\]\[Avg\].*?top1: ([0-9.]+)", log)
        assert len(t["steps"]) == 12 and t["metrics"]["top1"] == pytest.approx(float(top1[-1]))
        # its [Train] line at iter 10: batch_cost is the mean of iterations 5..10 (ppcls/engine/train/train.py),
        # ampbench's steps 6..11 (step k ends in iteration k-1's optimizer step)
        cost = float(re.findall(r"\[Iter: 10/12\].*?batch_cost: ([0-9.]+)s", log)[0])
        steps = {s["step"]: s["time_s"] for s in t["steps"]}
        assert 0.9 <= cost / (sum(steps[k] for k in range(6, 12)) / 6) <= 1.1
        check = t["workload_info"]["throughput_check"]   # the cross-check compares those same steps
        assert check["window"] == [6, 11] and 0.9 <= check["ratio"] <= 1.1, check
    amp = json.loads((folder / "trials" / "amp-o1-fp16__seed0.json").read_text())["amp"]
    assert amp["requested"] and not amp["active"] and amp["injected"] == {}


def test_the_programs_own_rate_is_its_samples_over_its_time_not_the_median_of_its_lines():
    """Three logging intervals of the same samples at 10, 10 and 100 samples/s took 0.1 + 0.1 + 0.01 s per
    sample-unit: the program's rate over them is 3 / 0.21 = 14.3, which ampbench's mean rate is compared with
    (the median, 10 here, was 0.83-0.94 of ampbench on PaddleRec's real DeepFM runs where it should be ~0.95)."""
    from ampbench.trial.command_record import throughput_check
    from ampbench.workloads.command.presets import LogScan

    scan = LogScan(preset="paddlerec")
    for ips in (1.0, 10.0, 10.0, 100.0):   # the first line (start-up) is left out
        scan.feed(f"epoch: 0, batch_id: 0, auc:0.5, ips: {ips} ins/s")
    check = throughput_check(14.285714, scan, 0.25)
    assert check["program_samples_per_s"] == pytest.approx(3 / 0.21) and check["ratio"] == pytest.approx(1.0)
    assert check["lines"] == 4 and check["agrees"]


def _clas_line(k: int, cost: float, batch: int = 16) -> str:
    """A PaddleClas train line as ppcls/engine/train/utils.py log_info writes it."""
    return (f"[2024/01/01 10:00:00] ppcls INFO: [Train][Epoch 1/1][Iter: {k}/12]lr(PiecewiseDecay): 0.10000000, "
            f"CELoss: 1.38, loss: 1.38, batch_cost: {cost:.5f}s, reader_cost: 0.00100, ips: {batch / cost:.5f} "
            "samples/s, eta: 0:00:10")


def test_the_paddleclas_cross_check_compares_the_iterations_of_its_line():
    """Issue 62: PaddleClas's ips at iteration k is the batch over the mean batch_cost of iterations 5..k (its
    meters reset at iteration 5), ampbench's steps 6..k+1; the mean over all measured steps (3..12 here, three
    slow ones inside) was compared with it before: ratio 0.53 where the same iterations agree to 1.000."""
    from ampbench.record.models import StepRecord
    from ampbench.trial.command_left_out import cross_check
    from ampbench.trial.command_record import throughput_check, window_steps
    from ampbench.workloads.command.presets import LogScan

    times = {k: 0.1 for k in range(1, 13)} | {3: 0.4, 4: 0.4, 5: 0.4}   # steps 3-5 slow (a loaded machine)
    steps = [StepRecord(step=k, loss=1.0, time_s=t, samples=16, warmup=k <= 2) for k, t in times.items()]
    scan = LogScan("paddleclas")
    scan.feed(_clas_line(0, 0.9))                                          # iteration 0: start-up inside, no window
    scan.feed(_clas_line(10, sum(times[k] for k in range(6, 12)) / 6))     # iterations 5..10 = steps 6..11
    assert scan.windows == [None, (6, 11)]
    mean_rate = sum(s.samples for s in steps if not s.warmup) / sum(s.time_s for s in steps if not s.warmup)
    check = throughput_check(mean_rate, scan, 0.25, steps)
    assert check["window"] == [6, 11] and check["ratio"] == pytest.approx(1.0, abs=1e-4) and check["agrees"]
    assert check["ampbench_samples_per_s"] == pytest.approx(160.0)
    before = throughput_check(mean_rate, scan, 0.25)      # no steps: the mean over the measured steps, as main did
    assert "window" not in before and before["ratio"] == pytest.approx(0.526, abs=1e-3) and not before["agrees"]
    assert [s.step for s in window_steps(steps, check["window"])] == list(range(6, 12))
    slow = throughput_check(mean_rate, scan, 0.25, [s.model_copy(update={"time_s": 2 * s.time_s}) for s in steps])
    said = cross_check(slow, window_steps(steps, slow["window"]), {}, steps)
    assert not slow["agrees"] and "samples over the time of steps 6-11, the iterations of its line" in said["warning"]
    # a missing step of the window, or a later epoch's lines (their first step is not known): not windowed
    assert "window" not in throughput_check(mean_rate, scan, 0.25, [s for s in steps if s.step != 8])
    later = LogScan("paddleclas")
    for line in (_clas_line(10, 0.1), _clas_line(10, 0.1).replace("[Epoch 1/1]", "[Epoch 2/2]")):
        later.feed(line)
    assert later.windows == [(6, 11), None]


CLAS_LOOP = r'''
import argparse, json, time
from pathlib import Path
import paddle
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int)
ap.add_argument("--out")
a = ap.parse_args()
paddle.seed(0)
net = paddle.nn.Linear(8, 4)
opt = paddle.optimizer.SGD(parameters=net.parameters())
x, y = paddle.randn([16, 8]), paddle.randint(0, 4, [16])
cost_sum, cost_n = 0.0, 0
tic = time.time()
for iter_id in range(a.steps):           # the timing of PaddleClas's train_epoch, written here
    if iter_id == 5:
        cost_sum, cost_n = 0.0, 0
    loss = paddle.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    time.sleep(0.12 if 2 <= iter_id <= 4 else 0.03)   # three slow iterations before its meters reset
    opt.step()
    opt.clear_grad()
    cost_sum, cost_n = cost_sum + time.time() - tic, cost_n + 1
    if iter_id % 10 == 0:
        avg = cost_sum / cost_n
        print(f"[Train][Epoch 1/1][Iter: {iter_id}/{a.steps}]lr(Constant): 0.001, loss: {float(loss):.5f}, "
              f"batch_cost: {avg:.5f}s, ips: {16 / avg:.5f} samples/s", flush=True)
    tic = time.time()
print("[Eval][Epoch 1][Avg]CELoss: 1.2, loss: 1.2, top1: 0.25, top5: 1.0", flush=True)
'''


@pytest.mark.slow
def test_a_program_in_paddleclas_loop_is_cross_checked_over_its_lines_iterations(tmp_path):
    """The real path: a program timing its loop as PaddleClas's train_epoch does (meters reset at iteration 5,
    a line every 10), three slow iterations before the reset, under the hook: its iteration-10 line and
    ampbench's steps 6..11 agree; the mean over every measured step would have included the slow ones."""
    prog = tmp_path / "clas_loop.py"
    prog.write_text(CLAS_LOOP)
    suite = tmp_path / "clas.toml"
    suite.write_text(f"""
[suite]
name = "clasloop"
workload = "command"
metric = "top1"
seeds = [0]

[workload]
command = ["{sys.executable}", "{prog}", "--steps", "{{steps}}", "--out", "{{out}}"]
metric = {{ preset = "paddleclas" }}

[train]
batch_size = 16
steps = 12
warmup_steps = 2
timeout_s = 120

[[modes]]
name = "fp32"
""")
    r = run("run", str(suite), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.exit_code == 3, r.output   # fp32 alone compares nothing: INCONCLUSIVE
    t = json.loads(next((tmp_path / "runs").glob("clasloop/*/trials/fp32__seed0.json")).read_text())
    check = t["workload_info"]["throughput_check"]
    assert check["window"] == [6, 11] and abs(check["ratio"] - 1) <= 0.03 and check["lines"] == 2, check
    measured = [s for s in t["steps"] if not s["warmup"]]
    mean = sum(s["samples"] for s in measured) / sum(s["time_s"] for s in measured)
    assert mean / check["program_samples_per_s"] < 0.85, (mean, check)   # what was compared before
    assert t["metrics"]["top1"] == 0.25


def test_the_cross_check_warning_names_which_ampbench_figure_it_compares():
    """The warning compares the measured steps' samples over their time (the program's lines are intervals'
    samples over time) and says so, beside the trial's own samples/s, the median per-step rate the record
    holds; it never calls the compared figure the trial's samples/s or "the mean" of it (issue 60)."""
    from ampbench.record.models import StepRecord
    from ampbench.trial.command_left_out import cross_check

    steps = [StepRecord(step=i, loss=None, time_s=t, samples=8, warmup=i == 1) for i, t in enumerate((1, .1, .1, .1, .5), 1)]
    ours = 32 / 0.8   # 4 measured steps of 8 samples over 0.8 s: 40 samples/s; their median rate is 80
    check = {"ampbench_samples_per_s": ours, "program_samples_per_s": 10.0, "ratio": 4.0, "agrees": False,
             "tolerance": 0.25, "lines": 2}
    warning = cross_check(check, [s for s in steps if not s.warmup], {}, steps)["warning"]
    assert "samples over the time of the measured steps, 40 samples/s" in warning
    assert "the trial's samples/s figure is the median per-step rate, 80" in warning
    assert "mean over the measured steps" not in warning


DOC = Path(__file__).resolve().parents[1] / "docs" / "command.md"


def _doc_commands(after: str) -> list[list[str]]:
    """The `ampbench ...` lines of the sh block that starts with `after` in docs/command.md."""
    import shlex

    text = DOC.read_text()
    block = text[text.index(after):]
    block = block[:block.index("```")].replace("\\\n", " ")
    return [shlex.split(ln, comments=True)[1:] for ln in block.splitlines() if ln.startswith("ampbench ")]


def _doc_toml_after(marker: str) -> dict:
    """The first ```toml block after `marker` in docs/command.md, parsed."""
    text = DOC.read_text()
    block = text[text.index(marker):]
    block = block[block.index("```toml") + 7:]
    return tomllib.loads(block[:block.index("```")])


@pytest.mark.parametrize(("toolkit", "marker"), [("PaddleSeg", "By hand, the same suite:\n\n```toml\n[suite]\n"
                                                               "metric = \"mIoU\""),
                                                 ("PaddleClas", "By hand, the same suite:\n\n```toml\n[suite]\n"
                                                                "metric = \"top1\"")])
def test_the_docs_toolkit_examples_pass_the_batch_and_put_the_checkout_first(toolkit, marker):
    """docs/command.md's hand-written toolkit suites pass `{batch_size}` to the program (the PaddleSeg one did not:
    its batch had to be kept in step with the config by hand) and put the checkout first on PYTHONPATH (an
    installed copy shadowed it); the docs say the latter for every toolkit (issue 60)."""
    w = _doc_toml_after(marker)["workload"]
    assert any("{batch_size}" in a for a in w["command"]), w["command"]
    assert w["env"]["PYTHONPATH"] == w["cwd"]
    text = " ".join(DOC.read_text().split())
    said = text[text.index("A toolkit checkout goes first on `PYTHONPATH`"):][:700]
    for name in ("PaddleOCR", "PaddleClas", "PaddleSeg", "PaddleRec", "PaddleNLP"):
        assert name in said, name


@pytest.mark.parametrize("toolkit", ["PaddleRec", "PaddleClas", "PaddleSeg"])
def test_the_docs_walkthroughs_import_as_written(tmp_path, monkeypatch, toolkit):
    """The walkthroughs' own lines (docs/command.md), run in a checkout as they say (`--repo .`): the
    import writes a suite every check of `ampbench run` passes, and the run line is the one the trainer
    tests run (--profile cpu --mode amp-o1-fp16)."""
    cmds = _doc_commands(f"git clone https://github.com/PaddlePaddle/{toolkit}")
    assert [c[0] for c in cmds] == ["import", "run"]
    imp, run_line = cmds
    if toolkit == "PaddleRec":
        repo = _rec_copy(REC_CHECKOUTS[0].values[0], tmp_path / "rec")
    elif toolkit == "PaddleSeg":
        from tests.test_import_paddleseg import CONFIG, seg_checkout

        repo = seg_checkout(tmp_path / "seg")
        (repo / imp[2]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(repo / CONFIG, repo / imp[2])   # the stand-in's config under the walkthrough's name
    else:
        repo = _clas_checkout(tmp_path / "clas")
        target = repo / imp[2]
        target.parent.mkdir(parents=True)
        shutil.copy(CLS_CONFIG, target)    # the stand-in's ResNet50-shaped config under the walkthrough's name
        py = repo / imp[imp.index("--python") + 1]
        py.parent.mkdir(parents=True)
        py.symlink_to(sys.executable)      # the walkthrough's venv
    monkeypatch.chdir(repo)
    r = run(*imp)
    assert r.exit_code == 0, r.output
    suite_file = repo / imp[imp.index("-o") + 1]
    assert run_line[1:] == [suite_file.name, "--profile", "cpu", "--mode", "amp-o1-fp16"]
    modes = {m["name"]: m for m in tomllib.loads(suite_file.read_text())["modes"]}
    assert modes["amp-o1-fp16"].get("amp") == ("inject" if toolkit == "PaddleRec" else None)
    for profile in ("default", "cpu"):
        load_suite(suite_file, profile)
