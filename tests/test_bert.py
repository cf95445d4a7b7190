"""The BERT workload: the import shim, params and suite file, a tiny BERT trained in-process on a
few rows, the pretrained_dir path, and one real `ampbench run` (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from ampbench.config import ConfigError
from ampbench.workloads import get_workload_class
from ampbench.workloads.base import WorkloadContext
from ampbench.workloads.bert.source import SOURCES, installed_sources, load_bert_api
from ampbench.workloads.bert.workload import BertParams, BertWorkload, macro_f1
from ampbench.workloads.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]
# `tox -e paddlenlp` sets AMPBENCH_BERT_SOURCE=paddlenlp: every test then goes through that source.
SOURCE = os.environ.get("AMPBENCH_BERT_SOURCE") or next(iter(installed_sources()), None)
needs_bert = pytest.mark.skipif(not installed_sources(), reason="needs paddleformers or paddlenlp (bert extra)")
bert_extra = pytest.mark.bert

POS = ["a warm, funny and moving film", "great acting and a clever story", "loved every minute of it",
       "这部电影很好看", "演员很棒，推荐"]
NEG = ["a dull, lifeless mess", "boring plot and wooden acting", "i want my two hours back",
       "太无聊了，不推荐", "剧情很差"]

TINY = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32, "max_seq_len": 16,
        "max_position_embeddings": 16, "vocab_size": 120, "min_frequency": 1, "dropout": 0.0,
        "attention_dropout": 0.0, "eval_batch_size": 8}


def write_reviews(path: Path) -> Path:
    rows = [f"{t} {k}\tpositive" for k in range(4) for t in POS] + [f"{t} {k}\tnegative" for k in range(4) for t in NEG]
    path.write_text("text\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------- shim
def test_registered_under_bert():
    assert get_workload_class("bert") is BertWorkload


@needs_bert
@bert_extra
@pytest.mark.parametrize("source", installed_sources())
def test_shim_loads_each_installed_source(source):
    api = load_bert_api(source)
    assert api.source == source and api.version != "unknown"
    assert api.model_cls.__name__ == "BertForSequenceClassification"
    assert api.config_cls.__name__ == "BertConfig" and "BertTokenizer" in api.tokenizer_cls.__name__


def test_shim_explains_a_missing_source():
    missing = [s for s in SOURCES if s not in installed_sources()]
    if not missing:
        pytest.skip("both sources are installed")
    with pytest.raises(ConfigError, match="not installed: pip install"):
        load_bert_api(missing[0])
    with pytest.raises(ConfigError, match="unknown"):
        load_bert_api("huggingface")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- config
def test_params_validation():
    with pytest.raises(ValidationError, match="multiple of num_heads"):
        BertParams(hidden_size=100, num_heads=12)
    with pytest.raises(ValidationError, match="max_position_embeddings"):
        BertParams(max_seq_len=128, max_position_embeddings=64)
    with pytest.raises(ValidationError, match="needs path"):
        BertParams.model_validate({"dataset": {"kind": "file"}})
    with pytest.raises(ValidationError):
        BertParams.model_validate({"hidden": 64})  # unknown keys are errors


@pytest.mark.parametrize("profile", ["default", "cpu"])
def test_suite_file_validates(profile):
    suite = load_suite(ROOT / "suites" / "bert.toml", profile=profile).suite
    names = [m.name for m in suite.modes]
    assert names[0] == "fp32" and any(m.amp for m in suite.modes)
    params = BertParams.model_validate(suite.workload)
    if profile == "default":
        assert (params.hidden_size, params.num_layers, params.max_seq_len) == (768, 12, 128)
        assert any(not m.use_promote for m in suite.modes)
        assert {"float16", "bfloat16"} <= {m.dtype for m in suite.modes if m.amp}
        assert {"O1", "O2"} <= {m.level for m in suite.modes if m.amp}
    else:
        assert params.hidden_size <= 256 and suite.suite.metric == "accuracy"


def test_macro_f1():
    y = np.array([0, 0, 1, 1, 1])
    p = np.array([0, 1, 1, 1, 0])
    # class 0: tp 1, fp 1, fn 1 -> 0.5; class 1: tp 2, fp 1, fn 1 -> 2/3
    assert macro_f1(y, p, 2) == pytest.approx((0.5 + 2 / 3) / 2)
    assert macro_f1(y, np.ones(5, dtype=int), 2) == pytest.approx((0 + 0.75) / 2)


# ---------------------------------------------------------------------------------------- workload
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    if not installed_sources():
        pytest.skip("needs paddleformers or paddlenlp (bert extra)")
    d = tmp_path_factory.mktemp("bert")
    data = write_reviews(d / "reviews.tsv")
    params = BertParams.model_validate(
        {**TINY, "source": SOURCE, "padding": "batch",
         "dataset": {"kind": "file", "path": str(data), "held_out_fraction": 0.3}}
    )
    ctx = WorkloadContext(params=params, batch_size=4, steps=10, seed=0, cache_dir=d / "cache")
    wl = BertWorkload(ctx)
    wl.prepare()
    return wl, ctx


@bert_extra
def test_prepare_builds_vocab_and_encodings_once(tiny):
    wl, ctx = tiny
    info = wl.describe()
    assert info["train_rows"] + info["eval_rows"] == 40 and info["eval_rows"] > 0
    assert info["vocab_size"] <= 120 and info["vocab_sha256"].startswith("sha256:")
    assert 0.5 <= info["majority_rate"] <= 1.0
    cached = sorted(p.name for p in Path(ctx.cache_dir).rglob("*") if p.is_file())
    stamps = [p.stat().st_mtime_ns for p in sorted(Path(ctx.cache_dir).rglob("*")) if p.is_file()]
    again = BertWorkload(ctx)
    again.prepare()
    assert sorted(p.name for p in Path(ctx.cache_dir).rglob("*") if p.is_file()) == cached
    assert [p.stat().st_mtime_ns for p in sorted(Path(ctx.cache_dir).rglob("*")) if p.is_file()] == stamps
    assert np.array_equal(again.x_train, wl.x_train) and again.vocab_hash == wl.vocab_hash
    # every row starts with [CLS]; lengths count real tokens only
    tok = wl.tokenizer
    assert (wl.x_train[:, 0] == tok.cls_token_id).all()
    assert all(wl.x_train[i, n - 1] == tok.sep_token_id for i, n in enumerate(wl.len_train))


@bert_extra
def test_encode_truncates_but_keeps_cls_and_sep(tiny):
    from ampbench.workloads.bert.workload import encode

    tok = tiny[0].tokenizer
    ids, lengths, full = encode(tok, ["great acting and a clever story", "剧情很差"], 6)
    assert lengths.tolist() == [6, 6] and full.tolist() == [8, 6]
    assert ids[:, 0].tolist() == [tok.cls_token_id] * 2 and ids[:, 5].tolist() == [tok.sep_token_id] * 2
    assert tok.convert_ids_to_tokens(ids[1, 1:5].tolist()) == ["剧", "情", "很", "差"]


@bert_extra
def test_batches_are_seeded_and_count_real_tokens(tiny):
    wl, _ = tiny
    a, b, c = wl.train_batches(0, 4), wl.train_batches(0, 4), wl.train_batches(1, 4)
    first = [next(a) for _ in range(5)]
    assert all(np.array_equal(x.inputs[0], next(b).inputs[0]) for x in first)
    assert not all(np.array_equal(x.inputs[0], next(c).inputs[0]) for x in first)
    for batch in first:
        ids, mask, labels = batch.inputs
        assert batch.samples == 4 == len(labels)
        assert batch.counts["tokens"] == int(mask.sum())
        assert ids.shape[1] % 8 == 0 and ((ids != 0) == (mask == 1)).all()


@bert_extra
def test_tiny_bert_trains_and_evaluates(tiny):
    import paddle

    wl, _ = tiny
    paddle.seed(0)
    model = wl.build_model()
    assert sum(int(np.prod(p.shape)) for p in model.parameters()) < 20_000
    opt = paddle.optimizer.AdamW(learning_rate=1e-2, parameters=model.parameters())
    batch = next(wl.train_batches(0, 8))
    model.train()
    losses = []
    for _ in range(20):  # fit one batch: the loss must fall
        loss = wl.loss(model, batch)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss.item()))
    assert losses[-1] < losses[0] * 0.5, losses
    metrics = wl.evaluate(model)
    assert set(metrics) == {"accuracy", "macro_f1", "eval_loss"}
    assert 0 <= metrics["accuracy"] <= 1 and 0 <= metrics["macro_f1"] <= 1 and metrics["eval_loss"] > 0
    assert model.training  # evaluate restores the mode it found
    # padding is masked: evaluating in another batch size gives the same numbers
    wl.params = wl.params.model_copy(update={"eval_batch_size": 3})
    try:
        assert wl.evaluate(model)["eval_loss"] == pytest.approx(metrics["eval_loss"], rel=1e-4)
    finally:
        wl.params = wl.params.model_copy(update={"eval_batch_size": TINY["eval_batch_size"]})


@bert_extra
def test_pretrained_dir_loads_local_weights(tiny, tmp_path: Path):
    import shutil

    import paddle

    wl, ctx = tiny
    paddle.seed(1)
    model = wl.build_model()
    model.save_pretrained(str(tmp_path))
    shutil.copy(wl.vocab_file, tmp_path / "vocab.txt")
    params = wl.params.model_copy(update={"pretrained_dir": str(tmp_path)})
    other = BertWorkload(WorkloadContext(params=params, batch_size=4, steps=1, seed=0, cache_dir=ctx.cache_dir))
    other.prepare()
    assert other.describe()["init"].startswith("pretrained:")
    loaded = other.build_model()
    model.eval()
    loaded.eval()
    ids, mask, _ = next(wl.train_batches(0, 4)).inputs
    a = wl._logits(model, ids, mask).numpy()
    b = other._logits(loaded, ids, mask).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@bert_extra
def test_pretrained_dir_without_vocab_is_a_config_error(tiny, tmp_path: Path):
    wl, ctx = tiny
    params = wl.params.model_copy(update={"pretrained_dir": str(tmp_path)})
    with pytest.raises(ConfigError, match="vocab.txt"):
        BertWorkload(WorkloadContext(params=params, batch_size=4, steps=1, seed=0, cache_dir=ctx.cache_dir)).prepare()


# ---------------------------------------------------------------------------------------- end to end
@needs_bert
@bert_extra
@pytest.mark.slow
def test_ampbench_run_bert_suite_tiny(tmp_path: Path):
    """The real suite file through `ampbench run`, shrunk by --set: AMP is inactive on CPU -> exit 3."""
    data = write_reviews(tmp_path / "reviews.tsv")
    sets = [f"workload.{k}={json.dumps(v)}" for k, v in TINY.items()]
    sets += [f'workload.dataset={{ kind = "file", path = "{data}", held_out_fraction = 0.3 }}',
             "train.steps=6", "train.warmup_steps=1", "train.batch_size=4", "train.timeout_s=300",
             f"workload.source={SOURCE}"]
    cmd = [sys.executable, "-m", "ampbench.cli", "run", str(ROOT / "suites" / "bert.toml"), "--profile", "cpu",
           "--out", str(tmp_path / "runs"), "--no-report"]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "AMPBENCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    trials = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("trials/*.json")]
    assert len(trials) == 2 and all(t["status"] == "ok" for t in trials)
    for t in trials:
        assert set(t["metrics"]) >= {"accuracy", "macro_f1"}
        assert t["throughput"]["extra_per_s"]["tokens"] > t["throughput"]["samples_per_s"]
        assert t["workload_info"]["vocab_sha256"].startswith("sha256:")
        assert t["workload_info"]["bert_source"].startswith(SOURCE)
    amp = next(t for t in trials if t["mode"] != "fp32")
    assert amp["amp"]["active"] is False
