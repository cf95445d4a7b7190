"""`ampbench import paddlerec CONFIG --repo CHECKOUT`: a command suite that runs PaddleRec's own
`tools/trainer.py -m CONFIG` per mode and seed (its model's dygraph_model.py, reader and data).

PaddleRec's dynamic-graph trainer has no AMP switch (tools/trainer.py: `loss.backward();
optimizer.step()`, no auto_cast, no GradScaler), so every AMP mode is `amp = "inject"`: ampbench's
start-up hook applies Paddle's auto_cast, GradScaler (float16) around the model the optimizer trains
(docs/command.md, "AMP without editing the program"). Its `-o` takes one list of `runner.KEY=VALUE`
(argparse nargs="*", each value cast to the type the config already has), so the command ends with it.

PaddleRec counts epochs, and reports its metric (`epoch: N done, auc: ...`, its create_metrics names)
only at an epoch's end, then saves the model (paddle.save, which the hook leaves out of the step it
falls in). So train.steps reaches it as `runner.epochs={epochs}` with `[workload.program]` (epochs 1, the
training files' lines, drop_last as its create_data_loader has it): the fewest whole epochs that hold
train.steps, each ending with its metric. What it reads is checked here, relative to the config's
folder as create_data_loader and load_model read them: the training data folder and its files, the
reader module, `runner.model_init_path` (`<path>/rec.pdparams`); `runner.use_gpu` is set per profile.
`--synthetic-data` writes Criteo-format samples (importers/toolkit_data.py) as `runner.train_data_dir`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from ampbench.config.suite import MAX_SEED
from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.importers.base import Imported, braced, load_yaml, mapping, number, read_input, text
from ampbench.importers.toolkit import Toolkit

REC = Toolkit("PaddleRec", "tools/trainer.py", "tools", "paddlerec", "`epoch: N done` line of the last epoch",
              "-o runner.train_batch_size={batch_size}", package_required=False)

DEFAULT_STEPS = 300
CPU_STEPS, CPU_WARMUP = 12, 2
MAX_FILES, MAX_DATA_BYTES = 10_000, 2**31
MIN_BASELINE_AUC = 0.55
_METRIC_NAMES = re.compile(r"metrics?_list_name\s*=\s*\[\s*['\"]([A-Za-z_]\w*)['\"]")


def _count_lines(folder: Path, file: str) -> int:
    """Samples per epoch as PaddleRec's readers yield them (a line each, every file of the folder)."""
    files = sorted(p for p in folder.iterdir() if not p.name.startswith("."))[:MAX_FILES + 1]
    if len(files) > MAX_FILES:
        raise ConfigError(file, "runner.train_data_dir", f"{folder}: more than {MAX_FILES} files")
    n, read = 0, 0
    for p in files:
        if not p.is_file() or p.is_symlink():
            continue
        last = b"\n"
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                n, last, read = n + chunk.count(b"\n"), chunk[-1:], read + len(chunk)
                if read > MAX_DATA_BYTES:
                    return n
        n += last != b"\n"
    return n


def _checked_paths(runner: dict[str, Any], where: Path, file: str, synthetic: Path | None) -> int:
    """The training data (or `synthetic`, --synthetic-data's folder), its reader and the initial weights,
    relative to the config's folder (where PaddleRec's create_data_loader and load_model look); the
    training samples per epoch."""
    data = synthetic or where / text(file, "runner.train_data_dir", runner.get("train_data_dir", ""), path=True)
    if not data.is_dir():
        raise ConfigError(file, "runner.train_data_dir", f"{data}: no such folder (PaddleRec reads it relative to the "
                          "config's folder): put the data there or point runner.train_data_dir at it")
    reader = text(file, "runner.train_reader_path", runner.get("train_reader_path", "reader"))
    if not (where / f"{reader}.py").is_file():
        raise ConfigError(file, "runner.train_reader_path", f"{reader}.py: no such reader beside the config ({where})")
    init = runner.get("model_init_path")
    if init:
        weights = where / text(file, "runner.model_init_path", init, path=True) / "rec.pdparams"
        if not weights.is_file():
            raise ConfigError(file, "runner.model_init_path", f"{weights}: no such file (PaddleRec's load_model reads "
                              "<model_init_path>/rec.pdparams): train one first, or comment the key out (its -o "
                              "cannot unset it) for random initialisation")
    samples = _count_lines(data, file)
    if samples == 0:
        raise ConfigError(file, "runner.train_data_dir", f"{data}: no training samples (no lines in its files)")
    return samples


def _synthetic(runner: dict[str, Any], root: Path, file: str) -> Path:
    """--synthetic-data: Criteo samples, for a model whose reader reads that format (criteo_reader)."""
    from ampbench.importers.toolkit_data import write_criteo_set

    reader = runner.get("train_reader_path", "reader")
    if reader != "criteo_reader":
        raise ConfigError(file, "runner.train_reader_path", f"{reader!r}: --synthetic-data writes the Criteo format "
                          "of PaddleRec's criteo_reader only; point runner.train_data_dir at your data instead")
    return write_criteo_set(root)


