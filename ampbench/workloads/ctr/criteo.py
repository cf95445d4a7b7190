"""Criteo-format click logs: `label \\t I1..I13 \\t C1..C26`, one impression a line.

Streaming: the file is read line by line (plain or .gz), so a log larger than memory trains
fine; order comes from a seeded shuffle buffer, as in tf.data.  Transforms are the common
DeepFM-baseline ones: integer counts -> log1p(max(x, 0)) with missing as 0; categorical strings
-> per-field hashed buckets (crc32 salted by field), bucket 0 reserved for "missing".
A malformed line is either an error naming `file:line` and what is wrong, or skipped and
counted (`on_error = "skip"`): real logs have a few broken lines, and silently training on
garbage is worse than both.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ampbench.config.suite import StrictInt

MISSING = 0  # bucket for an empty categorical field


@dataclass
class CTRArrays:
    """A block of rows in the Criteo layout shared by every CTR data source."""

    dense: np.ndarray  # float32 [n, dense_fields], already log-transformed
    sparse: np.ndarray  # int64 [n, sparse_fields], per-field ids in [0, vocab_sizes[f])
    label: np.ndarray  # float32 [n], 0 or 1
    prob: np.ndarray | None = None  # true click probability, only for synthetic data

    def __len__(self) -> int:
        return int(self.label.shape[0])

    def take(self, idx: np.ndarray | slice) -> CTRArrays:
        return CTRArrays(self.dense[idx], self.sparse[idx], self.label[idx],
                         None if self.prob is None else self.prob[idx])

    @staticmethod
    def concat(parts: list[CTRArrays]) -> CTRArrays:
        probs = [p.prob for p in parts if p.prob is not None]
        return CTRArrays(
            np.concatenate([p.dense for p in parts]), np.concatenate([p.sparse for p in parts]),
            np.concatenate([p.label for p in parts]),
            np.concatenate(probs) if len(probs) == len(parts) else None,
        )


def batches_from_blocks(blocks: Iterator[CTRArrays], batch_size: int) -> Iterator[CTRArrays]:
    """Re-cut a stream of blocks of any size into batches of exactly `batch_size` rows."""
    pending: list[CTRArrays] = []
    have = 0
    for block in blocks:
        pending.append(block)
        have += len(block)
        if have < batch_size:
            continue
        merged = CTRArrays.concat(pending)
        n_full = (len(merged) // batch_size) * batch_size
        for i in range(0, n_full, batch_size):
            yield merged.take(slice(i, i + batch_size))
        rest = merged.take(slice(n_full, None))
        pending, have = ([rest], len(rest)) if len(rest) else ([], 0)


class DataFormatError(ValueError):
    """A malformed data line, phrased for the user: `file:line: what is wrong; how to fix`."""


class CriteoSpec(BaseModel):
    """`[workload.criteo]`: a user's own Criteo/Avazu-style TSV log (`dataset = "criteo"`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="training TSV (.gz allowed); relative paths are from the current folder")
    eval_path: str | None = None
    holdout_every: StrictInt = Field(10, ge=2, description="without eval_path: every Nth line is held out")
    eval_rows: StrictInt = Field(100_000, ge=100)
    dense_fields: StrictInt = Field(13, ge=0)
    sparse_fields: StrictInt = Field(26, ge=1)
    hash_buckets: int | list[int] = Field(1_000_000, description="embedding rows per categorical field")
    on_error: Literal["raise", "skip"] = "raise"
    shuffle_buffer: StrictInt = Field(100_000, ge=1)
    block_rows: StrictInt = Field(8192, ge=1)

    @field_validator("path", "eval_path")
    @classmethod
    def _exists(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).is_file():
            raise ValueError(f"data file {v!r} not found (paths are relative to the current folder)")
        return v

    @field_validator("hash_buckets")
    @classmethod
    def _buckets(cls, v: int | list[int]) -> int | list[int]:
        if min([v] if isinstance(v, int) else v) < 2:
            raise ValueError("every field needs at least 2 buckets (bucket 0 is 'missing')")
        return v

    @model_validator(mode="after")
    def _bucket_count(self) -> CriteoSpec:
        self.buckets()  # a wrong-length list is a config error, not a failure after the first trial
        return self

    def buckets(self) -> list[int]:
        hb = self.hash_buckets
        if isinstance(hb, int):
            return [hb] * self.sparse_fields
        if len(hb) != self.sparse_fields:
            raise ValueError(f"hash_buckets lists {len(hb)} sizes for {self.sparse_fields} categorical fields")
        return list(hb)


