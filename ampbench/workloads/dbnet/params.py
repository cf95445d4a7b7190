"""The `[workload]` table of the dbnet workload (no paddle import: config validation uses it).

Names follow PaddleOCR's det configs where one exists (Loss: main_loss_type, alpha, beta,
ohem_ratio, balance_loss; Backbone: MobileNetV3 scale / ResNet_vd layers; PostProcess: thresh,
box_thresh, max_candidates, unclip_ratio), so an imported config maps key to key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ampbench.config.suite import StrictInt
from ampbench.workloads.base import WorkloadParams

Backbone = Literal["MobileNetV3", "ResNet_vd", "resnet18", "resnet34", "resnet50",
                   "mobilenet_v3_small", "mobilenet_v3_large"]


class SyntheticData(WorkloadParams):
    """Generated scene text (ampbench.workloads.dbnet.data); train and eval splits use different seeds."""

    kind: Literal["synthetic-scene-text"] = "synthetic-scene-text"
    images: StrictInt = Field(1000, ge=1)
    eval_images: StrictInt = Field(100, ge=1)
    seed: int = 0
    lines: tuple[int, int] = (2, 6)
    text_height: tuple[float, float] = (0.04, 0.10)
    cjk_fraction: float = Field(0.3, ge=0, le=1)
    max_angle: float = Field(20.0, ge=0, le=90)
    blur_prob: float = Field(0.3, ge=0, le=1)


class LabelFileData(WorkloadParams):
    """Any PaddleOCR-format detection set (SimpleDataSet): label_file_list + ratio_list + data_dir.
    Relative paths are relative to the working directory, as in PaddleOCR."""

    kind: Literal["paddleocr"]
    train_label: str | list[str]
    eval_label: str | list[str]
    ratio_list: float | list[float] = 1.0   # per train label file, (0, 1]
    data_dir: str | None = None             # image paths in the label files are relative to this
    eval_data_dir: str | None = None        # default: data_dir
    seed: int = 0                           # draws the ratio_list samples
    max_images: StrictInt | None = Field(None, ge=1)
    eval_images: StrictInt | None = Field(None, ge=1)

    @property
    def train_files(self) -> list[str]:
        return [self.train_label] if isinstance(self.train_label, str) else list(self.train_label)

    @property
    def eval_files(self) -> list[str]:
        return [self.eval_label] if isinstance(self.eval_label, str) else list(self.eval_label)

    @property
    def ratios(self) -> list[float]:
        r = self.ratio_list
        return [float(r)] * len(self.train_files) if isinstance(r, (int, float)) else [float(x) for x in r]

    @model_validator(mode="after")
    def _ratios(self) -> LabelFileData:
        if not self.train_files or not self.eval_files:
            raise ValueError("train_label and eval_label need at least one label file each")
        if len(self.ratios) != len(self.train_files):
            raise ValueError(f"ratio_list has {len(self.ratios)} entries for {len(self.train_files)} label files")
        if any(not 0 < r <= 1 for r in self.ratios):
            raise ValueError(f"ratio_list entries must be in (0, 1], got {self.ratios}")
        return self


class LossParams(WorkloadParams):
    """PaddleOCR's DBLoss arguments (defaults = its DB configs)."""

    main_loss_type: Literal["DiceLoss", "BCELoss"] = "DiceLoss"
    balance_loss: bool = True
    alpha: float = Field(5.0, ge=0)
    beta: float = Field(10.0, ge=0)
    ohem_ratio: float = Field(3.0, gt=0)
    eps: float = Field(1e-6, gt=0)


class DBNetParams(WorkloadParams):
    backbone: Backbone = "MobileNetV3"
    backbone_scale: float | None = Field(None, gt=0)  # MobileNetV3 width; None: 0.5 ours, 1.0 paddle.vision's
    backbone_layers: int = 50                          # ResNet_vd depth (18, 34, 50, 101)
    backbone_se: bool = True                           # MobileNetV3 squeeze-excite (PaddleOCR: disable_se)
    fpn_channels: StrictInt = Field(256, ge=8)
    image_size: StrictInt = Field(640, ge=32)
    k: float = Field(50.0, gt=0)
    # "sigmoid" is the numerically stable form of B; "exp" is PaddleOCR's literal
    # reciprocal(1 + exp(-k (P - T))), which can overflow in float16 (an AMP hazard to study).
    binarize: Literal["sigmoid", "exp"] = "sigmoid"
    shrink_ratio: float = Field(0.4, gt=0, lt=1)
    thresh_min: float = 0.3
    thresh_max: float = 0.7
    min_text_size: StrictInt = Field(8, ge=1)
    loss: LossParams = LossParams()
    det_thresh: float = Field(0.3, gt=0, lt=1)   # DBPostProcess thresh
    box_thresh: float = Field(0.6, gt=0, lt=1)
    max_candidates: StrictInt = Field(1000, ge=1)
    unclip_ratio: float = Field(1.5, gt=0)
    eval_batch_size: StrictInt = Field(8, ge=1)
    # Batch-norm running-stat momentum for every BN layer. paddle.vision's MobileNetV3 uses 0.99,
    # whose running statistics lag the weights for hundreds of steps, so an eval-mode model
    # outputs a flat map early in training; 0.9 is Paddle's default and what PaddleOCR's backbones use.
    bn_momentum: float | None = Field(0.9, gt=0, lt=1)
    dataset: Annotated[SyntheticData | LabelFileData, Field(discriminator="kind")] = SyntheticData()

    @field_validator("image_size")
    @classmethod
    def _multiple_of_32(cls, v: int) -> int:
        if v % 32:
            raise ValueError(f"image_size must be a multiple of 32 (the backbone's stride), got {v}")
        return v

    @model_validator(mode="after")
    def _scale(self) -> DBNetParams:
        if self.backbone_scale is None:
            object.__setattr__(self, "backbone_scale", 0.5 if self.backbone == "MobileNetV3" else 1.0)
        return self
