"""A WordPiece vocabulary trained on the training split, since no vocabulary ships offline.

Text is normalised and split exactly as BERT's BasicTokenizer does (lower case and accents
stripped, punctuation split, every CJK character its own word as in BERT-Chinese), so the
vocab.txt written here tokenises the same way when loaded by the PaddleNLP-family
`BertTokenizer(vocab_file=...)`.

Determinism: the `tokenizers` WordPiece trainer numbers its `##x` continuation symbols in
hash-map order, and merge ties are broken by those numbers, so two runs on the same text can
differ (huggingface/tokenizers#1794). We register every `##x` symbol up front, in sorted order,
which fixes their ids before training; the result is cached by content hash, so every trial of a
run reads the very same file either way.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PREFIX = "##"


def _pipeline(lowercase: bool):  # -> tokenizers.Tokenizer
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=PREFIX))
    # strip_accents=None follows `lowercase`, as BERT's do_lower_case does.
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def _continuation_symbols(texts: Sequence[str], lowercase: bool) -> list[str]:
    """Every `##x` symbol the trainer will create, sorted; a vocab_size=1 pass stops right after
    the trainer has listed them (in Rust, faster than pre-tokenising in Python)."""
    from tokenizers import trainers

    tok = _pipeline(lowercase)
    probe = trainers.WordPieceTrainer(
        vocab_size=1, special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix=PREFIX, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=probe, length=len(texts))
    return sorted(t for t in tok.get_vocab(with_added_tokens=True) if t.startswith(PREFIX))


def train_vocab(
    texts: Sequence[str], vocab_size: int = 8000, lowercase: bool = True, min_frequency: int = 2
) -> list[str]:
    """Vocabulary tokens in id order: the five BERT specials first, then what training kept."""
    from tokenizers import trainers

    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
    tok = _pipeline(lowercase)
    pinned = _continuation_symbols(texts, lowercase)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *pinned],
        continuing_subword_prefix=PREFIX,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    vocab = tok.get_vocab(with_added_tokens=True)
    return sorted(vocab, key=vocab.__getitem__)


def vocab_key(texts: Iterable[str], vocab_size: int, lowercase: bool, min_frequency: int) -> str:
    """What determines a vocabulary: the training texts and the settings (and the trainer's version)."""
    import tokenizers

    h = hashlib.sha256(f"wordpiece/1|{tokenizers.__version__}|{vocab_size}|{lowercase}|{min_frequency}".encode())
    for t in texts:
        h.update(t.encode())
        h.update(b"\x1d")
    return h.hexdigest()[:16]


def write_vocab(tokens: Sequence[str], path: Path) -> None:
    """One token a line (vocab.txt format), written atomically so concurrent trials never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vocab-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    os.replace(tmp, path)


def cached_vocab(
    texts: Sequence[str], cache_dir: Path, vocab_size: int = 8000, lowercase: bool = True, min_frequency: int = 2
) -> Path:
    """Path of vocab.txt for these texts and settings, training it only if the cache lacks it."""
    path = Path(cache_dir) / f"wordpiece-{vocab_key(texts, vocab_size, lowercase, min_frequency)}.txt"
    if not path.is_file():
        write_vocab(train_vocab(texts, vocab_size, lowercase, min_frequency), path)
    return path


def file_sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
