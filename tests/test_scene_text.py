"""Synthetic scene-text generator (determinism, geometry, caching) and the PaddleOCR label reader."""

import json

import numpy as np
import pytest

pytest.importorskip("skimage")
pytest.importorskip("shapely")

from ampbench.config import ConfigError
from ampbench.workloads.dbnet import data as st

SPEC = st.SceneTextSpec(images=3, image_size=64, seed=7, lines=(1, 3), text_height=(0.15, 0.25))


def test_same_seed_same_images_and_labels(tmp_path):
    fonts = st.find_fonts()
    a = st.write_dataset(SPEC, tmp_path / "a", fonts)
    b = st.write_dataset(SPEC, tmp_path / "b", fonts)
    assert a.read_text() == b.read_text()
    for ra, rb in zip(st.read_label_file(a), st.read_label_file(b)):
        assert np.array_equal(st.load_image(ra.path), st.load_image(rb.path))
    other = st.generate_image(SPEC.model_copy(update={"seed": 8}), fonts, 0)[0]
    assert not np.array_equal(other, st.generate_image(SPEC, fonts, 0)[0])


def test_each_image_has_its_own_stream():
    fonts = st.find_fonts()
    img1, items1 = st.generate_image(SPEC, fonts, 1)
    img1b, items1b = st.generate_image(SPEC.model_copy(update={"images": 100}), fonts, 1)
    assert np.array_equal(img1, img1b) and items1 == items1b  # independent of how many images


def test_polygons_inside_image_and_nonoverlapping():
    from shapely.geometry import Polygon

    fonts = st.find_fonts()
    n_regions = 0
    for i in range(3):
        img, items = st.generate_image(SPEC, fonts, i)
        assert img.shape == (64, 64, 3) and img.dtype == np.uint8
        polys = [Polygon(it["points"]) for it in items]
        for it, p in zip(items, polys):
            pts = np.array(it["points"])
            assert pts.shape == (4, 2) and pts.min() >= 0 and pts.max() <= 63 and p.area > 10
            assert it["transcription"]
        for j in range(len(polys)):
            for k in range(j + 1, len(polys)):
                assert not polys[j].intersects(polys[k])
        n_regions += len(items)
    assert n_regions >= 3


@pytest.mark.parametrize("angle", [0.0, 17.0, -30.0])
def test_rendered_ink_lies_inside_its_polygon(angle):
    from shapely.geometry import Point, Polygon

    fonts = st.find_fonts()
    alpha, box = st._render_line("Metro 42", fonts.latin[0], 16, angle)
    poly = Polygon(box).buffer(1.5)  # anti-aliasing and rounding
    ys, xs = np.nonzero(alpha > 0.5)
    assert len(xs) > 20
    inside = np.mean([poly.contains(Point(x + 0.5, y + 0.5)) for x, y in zip(xs, ys)])
    assert inside > 0.99
    # and the box is tight: the ink covers a good part of it
    assert (alpha > 0.5).sum() > 0.2 * Polygon(box).area


def test_cjk_text_uses_cjk_font_and_falls_back_with_warning():
    fonts = st.find_fonts()
    if fonts.cjk:
        spec = SPEC.model_copy(update={"cjk_fraction": 1.0})
        texts = [it["transcription"] for i in range(3) for it in st.generate_image(spec, fonts, i)[1]]
        assert texts and all(any("\u4e00" <= c <= "\u9fff" for c in t) for t in texts)
    with pytest.warns(RuntimeWarning, match="CJK font not found"):
        latin_only = st.find_fonts(cjk=("/nonexistent/font.ttc",))
    spec = SPEC.model_copy(update={"cjk_fraction": 1.0})
    texts = [it["transcription"] for it in st.generate_image(spec, latin_only, 0)[1]]
    assert all(not any("\u4e00" <= c <= "\u9fff" for c in t) for t in texts)


