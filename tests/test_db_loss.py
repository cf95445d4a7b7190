"""DB loss: PaddleOCR's DBLoss structure (DiceLoss default, BCELoss option), checked against an
independent numpy reading of the formulas, a hand-computed case, and PaddleOCR's own DBLoss when
its training code is importable (PaddleOCR's repository on PYTHONPATH; the pip wheel lacks it)."""

import importlib

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from ampbench.workloads.dbnet.loss import DBLoss


def _bce(p, y):
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def _np_db_loss(prob, thr, binary, gt, mask, tmap, tmask, main="DiceLoss", alpha=5.0, beta=10.0, ratio=3.0, eps=1e-6):
    """The formulas, read independently: balanced main loss (pixelwise BCE, or the scalar Dice
    broadcast over the masks), masked L1, Dice of B."""
    prob, thr, binary, gt, mask, tmap, tmask = (np.asarray(a, np.float64) for a in (prob, thr, binary, gt, mask, tmap, tmask))
    dice = lambda p: 1 - 2 * (p * gt * mask).sum() / ((p * mask).sum() + (gt * mask).sum() + eps)
    per_pixel = np.full(prob.shape, dice(prob)) if main == "DiceLoss" else _bce(prob, gt)
    pos, neg = gt * mask, (1 - gt) * mask
    npos = int(pos.sum())
    nneg = int(min(neg.sum(), npos * ratio))
    hardest = np.sort((neg * per_pixel).ravel())[::-1][:nneg].sum()
    shrink = ((pos * per_pixel).sum() + hardest) / (npos + nneg + 1e-6)
    l1 = (np.abs(thr - tmap) * tmask).sum() / (tmask.sum() + eps)
    return {"loss_shrink_maps": alpha * shrink, "loss_threshold_maps": beta * l1, "loss_binary_maps": dice(binary),
            "loss": alpha * shrink + beta * l1 + dice(binary)}


def _maps(seed, n=2, h=24, w=20, saturate=False):
    rng = np.random.default_rng(seed)
    pred = rng.uniform(0.02, 0.98, (n, 3, h, w)).astype(np.float32)
    gt = (rng.random((n, h, w)) < 0.2).astype(np.float32)
    if saturate:  # confident and wrong on some pixels: BCE's big-loss regime
        pred[:, 0][gt == 1] = np.where(rng.random(int(gt.sum())) < 0.3, 1e-6, pred[:, 0][gt == 1])
    mask = (rng.random((n, h, w)) < 0.9).astype(np.float32)
    tmap = rng.uniform(0.3, 0.7, (n, h, w)).astype(np.float32)
    tmask = (rng.random((n, h, w)) < 0.5).astype(np.float32)
    return pred, gt, mask, tmap, tmask


def _run(loss, pred, gt, mask, tmap, tmask):
    t = lambda a: paddle.to_tensor(a)
    out = loss({"maps": t(pred)}, [None, t(tmap), t(tmask), t(gt), t(mask)])
    return {k: float(v) for k, v in out.items()}


