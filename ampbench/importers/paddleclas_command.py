"""`ampbench import paddleclas CONFIG --repo CHECKOUT`: a command suite that runs PaddleClas's own
`tools/train.py -c CONFIG` per mode and seed (its model, data, augmentations, pretrained weights).

Written from PaddleClas's engine (ppcls/engine/engine.py and train/train.py, read at d178931fc):
- AMP the toolkit's way: its `AMP` section turns AMP on only with `AMP.use_amp=True` (ResNet50.yaml
  ships `use_amp: False`, and `AMP.level` alone trains FP32), so fp32 is `-o AMP.use_amp=False` and each
  AMP mode `-o AMP.use_amp=True -o AMP.level=O1|O2 -o AMP.scale_loss=.. -o AMP.use_dynamic_loss_scaling=..`
  (float16 only: PaddleClas has no AMP dtype); its `-o` is repeated, one KEY=VALUE each.
- The evaluation inside the steps ampbench sees: PaddleClas evaluates only at an epoch's end, so
  `Global.epochs=1 Global.iter_per_epoch={steps}` makes one epoch of exactly train.steps iterations (its
  loader restarts when the data runs out) that ends in the `[Eval]...[Avg]` line the metric comes from
  (`Global.eval_during_train=True Global.eval_interval=1 Global.start_eval_epoch=0`); no stop_after_steps.
- Device (`Global.device`, gpu, cpu in the cpu profile; `Global.use_dali=False` there), pretrained
  weights (`Arch.pretrained: True` downloads at start-up: `--no-pretrained` sets it False; a path, and
  `Global.pretrained_model`, must be `<path>.pdparams` in the checkout) and the data it reads relative
  to the checkout (`DataLoader.Train|Eval.dataset.image_root`, `cls_label_path`) are checked here, or
  `--synthetic-data` writes a small set in its list format (importers/toolkit_data.py) and points both at it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ampbench.config.suite import MAX_SEED
from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.importers.base import Imported, braced, load_yaml, mapping, number, read_input, text
from ampbench.importers.toolkit import Toolkit

CLAS = Toolkit("PaddleClas", "tools/train.py", "ppcls", "paddleclas", "[Eval]...[Avg] line",
               "-o DataLoader.Train.sampler.batch_size={batch_size}")

DEFAULT_STEPS = 300
CPU_STEPS, CPU_WARMUP = 12, 2


def _o(*pairs: str) -> list[str]:
    return [x for p in pairs for x in ("-o", p)]


def _command(py: str, config: Path, device: str, extra: list[str]) -> list[str]:
    return [py, "tools/train.py", "-c", str(config), *_o(
        "Global.epochs=1", "Global.iter_per_epoch={steps}", "Global.eval_during_train=True",
        "Global.eval_interval=1", "Global.start_eval_epoch=0", "DataLoader.Train.sampler.batch_size={batch_size}",
        f"Global.device={device}", "Global.output_dir={out}", "Global.seed={seed}"), *extra]


def _weights(cfg: dict[str, Any], checkout: Path, file: str, pretrained: bool) -> list[str]:
    """Arch.pretrained (True: PaddleClas downloads; a path: `<path>.pdparams`) and Global.pretrained_model."""
    arch = mapping(file, "Arch", cfg.get("Arch"))
    extra = []
    for key, raw in (("Arch.pretrained", arch.get("pretrained")),
                     ("Global.pretrained_model", mapping(file, "Global", cfg.get("Global")).get("pretrained_model"))):
        if not pretrained:
            if raw not in (None, False):
                extra += _o(f"{key}={'False' if key == 'Arch.pretrained' else 'None'}")   # its -o eval()s a value
            continue
        if isinstance(raw, str) and raw and not raw.startswith(("http://", "https://")):
            stem = text(file, key, raw, path=True).removesuffix(".pdparams")
            if not (checkout / f"{stem}.pdparams").is_file():
                raise ConfigError(file, key, f"{stem}.pdparams: no such file in {checkout}: download it, or import "
                                  "with --no-pretrained (random initialisation)")
    return extra


def _data(cfg: dict[str, Any], checkout: Path, file: str) -> None:
    loaders = mapping(file, "DataLoader", cfg.get("DataLoader"))
    for split in ("Train", "Eval"):
        ds = mapping(file, f"DataLoader.{split}.dataset",
                     mapping(file, f"DataLoader.{split}", loaders.get(split)).get("dataset"))
        for key, is_dir in (("image_root", True), ("cls_label_path", False)):
            raw = ds.get(key)
            if raw is None:
                continue
            p = checkout / text(file, f"DataLoader.{split}.dataset.{key}", raw, path=True)
            if not (p.is_dir() if is_dir else p.is_file()):
                raise ConfigError(file, f"DataLoader.{split}.dataset.{key}", f"{raw}: no such "
                                  f"{'folder' if is_dir else 'file'} in {checkout} (PaddleClas reads it relative to "
                                  "the checkout): put the data there or point the key at it")


def _modes(cfg: dict[str, Any], file: str) -> tuple[list[dict[str, Any]], str]:
    amp = mapping(file, "AMP", cfg.get("AMP"))
    scale = number(file, "AMP.scale_loss", amp.get("scale_loss", 128.0), minimum=1.0)
    dynamic = amp.get("use_dynamic_loss_scaling", True)
    if not isinstance(dynamic, bool):
        raise ConfigError(file, "AMP.use_dynamic_loss_scaling", f"{dynamic!r}: expected true or false")
    own = str(amp.get("level", "O1")).upper()
    levels = [own] + [lv for lv in ("O1", "O2") if lv != own] if own in ("O1", "O2") else ["O1", "O2"]
    modes: list[dict[str, Any]] = [{"name": "fp32", "args": _o("AMP.use_amp=False")}]
    for lv in levels:
        modes.append({"name": f"amp-{lv.lower()}-fp16", "level": lv, "dtype": "float16",
                      "scaler": {"init_loss_scaling": scale, "use_dynamic_loss_scaling": dynamic},
                      "args": _o("AMP.use_amp=True", f"AMP.level={lv}", f"AMP.scale_loss={scale}",
                                 f"AMP.use_dynamic_loss_scaling={dynamic}")})
    where = "its AMP section" if amp else "none in the config: PaddleClas's defaults"
    return modes, f"AMP.use_amp=True with level {', '.join(levels)}, scale_loss {scale:g} ({where})"


def _metric(cfg: dict[str, Any], file: str) -> str:
    metric = mapping(file, "Metric", cfg.get("Metric"))
    names = [next(iter(m)) for m in (metric.get("Eval") or []) if isinstance(m, dict) and m]
    return "top1" if not names or "TopkAcc" in names else str(names[0])


def _synthetic(cfg: dict[str, Any], root: Path, file: str) -> list[str]:
    """--synthetic-data: ampbench's small image set in ImageNetDataset's list format, the config's Train
    and Eval datasets pointed at it (absolute paths: PaddleClas joins image_root and each line's path)."""
    from ampbench.importers.toolkit_data import CLAS_CLASSES, write_imagenet_set

    classes = mapping(file, "Arch", cfg.get("Arch")).get("class_num")
    if isinstance(classes, int) and not isinstance(classes, bool) and classes < CLAS_CLASSES:
        raise ConfigError(file, "Arch.class_num", f"{classes}: --synthetic-data labels {CLAS_CLASSES} classes "
                          "(0-3), more than the model's outputs: point the config's data at yours instead")
    images, train, val = write_imagenet_set(root)
    return _o(*(f"DataLoader.{split}.dataset.{key}={braced(value)}" for split, listed in (("Train", train),
                ("Eval", val)) for key, value in (("image_root", images), ("cls_label_path", listed))))


def import_paddleclas_command(path: str | Path, repo: str | Path, python: str | None = None,
                              pretrained: bool = True, synthetic_root: Path | None = None) -> Imported:
    """A command suite running the checkout's tools/train.py on the config (see the module docstring);
    `synthetic_root`: --synthetic-data is written there and read instead of the config's data."""
    checkout = CLAS.checkout(repo)
    config = CLAS.config(path, checkout)   # ppcls/configs/... as PaddleClas's docs name it
    file = str(path)
    cfg = load_yaml(read_input(config, "PaddleClas config"), file)
    if not isinstance(cfg, dict):
        raise ConfigError(file, "", "a PaddleClas config is a YAML mapping (Global, Arch, DataLoader, ...)")
    g = mapping(file, "Global", cfg.get("Global"))
    weights = _weights(cfg, checkout, file, pretrained)
    extra = list(weights)
    if synthetic_root is None:
        _data(cfg, checkout, file)
    else:
        extra += _synthetic(cfg, synthetic_root, file)
    sampler = mapping(file, "DataLoader.Train.sampler", mapping(file, "DataLoader.Train", mapping(
        file, "DataLoader", cfg.get("DataLoader")).get("Train")).get("sampler"))
    batch = number(file, "DataLoader.Train.sampler.batch_size", sampler.get("batch_size", 64), int, minimum=1)
    seed = g.get("seed")
    seed = 0 if seed in (None, False) else number(file, "Global.seed", seed, int, minimum=0, maximum=MAX_SEED)
    modes, amp_from = _modes(cfg, file)
    metric = _metric(cfg, file)
    py = python or sys.executable
    out = Imported(suite={
        "suite": {"name": slug(config.stem, fallback="paddleclas"), "workload": "command", "metric": metric,
                  "seeds": [seed], "description": f"PaddleClas's tools/train.py on {config} ({checkout})"},
        "workload": CLAS.workload(_command(py, config, "gpu", extra), checkout),
        "train": {"batch_size": batch, "steps": DEFAULT_STEPS, "warmup_steps": 5, "timeout_s": 7200},
        "modes": modes,
        "thresholds": {"metric_abs_tol": 0.02},
        "profiles": {"cpu": {
            "workload": {"command": _command(py, config, "cpu", [*extra, *_o("Global.use_dali=False")])},
            "train": {"batch_size": min(batch, 2), "steps": CPU_STEPS, "warmup_steps": CPU_WARMUP,
                      "timeout_s": 3600}}},
    })
    for line in CLAS.decisions(py, config, checkout, metric):
        out.decide(line)
    out.decide(f"modes: fp32 (AMP.use_amp=False) and {amp_from}, each as -o overrides")
    out.decide("steps: Global.epochs=1 Global.iter_per_epoch={steps}: one epoch of train.steps iterations ending in "
               f"PaddleClas's own evaluation ({metric} from its [Eval] line); --set train.steps=N moves both")
    out.decide("device: Global.device=gpu (cpu profile: cpu, Global.use_dali=False)")
    if synthetic_root is not None:
        from ampbench.importers.toolkit_data import CLAS_CLASSES, CLAS_EVAL, CLAS_TRAIN

        out.decide(f"data: --synthetic-data: {CLAS_TRAIN} training and {CLAS_EVAL} evaluation JPEGs of "
                   f"{CLAS_CLASSES} classes in PaddleClas's ImageNet list format, under {synthetic_root}")
    if weights:
        out.decide("weights: --no-pretrained: Arch.pretrained=False / Global.pretrained_model=None (random initialisation)")
    elif mapping(file, "Arch", cfg.get("Arch")).get("pretrained") is True:
        out.decide("weights: Arch.pretrained: True: PaddleClas downloads them at start-up (offline: --no-pretrained)")
    out.finish()
    return out
