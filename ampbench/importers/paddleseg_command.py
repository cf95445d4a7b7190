"""`ampbench import paddleseg CONFIG --repo CHECKOUT`: a command suite that runs PaddleSeg's own
`tools/train.py --config CONFIG` per mode and seed (its model, losses, augmentations, data and evaluation).

Written from PaddleSeg's tools/train.py, paddleseg/core/train.py and paddleseg/cvlibs/config.py (read at d7975e7):
- AMP the toolkit's way: `--precision fp16 --amp_level O1|O2` (its train loop builds `GradScaler(
  init_loss_scaling=1024)`, auto_casts at the level, decorates model and optimizer at O2); fp32 is
  `--precision fp32`.  A checkout whose train.py has no `--precision` (or no `--amp_level`: O1 only) gets those
  modes as `amp = "inject"`: ampbench's start-up hook applies Paddle's AMP itself (docs/command.md).
- Steps and evaluation: `--iters {steps} --save_interval {steps} --do_eval`: train.steps iterations and one
  evaluation (and checkpoint) after the last, whose `[EVAL] #Images: N mIoU: ...` line gives the metric; the
  batch passes through `--batch_size {batch_size}`; `--log_iters 5` gives its `ips` lines for the cross-check.
- The config's `_base_` chain is read as PaddleSeg merges it (each relative to its file's folder) for what
  the import checks: the batch, the datasets (their `dataset_root`, `train_path`, `val_path`, relative to the
  checkout, PaddleSeg's working folder) and pretrained weights (`model.pretrained`, `model.backbone.pretrained`:
  a link is downloaded at start-up, `--no-pretrained` passes `--opts KEY=None`; a path must exist).
- `--synthetic-data`: a small set in PaddleSeg's `Dataset` format (importers/toolkit_data.py) and a config beside
  it that keeps the user's (`_base_`) and points train_dataset / val_dataset at the set (their own transforms
  kept, so the model sees the config's input size) with the model's num_classes set to the set's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.importers.base import Imported, braced, load_yaml, mapping, number, read_input, text
from ampbench.importers.toolkit import Toolkit

SEG = Toolkit("PaddleSeg", "tools/train.py", "paddleseg", "paddleseg", "`[EVAL] #Images: N mIoU: ...` line",
              "--batch_size {batch_size}")
DEFAULT_STEPS = 300
CPU_STEPS, CPU_WARMUP = 12, 2
LOG_ITERS = 5        # its [TRAIN] lines (ips) every 5 iterations: two inside the cpu profile's 10 measured steps
MAX_BASES = 16       # `_base_` files in one chain
SCALE = 1024.0       # paddleseg/core/train.py: paddle.amp.GradScaler(init_loss_scaling=1024)
_WEIGHTS = (("model", "pretrained"), ("model", "backbone", "pretrained"))


def _merge(dic: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """PaddleSeg's merge_config_dicts: `dic` over `base`, tables merged key by key, `_inherited_: False` replaces."""
    if dic.get("_inherited_", True) is False:
        return {k: v for k, v in dic.items() if k != "_inherited_"}
    out = dict(base)
    for k, v in dic.items():
        out[k] = _merge(v, out[k]) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve(path: Path, file: str, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The config with its `_base_` files merged in, as PaddleSeg's parse_from_yaml does (relative to each file's
    folder); a missing, cyclic or too long chain is one line naming the key."""
    if len(seen) >= MAX_BASES or path in seen:
        raise ConfigError(file, "_base_", f"{path}: a `_base_` chain longer than {MAX_BASES} files, or a cycle")
    if not path.is_file():
        raise ConfigError(file, "_base_", f"{path}: no such file")
    cfg = load_yaml(read_input(path, "PaddleSeg config"), file)
    if not isinstance(cfg, dict):
        raise ConfigError(file, "", "a PaddleSeg config is a YAML mapping (batch_size, model, train_dataset, ...)")
    bases = cfg.pop("_base_", None)
    for b in [bases] if isinstance(bases, str) else bases or []:
        cfg = _merge(cfg, resolve(path.parent / text(file, "_base_", b, path=True), file, (*seen, path)))
    return cfg


def _own_amp(checkout: Path) -> tuple[bool, bool]:
    """Whether the checkout's train.py takes `--precision` and `--amp_level` (PaddleSeg >= 2.1 takes both)."""
    src = (checkout / SEG.script).read_text(encoding="utf-8", errors="replace")
    return "--precision" in src, "--amp_level" in src