@pytest.mark.parametrize("main", ["DiceLoss", "BCELoss"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_formulas_term_by_term(main, seed):
    pred, gt, mask, tmap, tmask = _maps(seed, saturate=seed == 2)
    got = _run(DBLoss(main_loss_type=main), pred, gt, mask, tmap, tmask)
    want = _np_db_loss(pred[:, 0], pred[:, 1], pred[:, 2], gt, mask, tmap, tmask, main)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-5, abs=1e-6), k


def test_bce_hand_computed_case():
    # 2x3 pixels, one positive, one pixel masked out: 4 valid negatives, keep the 3 hardest.
    prob = np.array([[0.8, 0.6, 0.1], [0.3, 0.9, 0.2]], np.float32)
    thresh = np.array([[0.5, 0.4, 0.3], [0.3, 0.3, 0.7]], np.float32)
    binary = np.array([[0.9, 0.2, 0.1], [0.4, 0.5, 0.3]], np.float32)
    gt = np.array([[1, 0, 0], [0, 0, 0]], np.float32)[None]
    mask = np.array([[1, 1, 1], [1, 0, 1]], np.float32)[None]
    tmap = np.array([[0.7, 0.5, 0.3], [0.3, 0.3, 0.3]], np.float32)[None]
    tmask = np.array([[1, 1, 0], [0, 0, 1]], np.float32)[None]
    pred = np.stack([prob, thresh, binary])[None]
    got = _run(DBLoss(main_loss_type="BCELoss"), pred, gt, mask, tmap, tmask)
    shrink = (_bce(0.8, 1) + sum(sorted([_bce(v, 0) for v in (0.6, 0.1, 0.3, 0.2)], reverse=True)[:3])) / 4
    l1 = (0.2 + 0.1 + 0.4) / 3
    dice = 1 - 2 * 0.9 / ((0.9 + 0.2 + 0.1 + 0.4 + 0.3) + 1)
    assert got["loss_shrink_maps"] == pytest.approx(5 * shrink, rel=1e-5)
    assert got["loss_threshold_maps"] == pytest.approx(10 * l1, rel=1e-5)
    assert got["loss_binary_maps"] == pytest.approx(dice, rel=1e-5)
    # Dice default on the same maps: the shrink term is alpha * Dice(P) (OHEM selects nothing that matters)
    got = _run(DBLoss(), pred, gt, mask, tmap, tmask)
    dice_p = 1 - 2 * 0.8 / ((0.8 + 0.6 + 0.1 + 0.3 + 0.2) + 1)
    assert got["loss_shrink_maps"] == pytest.approx(5 * dice_p * 4 / (4 + 1e-6), rel=1e-6)


def test_no_text_gives_zero_shrink_term_and_gradients_flow():
    pred = paddle.to_tensor(np.full((2, 3, 4, 4), 0.3, np.float32), stop_gradient=False)
    zeros, ones = paddle.zeros([2, 4, 4]), paddle.ones([2, 4, 4])
    for main in ("DiceLoss", "BCELoss"):
        out = DBLoss(main_loss_type=main)({"maps": pred}, [None, zeros + 0.3, zeros, zeros, ones])
        out["loss"].backward()
        assert float(out["loss_shrink_maps"]) == 0.0 and np.isfinite(float(out["loss"]))
        assert pred.grad is not None


def test_bce_gradient_on_a_saturated_wrong_pixel_dwarfs_dice():
    """Why the BCE variant is an AMP case: its gradient explodes where Dice's stays small."""
    pred, gt, mask, tmap, tmask = _maps(3)
    pred[:, 0] = np.where(gt == 1, 1e-7, pred[:, 0])
    grads = {}
    for main in ("DiceLoss", "BCELoss"):
        x = paddle.to_tensor(pred, stop_gradient=False)
        out = DBLoss(main_loss_type=main)({"maps": x}, [None, *(paddle.to_tensor(a) for a in (tmap, tmask, gt, mask))])
        out["loss"].backward()
        grads[main] = float(np.abs(x.grad.numpy()[:, 0]).max())
    assert grads["BCELoss"] > 1e4 * grads["DiceLoss"]


def test_balance_off_and_bad_type():
    pred, gt, mask, tmap, tmask = _maps(4)
    got = _run(DBLoss(balance_loss=False), pred, gt, mask, tmap, tmask)
    dice_p = 1 - 2 * (pred[:, 0] * gt * mask).sum() / ((pred[:, 0] * mask).sum() + (gt * mask).sum() + 1e-6)
    assert got["loss_shrink_maps"] == pytest.approx(5 * dice_p, rel=1e-5)
    with pytest.raises(ValueError, match="main_loss_type"):
        DBLoss(main_loss_type="Focal")  # type: ignore[arg-type]


def _paddleocr_dbloss():
    for mod in ("ppocr.losses.det_db_loss", "paddleocr.ppocr.losses.det_db_loss"):
        try:
            return importlib.import_module(mod).DBLoss
        except ImportError:
            continue
    pytest.skip("PaddleOCR's training code (ppocr.losses) is not importable here; the pip wheel lacks it")


@pytest.mark.parametrize("main", ["DiceLoss", "BCELoss"])
def test_equals_paddleocr_dbloss_when_available(main):
    PPDBLoss = _paddleocr_dbloss()
    pred, gt, mask, tmap, tmask = _maps(5)
    t = lambda a: paddle.to_tensor(a)
    try:
        theirs = PPDBLoss(main_loss_type=main)({"maps": t(pred)}, [None, t(tmap), t(tmask), t(gt), t(mask)])
    except Exception as e:  # noqa: BLE001  newer PaddleOCR refuses BCELoss in DBLoss
        pytest.skip(f"this PaddleOCR's DBLoss does not take {main}: {e}")
    ours = _run(DBLoss(main_loss_type=main), pred, gt, mask, tmap, tmask)
    for k in ("loss", "loss_shrink_maps", "loss_threshold_maps", "loss_binary_maps"):
        assert ours[k] == pytest.approx(float(theirs[k]), abs=1e-6, rel=1e-6), k


@pytest.mark.slow   # a 24M-pixel sort: ~20 s on 2 CPU cores
def test_hard_negative_count_is_exact_beyond_2_pow_24_pixels():
    """A 4900x4900 map with 3 x positives > 2^24 hard negatives to keep (a `probe` batch of 640 px
    images reaches that): a float32 rank stops counting at 2^24 and kept every negative; the int64
    rank keeps exactly the hardest 3 x positives, as PaddleOCR's int() count and top-k do."""
    from ampbench.workloads.dbnet.loss import balance_loss

    side = 4900
    rng = np.random.default_rng(0)
    gt = (rng.random((1, side, side), dtype=np.float32) < 0.242).astype(np.float32)
    pred = rng.uniform(0.4, 0.95, (1, side, side)).astype(np.float32)
    mask = np.ones_like(gt)
    npos = int(gt.sum())
    nneg = int(min((1 - gt).sum(), 3 * npos))
    assert nneg > 2**24 and nneg < (1 - gt).sum()     # the regime the float32 rank got wrong
    per_pixel = _bce(pred.astype(np.float64), gt)
    neg = per_pixel[gt == 0]
    hardest = np.partition(neg, len(neg) - nneg)[len(neg) - nneg:].sum()
    want = ((per_pixel * gt).sum() + hardest) / (npos + nneg + 1e-6)
    every_negative = ((per_pixel * gt).sum() + neg.sum()) / (npos + nneg + 1e-6)
    assert abs(every_negative / want - 1) > 0.01       # the bug is visible at this size
    got = float(balance_loss(paddle.to_tensor(pred), paddle.to_tensor(gt), paddle.to_tensor(mask), "BCELoss"))
    assert got == pytest.approx(want, rel=1e-4)
