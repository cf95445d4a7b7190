"""A seeded Criteo-like click log whose best possible AUC is known.

Rows look like Criteo's: 13 heavy-tailed integer counts (log1p-transformed like the reader
does) and 26 categorical fields whose ids follow a Zipf law (a few very common ids, a long
tail of rare ones), each field's ids scattered by a fixed permutation as hashing would.
Clicks are drawn from a hidden factorization machine over those features, so the true click
probability of every row is known: the AUC of that probability on the eval split is the
oracle AUC, the ceiling any model can reach, reported beside the model's.

Streaming (the default, `train_rows` unset) draws fresh rows for every batch, the way CTR
models are trained one pass over new logs: no overfitting however long a trial runs.  A fixed
`train_rows` pool, reshuffled each epoch, reproduces the overfitting regime instead.
Everything is a pure function of (`data_seed`, trial seed): the same seed gives the same rows
in every precision mode.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ampbench.config.suite import StrictInt
from ampbench.workloads.ctr.criteo import CTRArrays

# SeedSequence stream tags: one independent stream per purpose.
_TRUTH, _EVAL, _POOL, _TRAIN = 11, 12, 13, 14


class SyntheticSpec(BaseModel):
    """`[workload.synthetic]`: the offline default dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    dense_fields: StrictInt = Field(13, ge=0)
    sparse_fields: StrictInt = Field(26, ge=1)
    vocab: int | list[int] = Field(10_000, description="ids per categorical field (= embedding rows)")
    zipf: float = Field(1.1, gt=0, description="popularity exponent: id k is drawn with p ~ (k+1)^-zipf")
    rank: StrictInt = Field(4, ge=1, description="latent dimension of the hidden factorization machine")
    signal: float = Field(1.5, gt=0, description="std of the hidden logit; larger -> higher oracle AUC")
    ctr: float = Field(0.25, gt=0, lt=1, description="mean click rate (Criteo's is about 0.26)")
    eval_rows: StrictInt = Field(50_000, ge=100)
    train_rows: StrictInt | None = Field(None, ge=1, description="unset: fresh rows every batch (one pass)")
    data_seed: StrictInt = Field(2024, description="fixes the hidden truth and the eval split")
    threads: StrictInt = Field(1, ge=1, description="threads generating streaming batches (GPU runs need a few)")

    @model_validator(mode="after")
    def _sizes(self) -> SyntheticSpec:
        v = self.vocab
        sizes = [v] * self.sparse_fields if isinstance(v, int) else list(v)
        if len(sizes) != self.sparse_fields:
            raise ValueError(f"vocab lists {len(sizes)} sizes for {self.sparse_fields} categorical fields")
        if min(sizes) < 2:
            raise ValueError("every categorical field needs a vocab of at least 2 ids")
        return self

    def vocab_sizes(self) -> list[int]:
        v = self.vocab
        return [v] * self.sparse_fields if isinstance(v, int) else list(v)


def _rng(spec: SyntheticSpec, *tags: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([spec.data_seed, *tags]))


