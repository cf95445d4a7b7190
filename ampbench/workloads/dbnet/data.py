"""Synthetic scene-text detection data, and the reader for PaddleOCR's detection label format.

Why synthetic: nothing may be downloaded at run time, yet a text detector needs images with
known text polygons.  Lines of Latin and Chinese text are rendered with real fonts (Debian
fonts-dejavu-core / fonts-wqy-microhei) onto crops of the real photographs bundled with
scikit-image, rotated, coloured against the local background and sometimes blurred.  Each
image's ground truth is the 4-point polygon of every line, written once to disk in PaddleOCR's
label format (`path\\t[{"transcription": ..., "points": [[x, y], ...]}]`) and cached under a
folder keyed by the generator's parameters.  The same reader loads ICDAR 2015 or any other
PaddleOCR-format detection set a user points to.

Every image is drawn from its own RNG stream (seed, index), so the data does not depend on
generation order and the same spec always gives the same images.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ampbench.config.suite import StrictInt

GENERATOR_VERSION = 2  # bump when the drawing code changes: it is part of the cache key

# scikit-image's bundled photographs (no download) that contain no text of their own.
# Left out on purpose: astronaut (NASA patch), text, page, logo, coins (inscriptions),
# rocket (lettering), clock_motion (numerals), and the synthetic test patterns.
BACKGROUNDS = (
    "brick", "camera", "chelsea", "coffee", "grass", "gravel",
    "hubble_deep_field", "immunohistochemistry", "moon", "retina",
)

LATIN_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSansCondensed-Bold.ttf",
)
CJK_FONTS = ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",)

LATIN_WORDS = (
    "OPEN", "SALE", "EXIT", "STOP", "HOTEL", "CAFE", "BANK", "PARKING", "STREET", "ROAD", "CITY",
    "coffee", "market", "station", "welcome", "north", "south", "museum", "garden", "school",
    "Pharmacy", "Bakery", "Books", "Taxi", "Metro", "Bus", "Police", "Fresh", "Daily", "Menu",
    "PUSH", "PULL", "FREE", "WiFi", "No.", "Tel", "Ave", "Plaza", "Office", "Service", "Center",
)
# Common simplified Chinese characters (frequency-list order), rendered with WenQuanYi Micro Hei.
CJK_CHARS = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后"
    "小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长"
    "知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最"
    "间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市"
    "眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计"
)


class SceneTextSpec(BaseModel):
    """Everything that determines a generated split; its hash names the cache folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    images: StrictInt = Field(200, ge=1)
    image_size: StrictInt = Field(640, ge=32)
    seed: int = 0
    lines: tuple[int, int] = (2, 6)              # min, max text lines per image
    text_height: tuple[float, float] = (0.04, 0.10)  # line height as a fraction of image_size
    cjk_fraction: float = Field(0.3, ge=0, le=1)
    max_angle: float = Field(20.0, ge=0, le=90)  # degrees, uniform in [-max, max]
    blur_prob: float = Field(0.3, ge=0, le=1)
    noise_std: float = Field(3.0, ge=0)          # gaussian pixel noise, 0-255 scale
    jpeg_quality: StrictInt = Field(95, ge=10, le=100)

    @model_validator(mode="after")
    def _ranges(self) -> SceneTextSpec:
        if not 1 <= self.lines[0] <= self.lines[1]:
            raise ValueError(f"lines must be (min, max) with 1 <= min <= max, got {self.lines}")
        lo, hi = self.text_height
        if not 0 < lo <= hi < 1:
            raise ValueError(f"text_height must be (min, max) fractions with 0 < min <= max < 1, got {self.text_height}")
        return self

    def cache_key(self, fonts: FontSet) -> str:
        blob = json.dumps(
            {"spec": self.model_dump(mode="json"), "version": GENERATOR_VERSION, "fonts": fonts.names()},
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class FontSet:
    """Font files found on this machine; CJK may be empty (then every line is Latin)."""

    latin: tuple[str, ...]
    cjk: tuple[str, ...]

    def names(self) -> list[str]:
        return [Path(p).name for p in (*self.latin, *self.cjk)]


def find_fonts(latin: tuple[str, ...] = LATIN_FONTS, cjk: tuple[str, ...] = CJK_FONTS) -> FontSet:
    """Debian font packages first; matplotlib's bundled DejaVu Sans as the Latin fallback."""
    lat = tuple(p for p in latin if os.path.isfile(p))
    if not lat:
        import matplotlib

        mpl = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
        if not mpl.is_file():
            raise RuntimeError("no Latin font found: apt-get install fonts-dejavu-core")
        lat = (str(mpl),)
    cj = tuple(p for p in cjk if os.path.isfile(p))
    if not cj:
        warnings.warn(
            "CJK font not found (apt-get install fonts-wqy-microhei): generating Latin text only",
            RuntimeWarning, stacklevel=2,
        )
    return FontSet(lat, cj)


@cache
def _background(name: str) -> np.ndarray:
    """A bundled scikit-image photo as HxWx3 uint8 RGB."""
    from skimage import data

    img = np.asarray(getattr(data, name)())
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    img = img[:, :, :3]
    if img.dtype != np.uint8:
        img = (255 * (img.astype(np.float64) / max(float(img.max()), 1e-9))).astype(np.uint8)
    return np.ascontiguousarray(img)


@lru_cache(maxsize=256)
def _font(path: str, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(path, size)


def _background_crop(rng: np.random.Generator, size: int) -> np.ndarray:
    import cv2

    bg = _background(BACKGROUNDS[rng.integers(len(BACKGROUNDS))])
    h, w = bg.shape[:2]
    side = int(min(h, w) * rng.uniform(0.35, 1.0))
    y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
    crop = bg[y: y + side, x: x + side]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    out = cv2.resize(np.ascontiguousarray(crop), (size, size), interpolation=cv2.INTER_AREA)
    gain, bias = rng.uniform(0.7, 1.2), rng.uniform(-25, 25)
    return np.clip(out.astype(np.float32) * gain + bias, 0, 255).astype(np.uint8)


def _random_text(rng: np.random.Generator, cjk: bool) -> str:
    if cjk:
        n = int(rng.integers(2, 9))
        return "".join(CJK_CHARS[i] for i in rng.integers(0, len(CJK_CHARS), n))
    kind = rng.random()
    if kind < 0.15:
        return f"{rng.integers(0, 10000):d}"
    if kind < 0.25:
        return f"${rng.integers(1, 999)}.{rng.integers(0, 100):02d}"
    words = [LATIN_WORDS[i] for i in rng.integers(0, len(LATIN_WORDS), int(rng.integers(1, 3)))]
    return " ".join(words)


def _render_line(text: str, font_path: str, height_px: int, angle: float) -> tuple[np.ndarray, np.ndarray]:
    """An alpha mask of the rotated line, and the rotated 4-point box of its ink, in mask coords."""
    import cv2
    from PIL import Image, ImageDraw

    font = _font(font_path, max(height_px, 4))
    left, top, right, bottom = font.getbbox(text)
    tw, th = max(right - left, 1), max(bottom - top, 1)
    pad = 2
    layer = Image.new("L", (tw + 2 * pad, th + 2 * pad), 0)
    ImageDraw.Draw(layer).text((pad - left, pad - top), text, fill=255, font=font)
    alpha = np.asarray(layer, dtype=np.float32) / 255.0
    box = np.array([[pad, pad], [pad + tw, pad], [pad + tw, pad + th], [pad, pad + th]], np.float64)
    h, w = alpha.shape
    m = np.asarray(cv2.getRotationMatrix2D((w / 2.0, h / 2.0), angle, 1.0), np.float64)  # already float64
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float64) @ m[:, :2].T + m[:, 2]
    shift = -corners.min(axis=0)
    m[:, 2] += shift
    out_w, out_h = (np.ceil(corners.max(axis=0) + shift)).astype(int) + 1
    rotated = cv2.warpAffine(alpha, m, (int(out_w), int(out_h)), flags=cv2.INTER_LINEAR)
    return rotated, box @ m[:, :2].T + m[:, 2]


def _text_color(rng: np.random.Generator, patch: np.ndarray) -> np.ndarray:
    """A colour that contrasts with the mean luminance of the patch under the line."""
    lum = float(patch.mean()) if patch.size else 128.0
    base = rng.uniform(0, 70, 3) if lum > 127 else rng.uniform(190, 255, 3)
    if rng.random() < 0.3:  # a saturated sign colour, still on the contrasting side
        base[rng.integers(3)] = 255.0 if lum <= 127 else rng.uniform(120, 200)
    return base.astype(np.float32)


def generate_image(spec: SceneTextSpec, fonts: FontSet, index: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """One HxWx3 uint8 RGB image and its PaddleOCR-style annotations (4-point polygons)."""
    import cv2
    from shapely.geometry import Polygon

    rng = np.random.default_rng([spec.seed, index])
    size = spec.image_size
    img = _background_crop(rng, size).astype(np.float32)
    placed: list[Polygon] = []
    items: list[dict[str, Any]] = []
    for _ in range(int(rng.integers(spec.lines[0], spec.lines[1] + 1))):
        cjk = bool(fonts.cjk) and rng.random() < spec.cjk_fraction
        text = _random_text(rng, cjk)
        font_path = fonts.cjk[rng.integers(len(fonts.cjk))] if cjk else fonts.latin[rng.integers(len(fonts.latin))]
        height = round(size * float(rng.uniform(*spec.text_height)))
        angle = float(rng.uniform(-spec.max_angle, spec.max_angle))
        alpha, box = _render_line(text, font_path, height, angle)
        while alpha.shape[1] >= size - 2 and len(text) > 1:  # too long for the image: shorten it
            text = text[: max(1, len(text) * 2 // 3)].strip() or text[:1]
            alpha, box = _render_line(text, font_path, height, angle)
        ah, aw = alpha.shape
        if ah >= size - 2 or aw >= size - 2:
            continue  # still too big: skip rather than clip (a clipped box would lie)
        for _try in range(20):
            x, y = int(rng.integers(1, size - aw)), int(rng.integers(1, size - ah))
            poly = Polygon(box + [x, y])
            if all(not poly.buffer(2).intersects(p) for p in placed):
                break
        else:
            continue
        region = img[y: y + ah, x: x + aw]
        color = _text_color(rng, region[alpha > 0.5])
        a = alpha[:, :, None]
        img[y: y + ah, x: x + aw] = region * (1 - a) + color * a
        placed.append(poly)
        pts = np.round(box + [x, y]).astype(int).clip(0, size - 1)
        items.append({"transcription": text, "points": pts.tolist()})
    if rng.random() < spec.blur_prob:
        img = np.asarray(cv2.GaussianBlur(img, (0, 0), float(rng.uniform(0.4, 1.2))), np.float32)  # stays float32
    if spec.noise_std > 0:
        img = img + rng.normal(0, spec.noise_std, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8), items


def write_dataset(spec: SceneTextSpec, out_dir: Path, fonts: FontSet | None = None) -> Path:
    """Render every image of the split into out_dir/images and write out_dir/label.txt."""
    import cv2

    fonts = fonts or find_fonts()
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(spec.images):
        img, items = generate_image(spec, fonts, i)
        rel = f"images/{i:06d}.jpg"
        cv2.imwrite(str(out_dir / rel), img[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, spec.jpeg_quality])
        lines.append(f"{rel}\t{json.dumps(items, ensure_ascii=False)}")
    (out_dir / "label.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = {"spec": spec.model_dump(mode="json"), "generator_version": GENERATOR_VERSION, "fonts": fonts.names()}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return out_dir / "label.txt"


def ensure_dataset(spec: SceneTextSpec, cache_root: Path) -> Path:
    """The split's label file, generated once per spec (and font set) and then reused.

    Built in a temporary sibling folder and renamed into place, so a crash or a concurrent
    trial never leaves (or sees) a half-written dataset.
    """
    fonts = find_fonts()
    final = Path(cache_root) / "scene_text" / f"{spec.image_size}px-{spec.images}-s{spec.seed}-{spec.cache_key(fonts)}"
    if (final / "label.txt").is_file():
        return final / "label.txt"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-"))
    try:
        write_dataset(spec, tmp, fonts)
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first: keep theirs
            if not (final / "label.txt").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / "label.txt"


# The reader of PaddleOCR label files lives in labels.py; re-exported for existing callers.
from ampbench.workloads.dbnet.labels import (  # noqa: F401
    IGNORE_TRANSCRIPTIONS,
    LabeledImage,
    load_image,
    read_label_file,
)
