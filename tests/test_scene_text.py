"""Synthetic scene-text generator (determinism, geometry, caching) and the PaddleOCR label reader."""

import json

import numpy as np
import pytest

pytest.importorskip("skimage")
pytest.importorskip("shapely")

from ampbench.config import ConfigError  # noqa: E402
from ampbench.workloads.dbnet import data as st  # noqa: E402

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