@dataclass
class ReadStats:
    """What a reader saw; `skipped_by_reason` keys are short reason classes."""

    lines: int = 0
    rows: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    first_skipped: list[str] = field(default_factory=list)  # a few `file:line: reason` examples


class _RowError(Exception):
    def __init__(self, kind: str, detail: str):
        self.kind, self.detail = kind, detail
        super().__init__(detail)


def hash_bucket(value: str, field_index: int, buckets: int) -> int:
    """Stable across processes and machines (unlike Python's hash): crc32 salted by field."""
    if value == "":
        return MISSING
    return 1 + zlib.crc32(value.encode("utf-8"), field_index + 1) % (buckets - 1)


class CriteoParser:
    """Turns one TSV line into (label, dense, sparse); raises _RowError on a malformed line."""

    def __init__(self, dense_fields: int, buckets: list[int]):
        self.nd, self.buckets = dense_fields, buckets
        self.width = 1 + dense_fields + len(buckets)

    def parse(self, line: str) -> tuple[float, list[float], list[int]]:
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) != self.width:
            raise _RowError("field_count", f"expected {self.width} tab-separated fields "
                            f"(label, {self.nd} integers, {len(self.buckets)} categoricals), found {len(parts)}")
        lab = parts[0].strip()
        if lab not in ("0", "1"):
            raise _RowError("label", f"label must be 0 or 1, found {lab[:20]!r}")
        dense: list[float] = []
        for j in range(self.nd):
            s = parts[1 + j].strip()
            if s == "":
                dense.append(0.0)
                continue
            try:
                v = int(s)
            except ValueError:
                raise _RowError("integer", f"integer field I{j + 1} is not an integer: {s[:20]!r}") from None
            dense.append(float(np.log1p(v)) if v > 0 else 0.0)
        off = 1 + self.nd
        sparse = [hash_bucket(parts[off + j].strip(), j, b) for j, b in enumerate(self.buckets)]
        return float(lab), dense, sparse


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


class CriteoReader:
    """Streams a Criteo-format file as CTRArrays blocks, honouring `on_error`."""

    def __init__(self, path: str | Path, spec: CriteoSpec):
        self.path = Path(path)
        self.spec = spec
        self.parser = CriteoParser(spec.dense_fields, spec.buckets())
        self.stats = ReadStats()

    def _fail_or_count(self, lineno: int, err: _RowError, count: bool) -> None:
        where = f"{self.path}:{lineno}"
        if self.spec.on_error == "raise":
            raise DataFormatError(
                f"{where}: {err.detail}; fix the line or set workload.criteo.on_error = \"skip\""
            )
        if count:
            self.stats.skipped += 1
            self.stats.skipped_by_reason[err.kind] = self.stats.skipped_by_reason.get(err.kind, 0) + 1
            if len(self.stats.first_skipped) < 5:
                self.stats.first_skipped.append(f"{where}: {err.detail}")

    def blocks(self, keep: Callable[[int], bool] | None = None, count: bool = True,
               limit: int | None = None) -> Iterator[CTRArrays]:
        """One pass over the file. `keep(lineno)` selects lines (1-based) before parsing;
        `count` = False reads without adding to the stats (later epochs); `limit` caps rows."""
        bs = self.spec.block_rows
        labels: list[float] = []
        dense: list[list[float]] = []
        sparse: list[list[int]] = []
        taken = 0
        with _open_text(self.path) as f:
            for lineno, line in enumerate(f, start=1):
                if count:
                    self.stats.lines += 1
                if keep is not None and not keep(lineno):
                    continue
                if not line.strip():
                    self._fail_or_count(lineno, _RowError("empty", "empty line"), count)
                    continue
                try:
                    y, d, s = self.parser.parse(line)
                except _RowError as e:
                    self._fail_or_count(lineno, e, count)
                    continue
                labels.append(y)
                dense.append(d)
                sparse.append(s)
                taken += 1
                if count:
                    self.stats.rows += 1
                if len(labels) >= bs:
                    yield self._block(labels, dense, sparse)
                    labels, dense, sparse = [], [], []
                if limit is not None and taken >= limit:
                    break
        if labels:
            yield self._block(labels, dense, sparse)

    def _block(self, labels: list[float], dense: list[list[float]], sparse: list[list[int]]) -> CTRArrays:
        nd = self.spec.dense_fields
        return CTRArrays(
            dense=np.asarray(dense, dtype=np.float32).reshape(len(labels), nd),
            sparse=np.asarray(sparse, dtype=np.int64),
            label=np.asarray(labels, dtype=np.float32),
        )


