"""DBNet text detection (Liao et al., "Real-time Scene Text Detection with Differentiable
Binarization", AAAI 2020): the seed's OCR scenario, trained the way PaddleOCR's DB configs train.

Pieces: params.py (the `[workload]` table), backbones.py + model.py (network), loss.py
(PaddleOCR's DBLoss structure), metric.py (DetMetric rules), labels.py (SimpleDataSet's label
files), data.py (synthetic scene text), prep.py (PaddleOCR label ops and cached arrays).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ampbench.workloads.base import Batch, Workload, bundled
from ampbench.workloads.dbnet.params import DBNetParams, LabelFileData, SyntheticData
from ampbench.workloads.dbnet.prep import (
    TRAIN_ARRAYS,
    build_train_arrays,
    cached_dir,
    letterbox,
    make_label_maps,
    paddleocr_version,
    ppocr_ops,
)

__all__ = ["DBNetParams", "DBNetWorkload", "make_label_maps", "ppocr_ops"]
LABEL_CACHE_VERSION = 2


def label_file_records(d: LabelFileData) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Train and eval records of a PaddleOCR-format set, plus what shapes them (the cache key)."""
    from ampbench.workloads.dbnet.labels import fingerprint, read_label_files

    train = read_label_files(d.train_files, d.data_dir, d.ratios, d.seed)[: d.max_images]
    eval_dir = d.eval_data_dir if d.eval_data_dir is not None else d.data_dir
    evals = read_label_files(d.eval_files, eval_dir, [1.0] * len(d.eval_files))[: d.eval_images]
    source = {"params": d.model_dump(mode="json"),
              "data_dir": str(Path(d.data_dir).resolve()) if d.data_dir else None,
              "files": [str(Path(f).resolve()) for f in d.train_files],
              **fingerprint(d.train_files, train)}
    return train, evals, source


