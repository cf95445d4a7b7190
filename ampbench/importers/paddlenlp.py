"""`ampbench import paddlenlp ARGS.json | --args "..."`: PaddleNLP Trainer arguments -> the bert suite.

Read (TrainingArguments names): fp16 / bf16, fp16_opt_level (PaddleNLP default O1), scale_loss
(default 2**15, the GradScaler's initial scale, dynamic), amp_custom_black_list /
amp_custom_white_list, per_device_train_batch_size, gradient_accumulation_steps, learning_rate,
weight_decay, max_grad_norm, warmup_steps / warmup_ratio, lr_scheduler_type, max_steps, seed,
max_seq_length. The suite is the bundled bert suite with these applied: an fp32 mode plus the
args' AMP mode (O1 and O2 float16 when the args set none). Every other argument is listed by name.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import tomllib

from ampbench.config.bundled import bundled_suites
from ampbench.core.errors import ConfigError
from ampbench.importers.base import Imported, boundary, items, load_json_object, number, read_input, text

NO_EFFECT = {"output_dir", "overwrite_output_dir", "logging_dir", "logging_steps", "save_steps", "save_total_limit",
             "do_train", "do_eval", "do_predict", "report_to", "disable_tqdm", "logging_first_step",
             "save_strategy", "logging_strategy", "run_name", "load_best_model_at_end", "metric_for_best_model",
             "eval_steps", "evaluation_strategy", "per_device_eval_batch_size", "dataloader_num_workers",
             "device", "overwrite_cache"}
SCHEDULES = {"linear": "linear", "cosine": "cosine", "constant": "constant"}


def parse_cli_args(text: str) -> dict[str, Any]:
    """`--fp16 --fp16_opt_level O2 --scale_loss=1024 --amp_custom_black_list a b` -> dict, as
    PaddleNLP's argument parser reads it: a bare flag is true, several values make a list."""
    out: dict[str, Any] = {}
    lists: set[str] = set()
    key: str | None = None
    try:
        tokens = shlex.split(text)
    except ValueError as e:
        raise ConfigError("--args", "", f"cannot be read as a command line ({e}: an unclosed quote?)") from None
    for tok in tokens:
        if tok.startswith("--"):
            key, eq, val = tok[2:].partition("=")
            lists.discard(key)  # given again: the last occurrence wins, as argparse does
            out[key] = _value(val) if eq else True
            key = None if eq else key
        elif key is None:
            raise ConfigError("--args", tok, "expected --name [value ...]")
        elif out[key] is True:
            out[key] = _value(tok)
        else:
            out[key] = (out[key] if key in lists else [out[key]]) + [_value(tok)]
            lists.add(key)
    return out


def _value(s: str) -> Any:
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        return s


def _amp_mode(a: dict[str, Any], where: str) -> dict[str, Any] | None:
    if a.get("fp16") and a.get("bf16"):
        raise ConfigError(where, "fp16/bf16", "both are set; PaddleNLP accepts one")
    if not (a.get("fp16") or a.get("bf16")):
        return None
    level = str(a.get("fp16_opt_level", "O1"))
    if level not in ("O1", "O2"):
        raise ConfigError(where, "fp16_opt_level", f"{level!r}: expected O1 or O2")
    dtype = "float16" if a.get("fp16") else "bfloat16"
    mode: dict[str, Any] = {"name": f"amp-{level.lower()}-{'fp16' if a.get('fp16') else 'bf16'}",
                            "level": level, "dtype": dtype,
                            "scaler": {"enable": True, "init_loss_scaling": number(where, "scale_loss", a.get("scale_loss", 2.0 ** 15),
                                                                   above=0),
                                       "use_dynamic_loss_scaling": True}}
    for src, dst in (("amp_custom_black_list", "custom_black_list"), ("amp_custom_white_list", "custom_white_list")):
        if a.get(src):
            vals = a[src]
            vals = vals if isinstance(vals, list) else text(where, src, vals).split(",")
            mode[dst] = [text(where, src, x) for x in items(where, src, vals)]
    if a.get("amp_master_grad") and level == "O2":
        mode["master_grad"] = True   # PaddleNLP passes it to paddle.amp.decorate(master_grad=...) at O2
    return mode


