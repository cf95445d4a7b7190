"""DBNet text detection (Liao et al., "Real-time Scene Text Detection with Differentiable
Binarization", AAAI 2020): the seed's OCR scenario.

No PyPI paddleocr ships PaddleOCR's modeling code, so the network and loss are written here
from the paper: a `paddle.vision.models` backbone (ResNet or MobileNetV3, chosen in the TOML),
an FPN neck that fuses strides 4-32 at 1/4 resolution, and a DB head predicting a probability
map P, a threshold map T and the approximate binary map B = 1 / (1 + exp(-k (P - T))).
Label maps (MakeBorderMap, MakeShrinkMap, DetLabelEncode) and box extraction (DBPostProcess)
are PaddleOCR's own, so targets and boxes are exactly what PaddleOCR trains and evaluates with.

Data is prepared once (not timed) into uint8/float16 arrays in the cache folder, because the
worker times `next(batches)` as part of a step; normalisation happens on the device.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal, Union

import numpy as np
from pydantic import Field, field_validator

from ampbench.workloads.base import Batch, Workload, WorkloadParams

MEAN = (0.485, 0.456, 0.406)  # PaddleOCR's det NormalizeImage defaults (ImageNet)
STD = (0.229, 0.224, 0.225)
LABEL_CACHE_VERSION = 1


class SyntheticData(WorkloadParams):
    """Generated scene text (ampbench.workloads.dbnet.data); train and eval splits use different seeds."""

    kind: Literal["synthetic-scene-text"] = "synthetic-scene-text"
    images: int = Field(1000, ge=1)
    eval_images: int = Field(100, ge=1)
    seed: int = 0
    lines: tuple[int, int] = (2, 6)
    text_height: tuple[float, float] = (0.04, 0.10)
    cjk_fraction: float = Field(0.3, ge=0, le=1)
    max_angle: float = Field(20.0, ge=0, le=90)
    blur_prob: float = Field(0.3, ge=0, le=1)


class LabelFileData(WorkloadParams):
    """Any PaddleOCR-format detection set, e.g. ICDAR 2015 converted by PaddleOCR's docs."""

    kind: Literal["paddleocr"]
    train_label: str
    eval_label: str
    data_dir: str | None = None  # image paths in the label files are relative to this
    max_images: int | None = Field(None, ge=1)
    eval_images: int | None = Field(None, ge=1)