class HiddenFM:
    """The ground truth: id popularity laws plus a factorization machine's weights.

    logit = b + sum_i w_i x_i + sum_{i<j} <v_i, v_j> x_i x_j over 26 one-hot fields and 13
    standardised dense features; variances are set so the logit's std is about `signal`, half
    from the linear part and half from the pairwise part, and b is solved for the mean CTR.
    """

    def __init__(self, spec: SyntheticSpec):
        self.spec = spec
        rng = _rng(spec, _TRUTH)
        sizes = spec.vocab_sizes()
        nd, ns, k = spec.dense_fields, spec.sparse_fields, spec.rank
        self.sizes = sizes
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        # popularity: a continuous power law over ranks (inverse CDF, one vectorised op for all
        # fields), then a fixed permutation rank -> id per field, the scatter hashing would give
        self.n_ids = np.asarray(sizes, dtype=np.float64)
        self.perm = np.concatenate([rng.permutation(n) for n in sizes]).astype(np.int64)
        # dense features: log-normal counts, per-field location and spread
        self.dense_mu = rng.uniform(0.0, 3.0, nd)
        self.dense_sigma = rng.uniform(0.5, 1.5, nd)
        fields = nd + ns
        pairs = max(fields * (fields - 1) / 2, 1.0)
        s = spec.signal
        sd_w = s * np.sqrt(0.5 / fields)
        var_v = s * np.sqrt(0.5 / (pairs * k))  # var(<v_i,v_j>) = k var_v^2 over `pairs` pairs
        total = int(sum(sizes))
        self.w = (rng.standard_normal(total) * sd_w).astype(np.float32)
        self.v = (rng.standard_normal((total, k)) * np.sqrt(var_v)).astype(np.float32)
        self.w_dense = (rng.standard_normal(nd) * sd_w).astype(np.float32)
        self.v_dense = (rng.standard_normal((nd, k)) * np.sqrt(var_v)).astype(np.float32)
        self.v_norm2 = (self.v * self.v).sum(1)
        self.v_dense_norm2 = (self.v_dense * self.v_dense).sum(1)
        self.bias = 0.0
        probe = self._features(rng, 20_000)
        self.bias = self._solve_bias(self._logit(*probe), spec.ctr)

    def _features(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        nd, ns = self.spec.dense_fields, self.spec.sparse_fields
        z = rng.standard_normal((n, nd))
        counts = np.floor(np.expm1(self.dense_mu + self.dense_sigma * z).clip(min=0.0))
        dense = np.log1p(counts).astype(np.float32)
        rank = self._zipf_rank(rng.random((n, ns)))
        sparse = np.take(self.perm, rank + self.offsets)
        return dense, sparse

    def _zipf_rank(self, u: np.ndarray) -> np.ndarray:
        """Inverse CDF of density ~ x^-zipf on [1, n+1), floored to a rank in [0, n)."""
        a, top = self.spec.zipf, self.n_ids + 1.0
        if abs(a - 1.0) < 1e-9:
            x = top ** u
        else:
            x = (1.0 + u * (top ** (1.0 - a) - 1.0)) ** (1.0 / (1.0 - a))
        return np.minimum(np.floor(x).astype(np.int64) - 1, (self.n_ids - 1).astype(np.int64))

    def _standardise(self, dense: np.ndarray) -> np.ndarray:
        # E and sd of log1p(floor(expm1(N(mu, sigma)))) are close to mu and sigma when mu >> 0;
        # the truth only needs a fixed affine map, not an exact one.
        return (dense - self.dense_mu) / self.dense_sigma

    def _logit(self, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
        gid = sparse + self.offsets
        xd = self._standardise(dense).astype(np.float32)
        lin = np.take(self.w, gid).sum(1) + xd @ self.w_dense
        # FM pairwise term: 0.5 * (|sum_i x_i v_i|^2 - sum_i x_i^2 |v_i|^2)
        vsum = np.take(self.v, gid, axis=0).sum(1) + xd @ self.v_dense  # [n, k]
        sq = np.take(self.v_norm2, gid).sum(1) + (xd * xd) @ self.v_dense_norm2
        pair = 0.5 * ((vsum * vsum).sum(1) - sq)
        return (self.bias + lin + pair).astype(np.float64)

    @staticmethod
    def _solve_bias(logit: np.ndarray, ctr: float) -> float:
        lo, hi = -20.0, 20.0
        for _ in range(60):  # bisection: mean sigmoid is monotone in the bias
            mid = (lo + hi) / 2
            if np.mean(1 / (1 + np.exp(-(logit + mid)))) < ctr:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    def sample(self, rng: np.random.Generator, n: int) -> CTRArrays:
        dense, sparse = self._features(rng, n)
        prob = 1.0 / (1.0 + np.exp(-self._logit(dense, sparse)))
        label = (rng.random(n) < prob).astype(np.float32)
        return CTRArrays(dense=dense, sparse=sparse, label=label, prob=prob.astype(np.float32))


class SyntheticSource:
    """The data source the CTR workload uses: eval split, endless training batches, oracle."""

    def __init__(self, spec: SyntheticSpec):
        self.spec = spec
        self.truth = HiddenFM(spec)
        self.vocab_sizes = spec.vocab_sizes()
        self.dense_fields = spec.dense_fields
        self._eval: CTRArrays | None = None
        self._pool: CTRArrays | None = None

    def eval_arrays(self) -> CTRArrays:
        if self._eval is None:
            self._eval = self.truth.sample(_rng(self.spec, _EVAL), self.spec.eval_rows)
        return self._eval

    def oracle_auc(self) -> float:
        from ampbench.workloads.ctr.metrics import auc  # scipy: imported only when used

        ev = self.eval_arrays()
        assert ev.prob is not None
        return auc(ev.label, ev.prob)

    def train_batches(self, seed: int, batch_size: int) -> Iterator[CTRArrays]:
        if self.spec.train_rows is None:
            return self._stream(seed, batch_size)
        return self._epochs(seed, batch_size)

    def batch(self, seed: int, index: int, batch_size: int) -> CTRArrays:
        """Streaming batch `index` of trial seed `seed`: a pure function of its arguments, so
        batches can be made in parallel threads and any one of them re-made alone."""
        return self.truth.sample(_rng(self.spec, _TRAIN, seed, index), batch_size)

    def _stream(self, seed: int, batch_size: int) -> Iterator[CTRArrays]:
        threads = self.spec.threads
        if threads <= 1:
            for k in itertools.count():
                yield self.batch(seed, k, batch_size)
        with ThreadPoolExecutor(threads, thread_name_prefix="ctr-gen") as ex:
            window = collections.deque(ex.submit(self.batch, seed, k, batch_size) for k in range(2 * threads))
            for k in itertools.count(2 * threads):
                yield window.popleft().result()
                window.append(ex.submit(self.batch, seed, k, batch_size))

    def _epochs(self, seed: int, batch_size: int) -> Iterator[CTRArrays]:
        if self._pool is None:
            assert self.spec.train_rows is not None
            self._pool = self.truth.sample(_rng(self.spec, _POOL), self.spec.train_rows)
        n = len(self._pool)
        if n < batch_size:
            raise ValueError(f"train_rows ({n}) is smaller than the batch size ({batch_size})")
        rng = _rng(self.spec, _TRAIN, seed)
        while True:
            order = rng.permutation(n)
            for i in range(0, n - batch_size + 1, batch_size):
                yield self._pool.take(order[i: i + batch_size])

    def describe(self) -> dict[str, object]:
        ev = self.eval_arrays()
        return {
            "dataset": "synthetic-criteo", "data_seed": self.spec.data_seed,
            "streaming": self.spec.train_rows is None, "train_rows": self.spec.train_rows,
            "eval_rows": len(ev), "eval_positive_rate": float(ev.label.mean()),
            "vocab_sizes": self.vocab_sizes, "zipf": self.spec.zipf, "hidden_rank": self.spec.rank,
            "oracle_auc": self.oracle_auc(),
        }
