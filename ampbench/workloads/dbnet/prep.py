"""Training targets prepared once (not timed): PaddleOCR's label ops, letterboxing, cached arrays.

Data is prepared into uint8/float16 arrays in the cache folder, because the worker times
`next(batches)` as part of a step; normalisation happens on the device. Label maps
(DetLabelEncode, MakeBorderMap, MakeShrinkMap) and box extraction (DBPostProcess) are
PaddleOCR's own, so targets and boxes are exactly what PaddleOCR trains and evaluates with.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

TRAIN_ARRAYS = {"image": np.uint8, "shrink_map": np.uint8, "shrink_mask": np.uint8,
                "threshold_map": np.float16, "threshold_mask": np.uint8}


def ppocr_ops() -> dict[str, Any]:
    """PaddleOCR's label ops and post-processing; imported lazily (paddleocr edits sys.path)."""
    try:
        from paddleocr.ppocr.data.imaug import DetLabelEncode, MakeBorderMap, MakeShrinkMap
        from paddleocr.ppocr.postprocess.db_postprocess import DBPostProcess
    except ImportError as e:
        raise ImportError(f"the dbnet workload needs paddleocr==2.10.0 (bash scripts/setup.sh --suites ocr): {e}") from e
    return {"DetLabelEncode": DetLabelEncode, "MakeBorderMap": MakeBorderMap,
            "MakeShrinkMap": MakeShrinkMap, "DBPostProcess": DBPostProcess}


def paddleocr_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("paddleocr")
    except PackageNotFoundError:
        return "missing"


def letterbox(image: np.ndarray, size: int) -> tuple[np.ndarray, float]:
    """Scale the longer side to `size` and pad bottom/right: deterministic, so labels can be cached.
    Returns the image and the scale to apply to its polygons."""
    import cv2

    h, w = image.shape[:2]
    if (h, w) == (size, size):
        return image, 1.0
    s = size / max(h, w)
    nh, nw = max(1, round(h * s)), max(1, round(w * s))
    out = np.zeros((size, size, 3), np.uint8)
    out[:nh, :nw] = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
    return out, s


def make_label_maps(image: np.ndarray, label_json: str, p: Any, ops: dict[str, Any]) -> dict[str, np.ndarray]:
    """PaddleOCR's DB train chain for one image: DetLabelEncode -> letterbox -> MakeBorderMap -> MakeShrinkMap."""
    data: dict[str, Any] | None = ops["DetLabelEncode"]()({"image": image, "label": label_json})
    if data is None:  # no text in the image: all background
        data = {"image": image, "polys": np.zeros((0, 4, 2), np.float32), "texts": [],
                "ignore_tags": np.zeros((0,), bool)}
    data["image"], scale = letterbox(data["image"], p.image_size)
    data["polys"] = (data["polys"] * np.float32(scale)).astype(np.float32)
    data = ops["MakeBorderMap"](shrink_ratio=p.shrink_ratio, thresh_min=p.thresh_min, thresh_max=p.thresh_max)(data)
    data = ops["MakeShrinkMap"](min_text_size=p.min_text_size, shrink_ratio=p.shrink_ratio)(data)
    return data


def build_train_arrays(records: list[Any], p: Any, out_dir: Path) -> None:
    """Label maps for every training image, as .npy files that later trials memory-map."""
    from ampbench.workloads.dbnet.labels import load_image

    ops = ppocr_ops()
    n, s = len(records), p.image_size
    arrays = {
        k: np.lib.format.open_memmap(out_dir / f"{k}.npy", mode="w+", dtype=dt,
                                     shape=(n, s, s, 3) if k == "image" else (n, s, s))
        for k, dt in TRAIN_ARRAYS.items()
    }
    for i, rec in enumerate(records):
        d = make_label_maps(load_image(rec.path, rec.where), rec.label, p, ops)
        for k in TRAIN_ARRAYS:
            arrays[k][i] = d[k]
    for a in arrays.values():
        a.flush()


def cached_dir(root: Path, key: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """root/<hash of key>, built once via build(tmp_dir) in a temporary sibling then renamed."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    final = root / digest
    if (final / "done").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    try:
        build(tmp)
        (tmp / "key.json").write_text(json.dumps(key, indent=1, default=str))
        (tmp / "done").write_text("")
        try:
            if final.exists() and not (final / "done").is_file():
                shutil.rmtree(final, ignore_errors=True)  # leftover of a crashed build
            os.replace(tmp, final)
        except OSError:
            if not (final / "done").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