class DBNetParams(WorkloadParams):
    backbone: Literal["resnet18", "resnet34", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large"] = "resnet18"
    backbone_scale: float = Field(1.0, gt=0)  # MobileNetV3 width multiplier
    fpn_channels: int = Field(256, ge=8)
    image_size: int = Field(640, ge=32)
    k: float = Field(50.0, gt=0)
    # "sigmoid" is the numerically stable form of B; "exp" is PaddleOCR's literal
    # reciprocal(1 + exp(-k (P - T))), which can overflow in float16 (an AMP hazard to study).
    binarize: Literal["sigmoid", "exp"] = "sigmoid"
    shrink_ratio: float = Field(0.4, gt=0, lt=1)
    thresh_min: float = 0.3
    thresh_max: float = 0.7
    min_text_size: int = Field(8, ge=1)
    loss_alpha: float = Field(5.0, ge=0)   # PaddleOCR det configs: alpha 5, beta 10, ohem 3
    loss_beta: float = Field(10.0, ge=0)
    ohem_ratio: float = Field(3.0, gt=0)
    det_thresh: float = Field(0.3, gt=0, lt=1)
    box_thresh: float = Field(0.6, gt=0, lt=1)
    unclip_ratio: float = Field(1.5, gt=0)
    eval_batch_size: int = Field(8, ge=1)
    # Batch-norm running-stat momentum for every BN layer. paddle.vision's MobileNetV3 uses 0.99,
    # whose running statistics lag the weights for hundreds of steps, so an eval-mode model
    # outputs a flat map early in training; 0.9 is Paddle's default and what PaddleOCR's backbones use.
    bn_momentum: float | None = Field(0.9, gt=0, lt=1)
    dataset: Annotated[Union[SyntheticData, LabelFileData], Field(discriminator="kind")] = SyntheticData()

    @field_validator("image_size")
    @classmethod
    def _multiple_of_32(cls, v: int) -> int:
        if v % 32:
            raise ValueError(f"image_size must be a multiple of 32 (the backbone's stride), got {v}")
        return v


# ------------------------------------------------------------------ PaddleOCR pieces (lazy)


def ppocr_ops() -> dict[str, Any]:
    """PaddleOCR's label ops and post-processing; imported lazily (paddleocr edits sys.path)."""
    try:
        from paddleocr.ppocr.data.imaug import DetLabelEncode, MakeBorderMap, MakeShrinkMap
        from paddleocr.ppocr.postprocess.db_postprocess import DBPostProcess
    except ImportError as e:
        raise ImportError(f"the dbnet workload needs paddleocr==2.10.0 (pip install 'ampbench[ocr]'): {e}") from e
    return {"DetLabelEncode": DetLabelEncode, "MakeBorderMap": MakeBorderMap,
            "MakeShrinkMap": MakeShrinkMap, "DBPostProcess": DBPostProcess}


def _paddleocr_version() -> str:
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


def make_label_maps(image: np.ndarray, label_json: str, p: DBNetParams, ops: dict[str, Any]) -> dict[str, np.ndarray]:
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


# ------------------------------------------------------------------ cached arrays

TRAIN_ARRAYS = {"image": np.uint8, "shrink_map": np.uint8, "shrink_mask": np.uint8,
                "threshold_map": np.float16, "threshold_mask": np.uint8}


def build_train_arrays(records: list[Any], p: DBNetParams, out_dir: Path) -> None:
    """Label maps for every training image, as .npy files that later trials memory-map."""
    from ampbench.workloads.dbnet.data import load_image

    ops = ppocr_ops()
    n, s = len(records), p.image_size
    arrays = {
        k: np.lib.format.open_memmap(out_dir / f"{k}.npy", mode="w+", dtype=dt,
                                     shape=(n, s, s, 3) if k == "image" else (n, s, s))
        for k, dt in TRAIN_ARRAYS.items()
    }
    for i, rec in enumerate(records):
        d = make_label_maps(load_image(rec.path), rec.label, p, ops)
        for k in TRAIN_ARRAYS:
            arrays[k][i] = d[k]
    for a in arrays.values():
        a.flush()


def cached_dir(root: Path, key: dict[str, Any], build: Any) -> Path:
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


# ------------------------------------------------------------------ model


def _backbone_layers(name: str, scale: float) -> list[Any]:
    """The backbone as a flat list of layers in forward order (no pooling or classifier)."""
    from paddle.vision import models

    if name.startswith("resnet"):
        m = getattr(models, name)(num_classes=0, with_pool=False)
        return [m.conv1, m.bn1, m.relu, m.maxpool, m.layer1, m.layer2, m.layer3, m.layer4]
    m = getattr(models, name)(scale=scale, num_classes=0, with_pool=False)
    return [m.conv, *m.blocks, m.lastconv]


def split_stages(layers: list[Any], probe: int = 64) -> tuple[list[Any], list[int]]:
    """Group layers into 4 stages ending at strides 4, 8, 16 and 32 (found by a zero-input probe
    in eval mode, so batch-norm statistics and RNG are untouched); also returns their channels."""
    import paddle
    import paddle.nn as nn

    x = paddle.zeros([1, 3, probe, probe])
    ends: dict[int, tuple[int, int]] = {}
    with paddle.no_grad():
        for i, layer in enumerate(layers):
            was = layer.training
            layer.eval()
            x = layer(x)
            layer.train() if was else None
            stride = probe // int(x.shape[-1])
            ends[stride] = (i, int(x.shape[1]))
    missing = [s for s in (4, 8, 16, 32) if s not in ends]
    if missing:
        raise ValueError(f"backbone has no output at stride(s) {missing}")
    stages, channels, start = [], [], 0
    for s in (4, 8, 16, 32):
        end, ch = ends[s]
        stages.append(nn.Sequential(*layers[start: end + 1]))
        channels.append(ch)
        start = end + 1
    return stages, channels


def build_dbnet(p: DBNetParams) -> Any:
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    def conv_bn_relu(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2D(cin, cout, 3, padding=1, bias_attr=False), nn.BatchNorm2D(cout), nn.ReLU())

    class FPN(nn.Layer):
        """1x1 lateral convs, top-down sum, 3x3 smoothing to C/4 each, upsample all to 1/4, concat."""

        def __init__(self, in_channels: list[int], c: int):
            super().__init__()
            self.lateral = nn.LayerList([nn.Conv2D(ci, c, 1, bias_attr=False) for ci in in_channels])
            self.smooth = nn.LayerList([nn.Conv2D(c, c // 4, 3, padding=1, bias_attr=False) for _ in in_channels])

        def forward(self, feats: list[Any]) -> Any:
            lat = [conv(f) for conv, f in zip(self.lateral, feats)]
            for i in range(len(lat) - 2, -1, -1):
                lat[i] = lat[i] + F.interpolate(lat[i + 1], size=lat[i].shape[-2:], mode="nearest")
            size = lat[0].shape[-2:]
            outs = [F.interpolate(s(x), size=size, mode="nearest") if i else s(x)
                    for i, (s, x) in enumerate(zip(self.smooth, lat))]
            return paddle.concat(outs[::-1], axis=1)

    class Branch(nn.Sequential):
        """3x3 conv, then two stride-2 transposed convs back to full resolution, sigmoid."""

        def __init__(self, c: int):
            q = max(c // 4, 1)
            super().__init__(
                conv_bn_relu(c, q),
                nn.Conv2DTranspose(q, q, 2, stride=2), nn.BatchNorm2D(q), nn.ReLU(),
                nn.Conv2DTranspose(q, 1, 2, stride=2), nn.Sigmoid(),
            )

    class DBNet(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            stages, channels = split_stages(_backbone_layers(p.backbone, p.backbone_scale))
            self.stages = nn.LayerList(stages)
            c = p.fpn_channels - p.fpn_channels % 4
            self.neck = FPN(channels, c)
            self.prob = Branch(c)
            self.thresh = Branch(c)

        @staticmethod
        def normalize(images_u8: Any) -> Any:
            """NHWC uint8 -> normalised NCHW float32 (PaddleOCR's NormalizeImage + ToCHWImage, on device).
            Mean/std are made per call, not buffers, so O2's decorate cannot cast them to float16."""
            x = images_u8.astype("float32").transpose([0, 3, 1, 2])
            mean = paddle.to_tensor([255.0 * m for m in MEAN], dtype="float32").reshape([1, 3, 1, 1])
            scale = paddle.to_tensor([1.0 / (255.0 * s) for s in STD], dtype="float32").reshape([1, 3, 1, 1])
            return (x - mean) * scale

        def forward(self, images_u8: Any) -> Any:
            x = self.normalize(images_u8)
            feats = []
            for stage in self.stages:
                x = stage(x)
                feats.append(x)
            fused = self.neck(feats)
            prob = self.prob(fused)
            if not self.training:
                return prob
            thresh = self.thresh(fused)
            if p.binarize == "sigmoid":
                binary = F.sigmoid(p.k * (prob - thresh))
            else:
                binary = paddle.reciprocal(1 + paddle.exp(-p.k * (prob - thresh)))
            return paddle.concat([prob, thresh, binary], axis=1)

    model = DBNet()
    if p.bn_momentum is not None:
        for layer in model.sublayers():
            if isinstance(layer, nn.layer.norm._BatchNormBase):
                layer._momentum = p.bn_momentum
    return model


# ------------------------------------------------------------------ loss


def db_loss(pred: Any, shrink_map: Any, shrink_mask: Any, threshold_map: Any, threshold_mask: Any,
            alpha: float = 5.0, beta: float = 10.0, ohem_ratio: float = 3.0, eps: float = 1e-6) -> tuple[Any, dict[str, Any]]:
    """alpha * balanced BCE(P) + beta * masked L1(T) + Dice(B), computed in float32.

    Balanced BCE keeps every positive pixel and the `ohem_ratio` x as many hardest negatives
    (largest loss), over the whole batch as PaddleOCR does; the top-k is a descending sort plus a
    rank mask so the loss needs no device-to-host sync.
    """
    import paddle
    import paddle.nn.functional as F

    pred = pred.astype("float32")
    prob, thresh, binary = pred[:, 0], pred[:, 1], pred[:, 2]
    positive = shrink_map * shrink_mask
    negative = (1 - shrink_map) * shrink_mask
    pos_count = positive.sum()
    neg_count = paddle.minimum(negative.sum(), paddle.floor(pos_count * ohem_ratio))
    bce = F.binary_cross_entropy(prob, shrink_map, reduction="none")
    neg_sorted = paddle.sort((bce * negative).flatten(), descending=True)
    rank = paddle.arange(neg_sorted.shape[0], dtype="float32")
    neg_loss = (neg_sorted * (rank < neg_count).astype("float32")).sum()
    loss_shrink = ((bce * positive).sum() + neg_loss) / (pos_count + neg_count + eps)

    loss_thresh = (paddle.abs(thresh - threshold_map) * threshold_mask).sum() / (threshold_mask.sum() + eps)

    inter = (binary * shrink_map * shrink_mask).sum()
    union = (binary * shrink_mask).sum() + (shrink_map * shrink_mask).sum() + eps
    loss_binary = 1 - 2.0 * inter / union

    total = alpha * loss_shrink + beta * loss_thresh + loss_binary
    return total, {"shrink": loss_shrink, "threshold": loss_thresh, "binary": loss_binary}


# ------------------------------------------------------------------ the workload


class DBNetWorkload(Workload[DBNetParams]):
    name = "dbnet"
    Params = DBNetParams
    shards_by_rank = True
    metric_goals = {"hmean": "max", "precision": "max", "recall": "max"}

    def _cache_root(self) -> Path:
        return Path(self.ctx.cache_dir)

    def _records(self) -> tuple[list[Any], list[Any], dict[str, Any]]:
        """Train and eval records (LabeledImage) plus a description of their source for cache keys."""
        from ampbench.workloads.dbnet.data import SceneTextSpec, ensure_dataset, read_label_file

        p = self.params
        d = p.dataset
        if isinstance(d, SyntheticData):
            common = dict(image_size=p.image_size, lines=d.lines, text_height=d.text_height,
                          cjk_fraction=d.cjk_fraction, max_angle=d.max_angle, blur_prob=d.blur_prob)
            train_spec = SceneTextSpec(images=d.images, seed=2 * d.seed, **common)
            eval_spec = SceneTextSpec(images=d.eval_images, seed=2 * d.seed + 1, **common)
            train_file = ensure_dataset(train_spec, self._cache_root())
            eval_file = ensure_dataset(eval_spec, self._cache_root())
            train, evals = read_label_file(train_file), read_label_file(eval_file)
            source = {"train": str(train_file.parent.name), "eval": str(eval_file.parent.name)}
        else:
            train = read_label_file(d.train_label, d.data_dir)[: d.max_images]
            evals = read_label_file(d.eval_label, d.data_dir)[: d.eval_images]
            files = [Path(d.train_label), Path(d.eval_label)]
            source = {"files": [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime) for f in files],
                      "max_images": d.max_images}
        return train, evals, source

    def prepare(self) -> None:
        from ampbench.workloads.dbnet.data import load_image

        p = self.params
        train, evals, source = self._records()
        key = {"source": source, "n": len(train), "paddleocr": _paddleocr_version(), "v": LABEL_CACHE_VERSION,
               **p.model_dump(include={"image_size", "shrink_ratio", "thresh_min", "thresh_max", "min_text_size"})}
        folder = cached_dir(self._cache_root() / "dbnet_labels", key, lambda tmp: build_train_arrays(train, p, tmp))
        self.train_arrays = {k: np.load(folder / f"{k}.npy", mmap_mode="r") for k in TRAIN_ARRAYS}
        self.label_dir = folder
        images, gts, ignores = [], [], []
        for rec in evals:
            img, scale = letterbox(load_image(rec.path), p.image_size)
            images.append(img)
            gts.append([poly * scale for poly in rec.polys])
            ignores.append(list(rec.ignore))
        self.eval_images = np.stack(images) if images else np.zeros((0, p.image_size, p.image_size, 3), np.uint8)
        self.eval_gts, self.eval_ignores = gts, ignores

    def build_model(self) -> Any:
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

    def loss(self, model: Any, batch: Batch) -> Any:
        import paddle

        p = self.params
        x = batch.inputs
        pred = model(paddle.to_tensor(x["image"]))
        with paddle.amp.auto_cast(enable=False):
            # float16 arrays are widened on the host: a float16 tensor on the device would show up in
            # Paddle's op statistics as low-precision work and could pass for AMP activity on CPU.
            maps = {k: paddle.to_tensor(x[k] if x[k].dtype == np.uint8 else x[k].astype(np.float32)).astype("float32")
                    for k in TRAIN_ARRAYS if k != "image"}
            total, _parts = db_loss(pred, maps["shrink_map"], maps["shrink_mask"], maps["threshold_map"],
                                    maps["threshold_mask"], p.loss_alpha, p.loss_beta, p.ohem_ratio)
        return total

    def predict_boxes(self, model: Any, images: np.ndarray) -> list[np.ndarray]:
        """Quadrilaterals for each image via PaddleOCR's DBPostProcess on the probability map."""
        import paddle

        p = self.params
        post = ppocr_ops()["DBPostProcess"](thresh=p.det_thresh, box_thresh=p.box_thresh,
                                            unclip_ratio=p.unclip_ratio)
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
        info: dict[str, Any] = {"backbone": p.backbone, "image_size": p.image_size, "dataset": p.dataset.kind}
        if hasattr(self, "train_arrays"):
            sm = self.train_arrays["shrink_map"]
            info.update(train_images=int(len(sm)), eval_images=int(len(self.eval_images)),
                        eval_text_regions=int(sum(len(g) - sum(ig) for g, ig in zip(self.eval_gts, self.eval_ignores))),
                        label_cache=str(self.label_dir))
        if isinstance(p.dataset, SyntheticData):
            from ampbench.workloads.dbnet.data import find_fonts

            info["fonts"] = find_fonts().names()
        return info
