"""Image classification with paddle.vision.models (resnet18/34/50, mobilenet_v3), random init.

The metric is held-out top-1 accuracy. Grayscale data (MNIST) is tiled to 3 channels so every
backbone is used unmodified.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from ampbench.config.suite import StrictInt
from ampbench.workloads.base import Batch, Workload, WorkloadParams, bundled, shuffled_indices

MEAN, STD = 0.45, 0.25


class ImageDataset(WorkloadParams):
    kind: Literal["mnist-5k", "image-folder", "cifar-python"] = "mnist-5k"
    path: str | None = None
    limit: StrictInt | None = Field(None, ge=10)  # use only the first N images (after a fixed shuffle)


class ResNetParams(WorkloadParams):
    model: Literal["resnet18", "resnet34", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large"] = "resnet18"
    image_size: StrictInt = Field(32, ge=16)
    dataset: ImageDataset = ImageDataset()
    eval_fraction: float = Field(0.2, gt=0, lt=1)
    eval_batch_size: StrictInt = Field(250, ge=1)


@bundled
class ResNetWorkload(Workload[ResNetParams]):
    name = "resnet"
    Params = ResNetParams
    metric_goals: ClassVar[dict[str, str]] = {"top1": "max", "eval_loss": "min"}

    def prepare(self) -> None:
        from ampbench.workloads.resnet import images

        p = self.params
        ds = p.dataset
        if ds.kind == "mnist-5k":
            data = images.mnist_5k()
        elif ds.kind == "cifar-python":
            data = images.cifar_python(Path(ds.path or "."))
        else:
            data = images.image_folder(Path(ds.path or "."), p.image_size)
        x, y = data.x, data.y
        if ds.limit:
            keep = np.sort(np.random.RandomState(7).permutation(len(x))[: ds.limit])
            x, y = x[keep], y[keep]
        x = images.resize(x, p.image_size)
        tr, ev = images.split(len(x), p.eval_fraction)
        self.num_classes = len(data.classes)
        self.x_train, self.y_train = x[tr], y[tr]
        self.x_eval, self.y_eval = x[ev], y[ev]

    def describe(self) -> dict[str, Any]:
        counts = np.bincount(self.y_eval, minlength=self.num_classes)
        return {"train_images": len(self.x_train), "eval_images": len(self.x_eval),
                "classes": self.num_classes, "majority_rate": float(counts.max() / counts.sum())}

    def build_model(self) -> Any:
        from paddle.vision import models

        p = self.params
        ctor = getattr(models, p.model)
        if p.model.startswith("mobilenet"):
            return ctor(pretrained=False, num_classes=self.num_classes, scale=1.0)
        return ctor(pretrained=False, num_classes=self.num_classes)

    def _tensor(self, x: np.ndarray) -> Any:
        import paddle

        xf = (x.astype(np.float32) / 255.0 - MEAN) / STD
        if xf.shape[1] == 1:
            xf = np.repeat(xf, 3, axis=1)
        return paddle.to_tensor(xf)

    def train_batches(self, seed: int, batch_size: int) -> Iterator[Batch]:
        for idx in shuffled_indices(len(self.x_train), batch_size, seed):
            yield Batch(inputs=(self.x_train[idx], self.y_train[idx]), samples=len(idx))

    def loss(self, model: Any, batch: Batch) -> Any:
        import paddle
        import paddle.nn.functional as F

        x, y = batch.inputs
        logits = model(self._tensor(x))
        return F.cross_entropy(logits.astype("float32"), paddle.to_tensor(y))

    def evaluate(self, model: Any) -> dict[str, float]:
        import paddle
        import paddle.nn.functional as F

        p = self.params
        correct, loss_sum = 0, 0.0
        with paddle.no_grad():
            for i in range(0, len(self.x_eval), p.eval_batch_size):
                xb, yb = self.x_eval[i: i + p.eval_batch_size], self.y_eval[i: i + p.eval_batch_size]
                logits = model(self._tensor(xb)).astype("float32")
                loss_sum += float(F.cross_entropy(logits, paddle.to_tensor(yb), reduction="sum"))
                correct += int((logits.argmax(1).numpy() == yb).sum())
        n = len(self.x_eval)
        return {"top1": correct / n, "eval_loss": loss_sum / n}
