"""Backbones that return features at strides 4, 8, 16 and 32 for the DB neck.

`MobileNetV3` (large, any width scale; 0.5 is PaddleOCR's det_mv3_db) is written from the
architecture table of Howard et al., "Searching for MobileNetV3" (ICCV 2019, Table 1), and
`ResNet_vd` (18/34/50/101; 50 is det_r50_vd_db) from He et al., "Bag of Tricks for Image
Classification" (CVPR 2019, ResNet-D: a three-conv stem and average-pool shortcuts). Both are
written here, not copied; names and defaults follow PaddleOCR's configs so an imported config
means the same network. paddle.vision's resnet18/34/50 and mobilenet_v3_small/large (scale 1.0)
stay available as before.

Imported only when a model is built (paddle at module level is fine here).
"""

from __future__ import annotations

from typing import Any

import paddle
from paddle import nn

# Table 1 of the MobileNetV3 paper, large model: kernel, expansion size, out channels, SE, act, stride.
MV3_LARGE = (
    (3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hardswish", 2), (3, 200, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1), (3, 184, 80, False, "hardswish", 1),
    (3, 480, 112, True, "hardswish", 1), (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2), (5, 960, 160, True, "hardswish", 1),
    (5, 960, 160, True, "hardswish", 1),
)
MV3_LAST_CONV = 960
RESNET_DEPTHS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round channels to a multiple of 8, never more than 10% below v (the MobileNet rule)."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: str | None = "relu") -> nn.Sequential:
    layers: list[Any] = [nn.Conv2D(cin, cout, k, stride=stride, padding=(k - 1) // 2, groups=groups, bias_attr=False),
                         nn.BatchNorm2D(cout)]
    if act == "relu":
        layers.append(nn.ReLU())
    elif act == "hardswish":
        layers.append(nn.Hardswish())
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Layer):
    """Channel gates: global pool, 1x1 down by 4, ReLU, 1x1 up, hard-sigmoid (the paper's relu6(x+3)/6)."""

    def __init__(self, c: int):
        super().__init__()
        mid = make_divisible(c / 4)
        self.gate = nn.Sequential(nn.AdaptiveAvgPool2D(1), nn.Conv2D(c, mid, 1), nn.ReLU(),
                                  nn.Conv2D(mid, c, 1), nn.Hardsigmoid())

    def forward(self, x: Any) -> Any:
        return x * self.gate(x)


class InvertedResidual(nn.Layer):
    """1x1 expand, kxk depthwise (stride), optional SE, 1x1 linear projection; identity skip when shapes allow."""

    def __init__(self, cin: int, exp: int, cout: int, k: int, se: bool, act: str, stride: int):
        super().__init__()
        layers: list[nn.Layer] = [conv_bn(cin, exp, 1, act=act), conv_bn(exp, exp, k, stride, groups=exp, act=act)]
        if se:
            layers.append(SqueezeExcite(exp))
        layers.append(conv_bn(exp, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.skip = stride == 1 and cin == cout

    def forward(self, x: Any) -> Any:
        y = self.body(x)
        return x + y if self.skip else y


class MultiStage(nn.Layer):
    """Runs stages in order and returns every stage's output (strides 4, 8, 16, 32)."""

    def __init__(self, stages: list[Any], channels: list[int]):
        super().__init__()
        self.stages = nn.LayerList(stages)
        self.out_channels = channels

    def forward(self, x: Any) -> list[Any]:
        outs = []
        for stage in self.stages:
            x = stage(x)
            outs.append(x)
        return outs


def mobilenet_v3_large(scale: float = 0.5, se: bool = True) -> MultiStage:
    """Stem (3x3 s2, hardswish), the table's blocks split before each stride-2 block after the
    first, and the final 1x1 conv to 960 * scale channels on the last stage."""
    cin = make_divisible(16 * scale)
    current: list[Any] = [conv_bn(3, cin, 3, 2, act="hardswish")]
    stages, channels = [], []
    for i, (k, exp, c, use_se, act, s) in enumerate(MV3_LARGE):
        if s == 2 and i > 1:
            stages.append(nn.Sequential(*current))
            channels.append(cin)
            current = []
        cout = make_divisible(c * scale)
        current.append(InvertedResidual(cin, make_divisible(exp * scale), cout, k, se and use_se, act, s))
        cin = cout
    last = make_divisible(MV3_LAST_CONV * scale)
    current.append(conv_bn(cin, last, 1, act="hardswish"))
    stages.append(nn.Sequential(*current))
    channels.append(last)
    return MultiStage(stages, channels)


class ResidualVd(nn.Layer):
    """Bottleneck (1x1, 3x3 strided, 1x1 x4) or basic (3x3, 3x3) block; a downsampling
    shortcut averages 2x2 first and then projects with a 1x1 conv (ResNet-D)."""

    def __init__(self, cin: int, c: int, stride: int, bottleneck: bool):
        super().__init__()
        cout = c * 4 if bottleneck else c
        if bottleneck:
            self.body = nn.Sequential(conv_bn(cin, c, 1), conv_bn(c, c, 3, stride), conv_bn(c, cout, 1, act=None))
        else:
            self.body = nn.Sequential(conv_bn(cin, c, 3, stride), conv_bn(c, c, 3, act=None))
        self.short: Any = None
        if stride != 1:
            self.short = nn.Sequential(nn.AvgPool2D(2, 2, ceil_mode=True), conv_bn(cin, cout, 1, act=None))
        elif cin != cout:
            self.short = conv_bn(cin, cout, 1, act=None)
        self.relu = nn.ReLU()

    def forward(self, x: Any) -> Any:
        return self.relu(self.body(x) + (x if self.short is None else self.short(x)))


def resnet_vd(layers: int = 50) -> MultiStage:
    """Three-conv stem (32, 32, 64) + max pool, then four stages of 64/128/256/512 (x4 for 50+)."""
    if layers not in RESNET_DEPTHS:
        raise ValueError(f"ResNet_vd layers must be one of {sorted(RESNET_DEPTHS)}, got {layers}")
    bottleneck = layers >= 50
    stem = [conv_bn(3, 32, 3, 2), conv_bn(32, 32, 3), conv_bn(32, 64, 3), nn.MaxPool2D(3, 2, padding=1)]
    stages, channels, cin = [], [], 64
    for i, (depth, c) in enumerate(zip(RESNET_DEPTHS[layers], (64, 128, 256, 512))):
        blocks: list[nn.Layer] = []
        for j in range(depth):
            blocks.append(ResidualVd(cin, c, 2 if (j == 0 and i > 0) else 1, bottleneck))
            cin = c * 4 if bottleneck else c
        stages.append(nn.Sequential(*(stem + blocks if i == 0 else blocks)))
        channels.append(cin)
    return MultiStage(stages, channels)


def vision_backbone(name: str, scale: float) -> MultiStage:
    """A paddle.vision model cut into four stages at strides 4-32 (found by a probe pass)."""
    from paddle.vision import models

    if name.startswith("resnet"):
        m = getattr(models, name)(num_classes=0, with_pool=False)
        layers = [m.conv1, m.bn1, m.relu, m.maxpool, m.layer1, m.layer2, m.layer3, m.layer4]
    else:
        m = getattr(models, name)(scale=scale, num_classes=0, with_pool=False)
        layers = [m.conv, *m.blocks, m.lastconv]
    return MultiStage(*split_stages(layers))


def split_stages(layers: list[Any], probe: int = 64) -> tuple[list[Any], list[int]]:
    """Group layers into 4 stages ending at strides 4, 8, 16 and 32 (found by a zero-input probe
    in eval mode, so batch-norm statistics and RNG are untouched); also returns their channels."""
    x = paddle.zeros([1, 3, probe, probe])
    ends: dict[int, tuple[int, int]] = {}
    with paddle.no_grad():
        for i, layer in enumerate(layers):
            was = layer.training
            layer.eval()
            x = layer(x)
            layer.train() if was else None
            ends[probe // int(x.shape[-1])] = (i, int(x.shape[1]))
    missing = [s for s in (4, 8, 16, 32) if s not in ends]
    if missing:
        raise ValueError(f"backbone has no output at stride(s) {missing}")
    stages, channels, start = [], [], 0
    for s in (4, 8, 16, 32):
        end, ch = ends[s]
        stages.append(nn.Sequential(*layers[start: end + 1]))
        channels.append(ch)
        start = end + 1
    return stages, channels


def build_backbone(name: str, scale: float = 0.5, layers: int = 50, se: bool = True) -> MultiStage:
    """By PaddleOCR's names (MobileNetV3, ResNet_vd) or paddle.vision's (resnet50, mobilenet_v3_small...)."""
    if name == "MobileNetV3":
        return mobilenet_v3_large(scale, se)
    if name == "ResNet_vd":
        return resnet_vd(layers)
    return vision_backbone(name, scale)