def _train(a: dict[str, Any], base: dict[str, Any], out: Imported, where: str) -> dict[str, Any]:
    train = dict(base.get("train", {}))
    opt = dict(train.get("optimizer", {}))
    simple = {"per_device_train_batch_size": ("batch_size", 1), "gradient_accumulation_steps": ("grad_accum", 1),
              "max_steps": ("steps", None)}
    for src, (dst, low) in simple.items():
        if src in a:
            v = number(where, src, a[src], int, minimum=low, maximum=10**9)
            if not (src == "max_steps" and v <= 0):  # PaddleNLP's max_steps -1: not set
                train[dst] = v
    if "steps" in train and train.get("warmup_steps", 0) >= train["steps"]:
        # ampbench's measurement warm-up (not the Trainer's learning-rate warm-up) must fit a short max_steps
        train["warmup_steps"] = max(0, min(train["steps"] // 5, train["steps"] - 1))
        out.notes.append(f"train.warmup_steps = {train['warmup_steps']} (ampbench's measurement warm-up, shortened to "
                         f"fit max_steps {train['steps']}; the learning-rate warm-up is optimizer.lr_warmup_steps)")
    optkeys = {"learning_rate": ("lr", float, {"above": 0}), "weight_decay": ("weight_decay", float, {"minimum": 0}),
               "max_grad_norm": ("grad_clip_norm", float, {}), "warmup_steps": ("lr_warmup_steps", int, {"minimum": 0})}
    for src, (dst, t, bounds) in optkeys.items():
        if src in a:
            v = number(where, src, a[src], t, **bounds)
            opt[dst] = None if src == "max_grad_norm" and v <= 0 else v
    ratio = number(where, "warmup_ratio", a["warmup_ratio"], minimum=0, maximum=1) if "warmup_ratio" in a else 0
    if ratio and not a.get("warmup_steps"):
        opt["lr_warmup_steps"] = int(ratio * train.get("steps", 100))
    if "lr_scheduler_type" in a:
        text(where, "lr_scheduler_type", a["lr_scheduler_type"])
        if a["lr_scheduler_type"] in SCHEDULES:
            opt["schedule"] = SCHEDULES[a["lr_scheduler_type"]]
        else:
            out.not_honoured["lr_scheduler_type"] = f"{a['lr_scheduler_type']!r}: ampbench has linear, cosine, constant"
    opt["name"] = "adamw"  # PaddleNLP's Trainer optimizer
    train["optimizer"] = {k: v for k, v in opt.items() if v is not None}
    return train


READ = {"fp16", "bf16", "fp16_opt_level", "scale_loss", "amp_custom_black_list", "amp_custom_white_list",
        "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps", "learning_rate", "weight_decay",
        "max_grad_norm", "warmup_steps", "warmup_ratio", "lr_scheduler_type", "seed", "max_seq_length"}
WHY = {"amp_master_grad": "master gradients apply to O2 only (paddle.amp.decorate)",
       "model_name_or_path": "the bert workload builds BERT from its [workload] shape (random init; "
                             "set workload.pretrained_dir for local weights)",
       "num_train_epochs": "ampbench counts steps (set max_steps)",
       "adam_beta1": "Paddle's AdamW default is used", "adam_beta2": "Paddle's AdamW default is used",
       "adam_epsilon": "Paddle's AdamW default is used"}


def _default_modes() -> list[dict[str, Any]]:
    """No fp16/bf16 in the args: O1 and O2 float16 with the Trainer's defaults (scale_loss 2**15, dynamic)."""
    return [{"name": f"amp-{lv.lower()}-fp16", "level": lv, "dtype": "float16",
             "scaler": {"enable": True, "init_loss_scaling": 2.0 ** 15, "use_dynamic_loss_scaling": True}}
            for lv in ("O1", "O2")]


def import_paddlenlp(args: dict[str, Any], where: str, source: str = "paddleformers") -> Imported:
    """Trainer arguments (already parsed) -> the bert suite with them applied."""
    with boundary(where):
        return _import(args, where, source)


def _import(args: dict[str, Any], where: str, source: str) -> Imported:
    base = tomllib.loads(bundled_suites()["bert"].read_text(encoding="utf-8"))
    out = Imported(suite={})
    amp = _amp_mode(args, where)
    wl = dict(base["workload"], source=source)
    if "max_seq_length" in args:
        wl["max_seq_len"] = number(where, "max_seq_length", args["max_seq_length"], int, minimum=2, maximum=10**6)
    meta = dict(base["suite"], name="bert-paddlenlp", description=f"bert suite with PaddleNLP Trainer args from {where}")
    if "seed" in args:
        meta["seeds"] = [number(where, "seed", args["seed"], int, minimum=0, maximum=2**32 - 1)]
    for k in args:
        honoured = k in READ or k in NO_EFFECT or (k == "amp_master_grad" and bool(amp and amp.get("master_grad")))
        if not honoured:
            out.not_honoured[k] = WHY.get(k, "not read by ampbench")
    amps = [amp] if amp else _default_modes()
    modes = [{"name": "fp32"}, *amps]
    out.decide(f"modes: fp32, {', '.join(m['name'] for m in amps)} "
               + ("(from the args' fp16/bf16)" if amp else "(the args set neither fp16 nor bf16: O1 and O2 "
                                                        "float16 with the Trainer's defaults, scale_loss 32768)"))
    out.decide(f"model: the bert workload's {source} BertForSequenceClassification, randomly initialised, "
               "on its bundled data (not the args' model or dataset)")
    # the bundled profiles keep their sizes but compare the args' modes
    profiles = {n: {**p, "modes": modes} if "modes" in p else p for n, p in base.get("profiles", {}).items()}
    out.suite = {"suite": meta, "workload": wl, "train": _train(args, base, out, where), "modes": modes,
                 "thresholds": base.get("thresholds", {}), "profiles": profiles}
    out.finish()
    return out


def load_args(path: str | Path | None, cli: str | None) -> tuple[dict[str, Any], str]:
    """Trainer arguments from a JSON file (as PaddleNLP's parse_json_file reads) or a CLI string."""
    if cli is not None and path is None:
        return parse_cli_args(cli), "--args"
    if path is None or cli is not None:
        raise ConfigError("ampbench import paddlenlp", "", "give exactly one of ARGS.json or --args \"...\"")
    data = load_json_object(read_input(path, "Trainer arguments file"), str(path))
    if not isinstance(data, dict):
        raise ConfigError(str(path), "", "Trainer arguments must be a JSON object")
    return data, str(path)
