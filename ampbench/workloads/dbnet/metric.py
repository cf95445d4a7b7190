"""Text-detection precision, recall and hmean (the ICDAR 2015 protocol, as PaddleOCR's DetMetric).

A prediction matches a ground-truth polygon when their IoU is >= `iou_threshold` (0.5); matching
is one-to-one (each ground truth and each prediction is used at most once), taken greedily from
the highest IoU down.  "Don't care" ground truths (transcription `###`) are not counted, and a
prediction lying mostly inside one (intersection / prediction area > 0.5) is dropped instead of
being counted as a false positive.  Counts are summed over all images before dividing, so the
numbers are dataset-level, as ICDAR reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

ArrayLike = Sequence[Sequence[float]] | np.ndarray


@dataclass
class DetCounts:
    """Matched / ground-truth / predicted polygon counts, summable over images."""

    matched: int = 0
    gt: int = 0
    pred: int = 0

    def __add__(self, other: "DetCounts") -> "DetCounts":
        return DetCounts(self.matched + other.matched, self.gt + other.gt, self.pred + other.pred)

    def scores(self) -> dict[str, float]:
        recall = self.matched / self.gt if self.gt else 0.0
        precision = self.matched / self.pred if self.pred else 0.0
        hmean = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        return {"precision": precision, "recall": recall, "hmean": hmean}


def _polygon(points: ArrayLike):
    from shapely.geometry import Polygon

    poly = Polygon(np.asarray(points, dtype=np.float64).reshape(-1, 2))
    if not poly.is_valid:
        poly = poly.buffer(0)  # self-intersecting quads (bad point order) -> a valid area
    return poly


def match_image(
    gts: Sequence[ArrayLike],
    preds: Sequence[ArrayLike],
    ignore: Sequence[bool] | None = None,
    iou_threshold: float = 0.5,
    dont_care_overlap: float = 0.5,
) -> DetCounts:
    """Counts for one image.  Degenerate (zero-area) predictions are dropped."""
    ignore = list(ignore) if ignore is not None else [False] * len(gts)
    if len(ignore) != len(gts):
        raise ValueError(f"ignore has {len(ignore)} flags for {len(gts)} ground-truth polygons")
    gt_polys = [_polygon(g) for g in gts]
    care = [p for p, ig in zip(gt_polys, ignore) if not ig]
    dont = [p for p, ig in zip(gt_polys, ignore) if ig]
    pred_polys = []
    for p in preds:
        poly = _polygon(p)
        if poly.area <= 0:
            continue
        if any(poly.intersection(d).area / poly.area > dont_care_overlap for d in dont):
            continue
        pred_polys.append(poly)

    pairs = []
    for i, g in enumerate(care):
        for j, d in enumerate(pred_polys):
            inter = g.intersection(d).area
            if inter <= 0:
                continue
            iou = inter / (g.area + d.area - inter)
            if iou >= iou_threshold:
                pairs.append((iou, i, j))
    used_g: set[int] = set()
    used_p: set[int] = set()
    for _iou, i, j in sorted(pairs, reverse=True):
        if i not in used_g and j not in used_p:
            used_g.add(i)
            used_p.add(j)
    return DetCounts(matched=len(used_g), gt=len(care), pred=len(pred_polys))


def detection_scores(
    gts: Sequence[Sequence[ArrayLike]],
    preds: Sequence[Sequence[ArrayLike]],
    ignores: Sequence[Sequence[bool]] | None = None,
    iou_threshold: float = 0.5,
) -> dict[str, float]:
    """Dataset-level precision, recall, hmean; gts[i] / preds[i] are image i's polygons."""
    if len(gts) != len(preds):
        raise ValueError(f"{len(gts)} images of ground truth but {len(preds)} of predictions")
    total = DetCounts()
    for i, (g, p) in enumerate(zip(gts, preds)):
        total = total + match_image(g, p, ignores[i] if ignores is not None else None, iou_threshold)
    out = total.scores()
    out.update({"gt_count": float(total.gt), "pred_count": float(total.pred), "matched": float(total.matched)})
    return out