@bundled
class DBNetWorkload(Workload[DBNetParams]):
    name = "dbnet"
    Params = DBNetParams
    shards_by_rank = True
    metric_goals: ClassVar[dict[str, str]] = {"hmean": "max", "precision": "max", "recall": "max"}

    @classmethod
    def check_suite(cls, params: DBNetParams, suite: Any) -> list[tuple[str, str]]:
        """Label files and the images they list must exist before any trial starts."""
        from ampbench.workloads.dbnet.labels import missing_images

        problems = super().check_suite(params, suite)
        d = params.dataset
        if not isinstance(d, LabelFileData):
            return problems
        for key, files in (("train_label", d.train_files), ("eval_label", d.eval_files)):
            gone = [f for f in files if not Path(f).is_file()]
            if gone:
                problems.append((f"workload.dataset.{key}",
                                 f"label file not found: {', '.join(gone)} (relative to {Path.cwd()})"))
        if problems:
            return problems
        train, evals, _ = label_file_records(d)
        gone = missing_images(train + evals)
        if gone:
            problems.append(("workload.dataset", "images listed but missing: " + "; ".join(gone)))
        return problems

    def _cache_root(self) -> Path:
        return Path(self.ctx.cache_dir)

    def _records(self) -> tuple[list[Any], list[Any], dict[str, Any]]:
        """Train and eval records (LabeledImage) plus a description of their source for cache keys."""
        from ampbench.workloads.dbnet.data import SceneTextSpec, ensure_dataset
        from ampbench.workloads.dbnet.labels import read_label_file

        p = self.params
        d = p.dataset
        if isinstance(d, LabelFileData):
            return label_file_records(d)
        def split(images: int, seed: int) -> SceneTextSpec:
            return SceneTextSpec(images=images, seed=seed, image_size=p.image_size, lines=d.lines,
                                 text_height=d.text_height, cjk_fraction=d.cjk_fraction, max_angle=d.max_angle,
                                 blur_prob=d.blur_prob)

        train_file = ensure_dataset(split(d.images, 2 * d.seed), self._cache_root())
        eval_file = ensure_dataset(split(d.eval_images, 2 * d.seed + 1), self._cache_root())
        source = {"train": str(train_file.parent.name), "eval": str(eval_file.parent.name)}
        return read_label_file(train_file), read_label_file(eval_file), source

    def prepare(self) -> None:
        from ampbench.workloads.dbnet.labels import load_image

        p = self.params
        train, evals, source = self._records()
        key = {"source": source, "n": len(train), "paddleocr": paddleocr_version(), "v": LABEL_CACHE_VERSION,
               **p.model_dump(include={"image_size", "shrink_ratio", "thresh_min", "thresh_max", "min_text_size"})}
        folder = cached_dir(self._cache_root() / "dbnet_labels", key, lambda tmp: build_train_arrays(train, p, tmp))
        self.train_arrays = {k: np.load(folder / f"{k}.npy", mmap_mode="r") for k in TRAIN_ARRAYS}
        self.label_dir = folder
        images, gts, ignores = [], [], []
        for rec in evals:
            img, scale = letterbox(load_image(rec.path, rec.where), p.image_size)
            images.append(img)
            gts.append([poly * scale for poly in rec.polys])
            ignores.append(list(rec.ignore))
        self.eval_images = np.stack(images) if images else np.zeros((0, p.image_size, p.image_size, 3), np.uint8)
        self.eval_gts, self.eval_ignores = gts, ignores

    def build_model(self) -> Any:
        from ampbench.workloads.dbnet.model import build_dbnet

        return build_dbnet(self.params)

    def train_batches(self, seed: int, batch_size: int) -> Iterator[Batch]:
        """Shuffled epochs from RandomState(seed); this rank's share when data-parallel."""
        n = len(self.train_arrays["image"])
        world, rank = max(self.ctx.world_size, 1), self.ctx.rank
        if n // world < 1:
            raise ValueError(f"{n} training images cannot be shared by {world} ranks")
        rng = np.random.RandomState(seed)
        while True:
            order = rng.permutation(n)[rank::world]
            if len(order) < batch_size:  # small sets: repeat within the "epoch"
                order = np.resize(order, batch_size)
            for i in range(0, len(order) - batch_size + 1, batch_size):
                idx = np.sort(order[i: i + batch_size])
                yield Batch(inputs={k: np.ascontiguousarray(a[idx]) for k, a in self.train_arrays.items()},
                            samples=len(idx))

    def loss_terms(self, model: Any, batch: Batch) -> dict[str, Any]:
        """PaddleOCR's DBLoss dict for one batch; the loss itself always runs in float32."""
        import paddle

        from ampbench.workloads.dbnet.loss import DBLoss

        x = batch.inputs
        pred = model(paddle.to_tensor(x["image"]))
        with paddle.amp.auto_cast(enable=False):
            # float16 arrays are widened on the host: a float16 tensor on the device would show up in
            # Paddle's op statistics as low-precision work and could pass for AMP activity on CPU.
            maps = {k: paddle.to_tensor(x[k] if x[k].dtype == np.uint8 else x[k].astype(np.float32)).astype("float32")
                    for k in TRAIN_ARRAYS if k != "image"}
            labels = [None, maps["threshold_map"], maps["threshold_mask"], maps["shrink_map"], maps["shrink_mask"]]
            return DBLoss(**self.params.loss.model_dump())({"maps": pred.astype("float32")}, labels)

    def loss(self, model: Any, batch: Batch) -> Any:
        return self.loss_terms(model, batch)["loss"]

    def predict_boxes(self, model: Any, images: np.ndarray) -> list[np.ndarray]:
        """Quadrilaterals for each image via PaddleOCR's DBPostProcess on the probability map."""
        import paddle

        p = self.params
        post = ppocr_ops()["DBPostProcess"](thresh=p.det_thresh, box_thresh=p.box_thresh,
                                            max_candidates=p.max_candidates, unclip_ratio=p.unclip_ratio)
        out: list[np.ndarray] = []
        with paddle.no_grad():
            for i in range(0, len(images), p.eval_batch_size):
                chunk = images[i: i + p.eval_batch_size]
                prob = model(paddle.to_tensor(chunk)).astype("float32").numpy()
                h, w = chunk.shape[1:3]
                shapes = [[h, w, 1.0, 1.0]] * len(chunk)
                out += [r["points"] for r in post({"maps": prob}, shapes)]
        return out

    def evaluate(self, model: Any) -> dict[str, float]:
        from ampbench.workloads.dbnet.metric import detection_scores

        preds = self.predict_boxes(model, self.eval_images)
        s = detection_scores(self.eval_gts, [list(b) for b in preds], self.eval_ignores)
        return {"hmean": s["hmean"], "precision": s["precision"], "recall": s["recall"]}

    def describe(self) -> dict[str, Any]:
        p = self.params
        info: dict[str, Any] = {"backbone": p.backbone, "image_size": p.image_size, "dataset": p.dataset.kind,
                                "loss": p.loss.main_loss_type}
        if hasattr(self, "train_arrays"):
            sm = self.train_arrays["shrink_map"]
            info.update(train_images=len(sm), eval_images=len(self.eval_images),
                        eval_text_regions=int(sum(len(g) - sum(ig) for g, ig in zip(self.eval_gts, self.eval_ignores))),
                        label_cache=str(self.label_dir))
        if isinstance(p.dataset, SyntheticData):
            from ampbench.workloads.dbnet.data import find_fonts

            info["fonts"] = find_fonts().names()
        return info
