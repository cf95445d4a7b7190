"""WordPiece vocabulary: deterministic training, caching, and round trips through the PaddleNLP-family
BertTokenizer on English and Chinese text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ampbench.workloads.bert import wordpiece as wp

pytest.importorskip("tokenizers", reason="the bert extra is not installed")
pytestmark = pytest.mark.bert

ENGLISH = [
    "This movie is GREAT fun!",
    "Not good at all; a waste of time.",
    "A tokenizer tokenizes tokens, and tokenization is fun.",
    "Café au lait, naïve résumé.",
    "Wel come to the Tok en izers libr ary.",
]
CHINESE = ["这个手机很好用，推荐购买！", "质量太差了，不推荐。", "物流很快，包装完好，手机不错"]
CORPUS = (ENGLISH + CHINESE) * 3


def basic_tokens(text: str, lowercase: bool = True) -> list[str]:
    """The words BERT's BasicTokenizer sees, from the trainer's own pipeline (normaliser + pre-tokenizer)."""
    tok = wp._pipeline(lowercase)
    return [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))]


def test_training_is_deterministic():
    """The bare `tokenizers` trainer varies run to run on this corpus (hash-map order decides ties;
    30 runs gave 18 different vocabularies); pinning the ## symbols must make it repeatable."""
    first = wp.train_vocab(CORPUS, vocab_size=200, min_frequency=1)
    for _ in range(8):
        assert wp.train_vocab(CORPUS, vocab_size=200, min_frequency=1) == first


def test_vocab_layout():
    vocab = wp.train_vocab(CORPUS, vocab_size=200, min_frequency=1)
    assert tuple(vocab[:5]) == wp.SPECIAL_TOKENS
    assert len(vocab) == len(set(vocab)) <= 200
    assert "##s" in vocab and "手" in vocab and "great" in vocab
    assert not any(t.startswith("##") and len(t) == 3 and "\u4e00" <= t[2] <= "\u9fff" for t in vocab)


def test_chinese_characters_are_split_like_bert_chinese():
    assert basic_tokens("我爱BERT模型!") == ["我", "爱", "bert", "模", "型", "!"]
    assert basic_tokens("Naïve", lowercase=False) == ["Naïve"]


def test_cache_reuses_the_file_and_keys_on_content(tmp_path: Path):
    a = wp.cached_vocab(CORPUS, tmp_path, vocab_size=200, min_frequency=1)
    stamp = a.stat().st_mtime_ns
    assert wp.cached_vocab(CORPUS, tmp_path, vocab_size=200, min_frequency=1) == a
    assert a.stat().st_mtime_ns == stamp  # not retrained
    assert a.read_text(encoding="utf-8").splitlines() == wp.train_vocab(CORPUS, vocab_size=200, min_frequency=1)
    assert wp.cached_vocab(CORPUS, tmp_path, vocab_size=150, min_frequency=1) != a
    assert wp.cached_vocab(CORPUS[:-1], tmp_path, vocab_size=200, min_frequency=1) != a


def test_rejects_a_vocab_too_small_for_the_specials():
    with pytest.raises(ValueError, match="vocab_size"):
        wp.train_vocab(CORPUS, vocab_size=5)


@pytest.fixture(scope="module")
def paddle_tokenizer(tmp_path_factory):
    from ampbench.workloads.bert.source import installed_sources, load_bert_api

    if not installed_sources():
        pytest.skip("neither paddleformers nor paddlenlp is installed (the bert extra)")
    vocab = wp.cached_vocab(CORPUS, tmp_path_factory.mktemp("wp"), vocab_size=300, min_frequency=1)
    api = load_bert_api(installed_sources()[0])
    return api.tokenizer_cls(vocab_file=str(vocab), do_lower_case=True), vocab


@pytest.mark.parametrize("text", [ENGLISH[0], ENGLISH[2], ENGLISH[3], CHINESE[0], CHINESE[1]])
def test_round_trip_through_paddle_bert_tokenizer(paddle_tokenizer, text: str):
    """The family's BertTokenizer, given our vocab.txt, splits exactly as the trainer's pipeline did,
    and decoding gives back the normalised words."""
    from tokenizers import models

    tok, vocab = paddle_tokenizer
    pieces = tok.tokenize(text)
    trainer_side = wp._pipeline(True)
    trainer_side.model = models.WordPiece.from_file(str(vocab), unk_token="[UNK]")
    assert pieces == trainer_side.encode(text, add_special_tokens=False).tokens
    assert "[UNK]" not in pieces
    ids = tok.convert_tokens_to_ids(pieces)
    assert tok.convert_tokens_to_string(tok.convert_ids_to_tokens(ids)) == " ".join(basic_tokens(text))


def test_unseen_characters_become_unk(paddle_tokenizer):
    tok, _ = paddle_tokenizer
    assert tok.tokenize("好 ☃") == ["好", "[UNK]"]