def _modes(precision: bool, level: bool) -> tuple[list[dict[str, Any]], str]:
    """fp32 and fp16 O1/O2, by PaddleSeg's own switches where its train.py has them, else injected."""
    modes: list[dict[str, Any]] = [{"name": "fp32", "args": ["--precision", "fp32"] if precision else []}]
    own = []
    for lv in ("O1", "O2"):
        mode: dict[str, Any] = {"name": f"amp-{lv.lower()}-fp16", "level": lv, "dtype": "float16"}
        if precision and (level or lv == "O1"):
            mode |= {"args": ["--precision", "fp16", *(["--amp_level", lv] if level else [])],
                     "scaler": {"init_loss_scaling": SCALE}}
            own.append(lv)
        else:
            mode["amp"] = "inject"
        modes.append(mode)
    injected = [lv for lv in ("O1", "O2") if lv not in own]
    words = (f"PaddleSeg's own --precision fp16 --amp_level {'/'.join(own)} (its GradScaler, init_loss_scaling "
             f"{SCALE:g})" if own else "")
    if injected:
        words += ("; " if words else "") + (f"{'/'.join(injected)} as amp = \"inject\": this train.py has no "
                                            f"{'--amp_level' if precision else '--precision'}, so ampbench's hook "
                                            "applies Paddle's AMP itself")
    return modes, words


def _dataset(cfg: dict[str, Any], key: str, file: str) -> dict[str, Any]:
    return mapping(file, key, cfg.get(key))


def _check_data(cfg: dict[str, Any], checkout: Path, file: str) -> None:
    """Each dataset's root (and a `Dataset`'s list files), relative to the checkout where PaddleSeg reads them."""
    if not _dataset(cfg, "val_dataset", file):
        raise ConfigError(file, "val_dataset", "none: PaddleSeg then never evaluates and no mIoU can be read: add one, "
                          "or import with --synthetic-data")
    for split, lists in (("train_dataset", ("train_path",)), ("val_dataset", ("val_path",))):
        ds = _dataset(cfg, split, file)
        root = ds.get("dataset_root")
        if root is None:
            continue
        where = checkout / text(file, f"{split}.dataset_root", root, path=True)
        if not where.is_dir():
            raise ConfigError(file, f"{split}.dataset_root", f"{root}: no such folder in {checkout} (PaddleSeg reads it "
                              "relative to the checkout; some of its dataset classes download theirs at start-up, "
                              "which needs the network): put the data there, or import with --synthetic-data")
        for key in lists:
            listed = ds.get(key)
            if listed is not None and not (checkout / text(file, f"{split}.{key}", listed, path=True)).is_file():
                raise ConfigError(file, f"{split}.{key}", f"{listed}: no such file in {checkout}: put the list there, "
                                  "or import with --synthetic-data")


