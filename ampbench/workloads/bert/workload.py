"""BERT text classification (PaddleNLP family) on real review text that ships offline.

Model: `BertConfig` + `BertForSequenceClassification` from paddleformers or paddlenlp (see
bert_source.py), random init unless `pretrained_dir` names local weights. Data: reviews.py; the
WordPiece vocabulary is trained on the training split (wordpiece.py) and texts are encoded once
with the family's `BertTokenizer(vocab_file=...)`; both are cached, and all of it happens in
prepare(), outside the timed steps. Metrics: held-out accuracy (primary), macro-F1, eval loss;
Batch.counts["tokens"] counts real tokens ([CLS]/[SEP] included, padding excluded).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from ampbench.config import ConfigError
from ampbench.config.suite import StrictInt
from ampbench.workloads.base import Batch, Workload, WorkloadParams, bundled

PAD_MULTIPLE = 8  # batch-wise padding rounds up to this (tensor-core friendly shapes)


class ReviewData(WorkloadParams):
    kind: Literal["rotten-tomatoes", "chinese-reviews", "file"] = "rotten-tomatoes"
    path: str | None = None  # kind = "file": a text<TAB>label TSV or text,label CSV
    held_out_fraction: float = Field(0.1, gt=0, lt=1)
    split_seed: int = 0  # fixes the split; trial seeds change init and order only
    max_train_rows: StrictInt | None = Field(None, ge=8)  # first N training rows (quick runs, tests)
    max_eval_rows: StrictInt | None = Field(None, ge=8)

    @model_validator(mode="after")
    def _path(self) -> ReviewData:
        if self.kind == "file" and not self.path:
            raise ValueError("kind = 'file' needs path = 'my_reviews.tsv'")
        return self


class BertParams(WorkloadParams):
    source: Literal["paddleformers", "paddlenlp"] = "paddleformers"
    dataset: ReviewData = ReviewData()
    vocab_size: StrictInt = Field(8000, ge=64)
    min_frequency: StrictInt = Field(2, ge=1)
    lowercase: bool = True
    max_seq_len: StrictInt = Field(128, ge=8, le=512)
    padding: Literal["max_length", "batch"] = "max_length"  # "batch": to the batch's longest (x8)
    hidden_size: StrictInt = Field(768, ge=8)
    num_layers: StrictInt = Field(12, ge=1)
    num_heads: StrictInt = Field(12, ge=1)
    intermediate_size: StrictInt = Field(3072, ge=8)
    max_position_embeddings: StrictInt = Field(512, ge=8)
    dropout: float = Field(0.1, ge=0, lt=1)
    attention_dropout: float = Field(0.1, ge=0, lt=1)
    pretrained_dir: str | None = None  # local folder from save_pretrained(), with its vocab.txt
    eval_batch_size: StrictInt = Field(256, ge=1)

    @model_validator(mode="after")
    def _shapes(self) -> BertParams:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be a multiple of num_heads ({self.num_heads})")
        if self.max_position_embeddings < self.max_seq_len:
            raise ValueError(
                f"max_position_embeddings ({self.max_position_embeddings}) is below max_seq_len ({self.max_seq_len})"
            )
        return self


def encode(tokenizer: Any, texts: Any, max_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[CLS] wordpieces [SEP], truncated to max_len, padded with [PAD].

    Returns ids [N, max_len], lengths (after truncation) and untruncated lengths. Uses tokenize +
    convert_tokens_to_ids, which paddleformers and paddlenlp share.
    """
    ids = np.full((len(texts), max_len), tokenizer.pad_token_id, dtype=np.int32)
    lengths = np.empty(len(texts), dtype=np.int32)
    full = np.empty(len(texts), dtype=np.int32)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    for i, text in enumerate(texts):
        pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
        row = [cls_id, *pieces[: max_len - 2], sep_id]
        ids[i, : len(row)] = row
        lengths[i], full[i] = len(row), len(pieces) + 2
    return ids, lengths, full


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> float:
    """Unweighted mean of per-class F1 (a class never predicted nor present scores 0)."""
    conf = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(conf, (y_true, y_pred), 1)
    tp = np.diag(conf).astype(float)
    denom = conf.sum(0) + conf.sum(1)
    f1 = np.divide(2 * tp, denom, out=np.zeros(n_classes), where=denom > 0)
    return float(f1.mean())


