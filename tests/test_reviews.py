"""Review datasets: the two offline corpora, de-duplication, the user file reader, the fixed split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ampbench.config import ConfigError
from ampbench.workloads.bert import reviews
from ampbench.workloads.bert.reviews import build_dataset, deduplicate, read_labelled_file, split_dataset


def test_deduplicate_keeps_first_copy_and_drops_conflicting_labels():
    texts = ["good  film", "good film", "bad &amp; dull", "meh", "meh", "  ", "fine"]
    labels = ["pos", "pos", "neg", "pos", "neg", "neg", "pos"]
    kept, kept_labels, dropped = deduplicate(texts, labels)
    assert kept == ["good film", "bad & dull", "fine"]  # whitespace collapsed, entity unescaped
    assert kept_labels == ["pos", "neg", "pos"]
    assert dropped == {"empty": 1, "duplicates": 2, "conflicting_labels": 1}


def test_chinese_reviews_are_deduplicated():
    ds = reviews.load_chinese_reviews()
    assert ds.label_names == ("negative", "positive")
    assert len(set(ds.texts)) == len(ds.texts)
    # every line ships twice, and a few lines sit in both files: those must be gone entirely
    assert ds.dropped["duplicates"] > 15_000 and ds.dropped["conflicting_labels"] > 0
    assert 15_000 < len(ds) < 20_000
    assert set(np.unique(ds.labels)) == {0, 1}
    assert 0.5 < ds.majority_rate() < 0.6


def test_rotten_tomatoes_reviews_only():
    ds = reviews.load_rotten_tomatoes()
    assert ds.label_names == ("rotten", "fresh")
    assert 12_000 < len(ds) < 13_000  # the plot synopses are not reviews and are left out
    assert 0.55 < ds.majority_rate() < 0.60  # fresh is the majority (57.8%)
    rotten, fresh = np.bincount(ds.labels, minlength=2)
    assert fresh > rotten
    assert not any("&amp;" in t for t in ds.texts)


def _toy(n: int = 400) -> reviews.TextDataset:
    return build_dataset("toy", [f"review number {i}" for i in range(n)], ["a" if i % 3 else "b" for i in range(n)])


def test_split_is_fixed_disjoint_and_complete():
    ds = _toy()
    a, b = split_dataset(ds, 0.2, seed=0), split_dataset(ds, 0.2, seed=0)
    assert a.held_out.texts == b.held_out.texts and a.train.texts == b.train.texts
    assert not set(a.train.texts) & set(a.held_out.texts)
    assert sorted(a.train.texts + a.held_out.texts) == sorted(ds.texts)
    assert 0.12 < len(a.held_out) / len(ds) < 0.28
    assert split_dataset(ds, 0.2, seed=1).held_out.texts != a.held_out.texts


def test_split_side_depends_on_the_text_alone():
    """Shuffling rows or removing other rows never moves a text across the split."""
    ds = _toy()
    held = set(split_dataset(ds, 0.2, seed=3).held_out.texts)
    perm = np.random.RandomState(0).permutation(len(ds))
    shuffled = ds.subset(perm)
    assert set(split_dataset(shuffled, 0.2, seed=3).held_out.texts) == held
    half = ds.subset(np.arange(0, len(ds), 2))
    assert set(split_dataset(half, 0.2, seed=3).held_out.texts) == held & set(half.texts)


def test_read_tsv_with_header_and_tabs_inside_text(tmp_path: Path):
    f = tmp_path / "mine.tsv"
    f.write_text("text\tlabel\nloved it\t1\na\ttabbed\ttext\t0\nloved it\t1\n\nawful\t0\n", encoding="utf-8")
    ds = read_labelled_file(f)
    assert ds.texts == ("loved it", "a tabbed text", "awful")  # label is after the last tab
    assert ds.label_names == ("0", "1") and ds.labels.tolist() == [1, 0, 0]
    assert ds.dropped["duplicates"] == 1


def test_read_csv_with_quotes_and_numeric_label_order(tmp_path: Path):
    f = tmp_path / "mine.csv"
    f.write_text('"great, really great",10\nbad,2\n"so-so",10\n', encoding="utf-8")
    ds = read_labelled_file(f)
    assert ds.texts[0] == "great, really great"
    assert ds.label_names == ("2", "10")  # numbers sort as numbers


@pytest.mark.parametrize(
    "content, needle",
    [("only text here\nfine\t1\n", "line 1"), ("a\t1\nb\t1\n", "two distinct labels"), ("x\t\ny\t1\n", "line 1")],
)
def test_read_errors_name_file_and_line(tmp_path: Path, content: str, needle: str):
    f = tmp_path / "bad.tsv"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        read_labelled_file(f)
    assert needle in str(e.value) and "bad.tsv" in str(e.value)


def test_missing_file_and_unknown_kind(tmp_path: Path):
    with pytest.raises(ConfigError, match="not found"):
        reviews.load_reviews("file", str(tmp_path / "nope.tsv"))
    with pytest.raises(ConfigError, match="needs path"):
        reviews.load_reviews("file")
    with pytest.raises(ConfigError, match="unknown"):
        reviews.load_reviews("imdb")


def test_fingerprint_tracks_content():
    a = build_dataset("x", ["one", "two"], ["p", "n"])
    b = build_dataset("y", ["one", "two"], ["p", "n"])
    c = build_dataset("x", ["one", "two!"], ["p", "n"])
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
