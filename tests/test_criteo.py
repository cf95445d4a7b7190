"""The Criteo-format reader on small hand-written TSV files, malformed lines included."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from ampbench.workloads.ctr.criteo import (
    CriteoReader,
    CriteoSource,
    CriteoSpec,
    CTRArrays,
    DataFormatError,
    batches_from_blocks,
    hash_bucket,
    shuffled,
)


def _line(label: str = "1", ints: list[str] | None = None, cats: list[str] | None = None) -> str:
    ints = ints if ints is not None else [str(i) for i in range(13)]
    cats = cats if cats is not None else [f"{j:08x}" for j in range(26)]
    return "\t".join([label, *ints, *cats]) + "\n"


GOOD_1 = _line("1", ["5", "", "-2", *["0"] * 10], ["68fd1e64", "", *["a" * 8] * 24])
GOOD_0 = _line("0")
BAD_FIELDS = "1\t2\t3\n"
BAD_LABEL = _line("2")
BAD_INT = _line("0", ["x1", *["0"] * 12])


def _write(tmp_path: Path, lines: list[str], name: str = "day_0.txt") -> Path:
    p = tmp_path / name
    p.write_text("".join(lines))
    return p


def _spec(path: Path, **kw) -> CriteoSpec:
    return CriteoSpec(path=str(path), hash_buckets=1000, block_rows=2, **kw)


def test_parses_label_log_transformed_ints_and_hashed_categoricals(tmp_path: Path) -> None:
    p = _write(tmp_path, [GOOD_1, GOOD_0])
    blocks = list(CriteoReader(p, _spec(p)).blocks())
    arr = CTRArrays.concat(blocks)
    assert arr.label.tolist() == [1.0, 0.0]
    assert arr.dense.shape == (2, 13) and arr.sparse.shape == (2, 26)
    assert arr.dense[0, 0] == pytest.approx(math.log1p(5))
    assert arr.dense[0, 1] == 0.0  # missing
    assert arr.dense[0, 2] == 0.0  # negative counts clip to 0 (Criteo's I2 has some)
    assert arr.sparse[0, 0] == hash_bucket("68fd1e64", 0, 1000)
    assert arr.sparse[0, 1] == 0  # missing categorical -> reserved bucket 0
    assert 1 <= arr.sparse.max() < 1000


def test_hash_is_stable_and_salted_by_field() -> None:
    assert hash_bucket("68fd1e64", 0, 1000) == hash_bucket("68fd1e64", 0, 1000)
    assert len({hash_bucket("68fd1e64", f, 10**6) for f in range(26)}) > 20
    assert hash_bucket("", 3, 1000) == 0


def test_malformed_line_raises_naming_file_and_line(tmp_path: Path) -> None:
    p = _write(tmp_path, [GOOD_1, GOOD_0, BAD_FIELDS, GOOD_0])
    with pytest.raises(DataFormatError) as e:
        list(CriteoReader(p, _spec(p)).blocks())
    msg = str(e.value)
    assert msg.startswith(f"{p}:3: expected 40 tab-separated fields")
    assert "found 3" in msg and 'on_error = "skip"' in msg


@pytest.mark.parametrize("bad, lineno, words", [
    (BAD_LABEL, 2, "label must be 0 or 1, found '2'"),
    (BAD_INT, 2, "integer field I1 is not an integer: 'x1'"),
    ("\n", 2, "empty line"),
])
def test_each_kind_of_bad_line_is_named(tmp_path: Path, bad: str, lineno: int, words: str) -> None:
    p = _write(tmp_path, [GOOD_0, bad, GOOD_1])
    with pytest.raises(DataFormatError, match=f":{lineno}: {words}"):
        list(CriteoReader(p, _spec(p)).blocks())


def test_skip_mode_skips_and_counts(tmp_path: Path) -> None:
    p = _write(tmp_path, [GOOD_1, BAD_FIELDS, GOOD_0, BAD_LABEL, BAD_INT, GOOD_0])
    r = CriteoReader(p, _spec(p, on_error="skip"))
    arr = CTRArrays.concat(list(r.blocks()))
    assert arr.label.tolist() == [1.0, 0.0, 0.0]
    assert (r.stats.lines, r.stats.rows, r.stats.skipped) == (6, 3, 3)
    assert r.stats.skipped_by_reason == {"field_count": 1, "label": 1, "integer": 1}
    assert r.stats.first_skipped[0].startswith(f"{p}:2:")


def test_gzip_file(tmp_path: Path) -> None:
    p = tmp_path / "day.txt.gz"
    with gzip.open(p, "wt") as f:
        f.write(GOOD_1 + GOOD_0)
    assert len(CTRArrays.concat(list(CriteoReader(p, _spec(p)).blocks()))) == 2


def _random_log(tmp_path: Path, n: int, bad_every: int = 0) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        if bad_every and i % bad_every == bad_every - 1:
            lines.append(BAD_FIELDS)
            continue
        c = [f"{rng.integers(0, 50):08x}" for _ in range(26)]
        y = "1" if int(c[0], 16) % 3 == 0 else str(int(rng.random() < 0.1))
        lines.append(_line(y, [str(rng.integers(0, 100)) for _ in range(13)], c))
    return _write(tmp_path, lines, "log.txt")


def test_source_holds_out_every_nth_line_and_streams_the_rest(tmp_path: Path) -> None:
    p = _random_log(tmp_path, 200)
    src = CriteoSource(CriteoSpec(path=str(p), hash_buckets=64, holdout_every=4, eval_rows=100,
                                  shuffle_buffer=32, block_rows=16))
    ev = src.eval_arrays()
    assert len(ev) == 50  # lines 4, 8, ..., 200
    it = src.train_batches(seed=0, batch_size=30)
    seen = np.concatenate([next(it).dense for _ in range(5)])  # 150 = one epoch of non-held-out rows
    assert seen.shape == (150, 13)
    ev_rows = {r.tobytes() for r in ev.dense}
    assert not ev_rows & {r.tobytes() for r in seen}  # no eval row leaks into training
    assert len({r.tobytes() for r in seen}) == len(np.unique(seen, axis=0))
    # the stream never ends and the same seed gives the same order
    again = src.train_batches(seed=0, batch_size=30)
    assert np.array_equal(next(again).sparse, np.concatenate([next(src.train_batches(0, 30)).sparse]))
    other = next(src.train_batches(seed=1, batch_size=30))
    assert not np.array_equal(other.sparse, next(src.train_batches(0, 30)).sparse)
    for _ in range(10):
        assert len(next(it)) == 30


def test_source_skip_mode_reports_counts_in_describe(tmp_path: Path) -> None:
    p = _random_log(tmp_path, 120, bad_every=10)
    src = CriteoSource(CriteoSpec(path=str(p), hash_buckets=64, holdout_every=5, eval_rows=100,
                                  on_error="skip", block_rows=8, shuffle_buffer=16))
    src.eval_arrays()
    it = src.train_batches(0, 16)
    for _ in range(12):  # more than one epoch: later epochs must not count twice
        next(it)
    d = src.describe()
    assert d["skipped_lines"] == 12 and d["skipped_by_reason"] == {"field_count": 12}
    assert d["train_lines_read"] == 120


def test_raise_mode_fails_the_stream_with_the_line(tmp_path: Path) -> None:
    p = _random_log(tmp_path, 60, bad_every=25)
    src = CriteoSource(CriteoSpec(path=str(p), hash_buckets=64, holdout_every=7, eval_rows=100,
                                  block_rows=8, shuffle_buffer=8))
    it = src.train_batches(0, 8)
    with pytest.raises(DataFormatError, match=r"log.txt:25: expected 40"):
        for _ in range(10):
            next(it)


def test_rebatching_and_shuffle_keep_every_row() -> None:
    blocks = [CTRArrays(np.full((n, 1), i, np.float32), np.zeros((n, 2), np.int64), np.zeros(n, np.float32))
              for i, n in enumerate([3, 7, 1, 9])]
    out = list(batches_from_blocks(iter(blocks), 4))
    assert [len(b) for b in out] == [4, 4, 4, 4, 4]  # 20 rows; the incomplete tail is dropped
    mixed = list(shuffled(iter(blocks), 8, np.random.default_rng(0)))
    vals = np.concatenate([b.dense[:, 0] for b in mixed])
    assert sorted(vals.tolist()) == sorted(np.concatenate([b.dense[:, 0] for b in blocks]).tolist())
    assert vals.tolist() != sorted(vals.tolist())


def test_spec_validation(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not found"):
        CriteoSpec(path=str(tmp_path / "nope.txt"))
    p = _write(tmp_path, [GOOD_0])
    with pytest.raises(ValidationError, match="at least 2 buckets"):
        CriteoSpec(path=str(p), hash_buckets=1)
    with pytest.raises(ValueError, match="3 sizes for 26"):
        CriteoSpec(path=str(p), hash_buckets=[10, 10, 10]).buckets()


def test_shuffle_buffer_larger_than_the_file_reshuffles_each_epoch(tmp_path: Path) -> None:
    p = _random_log(tmp_path, 100)
    src = CriteoSource(CriteoSpec(path=str(p), hash_buckets=64, holdout_every=10, eval_rows=100,
                                  shuffle_buffer=10**6, block_rows=16))
    it = src.train_batches(seed=0, batch_size=45)
    epoch1 = np.concatenate([next(it).dense for _ in range(2)])  # 90 training rows = one pass
    epoch2 = np.concatenate([next(it).dense for _ in range(2)])
    assert sorted(map(bytes, epoch1)) == sorted(map(bytes, epoch2))  # same rows...
    assert not np.array_equal(epoch1, epoch2)  # ...in a new order
