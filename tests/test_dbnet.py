"""DBNet workload: DB loss on a hand-computed case, PaddleOCR label round trip, model shapes,
data order, a few real training steps, and the suite file."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("paddleocr")
pytest.importorskip("skimage")

import paddle  # noqa: E402

from ampbench.config import ConfigError, load_suite  # noqa: E402
from ampbench.workloads import get_workload_class  # noqa: E402
from ampbench.workloads.base import WorkloadContext  # noqa: E402
from ampbench.workloads.dbnet.metric import detection_scores  # noqa: E402
from ampbench.workloads.dbnet.workload import DBNetParams, DBNetWorkload, db_loss, make_label_maps, ppocr_ops  # noqa: E402

SUITE = Path(__file__).resolve().parent.parent / "suites" / "ocr.toml"
TINY = {"backbone": "mobilenet_v3_small", "fpn_channels": 16, "image_size": 64,
        "dataset": {"kind": "synthetic-scene-text", "images": 3, "eval_images": 2, "lines": [1, 2],
                    "text_height": [0.18, 0.25]}}


def _bce(p, y):
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def test_db_loss_matches_hand_computation():
    # One image, 2x3 pixels. Shrink map: one positive pixel; one pixel masked out (ignored).
    prob = np.array([[0.8, 0.6, 0.1], [0.3, 0.9, 0.2]], np.float32)
    thresh = np.array([[0.5, 0.4, 0.3], [0.3, 0.3, 0.7]], np.float32)
    binary = np.array([[0.9, 0.2, 0.1], [0.4, 0.5, 0.3]], np.float32)
    gt = np.array([[1, 0, 0], [0, 0, 0]], np.float32)
    mask = np.array([[1, 1, 1], [1, 0, 1]], np.float32)           # (1,1) is "don't care"
    tmap = np.array([[0.7, 0.5, 0.3], [0.3, 0.3, 0.3]], np.float32)
    tmask = np.array([[1, 1, 0], [0, 0, 1]], np.float32)
    pred = paddle.to_tensor(np.stack([prob, thresh, binary])[None])
    t = [paddle.to_tensor(a[None]) for a in (gt, mask, tmap, tmask)]
    total, parts = db_loss(pred, *t, alpha=5.0, beta=10.0, ohem_ratio=3.0)

    # Balanced BCE: 1 positive, 4 valid negatives, keep the 3 hardest (largest BCE): 0.6, 0.3, 0.2.
    pos = _bce(0.8, 1)
    hardest = sorted([_bce(v, 0) for v in (0.6, 0.1, 0.3, 0.2)], reverse=True)[:3]
    shrink = (pos + sum(hardest)) / (1 + 3)
    l1 = (abs(0.5 - 0.7) + abs(0.4 - 0.5) + abs(0.7 - 0.3)) / 3
    inter = 0.9 * 1
    dice = 1 - 2 * inter / ((0.9 + 0.2 + 0.1 + 0.4 + 0.3) + 1)
    assert float(parts["shrink"]) == pytest.approx(shrink, rel=1e-4)
    assert float(parts["threshold"]) == pytest.approx(l1, rel=1e-4)
    assert float(parts["binary"]) == pytest.approx(dice, rel=1e-4)
    assert float(total) == pytest.approx(5 * shrink + 10 * l1 + dice, rel=1e-4)


def test_db_loss_without_text_is_finite_and_gradients_flow():
    pred = paddle.to_tensor(np.full((2, 3, 4, 4), 0.3, np.float32), stop_gradient=False)
    zeros, ones = paddle.zeros([2, 4, 4]), paddle.ones([2, 4, 4])
    total, parts = db_loss(pred, zeros, ones, zeros + 0.3, zeros)
    total.backward()
    assert np.isfinite(float(total)) and float(parts["shrink"]) == 0.0  # no positives -> no negatives kept
    assert pred.grad is not None


def test_labels_round_trip_through_paddleocr_postprocess():
    """Polygons -> MakeShrinkMap -> (shrink map as the predicted probability) -> DBPostProcess
    recovers the boxes with hmean 1.0."""
    p = DBNetParams(image_size=64)
    ops = ppocr_ops()
    boxes = [[[4, 6], [40, 6], [40, 18], [4, 18]], [[10, 30], [58, 28], [58, 44], [10, 46]],
             [[20, 50], [44, 50], [44, 61], [20, 61]]]
    label = json.dumps([{"transcription": f"t{i}", "points": b} for i, b in enumerate(boxes)])
    maps = make_label_maps(np.zeros((64, 64, 3), np.uint8), label, p, ops)
    assert maps["shrink_map"].shape == (64, 64) and maps["shrink_map"].sum() > 0
    assert maps["threshold_map"].min() == pytest.approx(0.3) and maps["threshold_map"].max() == pytest.approx(0.7)
    post = ops["DBPostProcess"](thresh=p.det_thresh, box_thresh=p.box_thresh, unclip_ratio=p.unclip_ratio)
    (res,) = post({"maps": maps["shrink_map"][None, None]}, [[64, 64, 1.0, 1.0]])
    assert len(res["points"]) == 3
    assert detection_scores([boxes], [list(res["points"])])["hmean"] == 1.0
    # and an ignored ("###") region is masked out of the loss instead of being a target
    label2 = json.dumps([{"transcription": "###", "points": boxes[0]}])
    maps2 = make_label_maps(np.zeros((64, 64, 3), np.uint8), label2, p, ops)
    assert maps2["shrink_map"].sum() == 0 and maps2["shrink_mask"][10, 20] == 0


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    params = DBNetParams.model_validate(TINY)
    ctx = WorkloadContext(params=params, batch_size=2, steps=8, seed=0, cache_dir=tmp_path_factory.mktemp("cache"))
    wl = DBNetWorkload(ctx)
    wl.prepare()
    return wl


def test_registered_and_prepared(workload):
    assert get_workload_class("dbnet") is DBNetWorkload
    info = workload.describe()
    assert info["train_images"] == 3 and info["eval_images"] == 2 and info["eval_text_regions"] >= 2
    arr = workload.train_arrays
    assert arr["image"].shape == (3, 64, 64, 3) and arr["image"].dtype == np.uint8
    assert arr["shrink_map"].max() == 1 and arr["threshold_map"].dtype == np.float16
    # a second workload with the same params reuses the cached label arrays
    again = DBNetWorkload(workload.ctx)
    again.prepare()
    assert again.label_dir == workload.label_dir


def test_batches_are_seeded(workload):
    def first_images(seed, n=3):
        it = workload.train_batches(seed, 2)
        return [next(it).inputs["image"].sum() for _ in range(n)]

    assert first_images(0) == first_images(0)
    b = next(workload.train_batches(0, 2))
    assert b.samples == 2 and set(b.inputs) == {"image", "shrink_map", "shrink_mask", "threshold_map", "threshold_mask"}
    orders = {tuple(first_images(s)) for s in range(4)}
    assert len(orders) > 1


def test_model_shapes_and_a_few_training_steps_lower_the_loss(workload):
    paddle.seed(0)
    model = workload.build_model()
    x = paddle.to_tensor(workload.eval_images)
    model.eval()
    prob = model(x)
    assert prob.shape == [2, 1, 64, 64] and 0 <= float(prob.min()) and float(prob.max()) <= 1
    model.train()
    assert model(x).shape == [2, 3, 64, 64]
    # every batch norm uses the configured momentum (MobileNetV3's own 0.99 lags for hundreds of steps)
    bns = [m for m in model.sublayers() if isinstance(m, paddle.nn.layer.norm._BatchNormBase)]
    assert bns and all(b._momentum == workload.params.bn_momentum == 0.9 for b in bns)
    opt = paddle.optimizer.Adam(learning_rate=3e-3, parameters=model.parameters())
    it = workload.train_batches(0, 3)
    batch = next(it)  # the same batch: the loss must fall when overfitting it
    losses = []
    for _ in range(8):
        loss = workload.loss(model, batch)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < 0.9 * losses[0]
    model.eval()
    m = workload.evaluate(model)
    assert set(m) == {"hmean", "precision", "recall"} and all(0 <= v <= 1 for v in m.values())


def test_resnet_splits_into_four_strides():
    from ampbench.workloads.dbnet.workload import _backbone_layers, split_stages

    stages, channels = split_stages(_backbone_layers("resnet18", 1.0))
    assert len(stages) == 4 and channels == [64, 128, 256, 512]


def test_params_validation():
    with pytest.raises(ValueError, match="multiple of 32"):
        DBNetParams(image_size=100)
    with pytest.raises(ValueError):
        DBNetParams.model_validate({"dataset": {"kind": "paddleocr"}})  # needs label files
    p = DBNetParams.model_validate({"dataset": {"kind": "paddleocr", "train_label": "a.txt", "eval_label": "b.txt"}})
    assert p.dataset.kind == "paddleocr"


@pytest.mark.parametrize("profile", ["default", "cpu"])
def test_suite_file_validates(profile):
    loaded = load_suite(SUITE, profile=profile)
    s = loaded.suite
    assert s.suite.workload == "dbnet" and s.suite.metric == "hmean"
    names = [m.name for m in s.modes]
    assert {"fp32", "amp-o1-fp16", "amp-o2-fp16"} <= set(names)
    if profile == "default":
        assert s.workload["image_size"] == 640 and s.train.batch_size == 8
        assert any(s.batch_size(m) == 32 for m in s.modes if m.amp)
    else:
        assert s.workload["image_size"] <= 128


def test_suite_with_bad_workload_key_names_it(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SUITE.read_text().replace("[workload]\n", "[workload]\nbackbon = 'x'\n", 1))
    with pytest.raises(ConfigError, match="backbon"):
        load_suite(bad)


def test_workload_itself_shows_no_low_precision_ops_on_cpu(workload):
    """AMP activity is judged from Paddle's op dtype statistics: the workload's own data must not
    put float16 tensors on the device (a float16 label map once made CPU trials look AMP-active)."""
    from ampbench.trial.precision import collect_op_dtypes, low_precision_calls

    paddle.seed(0)
    model = workload.build_model()
    with collect_op_dtypes() as counts:
        with paddle.amp.auto_cast(level="O1", dtype="float16"):
            loss = workload.loss(model, next(workload.train_batches(0, 2)))
        loss.backward()
    assert sum(sum(c.values()) for c in counts.values()) > 0
    assert low_precision_calls(dict(counts)) == 0