def _atomic_savez(path: Path, **arrays: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".enc-", suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


@bundled
class BertWorkload(Workload[BertParams]):
    name = "bert"
    Params = BertParams
    metric_goals: ClassVar[dict[str, str]] = {"accuracy": "max", "macro_f1": "max", "eval_loss": "min"}

    # ------------------------------------------------------------------ data (not timed)
    def prepare(self) -> None:
        from ampbench.workloads.bert import reviews, wordpiece
        from ampbench.workloads.bert.source import load_bert_api

        p = self.params
        self.api = load_bert_api(p.source)
        data = reviews.load_reviews(p.dataset.kind, p.dataset.path)
        split = reviews.split_dataset(data, p.dataset.held_out_fraction, p.dataset.split_seed)
        train, held = split.train, split.held_out
        if p.dataset.max_train_rows:
            train = train.subset(np.arange(min(len(train), p.dataset.max_train_rows)))
        if p.dataset.max_eval_rows:
            held = held.subset(np.arange(min(len(held), p.dataset.max_eval_rows)))
        if len(train) < 2 or len(held) < 1:
            raise ConfigError(
                data.name, "workload.dataset",
                f"too few rows after the split ({len(train)} train, {len(held)} held out); add data",
            )
        self.data, self.train_set, self.held_set = data, train, held
        cache = Path(self.ctx.cache_dir) / "bert" / f"{data.name}-{data.fingerprint()}"
        self.vocab_file = self._vocab(cache, wordpiece)
        self.tokenizer = self.api.tokenizer_cls(vocab_file=str(self.vocab_file), do_lower_case=p.lowercase)
        self.vocab_hash = wordpiece.file_sha256(self.vocab_file)
        self.x_train, self.len_train, self.full_len_train = self._encoded(cache, train, "train")
        self.x_eval, self.len_eval, _ = self._encoded(cache, held, "held-out")
        self.y_train, self.y_eval = train.labels, held.labels

    def _vocab(self, cache: Path, wordpiece: Any) -> Path:
        p = self.params
        if p.pretrained_dir:
            d = Path(p.pretrained_dir).expanduser()
            vocab = d / "vocab.txt"
            if not vocab.is_file():
                raise ConfigError(
                    d, "workload.pretrained_dir",
                    "needs the vocab.txt the weights were trained with (and model_config.json / config.json "
                    "plus model_state.pdparams, as save_pretrained() writes)",
                )
            return vocab
        return wordpiece.cached_vocab(self.train_set.texts, cache, p.vocab_size, p.lowercase, p.min_frequency)

    def _encoded(self, cache: Path, ds: Any, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = self.params
        key = hashlib.sha256(
            f"enc/2|{self.vocab_hash}|{p.lowercase}|{p.max_seq_len}|{self.api.source}|{self.api.version}|"
            f"{ds.fingerprint()}".encode()
        ).hexdigest()[:16]
        path = cache / f"encoded-{part}-{key}.npz"
        if path.is_file():
            with np.load(path) as z:
                return z["ids"], z["lengths"], z["full_lengths"]
        ids, lengths, full = encode(self.tokenizer, ds.texts, p.max_seq_len)
        _atomic_savez(path, ids=ids, lengths=lengths, full_lengths=full)
        return ids, lengths, full

    def describe(self) -> dict[str, Any]:
        p = self.params
        return {
            "dataset": self.data.name,
            "dataset_fingerprint": self.data.fingerprint(),
            "dropped_rows": self.data.dropped,
            "label_names": list(self.data.label_names),
            "train_rows": len(self.train_set),
            "eval_rows": len(self.held_set),
            "majority_rate": self.held_set.majority_rate(),
            "train_majority_rate": self.train_set.majority_rate(),
            "vocab_size": self._vocab_len(),
            "vocab_sha256": self.vocab_hash,
            "mean_train_tokens": float(self.len_train.mean()),
            "mean_train_tokens_untruncated": float(self.full_len_train.mean()),
            "truncated_fraction": float((self.full_len_train > p.max_seq_len).mean()),
            "bert_source": f"{self.api.source} {self.api.version}",
            "init": f"pretrained:{p.pretrained_dir}" if p.pretrained_dir else "random",
        }

    # ------------------------------------------------------------------ model
    def build_model(self) -> Any:
        p = self.params
        n_classes = len(self.data.label_names)
        if p.pretrained_dir:
            return self.api.model_cls.from_pretrained(str(Path(p.pretrained_dir).expanduser()), num_labels=n_classes)
        config = self.api.config_cls(
            vocab_size=self._vocab_len(),
            hidden_size=p.hidden_size,
            num_hidden_layers=p.num_layers,
            num_attention_heads=p.num_heads,
            intermediate_size=p.intermediate_size,
            max_position_embeddings=p.max_position_embeddings,
            hidden_dropout_prob=p.dropout,
            attention_probs_dropout_prob=p.attention_dropout,
            num_labels=n_classes,
            pad_token_id=int(self.tokenizer.pad_token_id),
        )
        return self.api.model_cls(config)

    def _vocab_len(self) -> int:
        return sum(1 for _ in self.vocab_file.open(encoding="utf-8"))

    # ------------------------------------------------------------------ training
    def _pad(self, ids: np.ndarray, lengths: np.ndarray, batch_wise: bool) -> tuple[np.ndarray, np.ndarray]:
        width = ids.shape[1]
        if batch_wise:
            width = min(width, -(-int(lengths.max()) // PAD_MULTIPLE) * PAD_MULTIPLE)
        ids = ids[:, :width].astype(np.int64)
        mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        return ids, mask

    def train_batches(self, seed: int, batch_size: int) -> Iterator[Batch]:
        p = self.params
        rng = np.random.RandomState(seed)
        n = len(self.y_train)
        if batch_size > n:
            raise ConfigError("[train]", "batch_size", f"{batch_size} exceeds the {n} training rows")
        while True:
            order = rng.permutation(n)
            for i in range(0, n - batch_size + 1, batch_size):
                idx = order[i: i + batch_size]
                lengths = self.len_train[idx]
                ids, mask = self._pad(self.x_train[idx], lengths, p.padding == "batch")
                yield Batch(inputs=(ids, mask, self.y_train[idx]), samples=len(idx),
                            counts={"tokens": int(lengths.sum())})

    def _logits(self, model: Any, ids: np.ndarray, mask: np.ndarray) -> Any:
        import paddle

        out = model(input_ids=paddle.to_tensor(ids), attention_mask=paddle.to_tensor(mask))
        logits = out if isinstance(out, paddle.Tensor) else getattr(out, "logits", None)
        if logits is None:
            logits = out[0]
        return logits.astype("float32")

    def loss(self, model: Any, batch: Batch) -> Any:
        import paddle
        import paddle.nn.functional as F

        ids, mask, labels = batch.inputs
        return F.cross_entropy(self._logits(model, ids, mask), paddle.to_tensor(labels))

    def evaluate(self, model: Any) -> dict[str, float]:
        """Held-out pass in length-sorted batches (padding masked, so order does not change results)."""
        import paddle
        import paddle.nn.functional as F

        p = self.params
        was_training = model.training
        model.eval()
        order = np.argsort(self.len_eval, kind="stable")
        preds = np.empty(len(order), dtype=np.int64)
        loss_sum = 0.0
        try:
            with paddle.no_grad():
                for i in range(0, len(order), p.eval_batch_size):
                    idx = order[i: i + p.eval_batch_size]
                    ids, mask = self._pad(self.x_eval[idx], self.len_eval[idx], True)
                    logits = self._logits(model, ids, mask)
                    labels = paddle.to_tensor(self.y_eval[idx])
                    loss_sum += float(F.cross_entropy(logits, labels, reduction="sum"))
                    preds[idx] = logits.argmax(axis=1).numpy()
        finally:
            if was_training:
                model.train()
        y = self.y_eval
        return {
            "accuracy": float((preds == y).mean()),
            "macro_f1": macro_f1(y, preds, len(self.data.label_names)),
            "eval_loss": loss_sum / len(y),
        }