def test_ensure_dataset_is_cached_by_spec(tmp_path, monkeypatch):
    label = st.ensure_dataset(SPEC, tmp_path)
    assert label.is_file() and len(st.read_label_file(label)) == 3

    def boom(*a, **k):
        raise AssertionError("regenerated a cached dataset")

    monkeypatch.setattr(st, "write_dataset", boom)
    assert st.ensure_dataset(SPEC, tmp_path) == label
    with pytest.raises(AssertionError):
        st.ensure_dataset(SPEC.model_copy(update={"seed": 99}), tmp_path)
    assert not any(p.name.startswith(".tmp-") for p in (tmp_path / "scene_text").iterdir())


def test_reader_parses_paddleocr_format_and_dont_care(tmp_path):
    (tmp_path / "imgs").mkdir()
    items = [{"transcription": "Hi", "points": [[1, 2], [30, 2], [30, 12], [1, 12]]},
             {"transcription": "###", "points": [[1, 20], [30, 20], [30, 30], [1, 30]]}]
    f = tmp_path / "train.txt"
    f.write_text(f"imgs/a.jpg\t{json.dumps(items)}\n\n")
    (rec,) = st.read_label_file(f)
    assert rec.path == tmp_path / "imgs" / "a.jpg"
    assert rec.ignore == [False, True] and rec.texts == ["Hi", "###"]
    assert rec.polys[0].shape == (4, 2) and rec.polys[0].dtype == np.float32
    assert json.loads(rec.label) == items
    (rec,) = st.read_label_file(f, data_dir="/data/icdar")
    assert str(rec.path) == "/data/icdar/imgs/a.jpg"


@pytest.mark.parametrize("line,match", [
    ("a.jpg [] ", "TAB"),
    ("a.jpg\t[{oops", "valid JSON"),
    ("a.jpg\t{}", "JSON list"),
    ('a.jpg\t[{"transcription": "x"}]', "points"),
    ('a.jpg\t[{"transcription": "x", "points": [[1, 2], [3, 4]]}]', ">= 4"),
])
def test_reader_errors_name_file_and_line(tmp_path, line, match):
    f = tmp_path / "bad.txt"
    f.write_text("ok.jpg\t[]\n" + line + "\n")
    with pytest.raises(ConfigError, match=match) as e:
        st.read_label_file(f)
    assert "line 2" in str(e.value) and "bad.txt" in str(e.value)


def test_missing_image_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="missing or unreadable"):
        st.load_image(tmp_path / "nope.jpg")


# ------------------------------------------------------------------ PaddleOCR SimpleDataSet semantics

ITEM = [{"transcription": "Hi", "points": [[1, 2], [30, 2], [30, 12], [1, 12]]}]


def _line(name, items=ITEM):
    return f"{name}\t{json.dumps(items, ensure_ascii=False)}"


def test_reader_drops_bom_and_splits_on_newline_only(tmp_path):
    from ampbench.workloads.dbnet.labels import read_label_file

    items = [{"transcription": "a\u2028b\u0085c", "points": ITEM[0]["points"]},
             {"transcription": "*", "points": ITEM[0]["points"]}]
    f = tmp_path / "l.txt"
    f.write_bytes(b"\xef\xbb\xbf" + (_line("x.jpg") + "\r\n" + _line("y.jpg", items) + "\n").encode("utf-8"))
    recs = read_label_file(f)
    assert [r.path.name for r in recs] == ["x.jpg", "y.jpg"]          # BOM not part of the first name
    assert recs[1].texts == ["a\u2028b\u0085c", "*"] and recs[1].ignore == [False, True]
    assert recs[1].where.endswith("l.txt line 2")


@pytest.mark.parametrize("raw,match", [
    (b"x.jpg\t[\xff\xfe]", "not UTF-8"),
    (_line("x.jpg", [{"points": ITEM[0]["points"]}]).encode(), "transcription"),
])
def test_reader_errors_name_label_file_and_line(tmp_path, raw, match):
    from ampbench.workloads.dbnet.labels import read_label_file

    f = tmp_path / "bad.txt"
    f.write_bytes(_line("ok.jpg").encode() + b"\n" + raw + b"\n")
    with pytest.raises(ConfigError, match=match) as e:
        read_label_file(f)
    assert "bad.txt" in str(e.value) and "line 2" in str(e.value)


