"""`ampbench import paddleocr CONFIG --repo CHECKOUT`: a command suite that runs PaddleOCR's own
`tools/train.py -c CONFIG` per mode and seed, so every architecture PaddleOCR has (PP-OCRv3's RSEFPN,
PP-OCRv4's PPLCNetV3, pretrained weights, their augmentations and data) is what is measured.

PaddleOCR's `-o` takes one list of KEY=VALUE (argparse nargs="+": a second `-o` would replace the
first), so the command ends with `-o` and the common overrides, and each mode's `args` continue that
list: fp32 `Global.use_amp=False`; an AMP mode `Global.use_amp=True Global.amp_level=.. amp_dtype=..
scale_loss=.. use_dynamic_loss_scaling=..` (the AMP modes are found as the translation import finds
them: Global's keys, the older top-level `AMP:` section, else O1 and O2 in the config's amp_dtype).

Steps, evaluation and epochs always agree. PaddleOCR counts epochs, not steps: the hook ends the
program after `train.steps` optimizer steps; `Global.epoch_num={epochs}` keeps the config's epoch
count unless it holds fewer steps (epochs x label lines / batch, `[workload.program]`); and
`Global.eval_batch_step=[0,{eval_step}]` makes PaddleOCR's own evaluation (the `cur metric, ...
hmean: ..` line) run after step train.steps - 1, so `--set train.steps=N` moves all three. What the
program will read (label files, data dirs, pretrained weights, relative to the checkout) is checked
here, or `--synthetic-data` writes a small set in PaddleOCR's det label format beside the suite.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ampbench.config.suite import MAX_SEED
from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.importers.base import Imported, UnsupportedConfig, braced, items, text
from ampbench.importers.paddleocr import MIN_BASELINE_HMEAN, _amp_modes, _Reader, load_config
from ampbench.importers.toolkit import Toolkit

OCR = Toolkit("PaddleOCR", "tools/train.py", "ppocr", "paddleocr", "`cur metric, ...` evaluation line",
              "-o Train.loader.batch_size_per_card={batch_size}", package_required=False)

DEFAULT_STEPS = 300   # per trial on a GPU (nightly-sized); the cpu profile proves the pipeline only
CPU_STEPS, CPU_WARMUP = 12, 2   # 10 measured steps: the speed rule's minimum (config.suite.MIN_MEASURED_STEPS)
SYNTHETIC_TRAIN, SYNTHETIC_EVAL = 16, 4   # images of --synthetic-data (the earlier acceptance's 16)
MAX_LABEL_BYTES = 2**30


def _mode_args(m: dict[str, Any]) -> list[str]:
    sc = m.get("scaler", {})
    args = ["Global.use_amp=True", f"Global.amp_level={m['level']}", f"Global.amp_dtype={m['dtype']}",
            f"Global.scale_loss={float(sc.get('init_loss_scaling', 1.0))}",
            f"Global.use_dynamic_loss_scaling={bool(sc.get('use_dynamic_loss_scaling', False))}"]
    for src, dst in (("custom_black_list", "amp_custom_black_list"), ("custom_white_list", "amp_custom_white_list")):
        if m.get(src):
            args.append(f"Global.{dst}=[{','.join(m[src])}]")
    return [braced(a) for a in args]


def _command(python: str, config: Path, extra: list[str]) -> list[str]:
    """The argv of a trial (placeholders ampbench fills), every user text in it braced (taken literally)."""
    return [braced(python), "tools/train.py", "-c", braced(config), "-o", "Global.seed={seed}",
            "Global.save_model_dir={out}", "Train.loader.batch_size_per_card={batch_size}",
            "Global.eval_batch_step=[0,{eval_step}]", "Global.epoch_num={epochs}", *(braced(x) for x in extra)]


def _dataset(cfg: dict[str, Any], split: str) -> dict[str, Any]:
    ds = ((cfg.get(split) or {}).get("dataset") or {}) if isinstance(cfg.get(split), dict) else {}
    return ds if isinstance(ds, dict) else {}


def _lines(path: Path) -> int:
    """Lines of a label file as PaddleOCR's SimpleDataSet reads them (readlines), counted in chunks."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        read = 0
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
            last, read = chunk[-1:], read + len(chunk)
            if read > MAX_LABEL_BYTES:
                break
    return n + (last != b"\n")


