"""The DB loss with PaddleOCR's structure and defaults (public path:
`ampbench.workloads.dbnet.loss.DBLoss`).

total = alpha * BalanceLoss(P) + beta * MaskL1(T) + Dice(B), as PaddleOCR's DBLoss computes it:
- `main_loss_type="DiceLoss"` (PaddleOCR's default and what its DB configs train): the shrink term
  is the Dice loss of P, scaled by BalanceLoss's (pos + neg) / (pos + neg + eps) factor, because
  BalanceLoss multiplies a scalar loss by the masks; OHEM then selects nothing that matters.
- `main_loss_type="BCELoss"`: the DB paper's OHEM-balanced BCE (every positive pixel plus the
  `ohem_ratio` x as many hardest negatives, over the whole batch). Its gradient on a saturated
  wrong pixel is ~1e8 times Dice's, which is why it is kept as an AMP study case.
- `balance_loss=False`: the shrink term is the plain loss: Dice, or for BCE the mean over pixels
  (PaddleOCR would return the unreduced BCE map there, which its DBLoss cannot sum into a scalar).
The terms are returned weighted, under PaddleOCR's names, so each can be compared with its log.
Counts are floored as PaddleOCR's int() does, but on the device (no host sync per step); the
top-k is a descending sort plus an int64 rank mask (exact beyond 2^24 pixels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

MainLoss = Literal["DiceLoss", "BCELoss"]


def dice_loss(pred: Any, gt: Any, mask: Any, eps: float = 1e-6) -> Any:
    """1 - 2 |P.G| / (|P| + |G|) over the masked pixels (PaddleOCR's DiceLoss)."""
    inter = (pred * gt * mask).sum()
    union = (pred * mask).sum() + (gt * mask).sum() + eps
    return 1 - 2.0 * inter / union


def mask_l1_loss(pred: Any, gt: Any, mask: Any, eps: float = 1e-6) -> Any:
    """Mean absolute error over the threshold mask (PaddleOCR's MaskL1Loss)."""
    return (pred - gt).abs().multiply(mask).sum() / (mask.sum() + eps)


def balance_loss(pred: Any, gt: Any, mask: Any, main_loss_type: MainLoss = "DiceLoss",
                 negative_ratio: float = 3.0, balance: bool = True, eps: float = 1e-6) -> Any:
    """PaddleOCR's BalanceLoss: positives plus the hardest `negative_ratio` x as many negatives."""
    import paddle
    import paddle.nn.functional as F

    if main_loss_type == "DiceLoss":
        loss = dice_loss(pred, gt, mask, eps)
    else:
        loss = F.binary_cross_entropy(pred, gt, reduction="none")
    if not balance:
        return loss if main_loss_type == "DiceLoss" else loss.mean()
    positive = gt * mask
    negative = (1 - gt) * mask
    pos_count = paddle.floor(positive.sum())
    neg_count = paddle.floor(paddle.minimum(negative.sum(), pos_count * negative_ratio))
    neg_sorted = paddle.sort((negative * loss).flatten(), descending=True)
    # an int64 rank: a float32 arange stops counting at 2^24 (16.7M pixels per batch, e.g. probe batches
    # of 640 px images), which kept every negative beyond it where PaddleOCR keeps the hardest few
    rank = paddle.arange(neg_sorted.shape[0], dtype="int64")
    neg_loss = (neg_sorted * (rank < neg_count.astype("int64")).astype(neg_sorted.dtype)).sum()
    return ((positive * loss).sum() + neg_loss) / (pos_count + neg_count + eps)


@dataclass(frozen=True)
class DBLoss:
    """Callable like PaddleOCR's DBLoss: `DBLoss()({"maps": pred}, [image, threshold_map,
    threshold_mask, shrink_map, shrink_mask])` -> {"loss", "loss_shrink_maps",
    "loss_threshold_maps", "loss_binary_maps"}; pred is (N, 3, H, W): P, T, B."""

    balance_loss: bool = True
    main_loss_type: MainLoss = "DiceLoss"
    alpha: float = 5.0
    beta: float = 10.0
    ohem_ratio: float = 3.0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.main_loss_type not in ("DiceLoss", "BCELoss"):
            raise ValueError(f"main_loss_type must be DiceLoss or BCELoss, got {self.main_loss_type!r}")

    def __call__(self, predicts: dict[str, Any], labels: list[Any]) -> dict[str, Any]:
        threshold_map, threshold_mask, shrink_map, shrink_mask = labels[1:5]
        maps = predicts["maps"]
        prob, thresh, binary = maps[:, 0], maps[:, 1], maps[:, 2]
        # BalanceLoss keeps its own eps (1e-6) in PaddleOCR: DBLoss's eps reaches only L1 and Dice(B)
        shrink = self.alpha * balance_loss(prob, shrink_map, shrink_mask, self.main_loss_type,
                                           self.ohem_ratio, self.balance_loss)
        threshold = self.beta * mask_l1_loss(thresh, threshold_map, threshold_mask, self.eps)
        binary_term = dice_loss(binary, shrink_map, shrink_mask, self.eps)
        return {"loss": shrink + threshold + binary_term, "loss_shrink_maps": shrink,
                "loss_threshold_maps": threshold, "loss_binary_maps": binary_term}
