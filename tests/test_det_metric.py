"""Detection metric on hand-made boxes: perfect, shifted, missing, extra, don't-care, one-to-one."""

import numpy as np
import pytest

pytest.importorskip("shapely")

from ampbench.workloads.dbnet.metric import DetCounts, detection_scores, match_image


def rect(x0, y0, x1, y1):
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


A = rect(0, 0, 10, 10)
B = rect(20, 0, 30, 10)


def test_perfect_match_scores_one():
    s = detection_scores([[A, B]], [[B, A]])
    assert s["precision"] == s["recall"] == s["hmean"] == 1.0


def test_shift_below_and_above_half_iou():
    # shifting a 10x10 box by 3 px: IoU = 70/130 = 0.54 -> match; by 4 px: 60/140 = 0.43 -> no match
    assert match_image([A], [rect(3, 0, 13, 10)]).matched == 1
    assert match_image([A], [rect(4, 0, 14, 10)]).matched == 0


def test_missing_and_extra_boxes():
    s = detection_scores([[A, B]], [[A]])  # one missed
    assert (s["precision"], s["recall"]) == (1.0, 0.5)
    assert s["hmean"] == pytest.approx(2 / 3)
    s = detection_scores([[A]], [[A, B]])  # one extra
    assert (s["precision"], s["recall"]) == (0.5, 1.0)


def test_one_to_one_two_predictions_on_one_box():
    c = match_image([A], [A, rect(1, 0, 11, 10)])
    assert (c.matched, c.gt, c.pred) == (1, 1, 2)


def test_pairing_is_in_index_order_like_paddleocr():
    # PaddleOCR's DetectionIoUEvaluator gives ground truth 0 the first unmatched prediction with
    # IoU > 0.5, not the best one: A takes c_box (IoU 0.54), so c_box's exact copy is left for
    # nothing and the second prediction (IoU with C 0.25) does not match: 1 match, not 2.
    c_box = rect(3, 0, 13, 10)
    assert match_image([A, c_box], [c_box, rect(-3, 0, 7, 10)]).matched == 1
    # in the other index order the same boxes give 2 matches
    assert match_image([c_box, A], [c_box, rect(-3, 0, 7, 10)]).matched == 2


def test_iou_exactly_half_does_not_match():
    # PaddleOCR matches on IoU > 0.5 strictly: 12x10 boxes shifted by 4 px: 80 / 160 = 0.5 exactly
    a, b = rect(0, 0, 12, 10), rect(4, 0, 16, 10)
    assert match_image([a], [b]).matched == 0
    assert match_image([a], [rect(3.9, 0, 15.9, 10)]).matched == 1


def test_invalid_polygons_are_skipped_on_both_sides():
    zero_area = [[0, 0], [10, 0], [20, 0], [30, 0]]
    bowtie = [[0, 0], [10, 10], [10, 0], [0, 10]]  # self-intersecting
    c = match_image([A, zero_area, bowtie], [A, bowtie, zero_area])
    assert (c.matched, c.gt, c.pred) == (1, 1, 1)


def test_empty_point_list_follows_shapelys_validity():
    # Rule 1 keeps whatever shapely calls valid and simple; shapely's empty polygon is both, so an
    # empty point list is counted on either side (PaddleOCR counts it) and, with area 0, never matches.
    from shapely.geometry import Polygon

    kept = int(Polygon([]).is_valid and Polygon([]).is_simple)
    c = match_image([A, []], [A, []])
    assert (c.matched, c.gt, c.pred) == (1, 1 + kept, 1 + kept)
    # two empty polygons have no union: IoU 0, no match, no division by zero
    c = match_image([[]], [[]])
    assert (c.matched, c.gt, c.pred) == (0, kept, kept)


def test_prediction_inside_dont_care_is_not_counted():
    inner = rect(1, 1, 9, 9)
    c = match_image([A, B], [inner, B], ignore=[True, False])
    assert (c.matched, c.gt, c.pred) == (1, 1, 1)
    # an invalid don't-care ground truth is skipped, so the same prediction becomes a false positive
    c = match_image([[[0, 0], [10, 10], [10, 0], [0, 10]], B], [inner, B], ignore=[True, False])
    assert (c.matched, c.gt, c.pred) == (1, 1, 2)


