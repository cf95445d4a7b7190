"""Detection metric on hand-made boxes: perfect, shifted, missing, extra, don't-care, one-to-one."""

import pytest

pytest.importorskip("shapely")

from ampbench.workloads.dbnet.metric import DetCounts, detection_scores, match_image  # noqa: E402


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


def test_greedy_by_iou_prefers_better_pair():
    # Matching in list order would give A the first prediction (IoU 0.54) and leave C unmatched;
    # taking the highest IoU first pairs C with its exact copy and A with the other: 2 matches.
    c_box = rect(3, 0, 13, 10)
    c = match_image([A, c_box], [c_box, rect(-3, 0, 7, 10)])
    assert c.matched == 2


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