def _get(cfg: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The value at a key path of the config (model.backbone.pretrained), None where a table is missing."""
    node: Any = cfg
    for k in keys:
        node = node.get(k) if isinstance(node, dict) else None
    return node


def _weights(cfg: dict[str, Any], checkout: Path, file: str, pretrained: bool) -> tuple[list[str], list[str]]:
    """(--opts items, words): `--no-pretrained` sets each pretrained key None; a link is downloaded by PaddleSeg at
    start-up; a path must be in the checkout."""
    opts, links = [], []
    for keys in _WEIGHTS:
        raw, key = _get(cfg, keys), ".".join(keys)
        if raw in (None, False, "", "None", "null"):
            continue
        if not pretrained:
            opts.append(f"{key}=None")
            continue
        value = text(file, key, raw, path=True)
        if value.startswith(("http://", "https://")):
            links.append(key)
        elif not (checkout / value).exists():
            raise ConfigError(file, key, f"{value}: no such file in {checkout}: download it, or import with "
                              "--no-pretrained (random initialisation)")
    words = ([f"weights: --no-pretrained: --opts {' '.join(opts)} (random initialisation)"] if opts else []) + (
        [f"weights: {', '.join(links)} downloaded by PaddleSeg at start-up (offline: --no-pretrained)"] if links else [])
    return opts, words


def _synthetic(cfg: dict[str, Any], config: Path, root: Path, file: str) -> Path:
    """--synthetic-data: the set in PaddleSeg's Dataset format, and a config beside it over the user's (`_base_`)
    that points both datasets at it, keeping their transforms; its path."""
    import yaml

    from ampbench.core.files import atomic_write_text, refuse_link
    from ampbench.importers.toolkit_data import SEG_CLASSES, write_seg_set

    folder, train, val = write_seg_set(root)

    def dataset(split: str, mode: str, listed: Path) -> dict[str, Any]:
        tf = _dataset(cfg, split, file).get("transforms") or [{"type": "Normalize"}]
        return {"_inherited_": False, "type": "Dataset", "dataset_root": str(folder), f"{mode}_path": str(listed),
                "num_classes": SEG_CLASSES, "mode": mode, "transforms": tf}

    wrapper = {"_base_": str(config), "model": {"num_classes": SEG_CLASSES},
               "train_dataset": dataset("train_dataset", "train", train),
               "val_dataset": dataset("val_dataset" if _dataset(cfg, "val_dataset", file) else "train_dataset",
                                      "val", val)}
    out = root / f"paddleseg-{slug(config.stem, fallback='config')}.yml"
    refuse_link(out)
    with_note = "# Written by `ampbench import paddleseg --synthetic-data`: the _base_ config, on synthetic data.\n"
    atomic_write_text(out, with_note + yaml.safe_dump(wrapper, sort_keys=False, allow_unicode=True), root=root)
    return out


def _command(py: str, config: Path, device: str, opts: list[str]) -> list[str]:
    return [braced(py), SEG.script, "--config", braced(config), "--device", device, "--iters", "{steps}",
            *SEG.batch_flag.split(), "--save_dir", "{out}", "--seed", "{seed}", "--do_eval", "--save_interval",
            "{steps}", "--log_iters", str(LOG_ITERS), *(["--opts", *map(braced, opts)] if opts else [])]


def import_paddleseg_command(path: str | Path, repo: str | Path, python: str | None = None,
                             synthetic_root: Path | None = None, pretrained: bool = True) -> Imported:
    """A command suite running the checkout's tools/train.py on the config (see the module docstring);
    `synthetic_root`: --synthetic-data is written there and trained on; `pretrained=False`: --no-pretrained."""
    checkout = SEG.checkout(repo)
    config = SEG.config(path, checkout)   # configs/... as PaddleSeg's docs name it
    file = str(path)
    cfg = resolve(config, file)
    batch = number(file, "batch_size", cfg.get("batch_size", 2), int, minimum=1, maximum=10**6)
    opts, weight_words = _weights(cfg, checkout, file, pretrained)
    run_config = config if synthetic_root is None else _synthetic(cfg, config, synthetic_root, file)
    if synthetic_root is None:
        _check_data(cfg, checkout, file)
    modes, amp_words = _modes(*_own_amp(checkout))
    py = python or sys.executable
    out = Imported(suite={
        "suite": {"name": slug(config.stem, fallback="paddleseg"), "workload": "command", "metric": "mIoU",
                  "seeds": [0], "description": f"PaddleSeg's tools/train.py on {config.name} ({checkout})"},
        "workload": SEG.workload(_command(py, run_config, "gpu", opts), checkout),
        "train": {"batch_size": batch, "steps": DEFAULT_STEPS, "warmup_steps": 5, "timeout_s": 7200},
        "modes": modes,
        "thresholds": {"metric_abs_tol": 0.02},
        "profiles": {"cpu": {
            "workload": {"command": _command(py, run_config, "cpu", opts)},
            "train": {"batch_size": min(batch, 2), "steps": CPU_STEPS, "warmup_steps": CPU_WARMUP, "timeout_s": 3600}}},
    })
    for line in SEG.decisions(py, config, checkout, "mIoU"):
        out.decide(line)
    out.decide(f"modes: fp32 and fp16 O1/O2: {amp_words}")
    out.decide("steps: --iters {steps} --save_interval {steps} --do_eval: train.steps iterations, PaddleSeg's own "
               f"evaluation (and checkpoint) after the last; --log_iters {LOG_ITERS}; the config's iters are not "
               "kept (its learning-rate schedule runs over train.steps)")
    out.decide("device: --device gpu (cpu profile: cpu, batch <= 2, 12 steps)")
    if synthetic_root is not None:
        from ampbench.importers.toolkit_data import SEG_CLASSES, SEG_EVAL, SEG_SIZE, SEG_TRAIN

        out.decide(f"data: --synthetic-data: {SEG_TRAIN} training and {SEG_EVAL} evaluation {SEG_SIZE}px images of "
                   f"{SEG_CLASSES} classes in PaddleSeg's Dataset format under {synthetic_root}, read through "
                   f"{run_config.name} there (_base_: your config; its transforms kept, model.num_classes "
                   f"{SEG_CLASSES})")
    for line in weight_words:
        out.decide(line)
    out.finish()
    return out