def _metric(where: Path) -> str:
    """The first name the model's create_metrics reports (dygraph_model.py), e.g. "auc"."""
    model = where / "dygraph_model.py"
    found = _METRIC_NAMES.search(model.read_text(encoding="utf-8", errors="replace")) if model.is_file() else None
    return found.group(1) if found else "auc"


def _command(py: str, config: Path, use_gpu: bool, extra: list[str]) -> list[str]:
    return [py, "tools/trainer.py", "-m", str(config), "-o", "runner.seed={seed}", "runner.model_save_path={out}",
            "runner.train_batch_size={batch_size}", "runner.epochs={epochs}", f"runner.use_gpu={use_gpu}", *extra]


def _typed(runner: dict[str, Any], file: str) -> None:
    """PaddleRec's -o casts a value to the type the config's key already has, and keeps a string
    otherwise: the keys ampbench sets must be in the config with their type, or the trainer gets "2"."""
    for key, kind in (("train_batch_size", int), ("epochs", int), ("use_gpu", bool)):
        v = runner.get(key)
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ConfigError(file, f"runner.{key}", f"{v!r}: ampbench sets it through PaddleRec's -o, which casts to "
                              f"the config's own type: put `{key}:` with a {kind.__name__} in the runner section")


def import_paddlerec_command(path: str | Path, repo: str | Path, python: str | None = None,
                             synthetic_root: Path | None = None) -> Imported:
    """A command suite running the checkout's tools/trainer.py on the config (see the module docstring);
    `synthetic_root`: --synthetic-data (Criteo-format samples) is written there and trained on."""
    checkout = REC.checkout(repo)
    config = REC.config(path, checkout)   # models/rank/deepfm/config.yaml as PaddleRec's own docs name it
    file = str(path)
    cfg = load_yaml(read_input(config, "PaddleRec config"), file)
    if not isinstance(cfg, dict):
        raise ConfigError(file, "", "a PaddleRec config is a YAML mapping (runner, hyper_parameters)")
    runner = mapping(file, "runner", cfg.get("runner"))
    where = config.parent
    _typed(runner, file)
    synthetic = None
    if synthetic_root is not None:
        synthetic = _synthetic(runner, synthetic_root, file)
    samples = _checked_paths(runner, where, file, synthetic)
    batch = number(file, "runner.train_batch_size", runner.get("train_batch_size", 1), int, minimum=1)
    seed = number(file, "runner.seed", runner.get("seed", 0), int, minimum=0, maximum=MAX_SEED)
    epochs = number(file, "runner.epochs", runner.get("epochs", 1), int, minimum=1, maximum=10**6)
    metric = _metric(where)
    extra = [f"runner.train_data_dir={braced(synthetic)}"] if synthetic else []
    py = python or sys.executable
    out = Imported(suite={})
    modes: list[dict[str, Any]] = [{"name": "fp32"}] + [
        {"name": f"amp-o1-{short}", "level": "O1", "dtype": dtype, "amp": "inject"}
        for short, dtype in (("fp16", "float16"), ("bf16", "bfloat16"))]
    out.suite = {
        "suite": {"name": slug(f"{where.name}-{config.stem}", fallback="paddlerec"), "workload": "command",
                  "metric": metric, "seeds": [seed],
                  "description": f"PaddleRec's tools/trainer.py on {config} ({checkout})"},
        "workload": REC.workload(_command(py, config, True, extra), checkout,
                                 program={"epochs": 1, "samples": samples, "drop_last": True}),
        "train": {"batch_size": batch, "steps": DEFAULT_STEPS, "warmup_steps": 5, "timeout_s": 7200},
        "modes": modes,
        "thresholds": {"metric_abs_tol": 0.01, "min_baseline_metric": MIN_BASELINE_AUC},
        "profiles": {"cpu": {
            "workload": {"command": _command(py, config, False, extra)},
            "train": {"batch_size": batch, "steps": CPU_STEPS, "warmup_steps": CPU_WARMUP, "timeout_s": 3600},
            "thresholds": {"min_baseline_metric": 0.0}}},
    }
    per = samples // batch
    for line in REC.decisions(py, config, checkout, metric):
        out.decide(line)
    out.decide("modes: fp32 and O1 float16/bfloat16 with amp = \"inject\": PaddleRec's trainer has no AMP switch, so "
               "ampbench's start-up hook applies Paddle's auto_cast (and a GradScaler for float16) itself")
    out.decide(f"steps: runner.epochs={{epochs}}: the fewest whole epochs holding train.steps ({samples} samples, "
               f"{per} steps of batch {batch} an epoch, the last partial batch dropped; the config's {epochs} epochs "
               f"are not kept); {metric} is read from PaddleRec's `epoch: N done` line of the last epoch")
    out.decide("device: runner.use_gpu=True (cpu profile: False)")
    if synthetic:
        out.decide(f"data: --synthetic-data: {samples} synthetic samples in the Criteo slot:value format of "
                   f"PaddleRec's criteo_reader (runner.train_data_dir={synthetic})")
    if runner.get("model_init_path"):
        out.decide(f"weights: runner.model_init_path {runner['model_init_path']} (checked: rec.pdparams there)")
    out.finish()
    return out
