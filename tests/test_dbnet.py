"""DBNet workload: DB loss on a hand-computed case, PaddleOCR label round trip, model shapes,
data order, a few real training steps, and the suite file."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("paddleocr")
pytest.importorskip("skimage")

import paddle

from ampbench.config import ConfigError
from ampbench.workloads import get_workload_class
from ampbench.workloads.base import WorkloadContext
from ampbench.workloads.dbnet.metric import detection_scores
from ampbench.workloads.dbnet.workload import DBNetParams, DBNetWorkload, make_label_maps, ppocr_ops
from ampbench.workloads.suites import load_suite

SUITE = Path(__file__).resolve().parent.parent / "suites" / "ocr.toml"
TINY = {"backbone": "mobilenet_v3_small", "fpn_channels": 16, "image_size": 64,
        "dataset": {"kind": "synthetic-scene-text", "images": 3, "eval_images": 2, "lines": [1, 2],
                    "text_height": [0.18, 0.25]}}


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
    for _ in range(16):
        loss = workload.loss(model, batch)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    # Dice terms fall slowly from ~1 on an untrained map: 16 steps on one batch take ~8% off
    assert np.isfinite(losses).all() and losses[-1] < 0.95 * losses[0]
    model.eval()
    m = workload.evaluate(model)
    assert set(m) == {"hmean", "precision", "recall"} and all(0 <= v <= 1 for v in m.values())


@pytest.mark.parametrize("name,kw,channels", [
    ("resnet18", {}, [64, 128, 256, 512]),                       # paddle.vision, split by a probe
    ("MobileNetV3", {"scale": 0.5}, [16, 24, 56, 480]),          # PaddleOCR det_mv3_db's stage outputs
    ("ResNet_vd", {"layers": 50}, [256, 512, 1024, 2048]),        # det_r50_vd_db's
    ("ResNet_vd", {"layers": 18}, [64, 128, 256, 512]),
])
def test_backbones_give_four_strides(name, kw, channels):
    from ampbench.workloads.dbnet.backbones import build_backbone

    bb = build_backbone(name, **kw)
    bb.eval()
    outs = bb(paddle.zeros([1, 3, 64, 64]))
    assert bb.out_channels == channels
    assert [tuple(o.shape[1:]) for o in outs] == [(c, 64 // s, 64 // s) for c, s in zip(channels, (4, 8, 16, 32))]


def test_neck_and_head_have_paddleocrs_parameter_counts():
    """DBFPN(256) on ResNet50-vd features: 1,572,864 trainable parameters; DBHead: 328,834."""
    from ampbench.workloads.dbnet.model import build_dbnet

    model = build_dbnet(DBNetParams(backbone="ResNet_vd", image_size=64))
    count = lambda layer: sum(int(p.size) for p in layer.parameters() if not p.stop_gradient)
    assert count(model.neck) == 1_572_864
    assert count(model.prob) + count(model.thresh) == 328_834
    vd = model.backbone.stages[1][0].short  # ResNet-D: the downsampling shortcut averages first
    assert isinstance(vd[0], paddle.nn.AvgPool2D)


def test_params_validation():
    with pytest.raises(ValueError, match="multiple of 32"):
        DBNetParams(image_size=100)
    with pytest.raises(ValueError):
        DBNetParams.model_validate({"dataset": {"kind": "paddleocr"}})  # needs label files
    p = DBNetParams.model_validate({"dataset": {"kind": "paddleocr", "train_label": "a.txt", "eval_label": "b.txt"}})
    assert p.dataset.kind == "paddleocr" and p.dataset.train_files == ["a.txt"] and p.dataset.ratios == [1.0]
    with pytest.raises(ValueError, match="ratio_list"):
        DBNetParams.model_validate({"dataset": {"kind": "paddleocr", "train_label": ["a", "b"], "eval_label": "c",
                                                "ratio_list": [1.0]}})
    assert DBNetParams().backbone == "MobileNetV3" and DBNetParams().backbone_scale == 0.5
    assert DBNetParams(backbone="mobilenet_v3_small").backbone_scale == 1.0
    assert DBNetParams().loss.main_loss_type == "DiceLoss"


@pytest.mark.parametrize("profile", ["default", "cpu", "r50", "bce"])
def test_suite_file_validates(profile):
    loaded = load_suite(SUITE, profile=profile)
    s = loaded.suite
    assert s.suite.workload == "dbnet" and s.suite.metric == "hmean"
    names = [m.name for m in s.modes]
    assert "fp32" in names and any(m.amp for m in s.modes)
    p = DBNetParams.model_validate(s.workload)
    if profile in ("default", "r50"):
        assert s.workload["image_size"] == 640 and s.train.batch_size == 8
        assert any(s.batch_size(m) == 32 for m in s.modes if m.amp)
        assert s.train.optimizer.schedule == "cosine" and s.train.optimizer.lr_warmup_steps > 0
        assert (p.backbone, p.box_thresh) == (("ResNet_vd", 0.7) if profile == "r50" else ("MobileNetV3", 0.6))
    elif profile == "cpu":
        assert s.workload["image_size"] <= 128
        assert s.thresholds.min_baseline_metric is not None and s.thresholds.min_baseline_metric >= 0.3
    assert p.loss.main_loss_type == ("BCELoss" if profile == "bce" else "DiceLoss")


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


@pytest.mark.parametrize("hmean,expected", [(0.0, "INCONCLUSIVE"), (0.79, "PASS")])
def test_cpu_profile_floor_makes_a_blind_detector_inconclusive(tmp_path, hmean, expected):
    """The cpu profile's min_baseline_metric: FP32 and AMP both at hmean 0 is not parity."""
    from ampbench.commands.check import check_run
    from tests.factories import make_run, make_trials

    suite = load_suite(SUITE, profile="cpu").suite
    trials = make_trials(suite, metrics={m.name: [hmean] for m in suite.modes})
    report = check_run(make_run(tmp_path, suite, trials, profile="cpu"))
    rules = {r.rule: r for v in report.verdicts for r in v.rules if v.mode == "amp-o2-fp16"}
    assert rules["baseline-quality"].status == expected
    if expected == "INCONCLUSIVE":
        assert "below min_baseline_metric 0.4" in rules["baseline-quality"].message
        assert next(v for v in report.verdicts if v.mode == "amp-o2-fp16").verdict != "PASS"