def shuffled(blocks: Iterator[CTRArrays], buffer_rows: int, rng: np.random.Generator) -> Iterator[CTRArrays]:
    """A shuffle buffer over a stream: rows leave in random order once `buffer_rows` are held."""
    pool: list[CTRArrays] = []
    held = 0
    for block in blocks:
        pool.append(block)
        held += len(block)
        if held >= buffer_rows:
            merged = CTRArrays.concat(pool)
            order = rng.permutation(len(merged))
            half = len(merged) // 2  # emit half, keep half mixing with what comes next
            yield merged.take(order[:half])
            pool, held = [merged.take(order[half:])], len(merged) - half
    if pool:
        merged = CTRArrays.concat(pool)
        yield merged.take(rng.permutation(len(merged)))


class CriteoSource:
    """A Criteo-format dataset: a held-out eval split in memory, training streamed endlessly."""

    def __init__(self, spec: CriteoSpec):
        self.spec = spec
        self.vocab_sizes = spec.buckets()
        self.dense_fields = spec.dense_fields
        self.train_reader = CriteoReader(spec.path, spec)
        self.eval_reader = CriteoReader(spec.eval_path or spec.path, spec)
        self._eval: CTRArrays | None = None

    def _is_holdout(self, lineno: int) -> bool:
        return self.spec.eval_path is None and lineno % self.spec.holdout_every == 0

    def eval_arrays(self) -> CTRArrays:
        if self._eval is None:
            keep = None if self.spec.eval_path else self._is_holdout
            blocks = list(self.eval_reader.blocks(keep=keep, limit=self.spec.eval_rows))
            if not blocks:
                raise DataFormatError(f"{self.eval_reader.path}: no valid rows for the eval split")
            self._eval = CTRArrays.concat(blocks)
            if len(np.unique(self._eval.label)) < 2:
                raise DataFormatError(f"{self.eval_reader.path}: the eval split has only one class; AUC is undefined")
        return self._eval

    def train_batches(self, seed: int, batch_size: int) -> Iterator[CTRArrays]:
        rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
        holdout = self._is_holdout

        def keep(lineno: int) -> bool:
            return not holdout(lineno)

        def endless() -> Iterator[CTRArrays]:
            # shuffle within each pass (the buffer flushes at the end of the file), then repeat:
            # a small file is fully reshuffled every epoch, a huge one mixes `shuffle_buffer` rows
            epoch = 0
            while True:
                got = 0
                blocks = self.train_reader.blocks(keep=keep, count=epoch == 0)
                for block in shuffled(blocks, self.spec.shuffle_buffer, rng):
                    got += len(block)
                    yield block
                if got == 0:
                    raise DataFormatError(f"{self.train_reader.path}: no valid training rows")
                epoch += 1

        return batches_from_blocks(endless(), batch_size)

    def describe(self) -> dict[str, object]:
        s_tr, s_ev = self.train_reader.stats, self.eval_reader.stats
        ev = self.eval_arrays()
        return {
            "dataset": "criteo-format", "path": str(self.spec.path), "eval_path": self.spec.eval_path,
            "eval_rows": len(ev), "eval_positive_rate": float(ev.label.mean()),
            "vocab_sizes": self.vocab_sizes, "on_error": self.spec.on_error,
            "train_lines_read": s_tr.lines, "skipped_lines": s_tr.skipped + s_ev.skipped,
            "skipped_by_reason": {k: s_tr.skipped_by_reason.get(k, 0) + s_ev.skipped_by_reason.get(k, 0)
                                  for k in {**s_tr.skipped_by_reason, **s_ev.skipped_by_reason}},
            "skipped_examples": (s_ev.first_skipped + s_tr.first_skipped)[:5],
        }