def _samples(cfg: dict[str, Any], split: str, checkout: Path, file: str) -> int:
    """The split's samples per epoch (its label files' lines x ratio_list); a label file or data dir
    missing from the checkout is one line naming it, before any trial."""
    ds = _dataset(cfg, split)
    key = f"{split}.dataset"
    files = [text(file, f"{key}.label_file_list", x, path=True) for x in items(file, f"{key}.label_file_list",
                                                                            ds.get("label_file_list"))]
    raw = ds.get("ratio_list", 1.0)
    try:
        ratios = [float(raw)] * len(files) if isinstance(raw, (int, float)) else [float(x) for x in items(file, key, raw)]
    except (TypeError, ValueError):
        raise ConfigError(file, f"{key}.ratio_list", f"{raw!r}: expected a number or a list of numbers") from None
    total = 0
    for i, name in enumerate(files):
        path = checkout / name
        if not path.is_file():
            raise ConfigError(file, f"{key}.label_file_list", f"{name}: no such file in {checkout} (PaddleOCR "
                              "reads it relative to the checkout): put the data there, or import with --synthetic-data")
        total += round(_lines(path) * (ratios[i] if i < len(ratios) else 1.0))
    data_dir = ds.get("data_dir")
    if data_dir is not None and not (checkout / text(file, f"{key}.data_dir", data_dir, path=True)).is_dir():
        raise ConfigError(file, f"{key}.data_dir", f"{data_dir}: no such folder in {checkout} (PaddleOCR reads it "
                          "relative to the checkout): put the data there, or import with --synthetic-data")
    return total


def _weights(cfg: dict[str, Any], checkout: Path, file: str) -> None:
    """Global.pretrained_model / checkpoints: PaddleOCR asserts `<path>.pdparams` exists
    (ppocr/utils/save_load.py), relative to the checkout; a link is downloaded by PaddleOCR itself."""
    g = cfg.get("Global") or {}
    for key in ("pretrained_model", "checkpoints"):
        raw = g.get(key)
        if not raw:
            continue
        name = text(file, f"Global.{key}", raw, path=True)
        if name.startswith(("http://", "https://")):
            continue   # ppocr/utils/network.py maybe_download_params fetches a link at start-up
        stem = name[: -len(".pdparams")] if name.endswith(".pdparams") else name.rstrip("/\\")
        if not (checkout / f"{stem}.pdparams").is_file():
            raise ConfigError(file, f"Global.{key}", f"{stem}.pdparams: no such file in {checkout}: download it (see "
                              "PaddleOCR's training doc) or import with --no-pretrained (random initialisation)")


def _synthetic(cfg: dict[str, Any], root: Path, file: str) -> tuple[list[str], int]:
    """A small scene-text set in PaddleOCR's det label format (the built-in DBNet's generator), and
    the -o overrides that point the config's Train and Eval datasets at it."""
    from ampbench.workloads.dbnet.data import SceneTextSpec, ensure_dataset

    kind = (cfg.get("Architecture") or {}).get("model_type")
    if kind != "det":
        raise ConfigError(file, "Architecture.model_type", f"{kind!r}: --synthetic-data writes text detection "
                          "data only (model_type det); point the config's label files at your data instead")
    args = []
    for split, n, seed in (("Train", SYNTHETIC_TRAIN, 0), ("Eval", SYNTHETIC_EVAL, 1)):
        label = ensure_dataset(SceneTextSpec(images=n, seed=seed), root)
        args += [f"{split}.dataset.data_dir={json.dumps(str(label.parent))}",
                 f"{split}.dataset.label_file_list={json.dumps([str(label)])}", f"{split}.dataset.ratio_list=[1.0]"]
    return args, SYNTHETIC_TRAIN


def _check_checkout(repo: Path, cfg: dict[str, Any], file: str) -> None:
    train = OCR.checkout(repo) / OCR.script
    text = train.read_text(encoding="utf-8", errors="replace")
    if isinstance(cfg.get("AMP"), dict) and ('"AMP"' in text or "'AMP'" in text):
        raise UnsupportedConfig(file, "AMP", f"{train} turns AMP on whenever the config has an AMP section, so no "
                                "fp32 trial is possible: remove the section and import again (its settings then "
                                "come from the modes' -o Global.* overrides)")


