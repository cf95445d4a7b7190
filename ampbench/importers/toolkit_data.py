"""`--synthetic-data` for `import paddleclas`, `import paddleseg` and `import paddlerec`: a small data set in the
toolkit's own format, made by ampbench's code (nothing downloaded), so a toolkit's unmodified trainer can be
benchmarked before the user's data is at hand.

- PaddleClas (ppcls/data/dataloader/imagenet_dataset.py): an image folder and `train_list.txt` /
  `val_list.txt` of `relative/path.jpg LABEL` lines, read relative to `image_root`; the images are JPEG
  (its DecodeImage is cv2.imdecode), each class a colour and stripe direction with pixel noise, so a
  model can learn something in few steps.
- PaddleSeg (paddleseg/datasets/dataset.py, its `Dataset` type): an image folder and `train.txt` / `val.txt` of
  `image.png label.png` lines, read relative to `dataset_root`; each label a single-channel PNG of class ids
  (0 background, 1 a bright rectangle on noise), so mIoU moves within a few steps.
- PaddleRec's Criteo readers (models/rank/*/criteo_reader.py, its data/sample_data): lines of
  `slot:value` pairs (`click`, 13 `dense_feature`, categorical slots 1-26); the click follows a fixed
  random logistic rule over a few columns, so AUC is informative.

Each set is written in a temporary sibling folder and renamed into place (a half-written set is never
seen), into a folder beside the suite file that must not be a symbolic link; an existing complete set of
the same spec is reused.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ampbench.core.files import refuse_link

CLAS_TRAIN, CLAS_EVAL, CLAS_CLASSES, CLAS_SIZE = 16, 8, 4, 64
SEG_TRAIN, SEG_EVAL, SEG_CLASSES, SEG_SIZE = 16, 4, 2, 128
REC_TRAIN = 80   # samples (the sample_data PaddleRec ships for DeepFM has 80 lines)
DENSE, SPARSE = 13, 26


def _place(final: Path, write) -> Path:
    """`write(tmp)` into a temporary sibling, renamed to `final`; an existing `final` is kept."""
    refuse_link(final.parent)
    refuse_link(final)
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-"))
    try:
        write(tmp)
        try:
            os.replace(tmp, final)
        except OSError:   # another import finished first: keep theirs
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _image(label: int, rng: np.random.Generator) -> bytes:
    """One JPEG: the class's colour and stripe direction, with per-image noise and offset."""
    from PIL import Image

    palette = np.array([[200, 40, 40], [40, 200, 40], [40, 40, 200], [200, 200, 40]], dtype=np.float32)
    yy, xx = np.mgrid[0:CLAS_SIZE, 0:CLAS_SIZE]
    stripes = np.sin(((xx if label % 2 else yy) + rng.integers(0, 8)) * 0.5)[..., None]
    img = palette[label % len(palette)] * (0.75 + 0.25 * stripes) + rng.normal(0, 12, (CLAS_SIZE, CLAS_SIZE, 3))
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_imagenet_set(root: Path) -> tuple[Path, Path, Path]:
    """(image_root, train list, eval list) of PaddleClas's ImageNetDataset format under root/paddleclas-..."""
    name = f"paddleclas-{CLAS_TRAIN}-{CLAS_EVAL}-c{CLAS_CLASSES}-{CLAS_SIZE}px"

    def write(tmp: Path) -> None:
        rng = np.random.default_rng(0)
        for split, n in (("train", CLAS_TRAIN), ("val", CLAS_EVAL)):
            (tmp / split).mkdir()
            lines = []
            for i in range(n):
                label = i % CLAS_CLASSES
                (tmp / split / f"{i:04d}.jpg").write_bytes(_image(label, rng))
                lines.append(f"{split}/{i:04d}.jpg {label}\n")
            (tmp / f"{split}_list.txt").write_text("".join(lines), encoding="utf-8")

    folder = _place(root / name, write)
    return folder, folder / "train_list.txt", folder / "val_list.txt"


def write_seg_set(root: Path) -> tuple[Path, Path, Path]:
    """(dataset_root, train list, val list) of PaddleSeg's `Dataset` format under root/paddleseg-...: PNG images
    of noise with one bright rectangle each, and label PNGs (1 inside the rectangle, 0 elsewhere)."""
    from PIL import Image

    name = f"paddleseg-{SEG_TRAIN}-{SEG_EVAL}-c{SEG_CLASSES}-{SEG_SIZE}px"

    def write(tmp: Path) -> None:
        rng = np.random.default_rng(0)
        for split, n in (("train", SEG_TRAIN), ("val", SEG_EVAL)):
            (tmp / split).mkdir()
            lines = []
            for i in range(n):
                img = rng.integers(0, 80, (SEG_SIZE, SEG_SIZE, 3), dtype=np.uint8)
                lab = np.zeros((SEG_SIZE, SEG_SIZE), np.uint8)
                x, y = rng.integers(0, SEG_SIZE // 2, 2)
                w, h = rng.integers(SEG_SIZE // 4, SEG_SIZE // 2, 2)
                img[y:y + h, x:x + w] += 150
                lab[y:y + h, x:x + w] = 1
                Image.fromarray(img).save(tmp / split / f"{i:04d}.png")
                Image.fromarray(lab).save(tmp / split / f"{i:04d}_label.png")
                lines.append(f"{split}/{i:04d}.png {split}/{i:04d}_label.png\n")
            (tmp / f"{split}.txt").write_text("".join(lines), encoding="utf-8")

    folder = _place(root / name, write)
    return folder, folder / "train.txt", folder / "val.txt"


def write_criteo_set(root: Path) -> Path:
    """A folder of one text file in the format of PaddleRec's Criteo readers and its sample_data:
    space-separated `slot:value` pairs, `click:0|1`, 13 `dense_feature:FLOAT` in [0, 1], and one
    `N:ID` for each categorical slot 1-26 (ids below the models' sparse_feature_number, 1000001)."""
    name = f"paddlerec-criteo-{REC_TRAIN}"

    def write(tmp: Path) -> None:
        rng = np.random.default_rng(0)
        dense = rng.random((REC_TRAIN, DENSE))
        sparse = rng.integers(0, 50, (REC_TRAIN, SPARSE))
        w = rng.normal(0, 1, 3)
        logit = w[0] * (dense[:, 0] - 0.5) * 4 + w[1] * (sparse[:, 0] % 2 * 2 - 1) + w[2] * (sparse[:, 1] < 25)
        click = rng.random(REC_TRAIN) < 1 / (1 + np.exp(-2 * logit))
        rows = [" ".join([f"click:{int(c)}", *(f"dense_feature:{v:.6g}" for v in d),
                          *(f"{j + 1}:{j * 1000 + v}" for j, v in enumerate(s))])
                for c, d, s in zip(click, dense, sparse, strict=True)]
        (tmp / "train").mkdir()
        (tmp / "train" / "part-0.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")

    return _place(root / name, write) / "train"
