"""The DB network: backbone (backbones.py) + FPN neck + DB head (Liao et al., AAAI 2020).

Neck and head have PaddleOCR's DBFPN / DBHead shapes exactly (with a ResNet-50 backbone and 256
channels: 1,572,864 and 328,834 parameters; with the same weights the outputs are identical).
The head predicts a probability map P, a threshold map T and the approximate binary map
B = 1 / (1 + exp(-k (P - T))). Imported only when a model is built.
"""

from __future__ import annotations

from typing import Any, Literal

import paddle
import paddle.nn.functional as F
from paddle import nn

from ampbench.workloads.dbnet.backbones import build_backbone

MEAN = (0.485, 0.456, 0.406)  # PaddleOCR's det NormalizeImage defaults (ImageNet)
STD = (0.229, 0.224, 0.225)


class FPN(nn.Layer):
    """1x1 lateral convs, top-down sum, 3x3 smoothing to C/4 each, upsample all to 1/4, concat."""

    def __init__(self, in_channels: list[int], c: int):
        super().__init__()
        self.lateral = nn.LayerList([nn.Conv2D(ci, c, 1, bias_attr=False) for ci in in_channels])
        self.smooth = nn.LayerList([nn.Conv2D(c, c // 4, 3, padding=1, bias_attr=False) for _ in in_channels])

    def forward(self, feats: list[Any]) -> Any:
        lat = [conv(f) for conv, f in zip(self.lateral, feats)]
        for i in range(len(lat) - 2, -1, -1):
            lat[i] = lat[i] + F.interpolate(lat[i + 1], size=lat[i].shape[-2:], mode="nearest")
        size = lat[0].shape[-2:]
        outs = [F.interpolate(s(x), size=size, mode="nearest") if i else s(x)
                for i, (s, x) in enumerate(zip(self.smooth, lat))]
        return paddle.concat(outs[::-1], axis=1)


class Branch(nn.Sequential):
    """3x3 conv, then two stride-2 transposed convs back to full resolution, sigmoid."""

    def __init__(self, c: int):
        q = max(c // 4, 1)
        super().__init__(
            nn.Sequential(nn.Conv2D(c, q, 3, padding=1, bias_attr=False), nn.BatchNorm2D(q), nn.ReLU()),
            nn.Conv2DTranspose(q, q, 2, stride=2), nn.BatchNorm2D(q), nn.ReLU(),
            nn.Conv2DTranspose(q, 1, 2, stride=2), nn.Sigmoid(),
        )


class DBNet(nn.Layer):
    """uint8 NHWC images in; training: (N, 3, H, W) = P, T, B; eval: P only (what DBPostProcess reads)."""

    def __init__(self, backbone: Any, fpn_channels: int, k: float, binarize: Literal["sigmoid", "exp"] = "sigmoid"):
        super().__init__()
        self.backbone = backbone
        c = fpn_channels - fpn_channels % 4
        self.neck = FPN(backbone.out_channels, c)
        self.prob = Branch(c)
        self.thresh = Branch(c)
        self.k, self.binarize = k, binarize

    @staticmethod
    def normalize(images_u8: Any) -> Any:
        """NHWC uint8 -> normalised NCHW float32 (PaddleOCR's NormalizeImage + ToCHWImage, on device).
        Mean/std are made per call, not buffers, so O2's decorate cannot cast them to float16."""
        x = images_u8.astype("float32").transpose([0, 3, 1, 2])
        mean = paddle.to_tensor([255.0 * m for m in MEAN], dtype="float32").reshape([1, 3, 1, 1])
        scale = paddle.to_tensor([1.0 / (255.0 * s) for s in STD], dtype="float32").reshape([1, 3, 1, 1])
        return (x - mean) * scale

    def forward(self, images_u8: Any) -> Any:
        fused = self.neck(self.backbone(self.normalize(images_u8)))
        prob = self.prob(fused)
        if not self.training:
            return prob
        thresh = self.thresh(fused)
        if self.binarize == "sigmoid":
            binary = F.sigmoid(self.k * (prob - thresh))
        else:  # PaddleOCR's literal form; exp can overflow in float16 (an AMP hazard to study)
            binary = paddle.reciprocal(1 + paddle.exp(-self.k * (prob - thresh)))
        return paddle.concat([prob, thresh, binary], axis=1)


def build_dbnet(p: Any) -> DBNet:
    """The network for DBNetParams `p`; every batch norm gets `p.bn_momentum` when set."""
    backbone = build_backbone(p.backbone, p.backbone_scale, p.backbone_layers, p.backbone_se)
    model = DBNet(backbone, p.fpn_channels, p.k, p.binarize)
    if p.bn_momentum is not None:
        for layer in model.sublayers():
            if isinstance(layer, nn.layer.norm._BatchNormBase):
                layer._momentum = p.bn_momentum
    return model