def import_paddleocr_command(path: str | Path, repo: str | Path, python: str | None = None,
                             synthetic_root: Path | None = None, pretrained: bool = True) -> Imported:
    """A command suite running the checkout's tools/train.py on the config (see the module docstring);
    `synthetic_root`: write --synthetic-data there; `pretrained=False`: no Global.pretrained_model."""
    file, checkout = str(path), Path(repo).resolve()
    cfg = load_config(path)
    _check_checkout(checkout, cfg, file)
    r = _Reader(cfg, file)
    amps, amp_from, _ = _amp_modes(r)
    r.out.not_honoured.clear()  # their own train.py reads every key: nothing is translated away
    metric = text(file, "Metric.main_indicator", r.section("Metric").get("main_indicator", "hmean"))
    loader = r.sub("Train.loader", r.section("Train").get("loader"))
    batch = r.num("Train.loader.batch_size_per_card", loader.get("batch_size_per_card", 8), int, minimum=1)
    seed = r.section("Global").get("seed")
    seed = 0 if seed is None else r.num("Global.seed", seed, int, minimum=0, maximum=MAX_SEED)
    g = r.section("Global")
    epochs = r.num("Global.epoch_num", g.get("epoch_num", 1), int, minimum=1, maximum=10**6)
    extra = [] if pretrained else ["Global.pretrained_model=", "Global.checkpoints="]
    if pretrained:
        _weights(cfg, checkout, file)
    if synthetic_root is not None:
        data_args, samples = _synthetic(cfg, synthetic_root, file)
        extra += data_args
    else:
        samples = _samples(cfg, "Train", checkout, file)
        if _samples(cfg, "Eval", checkout, file) == 0:
            raise ConfigError(file, "Eval.dataset.label_file_list", "no evaluation images: PaddleOCR then never "
                              f"evaluates and no {metric} can be read")
    if samples == 0:
        raise ConfigError(file, "Train.dataset.label_file_list", "no training images in the label files")
    py = python or sys.executable
    config = Path(path).resolve()
    modes = [{"name": "fp32", "args": ["Global.use_amp=False"]},
             *({k: v for k, v in m.items() if k not in ("flags", "master_weight")} | {"args": _mode_args(m)}
               for m in amps)]
    name = slug(config.stem, fallback="paddleocr")
    program = {"epochs": epochs, "samples": samples, "drop_last": bool(loader.get("drop_last", False))}
    r.out.suite = {
        "suite": {"name": name, "workload": "command", "metric": metric,
                  "seeds": [seed],
                  "description": f"PaddleOCR's tools/train.py on {config.name} ({checkout})"},
        "workload": OCR.workload(_command(py, config, extra), checkout, stop_after_steps=True, program=program),
        "train": {"batch_size": batch, "steps": DEFAULT_STEPS, "warmup_steps": 5, "timeout_s": 7200},
        "modes": modes,
        "thresholds": {"metric_abs_tol": 0.02, "min_baseline_metric": MIN_BASELINE_HMEAN},
        "profiles": {"cpu": {
            "workload": {"command": _command(py, config, [*extra, "Global.use_gpu=False"])},
            "train": {"batch_size": min(batch, 2), "steps": CPU_STEPS, "warmup_steps": CPU_WARMUP, "timeout_s": 3600},
            "thresholds": {"min_baseline_metric": 0.0}}},
    }
    for line in OCR.decisions(py, config, checkout, metric):
        r.out.decide(line)
    r.out.decide(f"modes: fp32, {', '.join(m['name'] for m in amps)} (AMP from {amp_from}), each as -o overrides")
    r.out.decide(f"steps: ampbench ends the program after train.steps = {DEFAULT_STEPS} optimizer steps (cpu "
                 f"profile {CPU_STEPS}, {CPU_STEPS - CPU_WARMUP} measured); PaddleOCR evaluates after step "
                 "train.steps - 1 (Global.eval_batch_step=[0,{eval_step}]) and runs Global.epoch_num={epochs}: "
                 f"the config's {epochs}, or more when {epochs} x {samples} samples / batch hold fewer steps; "
                 "--set train.steps=N moves all three")
    if synthetic_root is not None:
        r.out.decide(f"data: --synthetic-data: {SYNTHETIC_TRAIN} training and {SYNTHETIC_EVAL} evaluation images "
                     f"of synthetic scene text in PaddleOCR's det label format, under {synthetic_root}")
    if not pretrained:
        r.out.decide("weights: --no-pretrained: Global.pretrained_model and checkpoints are emptied (random "
                     "initialisation)")
    r.out.decide(f"baseline: min_baseline_metric {MIN_BASELINE_HMEAN} ({metric}; 0 in the cpu profile, whose few "
                 "steps prove the pipeline, not quality)")
    r.out.finish()
    return r.out
