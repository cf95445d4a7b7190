"""Click-through-rate prediction: DeepFM (or Wide&Deep) over hashed sparse fields.

The seed's second scenario: an hourly fine-tuned CTR model where AMP must keep AUC within 0.1%
while the embeddings stay in FP32 (`custom_black_list = ["lookup_table_v2"]` in the suite).
All categorical fields share one embedding table with per-field row offsets, so a step does
one lookup for the FM vectors and one for the first-order weights, as PaddleRec's DeepFM does;
`sparse = true` makes those lookups produce sparse (SelectedRows) gradients.
Data: synthetic (offline default, oracle AUC known), a Criteo-format TSV, or Adult census.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from ampbench.config.suite import StrictInt
from ampbench.workloads.base import Batch, Workload, WorkloadParams, bundled
from ampbench.workloads.ctr.adult import AdultSpec
from ampbench.workloads.ctr.criteo import CriteoSpec, CTRArrays
from ampbench.workloads.ctr.synthetic import SyntheticSpec


class CTRParams(WorkloadParams):
    model: Literal["deepfm", "wide_deep"] = "deepfm"
    embedding_dim: StrictInt = Field(8, ge=1)
    mlp: list[StrictInt] = [256, 128]  # noqa: RUF012  a pydantic field: copied per instance
    dropout: float = Field(0.0, ge=0, lt=1)
    sparse: bool = Field(False, description="sparse (SelectedRows) embedding gradients; Paddle 3.3.1's fp16 "
                         "GradScaler cannot unscale them (docs/ctr.md)")
    init_std: float = Field(0.01, gt=0, description="std of the normal init of embedding rows")
    eval_batch_size: StrictInt = Field(16384, ge=1)
    prefetch: StrictInt = Field(2, ge=0, description="batches prepared ahead in a thread; 0 = inline")
    # which data source; each has its own table so a profile can switch with one key
    dataset: Literal["synthetic", "criteo", "adult"] = "synthetic"
    synthetic: SyntheticSpec = SyntheticSpec()
    criteo: CriteoSpec | None = None
    adult: AdultSpec = AdultSpec()

    @model_validator(mode="after")
    def _criteo_needs_path(self) -> CTRParams:
        if self.dataset == "criteo" and self.criteo is None:
            raise ValueError('dataset = "criteo" needs a [workload.criteo] table with at least path = "..."')
        return self

    def dataset_spec(self) -> SyntheticSpec | CriteoSpec | AdultSpec:
        if self.dataset == "synthetic":
            return self.synthetic
        if self.dataset == "adult":
            return self.adult
        if self.criteo is None:  # refused by _criteo_needs_path already
            raise ValueError('dataset = "criteo" needs a [workload.criteo] table')
        return self.criteo

    @field_validator("mlp")
    @classmethod
    def _mlp(cls, v: list[int]) -> list[int]:
        if any(h < 1 for h in v):
            raise ValueError(f"hidden sizes must be >= 1, got {v}")
        return v


def build_source(spec: SyntheticSpec | CriteoSpec | AdultSpec) -> Any:
    """The data source for a dataset table; each has eval_arrays/train_batches/describe."""
    if isinstance(spec, SyntheticSpec):
        from ampbench.workloads.ctr.synthetic import SyntheticSource

        return SyntheticSource(spec)
    if isinstance(spec, CriteoSpec):
        from ampbench.workloads.ctr.criteo import CriteoSource

        return CriteoSource(spec)
    from ampbench.workloads.ctr.adult import AdultSource

    return AdultSource(spec)


def prefetched(it: Iterator[Any], depth: int) -> Iterator[Any]:
    """Runs `it` in a daemon thread `depth` items ahead: host-side data work (numpy releases the
    GIL) overlaps the training step instead of counting as step time. Order is unchanged."""
    if depth <= 0:
        yield from it
        return
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def fill() -> None:
        try:
            for item in it:
                q.put(item)
        except Exception as e:  # noqa: BLE001 -- re-raised in the consumer
            q.put(e)
        q.put(done)

    threading.Thread(target=fill, daemon=True, name="ctr-prefetch").start()
    while True:
        item = q.get()
        if item is done:
            return
        if isinstance(item, Exception):
            raise item
        yield item


def build_network(p: CTRParams, vocab_sizes: list[int], dense_fields: int) -> Any:
    """DeepFM or Wide&Deep as a paddle Layer taking (dense float32 [B, D], ids int64 [B, F])."""
    import paddle
    from paddle import nn

    total = int(sum(vocab_sizes))
    n_sparse, dim = len(vocab_sizes), p.embedding_dim
    normal = nn.initializer.Normal(std=p.init_std)

    class CTRNet(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.kind = p.model
            # one table for every field (rows offset per field): one lookup op per step
            self.embedding = nn.Embedding(total, dim, sparse=p.sparse, weight_attr=paddle.ParamAttr(initializer=normal))
            self.first_order = nn.Embedding(total, 1, sparse=p.sparse,
                                            weight_attr=paddle.ParamAttr(initializer=nn.initializer.Constant(0.0)))
            self.dense_linear = nn.Linear(dense_fields, 1) if dense_fields else None
            self.dense_vectors: paddle.Tensor | None
            if p.model == "deepfm" and dense_fields:
                # each dense feature is a field whose FM vector is scaled by its value
                self.dense_vectors = self.create_parameter([dense_fields, dim], default_initializer=normal)
                deep_in = (n_sparse + dense_fields) * dim
            else:
                self.dense_vectors = None
                deep_in = n_sparse * dim + dense_fields
            layers: list[nn.Layer] = []
            for h in p.mlp:
                layers += [nn.Linear(deep_in, h), nn.ReLU()]
                if p.dropout:
                    layers.append(nn.Dropout(p.dropout))
                deep_in = h
            layers.append(nn.Linear(deep_in, 1))
            self.deep = nn.Sequential(*layers)

        def forward(self, dense: Any, ids: Any) -> Any:
            emb = self.embedding(ids)  # [B, F, dim]
            wide = self.first_order(ids).sum(axis=[1, 2])  # [B]
            if self.dense_linear is not None:
                wide = wide + self.dense_linear(dense).squeeze(-1)
            if self.kind == "wide_deep":
                deep_in = paddle.concat([emb.flatten(1), dense.astype(emb.dtype)], axis=1)
                return wide + self.deep(deep_in).squeeze(-1)
            vecs = emb
            if self.dense_vectors is not None:
                dv = dense.astype(emb.dtype).unsqueeze(-1) * self.dense_vectors.astype(emb.dtype)
                vecs = paddle.concat([emb, dv], axis=1)  # [B, F + D, dim]
            s = vecs.sum(axis=1)
            fm = 0.5 * (s * s - (vecs * vecs).sum(axis=1)).sum(axis=1)
            return wide + fm + self.deep(vecs.flatten(1)).squeeze(-1)

    return CTRNet()


@bundled
class CTRWorkload(Workload[CTRParams]):
    name = "ctr"
    Params = CTRParams
    metric_goals: ClassVar[dict[str, str]] = {"auc": "max", "logloss": "min", "oracle_auc": "max", "auc_vs_oracle": "max"}

    def prepare(self) -> None:
        p = self.params
        self.source = build_source(p.dataset_spec())
        self.offsets = np.concatenate([[0], np.cumsum(self.source.vocab_sizes)[:-1]]).astype(np.int64)
        self.eval_data: CTRArrays = self.source.eval_arrays()
        self.oracle = self.source.oracle_auc() if hasattr(self.source, "oracle_auc") else None

    def build_model(self) -> Any:
        return build_network(self.params, self.source.vocab_sizes, self.source.dense_fields)

    def _global_ids(self, sparse: np.ndarray) -> np.ndarray:
        return sparse + self.offsets

    def train_batches(self, seed: int, batch_size: int) -> Iterator[Batch]:
        def batches() -> Iterator[Batch]:
            for arr in self.source.train_batches(seed, batch_size):
                arr = CTRArrays(arr.dense, self._global_ids(arr.sparse), arr.label)
                yield Batch(inputs=arr, samples=len(arr))

        return prefetched(batches(), self.params.prefetch)

    def loss(self, model: Any, batch: Batch) -> Any:
        import paddle
        import paddle.nn.functional as F

        arr: CTRArrays = batch.inputs
        logits = model(paddle.to_tensor(arr.dense), paddle.to_tensor(arr.sparse))
        return F.binary_cross_entropy_with_logits(logits.astype("float32"), paddle.to_tensor(arr.label))

    def predict_logits(self, model: Any, arr: CTRArrays) -> np.ndarray:
        import paddle

        out = []
        bs = self.params.eval_batch_size
        ids = self._global_ids(arr.sparse)
        with paddle.no_grad():
            for i in range(0, len(arr), bs):
                z = model(paddle.to_tensor(arr.dense[i: i + bs]), paddle.to_tensor(ids[i: i + bs]))
                out.append(z.astype("float32").numpy())
        return np.concatenate(out).astype(np.float64)

    def evaluate(self, model: Any) -> dict[str, float]:
        from ampbench.workloads.ctr.metrics import auc, log_loss_from_logits

        ev = self.eval_data
        z = self.predict_logits(model, ev)
        out = {"auc": auc(ev.label, z), "logloss": log_loss_from_logits(ev.label, z)}
        if self.oracle is not None:
            out["oracle_auc"] = self.oracle
            out["auc_vs_oracle"] = out["auc"] / self.oracle
        return out

    def describe(self) -> dict[str, Any]:
        p = self.params
        total = int(sum(self.source.vocab_sizes))
        return {
            "model": p.model, "embedding_dim": p.embedding_dim, "mlp": p.mlp, "sparse_grads": p.sparse,
            "embedding_rows": total,
            "embedding_bytes_fp32": total * (p.embedding_dim + 1) * 4,
            **self.source.describe(),
        }
