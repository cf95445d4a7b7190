"""Text-detection precision, recall and hmean with PaddleOCR's DetMetric rules (public path:
`ampbench.workloads.dbnet.metric.detection_scores`, per image `match_image`).

The rules (each with its reason in docs/ocr.md), as PaddleOCR's DetectionIoUEvaluator applies them:
1. A polygon that shapely finds invalid or not simple (zero area, self-intersecting, too few
   distinct points) is skipped, on the ground-truth side and the prediction side alike. An empty
   point list is shapely's empty polygon, which is valid and simple: it is counted (never matched),
   as PaddleOCR counts it. One or two points, which PaddleOCR's shapely call rejects with an
   error, are skipped here.
2. A prediction whose area lies more than 50% inside a "don't care" ground truth (`###`, `*`)
   is itself "don't care": neither a true nor a false positive. Don't-care ground truths are
   not counted and cannot be matched.
3. IoU = intersection area / union area (shapely's union); a pair matches when IoU > 0.5, strictly.
   Two empty polygons (union area 0, where PaddleOCR divides by zero) have IoU 0.
4. Matching is one-to-one, greedy in index order: ground truth i takes the first unmatched
   prediction j with IoU > 0.5 (not the best one).
5. Counts (matched, cared ground truths, cared predictions) are summed over all images before
   dividing (dataset-level, as ICDAR reports); an empty denominator gives 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ArrayLike = Sequence[Sequence[float]] | np.ndarray


@dataclass
class DetCounts:
    """Matched / cared ground-truth / cared predicted polygon counts, summable over images."""

    matched: int = 0
    gt: int = 0
    pred: int = 0

    def __add__(self, other: DetCounts) -> DetCounts:
        return DetCounts(self.matched + other.matched, self.gt + other.gt, self.pred + other.pred)

    def scores(self) -> dict[str, float]:
        recall = self.matched / self.gt if self.gt else 0.0
        precision = self.matched / self.pred if self.pred else 0.0
        hmean = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        return {"precision": precision, "recall": recall, "hmean": hmean}


def _valid(points: ArrayLike) -> Any:
    """The shapely polygon, or None when rule 1 skips it."""
    from shapely.geometry import Polygon

    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if len(pts) == 0:
        return Polygon()  # valid and simple for shapely, so PaddleOCR counts it
    if len(pts) < 3:
        return None
    poly = Polygon(pts)
    return poly if poly.is_valid and poly.is_simple else None


def _iou(d: Any, g: Any) -> float:
    """Rule 3, with an empty union (two empty polygons) as IoU 0 instead of a division by zero."""
    union = d.union(g).area
    return d.intersection(g).area / union if union else 0.0


def _dont_care_predictions(dont: list[Any], preds: list[Any], overlap: float) -> set[int]:
    """Rule 2: predictions mostly inside a don't-care ground truth."""
    out = set()
    for j, d in enumerate(preds):
        for g in dont:
            inside = g.intersection(d).area / d.area if d.area else 0.0
            if inside > overlap:
                out.add(j)
                break
    return out


def match_image(
    gts: Sequence[ArrayLike],
    preds: Sequence[ArrayLike],
    ignore: Sequence[bool] | None = None,
    iou_threshold: float = 0.5,
    dont_care_overlap: float = 0.5,
) -> DetCounts:
    """Counts for one image under rules 1-4."""
    ignore = list(ignore) if ignore is not None else [False] * len(gts)
    if len(ignore) != len(gts):
        raise ValueError(f"ignore has {len(ignore)} flags for {len(gts)} ground-truth polygons")
    kept = [(p, ig) for p, ig in ((_valid(g), bool(ig)) for g, ig in zip(gts, ignore)) if p is not None]
    gt_polys = [p for p, _ in kept]
    gt_dont = {i for i, (_, ig) in enumerate(kept) if ig}
    pred_polys = [p for p in (_valid(d) for d in preds) if p is not None]
    pred_dont = _dont_care_predictions([gt_polys[i] for i in sorted(gt_dont)], pred_polys, dont_care_overlap)
    used_p: set[int] = set()
    matched = 0
    for i, g in enumerate(gt_polys):
        if i in gt_dont:
            continue
        for j, d in enumerate(pred_polys):
            if j in used_p or j in pred_dont:
                continue
            if _iou(d, g) > iou_threshold:
                used_p.add(j)
                matched += 1
                break
    return DetCounts(matched=matched, gt=len(gt_polys) - len(gt_dont), pred=len(pred_polys) - len(pred_dont))


def detection_scores(
    gts: Sequence[Sequence[ArrayLike]],
    preds: Sequence[Sequence[ArrayLike]],
    ignores: Sequence[Sequence[bool]] | None = None,
    iou_threshold: float = 0.5,
) -> dict[str, float]:
    """Dataset-level precision, recall, hmean (rule 5); gts[i] / preds[i] are image i's polygons."""
    if len(gts) != len(preds):
        raise ValueError(f"{len(gts)} images of ground truth but {len(preds)} of predictions")
    total = DetCounts()
    for i, (g, p) in enumerate(zip(gts, preds)):
        total = total + match_image(g, p, ignores[i] if ignores is not None else None, iou_threshold)
    out = total.scores()
    out.update({"gt_count": float(total.gt), "pred_count": float(total.pred), "matched": float(total.matched)})
    return out


