"""PaddleOCR detection label files, read the way PaddleOCR's SimpleDataSet reads them.

A line is `image_path<TAB>[{"transcription": ..., "points": [[x, y], ...]}, ...]`; image paths
are relative to `data_dir`. As SimpleDataSet: the file is split on b"\\n" only (a raw U+2028 or
U+0085 inside a transcription is legal JSON and stays in its line; str.splitlines would cut it),
a trailing "\\r" is tolerated (CRLF files), several label files combine with a `ratio_list`
(a ratio below 1 keeps a seeded random sample of that file's lines), and the transcriptions
"###" and "*" mark "don't care" regions (DetLabelEncode's ignore tags). Unlike SimpleDataSet, a
leading UTF-8 BOM is dropped (it would otherwise become part of the first image's name), blank
lines are skipped, and a bad line is an error naming the label file and line instead of being
silently replaced by a random other sample, so a user's data problem is seen, not trained around.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ampbench.core.errors import ConfigError

IGNORE_TRANSCRIPTIONS = ("###", "*")  # PaddleOCR's DetLabelEncode ignore marks
BOM = b"\xef\xbb\xbf"


@dataclass
class LabeledImage:
    """One line of a detection label file: the image path and its text regions."""

    path: Path
    label: str  # the raw JSON, as PaddleOCR's DetLabelEncode expects it
    polys: list[np.ndarray] = field(default_factory=list)  # each (k, 2) float32, k >= 4
    texts: list[str] = field(default_factory=list)
    ignore: list[bool] = field(default_factory=list)
    where: str = ""  # "label.txt line 3": named in every error about this image


def _parse_items(raw: str, label_file: Path, where: str) -> tuple[list[np.ndarray], list[str]]:
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(label_file, where, f"annotation is not valid JSON ({e})") from None
    if not isinstance(items, list):
        raise ConfigError(label_file, where, "annotation must be a JSON list of {transcription, points}")
    polys, texts = [], []
    for j, it in enumerate(items):
        if not isinstance(it, dict) or "transcription" not in it:
            raise ConfigError(label_file, f"{where} item {j}", "needs 'transcription' (PaddleOCR's DetLabelEncode "
                              "requires it; use \"###\" for a don't-care region)")
        try:
            pts = np.asarray(it["points"], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise ConfigError(label_file, f"{where} item {j}", "needs 'points': [[x, y], ...] (numbers)") from None
        if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] < 4:
            raise ConfigError(label_file, f"{where} item {j}", f"points must be >= 4 [x, y] pairs, got shape {pts.shape}")
        polys.append(pts)
        texts.append(str(it["transcription"]))
    return polys, texts


def _lines(label_file: Path) -> list[tuple[int, bytes]]:
    """(line number, bytes) of every non-blank line; split on b"\\n" only, BOM dropped."""
    if not label_file.is_file():
        raise ConfigError(label_file, "", "label file not found")
    data = label_file.read_bytes()
    data = data.removeprefix(BOM)
    return [(n, b) for n, b in enumerate(data.split(b"\n"), 1) if b.strip()]


def parse_line(n: int, raw_line: bytes, label_file: Path, root: Path) -> LabeledImage:
    where = f"line {n}"
    try:
        line = raw_line.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as e:
        raise ConfigError(label_file, where, f"not UTF-8 (byte {e.start}): save the label file as UTF-8") from None
    if "\t" not in line:
        raise ConfigError(label_file, where, "expected `image_path<TAB>[{...}]` (PaddleOCR det format)")
    rel, raw = line.split("\t", 1)
    polys, texts = _parse_items(raw, label_file, where)
    return LabeledImage(path=root / rel, label=raw, polys=polys, texts=texts,
                        ignore=[t in IGNORE_TRANSCRIPTIONS for t in texts], where=f"{label_file} {where}")


def read_label_file(label_file: str | Path, data_dir: str | Path | None = None) -> list[LabeledImage]:
    """Every entry of one label file; image paths relative to data_dir (default: the file's folder)."""
    label_file = Path(label_file)
    root = Path(data_dir) if data_dir is not None else label_file.parent
    out = [parse_line(n, b, label_file, root) for n, b in _lines(label_file)]
    if not out:
        raise ConfigError(label_file, "", "label file has no entries")
    return out


def read_label_files(files: Sequence[str | Path], data_dir: str | Path | None, ratios: Sequence[float],
                     seed: int = 0) -> list[LabeledImage]:
    """SimpleDataSet's label_file_list + ratio_list: file i contributes round(len * ratio_i) lines,
    a Random(seed) sample (kept in file order) when the ratio is below 1."""
    out: list[LabeledImage] = []
    for f, ratio in zip(files, ratios):
        recs = read_label_file(f, data_dir)
        if ratio < 1.0:
            keep = sorted(random.Random(seed).sample(range(len(recs)), round(len(recs) * ratio)))
            recs = [recs[i] for i in keep]
        out += recs
    return out


def missing_images(records: Sequence[LabeledImage], limit: int = 5) -> list[str]:
    """'<label file> line N: <image>' for up to `limit` images that do not exist."""
    return [f"{r.where}: {r.path}" for r in records if not r.path.is_file()][:limit]


def fingerprint(files: Sequence[str | Path], records: Sequence[LabeledImage]) -> dict[str, Any]:
    """What shapes the cached arrays: label file contents and every image's path, size and mtime."""
    h = hashlib.sha256()
    for r in records:
        st = r.path.stat() if r.path.is_file() else None
        h.update(f"{r.path.resolve()}|{st.st_size if st else -1}|{st.st_mtime_ns if st else -1}\n".encode())
    return {"label_files": [hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files],
            "images": h.hexdigest()}


def load_image(path: Path, where: str = "") -> np.ndarray:
    """HxWx3 uint8 RGB; a missing image is an error naming the label file and line that list it."""
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise ConfigError(where or path, str(path) if where else "",
                          "image listed in the label file is missing or unreadable")
    return img[:, :, ::-1].copy()
