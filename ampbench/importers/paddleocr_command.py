"""`ampbench import paddleocr CONFIG --repo CHECKOUT`: a command suite that runs PaddleOCR's own
`tools/train.py -c CONFIG` per mode and seed, so every architecture PaddleOCR has (PP-OCRv3's RSEFPN,
PP-OCRv4's PPLCNetV3, pretrained weights, their augmentations and data) is what is measured.

PaddleOCR's `-o` takes one list of KEY=VALUE (argparse nargs="+": a second `-o` would replace the
first), so the command ends with `-o` and the common overrides, and each mode's `args` continue that
list: fp32 `Global.use_amp=False`; an AMP mode `Global.use_amp=True Global.amp_level=.. amp_dtype=..
scale_loss=.. use_dynamic_loss_scaling=..` (the AMP modes are found as the translation import finds
them: Global's keys, the older top-level `AMP:` section, else O1 and O2 float16). PaddleOCR counts
epochs, not steps, so the hook ends the program after `train.steps` optimizer steps, and
`Global.eval_batch_step=[0, steps-2]` makes its own evaluation (the `cur metric, ... hmean: ..` line)
run at step steps-1, before that end.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.config.suite import MAX_SEED
from ampbench.importers.base import Imported, UnsupportedConfig, text
from ampbench.importers.paddleocr import MIN_BASELINE_HMEAN, _amp_modes, _Reader, load_config

DEFAULT_STEPS = 300   # per trial on a GPU (nightly-sized); the cpu profile proves the pipeline only
CPU_STEPS = 8


def _mode_args(m: dict[str, Any]) -> list[str]:
    sc = m.get("scaler", {})
    args = ["Global.use_amp=True", f"Global.amp_level={m['level']}", f"Global.amp_dtype={m['dtype']}",
            f"Global.scale_loss={float(sc.get('init_loss_scaling', 1.0))}",
            f"Global.use_dynamic_loss_scaling={bool(sc.get('use_dynamic_loss_scaling', False))}"]
    for src, dst in (("custom_black_list", "amp_custom_black_list"), ("custom_white_list", "amp_custom_white_list")):
        if m.get(src):
            args.append(f"Global.{dst}=[{','.join(m[src])}]")
    return args


def _command(python: str, config: Path, steps: int, extra: list[str]) -> list[str]:
    return [python, "tools/train.py", "-c", str(config), "-o", "Global.seed={seed}", "Global.save_model_dir={out}",
            "Train.loader.batch_size_per_card={batch_size}", f"Global.eval_batch_step=[0,{max(1, steps - 2)}]",
            *extra]


def _check_checkout(repo: Path, cfg: dict[str, Any], file: str) -> None:
    train = repo / "tools" / "train.py"
    if not train.is_file():
        raise ConfigError(str(repo), "--repo", "not a PaddleOCR checkout: tools/train.py not found in it")
    text = train.read_text(encoding="utf-8", errors="replace")
    if isinstance(cfg.get("AMP"), dict) and ('"AMP"' in text or "'AMP'" in text):
        raise UnsupportedConfig(file, "AMP", f"{train} turns AMP on whenever the config has an AMP section, so no "
                                "fp32 trial is possible: remove the section and import again (its settings then "
                                "come from the modes' -o Global.* overrides)")


def import_paddleocr_command(path: str | Path, repo: str | Path, python: str | None = None) -> Imported:
    """A command suite running the checkout's tools/train.py on the config (see the module docstring)."""
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
    py = python or sys.executable
    config = Path(path).resolve()
    modes = [{"name": "fp32", "args": ["Global.use_amp=False"]},
             *({k: v for k, v in m.items() if k not in ("flags", "master_weight")} | {"args": _mode_args(m)}
               for m in amps)]
    name = slug(config.stem, fallback="paddleocr")
    r.out.suite = {
        "suite": {"name": name, "workload": "command", "metric": metric,
                  "seeds": [seed],
                  "description": f"PaddleOCR's tools/train.py on {config.name} ({checkout})"},
        "workload": {"command": _command(py, config, DEFAULT_STEPS, []), "cwd": str(checkout),
                     "metric": {"preset": "paddleocr"}, "stop_after_steps": True},
        "train": {"batch_size": batch, "steps": DEFAULT_STEPS, "warmup_steps": 5, "timeout_s": 7200},
        "modes": modes,
        "thresholds": {"metric_abs_tol": 0.02, "min_baseline_metric": MIN_BASELINE_HMEAN},
        "profiles": {"cpu": {
            "workload": {"command": _command(py, config, CPU_STEPS, ["Global.use_gpu=False"])},
            "train": {"batch_size": min(batch, 2), "steps": CPU_STEPS, "warmup_steps": 2, "timeout_s": 3600},
            "thresholds": {"min_baseline_metric": 0.0}}},
    }
    r.out.decide(f"program: {py} tools/train.py -c {config} in {checkout} (their model, data, pretrained "
                 "weights and augmentations; nothing translated)")
    r.out.decide(f"modes: fp32, {', '.join(m['name'] for m in amps)} (AMP from {amp_from}), each as -o overrides")
    r.out.decide(f"steps: ampbench ends the program after train.steps = {DEFAULT_STEPS} optimizer steps (cpu "
                 f"profile {CPU_STEPS}); Global.eval_batch_step=[0, steps-2] in the command makes PaddleOCR "
                 "evaluate just before: change both together")
    r.out.decide(f"baseline: min_baseline_metric {MIN_BASELINE_HMEAN} ({metric}; 0 in the cpu profile, whose few "
                 "steps prove the pipeline, not quality)")
    r.out.finish()
    return r.out
