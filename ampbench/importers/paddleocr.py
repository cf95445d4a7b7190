"""`ampbench import paddleocr CONFIG.yml`: a PaddleOCR DB detection config -> an ocr suite.

Read: both of PaddleOCR's AMP formats, Global's keys (use_amp, amp_level [PaddleOCR default O2],
amp_dtype [float16], scale_loss [1.0], use_dynamic_loss_scaling [false], amp_custom_black_list/white_list)
and the older top-level `AMP:` section (scale_loss, use_dynamic_loss_scaling; O1 float16),
Architecture (DB with MobileNetV3 large / ResNet_vd, DBFPN, DBHead), Loss (DBLoss), Optimizer,
PostProcess (DBPostProcess), Metric (DetMetric), Train/Eval SimpleDataSet label files, the
EastRandomCropData size and the label-map transforms. The suite gets an fp32 mode and the config's
AMP mode (with PaddleOCR's AMP flags) or, when the config sets none, O1 and O2 float16: an import
always compares something. Decisions (modes, data, keys not honoured) are printed and kept in
suite.notes, which report.md shows. Everything not read is listed by name.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.importers.base import (
    Imported,
    UnsupportedConfig,
    boundary,
    items,
    load_yaml,
    mapping,
    number,
    read_input,
    text,
)

# PaddleOCR tools/train.py under use_amp: the two cuDNN/cuBLAS flags on CUDA builds (a CPU build records
# them as null); FLAGS_max_inplace_grad_add = 8 was also set there by earlier PaddleOCR releases.
PADDLEOCR_AMP_FLAGS = {"FLAGS_max_inplace_grad_add": 8, "FLAGS_cudnn_batchnorm_spatial_persistent": 1,
                       "FLAGS_gemm_use_half_precision_compute_type": 0}
# Keys with no effect on the trained numbers (logging, saving, inference paths).
NO_EFFECT = {"use_gpu", "log_smooth_window", "print_batch_step", "save_model_dir", "save_epoch_step",
             "cal_metric_during_train", "checkpoints", "save_inference_dir", "use_visualdl", "infer_img",
             "save_res_path", "use_wandb", "infer_mode", "character_dict_path", "max_text_length", "use_xpu",
             "use_npu", "use_mlu", "d2s_train_image_shape"}
AMP_KEYS = {"use_amp", "amp_level", "amp_dtype", "scale_loss", "use_dynamic_loss_scaling",
            "amp_custom_black_list", "amp_custom_white_list"}
LABEL_TRANSFORMS = {"DecodeImage", "DetLabelEncode", "MakeBorderMap", "MakeShrinkMap", "NormalizeImage",
                    "ToCHWImage", "KeepKeys", "EastRandomCropData", "DetResizeForTest"}
MIN_BASELINE_HMEAN = 0.3
CPU_PROFILE: dict[str, Any] = {"seeds": [0], "workload": {"image_size": 128, "fpn_channels": 64, "eval_batch_size": 16},
               "train": {"batch_size": 8, "steps": 200, "warmup_steps": 3, "timeout_s": 1800}}


class _Reader:
    """Walks the config, remembering which keys were used; the rest are reported."""

    def __init__(self, cfg: dict[str, Any], file: str):
        self.cfg, self.file = cfg, file
        self.out = Imported(suite={})

    def section(self, name: str) -> dict[str, Any]:
        return mapping(self.file, name, self.cfg.get(name))

    def sub(self, key: str, value: Any) -> dict[str, Any]:
        return mapping(self.file, key, value)

    def num(self, key: str, value: Any, kind: type = float, **bounds: float) -> Any:
        return number(self.file, key, value, kind, **bounds)

    def skip(self, key: str, why: str) -> None:
        self.out.not_honoured[key] = why

    def rest(self, prefix: str, sec: dict[str, Any], used: set[str], why: str = "not read by ampbench") -> None:
        for k in sec:
            if k not in used:
                self.skip(f"{prefix}.{k}", why)


def _unsupported(file: str, key: str, why: str) -> None:
    raise UnsupportedConfig(file, key, f"unsupported architecture: {why}")


def _architecture(r: _Reader) -> dict[str, Any]:
    arch = r.section("Architecture")
    if arch.get("model_type") != "det" or arch.get("algorithm") != "DB":
        _unsupported(r.file, "Architecture", f"model_type {arch.get('model_type')!r} / algorithm "
                     f"{arch.get('algorithm')!r}; ampbench's dbnet workload is DB text detection (det, DB)")
    if arch.get("Transform"):
        _unsupported(r.file, "Architecture.Transform", "a Transform stage is not part of DBNet here")
    wl: dict[str, Any] = {}
    bb = r.sub("Architecture.Backbone", arch.get("Backbone"))
    name = bb.get("name")
    if name == "MobileNetV3":
        if bb.get("model_name", "large") != "large":
            _unsupported(r.file, "Architecture.Backbone.model_name", "only MobileNetV3 large is implemented")
        wl.update(backbone="MobileNetV3", backbone_scale=r.num("Architecture.Backbone.scale", bb.get("scale", 0.5), above=0),
                  backbone_se=not bb.get("disable_se", False))
        r.rest("Architecture.Backbone", bb, {"name", "model_name", "scale", "disable_se"})
    elif name in ("ResNet_vd", "ResNet"):
        wl.update(backbone="ResNet_vd", backbone_layers=r.num("Architecture.Backbone.layers", bb.get("layers", 50), int, minimum=1))
        if name == "ResNet":
            r.out.notes.append("Backbone ResNet read as ResNet_vd (what PaddleOCR's DB ResNet configs build).")
        r.rest("Architecture.Backbone", bb, {"name", "layers"})
    else:
        _unsupported(r.file, "Architecture.Backbone.name", f"{name!r}; supported: MobileNetV3 (large), ResNet_vd")
    neck, head = r.sub("Architecture.Neck", arch.get("Neck")), r.sub("Architecture.Head", arch.get("Head"))
    if neck.get("name") != "DBFPN":
        _unsupported(r.file, "Architecture.Neck.name", f"{neck.get('name')!r}; supported: DBFPN")
    if head.get("name") != "DBHead":
        _unsupported(r.file, "Architecture.Head.name", f"{head.get('name')!r}; supported: DBHead")
    wl.update(fpn_channels=r.num("Architecture.Neck.out_channels", neck.get("out_channels", 256), int, minimum=1),
              k=r.num("Architecture.Head.k", head.get("k", 50), above=0))
    r.rest("Architecture.Neck", neck, {"name", "out_channels"})
    r.rest("Architecture.Head", head, {"name", "k"})
    r.rest("Architecture", arch, {"model_type", "algorithm", "Transform", "Backbone", "Neck", "Head"})
    return wl


def _loss(r: _Reader) -> dict[str, Any]:
    loss = r.section("Loss")
    if loss.get("name") != "DBLoss":
        _unsupported(r.file, "Loss.name", f"{loss.get('name')!r}; supported: DBLoss")
    main = loss.get("main_loss_type", "DiceLoss")
    if main not in ("DiceLoss", "BCELoss"):
        _unsupported(r.file, "Loss.main_loss_type", f"{main!r}; supported: DiceLoss, BCELoss")
    keys = {"balance_loss": bool, "alpha": float, "beta": float, "ohem_ratio": float, "eps": float}
    out: dict[str, Any] = {"main_loss_type": main}
    for k, t in keys.items():
        if k in loss and t is bool and not isinstance(loss[k], bool):
            raise ConfigError(r.file, f"Loss.{k}", f"{loss[k]!r} is not true or false")
        if k in loss:
            out[k] = loss[k] if t is bool else r.num(f"Loss.{k}", loss[k], minimum=0)
    r.rest("Loss", loss, {"name", "main_loss_type", *keys})
    return out


def _optimizer(r: _Reader, steps_per_epoch: int) -> dict[str, Any]:
    o = r.section("Optimizer")
    names = {"Adam": "adam", "AdamW": "adamw", "Momentum": "momentum", "SGD": "sgd"}
    if o.get("name") not in names:
        _unsupported(r.file, "Optimizer.name", f"{o.get('name')!r}; supported: {', '.join(names)}")
    out: dict[str, Any] = {"name": names[o["name"]]}
    lr = r.sub("Optimizer.lr", o.get("lr"))
    out["lr"] = r.num("Optimizer.lr.learning_rate", lr.get("learning_rate", 0.001), above=0)
    sched = {None: "constant", "Cosine": "cosine", "Linear": "linear"}
    if lr.get("name") in sched:
        out["schedule"] = sched[lr.get("name")]
    else:
        r.skip("Optimizer.lr.name", f"{lr.get('name')!r} schedule not available (constant, Cosine, Linear)")
    if lr.get("warmup_epoch"):
        out["lr_warmup_steps"] = math.ceil(r.num("Optimizer.lr.warmup_epoch", lr["warmup_epoch"], minimum=0,
                                                maximum=1e6) * steps_per_epoch)
    r.rest("Optimizer.lr", lr, {"name", "learning_rate", "warmup_epoch"})
    reg = r.sub("Optimizer.regularizer", o.get("regularizer"))
    if reg and reg.get("name", "L2") == "L2":
        out["weight_decay"] = r.num("Optimizer.regularizer.factor", reg.get("factor", 0.0), minimum=0)
    elif reg:
        r.skip("Optimizer.regularizer", f"{reg.get('name')!r}: only L2 is applied")
    if "clip_norm" in o:
        out["grad_clip_norm"] = r.num("Optimizer.clip_norm", o["clip_norm"], above=0)
    if "momentum" in o:
        out["momentum"] = r.num("Optimizer.momentum", o["momentum"], minimum=0)
    for k, default in (("beta1", 0.9), ("beta2", 0.999)):
        if k in o and r.num(f"Optimizer.{k}", o[k], minimum=0, maximum=1) != default:
            r.skip(f"Optimizer.{k}", f"{o[k]} differs from Paddle's default {default}, which ampbench uses")
    r.rest("Optimizer", o, {"name", "lr", "regularizer", "clip_norm", "momentum", "beta1", "beta2"})
    return out


def _post_and_metric(r: _Reader) -> dict[str, Any]:
    post, metric = r.section("PostProcess"), r.section("Metric")
    if post.get("name") != "DBPostProcess":
        _unsupported(r.file, "PostProcess.name", f"{post.get('name')!r}; supported: DBPostProcess")
    if metric.get("name", "DetMetric") != "DetMetric" or metric.get("main_indicator", "hmean") != "hmean":
        _unsupported(r.file, "Metric", "only DetMetric with main_indicator hmean is implemented")
    out = {}
    for src, dst in (("thresh", "det_thresh"), ("box_thresh", "box_thresh"), ("unclip_ratio", "unclip_ratio")):
        if src in post:
            out[dst] = r.num(f"PostProcess.{src}", post[src], minimum=0)
    if "max_candidates" in post:
        out["max_candidates"] = r.num("PostProcess.max_candidates", post["max_candidates"], int, minimum=1)
    for k, default in (("use_dilation", False), ("score_mode", "fast"), ("box_type", "quad")):
        if k in post and post[k] != default:
            r.skip(f"PostProcess.{k}", f"{post[k]!r}: ampbench uses DBPostProcess's default {default!r}")
    r.rest("PostProcess", post, {"name", "thresh", "box_thresh", "unclip_ratio", "max_candidates",
                                 "use_dilation", "score_mode", "box_type"})
    r.rest("Metric", metric, {"name", "main_indicator"})
    return out


def _transforms(r: _Reader, split: str, transforms: list[Any], wl: dict[str, Any]) -> None:
    """Label-map settings and the crop size; augmentations are listed as not honoured."""
    for i, t in enumerate(items(r.file, f"{split}.dataset.transforms", transforms)):
        name, args = (next(iter(t.items())) if isinstance(t, dict) and t else (text(r.file, f"{split}.dataset.transforms[{i}]", t), None))
        name = text(r.file, f"{split}.dataset.transforms[{i}]", name)
        key = f"{split}.dataset.transforms[{i}].{name}"
        args = r.sub(key, args)
        if name == "EastRandomCropData":
            size = [r.num(key + ".size", v, int, minimum=32) for v in items(r.file, key + ".size", args.get("size", [640, 640]))]
            if len(size) != 2 or size[0] != size[1] or size[0] % 32:
                raise ConfigError(r.file, key + ".size", f"{size}: ampbench needs a square size, multiple of 32")
            wl["image_size"] = int(size[0])
            r.skip(key, "random crop replaced by a fixed letterbox to the same size (labels cached once)")
        elif name == "MakeBorderMap":
            wl.update({k: r.num(f"{key}.{k}", args[k], minimum=0) for k in ("shrink_ratio", "thresh_min", "thresh_max")
                       if k in args})
        elif name == "MakeShrinkMap":
            wl.update({k: r.num(f"{key}.{k}", v, int if k == "min_text_size" else float, minimum=0)
                       for k, v in args.items() if k in ("shrink_ratio", "min_text_size")})
        elif name == "DetResizeForTest":
            r.skip(key, "eval images are letterboxed to image_size instead")
        elif name not in LABEL_TRANSFORMS:
            r.skip(key, "augmentation not applied (training data are fixed, cached arrays)")


def _datasets(r: _Reader, wl: dict[str, Any], synthetic: bool) -> tuple[int, int]:
    """Train/Eval SimpleDataSet -> workload.dataset; returns (batch size, training images)."""
    train, evals = r.section("Train"), r.section("Eval")
    tds, eds = r.sub("Train.dataset", train.get("dataset")), r.sub("Eval.dataset", evals.get("dataset"))
    for split, ds in (("Train", tds), ("Eval", eds)):
        if ds.get("name", "SimpleDataSet") != "SimpleDataSet":
            raise UnsupportedConfig(r.file, f"{split}.dataset.name", f"{ds.get('name')!r}: only SimpleDataSet is read")
        _transforms(r, split, ds.get("transforms") or [], wl)
        r.rest(f"{split}.dataset", ds, {"name", "data_dir", "label_file_list", "ratio_list", "transforms"})
    loader = r.sub("Train.loader", train.get("loader"))
    batch = r.num("Train.loader.batch_size_per_card", loader.get("batch_size_per_card", 8), int, minimum=1)
    if loader.get("drop_last") is False:
        r.skip("Train.loader.drop_last", "false: ampbench always drops the last partial batch of an epoch")
    files = [text(r.file, "Train.dataset.label_file_list", f, path=True)
             for f in items(r.file, "Train.dataset.label_file_list", tds.get("label_file_list"))]
    eval_files = [text(r.file, "Eval.dataset.label_file_list", f, path=True)
                  for f in items(r.file, "Eval.dataset.label_file_list", eds.get("label_file_list"))]
    missing = [f for f in files + eval_files if not Path(f).is_file()]
    if synthetic or not files or not eval_files or missing:
        why = ("replaced by ampbench's synthetic scene text (--synthetic-data)" if synthetic else
               f"label files not found from {Path.cwd()}: {', '.join(missing)}; synthetic scene text used "
               "(run the import where the paths resolve, as PaddleOCR's tools/train.py would, to use your data)"
               if missing else "no label_file_list: synthetic scene text used")
        r.skip("Train.dataset / Eval.dataset", why)
        r.out.decide("data: " + why)
        wl["dataset"] = {"kind": "synthetic-scene-text", "images": 1000, "eval_images": 200}
        return batch, 1000
    ratio = tds.get("ratio_list", 1.0)
    wl["dataset"] = {"kind": "paddleocr", "train_label": files,
                     "ratio_list": [r.num("Train.dataset.ratio_list", x, above=0, maximum=1) for x in ratio]
                     if isinstance(ratio, list) else r.num("Train.dataset.ratio_list", ratio, above=0, maximum=1),
                     "eval_label": eval_files,
                     "data_dir": text(r.file, "Train.dataset.data_dir", tds.get("data_dir", "."), path=True),
                     "eval_data_dir": text(r.file, "Eval.dataset.data_dir", eds.get("data_dir", "."), path=True)}
    n = sum(_count_lines(f) for f in files)
    r.out.decide(f"data: the config's label files ({', '.join(files)}; eval {', '.join(eval_files)})")
    return batch, n or 1000


def _count_lines(f: str) -> int:
    """Images listed in a label file (a FIFO or a huge file is refused, never waited on)."""
    from ampbench.core.errors import ResultsError
    from ampbench.core.files import read_bytes

    p = Path(f)
    if not p.is_file():
        return 0
    try:
        return sum(1 for b in read_bytes(p, "label file", limit=512 * 2**20).split(b"\n") if b.strip())
    except ResultsError as e:
        raise ConfigError(f, "", str(e).removeprefix(f"{f}: ")) from None


# What an import compares when the config turns AMP on nowhere: O1 and O2 float16 with the flags of
# PaddleOCR's detection doc ("-o Global.use_amp=True Global.scale_loss=1024.0
# Global.use_dynamic_loss_scaling=True"); tools/train.py's own fallbacks are scale_loss 1.0, static.
DEFAULT_SCALER = {"enable": True, "init_loss_scaling": 1024.0, "use_dynamic_loss_scaling": True}
AMP_SECTION_KEYS = {"use_amp", "scale_loss", "use_dynamic_loss_scaling", "amp_dtype"}


def _named(level: str, dtype: str) -> str:
    return f"amp-{level.lower()}-{'fp16' if dtype == 'float16' else 'bf16'}"


def _global_amp(r: _Reader, g: dict[str, Any]) -> dict[str, Any]:
    """Global.use_amp and friends (PaddleOCR >= 2.5): amp_level default O2, amp_dtype float16."""
    level, dtype = str(g.get("amp_level", "O2")), str(g.get("amp_dtype", "float16"))
    if level not in ("O1", "O2") or dtype not in ("float16", "bfloat16"):
        raise ConfigError(r.file, "Global.amp_level / amp_dtype", f"{level}/{dtype}: expected O1|O2, float16|bfloat16")
    mode: dict[str, Any] = {
        "name": _named(level, dtype), "level": level, "dtype": dtype,
        "scaler": {"enable": True, "init_loss_scaling": r.num("Global.scale_loss", g.get("scale_loss", 1.0), above=0),
                   "use_dynamic_loss_scaling": bool(g.get("use_dynamic_loss_scaling", False))},
        "flags": dict(PADDLEOCR_AMP_FLAGS),
    }
    for src, dst in (("amp_custom_black_list", "custom_black_list"), ("amp_custom_white_list", "custom_white_list")):
        if g.get(src):
            mode[dst] = [text(r.file, f"Global.{src}", x) for x in items(r.file, f"Global.{src}", g[src])]
    if level == "O2":
        mode["master_weight"] = True  # PaddleOCR decorates O2 models with master_weight=True
    return mode


def _section_amp(r: _Reader, sec: dict[str, Any]) -> dict[str, Any]:
    """The top-level `AMP:` section of configs/det/det_mv3_db_amp.yml: its presence turned AMP on in the
    tools/train.py of that era, which built GradScaler(scale_loss [1.0], use_dynamic_loss_scaling
    [false]) and trained under auto_cast() at its default level, O1, float16 (bfloat16 when the
    config names `amp_dtype: bfloat16`, in this section or in Global)."""
    r.rest("AMP", sec, AMP_SECTION_KEYS, "not read by PaddleOCR's AMP section either")
    dtype = _fallback_dtype(r, r.section("Global"), sec)   # bfloat16 when the config names it, in either place
    return {"name": _named("O1", dtype), "level": "O1", "dtype": dtype,
            "scaler": {"enable": True, "init_loss_scaling": r.num("AMP.scale_loss", sec.get("scale_loss", 1.0), above=0),
                       "use_dynamic_loss_scaling": bool(sec.get("use_dynamic_loss_scaling", False))},
            "flags": dict(PADDLEOCR_AMP_FLAGS)}


def _fallback_dtype(r: _Reader, g: dict[str, Any], sec: dict[str, Any] | None) -> str:
    """The dtype a config names while AMP is off (ch_PP-OCRv2_det_cml.yml: `use_amp: False`,
    `amp_dtype: bfloat16`): the modes added are in that dtype, never silently float16."""
    raw = g.get("amp_dtype", (sec or {}).get("amp_dtype", "float16"))
    if raw not in ("float16", "bfloat16"):
        raise ConfigError(r.file, "Global.amp_dtype", f"{raw!r}: expected float16 or bfloat16")
    return str(raw)


def _amp_modes(r: _Reader) -> tuple[list[dict[str, Any]], str, int | None]:
    """Every AMP format PaddleOCR has used -> (AMP modes, where they came from, epoch_num); never empty."""
    g = r.section("Global")
    for k in g:
        if k in NO_EFFECT:
            continue
        if k not in AMP_KEYS | {"epoch_num", "seed"}:
            r.skip(f"Global.{k}", "not read by ampbench" if k != "pretrained_model" else
                   "ampbench trains from random initialisation (no download at run time)")
    sec = r.cfg.get("AMP")
    if sec is not None and not isinstance(sec, dict):
        raise ConfigError(r.file, "AMP", "must be a mapping (scale_loss, use_dynamic_loss_scaling)")
    if g.get("use_amp"):
        if sec:
            r.skip("AMP", "Global.use_amp is set, which PaddleOCR reads instead of the AMP section")
        return [_global_amp(r, g)], "Global.use_amp", g.get("epoch_num")
    if sec is not None and sec.get("use_amp", True) is not False:
        return [_section_amp(r, sec)], "the top-level AMP section", g.get("epoch_num")
    if sec is not None:
        r.skip("AMP", "AMP.use_amp is false")
    dtype = _fallback_dtype(r, g, sec)
    modes = [{"name": _named(lv, dtype), "level": lv, "dtype": dtype, "scaler": dict(DEFAULT_SCALER),
              "flags": dict(PADDLEOCR_AMP_FLAGS), **({"master_weight": True} if lv == "O2" else {})}
             for lv in ("O1", "O2")]
    why = (f"the config turns AMP on nowhere (no Global.use_amp, no AMP section): added O1 and O2 {dtype} with "
           "the flags of PaddleOCR's detection doc (scale_loss 1024, dynamic loss scaling)")
    return modes, why, g.get("epoch_num")


def load_config(path: str | Path) -> dict[str, Any]:
    """A PaddleOCR YAML config as a mapping, read within the bounds of every import (size, depth,
    aliases); shared with the command import (paddleocr_command.py)."""

    file = str(path)
    cfg = load_yaml(read_input(path, "PaddleOCR config"), file)
    if not isinstance(cfg, dict):
        raise ConfigError(file, "", "a PaddleOCR config is a YAML mapping (Global, Architecture, ...)")
    return cfg


def import_paddleocr(path: str | Path, synthetic: bool = False) -> Imported:
    """Read a PaddleOCR det YAML config into a suite (see the module docstring)."""
    file = str(path)
    cfg = load_config(path)
    with boundary(file):
        return _import(cfg, file, Path(path), synthetic)


def _import(cfg: dict[str, Any], file: str, path: Path, synthetic: bool) -> Imported:
    r = _Reader(cfg, file)
    wl = _architecture(r)
    wl["loss"] = _loss(r)
    wl.update(_post_and_metric(r))
    batch, n_train = _datasets(r, wl, synthetic)
    steps_per_epoch = max(1, math.ceil(n_train / batch))
    opt = _optimizer(r, steps_per_epoch)
    amps, amp_from, epochs = _amp_modes(r)
    steps = r.num("Global.epoch_num", epochs, int, minimum=1, maximum=10**6) * steps_per_epoch if epochs is not None else 3000
    r.rest("(top level)", cfg, {"Global", "AMP", "Architecture", "Loss", "Optimizer", "PostProcess", "Metric",
                                "Train", "Eval"})
    r.rest("Train", r.section("Train"), {"dataset", "loader"})
    r.rest("Eval", r.section("Eval"), {"dataset", "loader"})
    name = slug(Path(path).stem, fallback="paddleocr")
    modes = [{"name": "fp32"}, *amps]
    r.out.decide(f"modes: fp32, {', '.join(m['name'] for m in amps)} (AMP from {amp_from})")
    r.out.notes.append(f"train.steps = epoch_num x ceil({n_train} images / batch {batch}) = {steps}.")
    seed = r.section("Global").get("seed")
    seed = 0 if seed is None else r.num("Global.seed", seed, int, minimum=0, maximum=2**32 - 1)
    r.out.suite = {
        "suite": {"name": name, "workload": "dbnet", "metric": "hmean", "seeds": [seed],
                  "description": f"PaddleOCR config {Path(path).name}"},
        "workload": wl,
        "train": {"batch_size": batch, "steps": steps, "warmup_steps": min(20, steps - 1), "optimizer": opt},
        "modes": modes,
        # hmean parity means nothing if FP32 detects no text (not measured on GPU; the bundled ocr suite's floor)
        "thresholds": {"metric_abs_tol": 0.02, "min_baseline_metric": MIN_BASELINE_HMEAN},
        "profiles": {"cpu": _cpu_profile(wl, opt)},
    }
    r.out.finish()
    return r.out


def _cpu_profile(wl: dict[str, Any], opt: dict[str, Any]) -> dict[str, Any]:
    prof: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in CPU_PROFILE.items()}
    prof["train"]["optimizer"] = {**opt, "lr_warmup_steps": min(int(opt.get("lr_warmup_steps", 0)), 20)}
    if wl["dataset"]["kind"] == "paddleocr":
        prof["workload"]["dataset"] = {**wl["dataset"], "max_images": 256, "eval_images": 32}
    else:
        prof["workload"]["dataset"] = {"kind": "synthetic-scene-text", "images": 256, "eval_images": 32,
                                       "lines": [1, 3], "text_height": [0.12, 0.25], "max_angle": 10}
    return prof