def test_missing_image_names_label_file_and_line(tmp_path):
    from ampbench.workloads.dbnet.labels import load_image, missing_images, read_label_file

    f = tmp_path / "l.txt"
    f.write_text(_line("gone.jpg") + "\n")
    (rec,) = read_label_file(f)
    assert missing_images([rec]) == [f"{f} line 1: {tmp_path / 'gone.jpg'}"]
    with pytest.raises(ConfigError, match="missing or unreadable") as e:
        load_image(rec.path, rec.where)
    assert "l.txt line 1" in str(e.value) and "gone.jpg" in str(e.value)


def test_several_label_files_with_ratio_list(tmp_path):
    from ampbench.workloads.dbnet.labels import read_label_files

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(_line(f"a{i}.jpg") for i in range(10)) + "\n")
    b.write_text("\n".join(_line(f"b{i}.jpg") for i in range(8)) + "\n")
    recs = read_label_files([a, b], tmp_path, [1.0, 0.5], seed=0)
    names = [r.path.name for r in recs]
    assert names[:10] == [f"a{i}.jpg" for i in range(10)]
    assert len(names) == 14 and all(n.startswith("b") for n in names[10:])   # round(8 * 0.5) of b
    assert names == [r.path.name for r in read_label_files([a, b], tmp_path, [1.0, 0.5], seed=0)]
    assert names != [r.path.name for r in read_label_files([a, b], tmp_path, [1.0, 0.5], seed=1)]


def test_cache_fingerprint_follows_data_dir_contents_and_images(tmp_path):
    import os

    from ampbench.workloads.dbnet.labels import fingerprint, read_label_file

    for d in ("d1", "d2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.jpg").write_bytes(b"img-" + d.encode())
    f = tmp_path / "l.txt"
    f.write_text(_line("x.jpg") + "\n")
    fp1 = fingerprint([f], read_label_file(f, tmp_path / "d1"))
    assert fingerprint([f], read_label_file(f, tmp_path / "d2")) != fp1          # other data_dir
    (tmp_path / "d1" / "x.jpg").write_bytes(b"changed image")
    os.utime(tmp_path / "d1" / "x.jpg", ns=(1, 1))
    assert fingerprint([f], read_label_file(f, tmp_path / "d1")) != fp1          # image changed
    f.write_text(_line("x.jpg", [{"transcription": "###", "points": ITEM[0]["points"]}]) + "\n")
    assert fingerprint([f], read_label_file(f, tmp_path / "d1"))["label_files"] != fp1["label_files"]


def test_missing_files_are_found_when_the_suite_loads(tmp_path, monkeypatch):
    from ampbench.workloads.suites import load_suite

    monkeypatch.chdir(tmp_path)
    (tmp_path / "imgs").mkdir()
    (tmp_path / "train.txt").write_text(_line("imgs/a.jpg") + "\n")
    suite = tmp_path / "s.toml"
    body = """
[suite]
name = "t"
workload = "dbnet"
metric = "hmean"
[workload]
dataset = {{ kind = "paddleocr", train_label = "train.txt", eval_label = "{ev}", data_dir = "." }}
[[modes]]
name = "fp32"
"""
    suite.write_text(body.format(ev="nope.txt"))
    with pytest.raises(ConfigError, match="label file not found: nope.txt") as e:
        load_suite(suite)
    assert "workload.dataset.eval_label" in str(e.value)
    suite.write_text(body.format(ev="train.txt"))
    with pytest.raises(ConfigError, match=r"missing: .*train.txt line 1: imgs/a.jpg"):
        load_suite(suite)
    (tmp_path / "imgs" / "a.jpg").write_bytes(b"x")
    assert load_suite(suite).suite.workload["dataset"]["kind"] == "paddleocr"