def test_dont_care_regions_are_neither_missed_nor_false_positives():
    c = match_image([A, B], [A, B], ignore=[False, True])
    assert (c.matched, c.gt, c.pred) == (1, 1, 1)


def test_counts_sum_over_images_before_dividing():
    s = detection_scores([[A], [A, B]], [[A], []])
    assert s["recall"] == pytest.approx(1 / 3) and s["precision"] == 1.0
    assert DetCounts(1, 2, 3) + DetCounts(1, 1, 1) == DetCounts(2, 3, 4)


def test_no_predictions_gives_zero_not_error():
    assert detection_scores([[A]], [[]])["hmean"] == 0.0
    with pytest.raises(ValueError):
        detection_scores([[A]], [])


def _paddleocr_evaluator():
    import importlib

    for mod in ("ppocr.metrics.eval_det_iou", "paddleocr.ppocr.metrics.eval_det_iou"):
        try:
            return importlib.import_module(mod).DetectionIoUEvaluator()
        except ImportError:
            continue
    pytest.skip("PaddleOCR's training code (ppocr.metrics) is not importable here; the pip wheel lacks it")


def test_equals_paddleocr_detection_iou_evaluator_when_available():
    ev = _paddleocr_evaluator()
    rng = np.random.default_rng(0)
    gts, preds, ignores = [], [], []
    for _ in range(40):
        g = [rng.integers(0, 30, (4, 2)).tolist() for _ in range(rng.integers(0, 5))]
        p = [(np.asarray(x) + rng.integers(-3, 4, (4, 2))).tolist() for x in g] + \
            [rng.integers(0, 30, (4, 2)).tolist() for _ in range(rng.integers(0, 3))]
        gts.append(g)
        preds.append(p)
        ignores.append([bool(rng.random() < 0.2) for _ in g])
    results = [ev.evaluate_image([{"points": x, "text": "", "ignore": ig} for x, ig in zip(g, i)],
                                 [{"points": x, "text": ""} for x in p]) for g, p, i in zip(gts, preds, ignores)]
    theirs = ev.combine_results(results)
    ours = detection_scores(gts, preds, ignores)
    for k in ("precision", "recall", "hmean"):
        assert ours[k] == pytest.approx(theirs[k], abs=1e-12)


def _hostile_image(rng):
    """GTs, ignore tags, predictions: invalid shapes, exact IoU 0.5, nested GTs, many-to-one."""
    pool = [lambda: rng.integers(0, 12, (4, 2)).tolist(), lambda: [[0, 0], [10, 10], [10, 0], [0, 10]],
            lambda: [[0, 0], [10, 0], [20, 0], [30, 0]], lambda: rect(0, 0, 12, 10), lambda: rect(4, 0, 16, 10),
            lambda: rect(0, 0, 10, 5), lambda: A, lambda: rect(1, 1, 9, 9), lambda: [[0, 0], [8, 0], [4, 6]],
            lambda: rng.uniform(0, 30, (int(rng.integers(3, 8)), 2)).tolist()]
    gts = [pool[rng.integers(len(pool))]() for _ in range(rng.integers(0, 6))]
    ignore = [["abc", "###", "*"][rng.integers(3)] in ("###", "*") for _ in gts]
    preds = [pool[rng.integers(len(pool))]() for _ in range(rng.integers(0, 6))]
    preds += [(np.asarray(g, float) + rng.integers(-2, 3, np.shape(g))).tolist() for g in gts if rng.random() < 0.5]
    if rng.random() < 0.3:
        preds.append([])  # an empty prediction (PaddleOCR counts it)
    return gts, ignore, preds


def test_equals_paddleocr_on_hostile_polygons_when_available():
    ev = _paddleocr_evaluator()
    rng = np.random.default_rng(1)
    for _ in range(300):
        g, i, p = _hostile_image(rng)
        r = ev.evaluate_image([{"points": x, "text": "", "ignore": ig} for x, ig in zip(g, i)],
                              [{"points": x, "text": ""} for x in p])
        c = match_image(g, p, i)
        assert (c.matched, c.gt, c.pred) == (r["detMatched"], r["gtCare"], r["detCare"]), (g, i, p)
