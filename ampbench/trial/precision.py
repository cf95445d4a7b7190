"""A precision mode -> Paddle AMP calls (auto_cast, decorate, GradScaler), plus op-name checks
and the op-dtype evidence that says whether AMP was really active.

Paddle silently ignores unknown names in custom op lists and silently runs everything in FP32
where the device has no low-precision kernels; this module makes both visible.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ampbench.config import ModeConfig


def known_op_names() -> set[str]:
    from paddle.base import core

    return set(core.get_all_op_names())


def unknown_op_names(names: list[str]) -> list[str]:
    """Names in a custom white/black list that Paddle does not know (e.g. `embedding`)."""
    known = known_op_names()
    return sorted({n for n in names if n not in known})


def default_lists(dtype: str, level: str) -> dict[str, list[str]]:
    """Paddle's own white/black lists for this dtype and level (they change between versions)."""
    import paddle

    key = "OD" if level == "OD" else level
    try:
        white = paddle.amp.amp_lists.white_list()[dtype].get(key, set())
        black = paddle.amp.amp_lists.black_list()[dtype].get(key, set())
    except (AttributeError, KeyError):
        return {"white": [], "black": []}
    return {"white": sorted(white), "black": sorted(black)}


def lists_hash(lists: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(lists, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class StepOutcome:
    """What one optimizer step tells about the scaler."""

    loss_scale: float | None
    found_inf: bool


NO_SCALER = StepOutcome(loss_scale=None, found_inf=False)  # shared, never mutated
_FP32 = contextlib.nullcontext()                           # reusable: no per-step allocation


@dataclass
class Precision:
    """Applies one mode to a model/optimizer and runs the scaled backward/step."""

    mode: ModeConfig
    scaler: Any = None
    unknown_names: list[str] = field(default_factory=list)
    live: bool = False   # scaler_enabled, fixed after prepare(): read on every step without a getattr

    @classmethod
    def build(cls, mode: ModeConfig) -> Precision:
        p = cls(mode=mode)
        if mode.amp:
            p.unknown_names = unknown_op_names(mode.custom_white_list + mode.custom_black_list)
        return p

    def prepare(self, model: Any, optimizer: Any) -> tuple[Any, Any]:
        """O2 casts parameters to low precision and keeps FP32 master weights (paddle.amp.decorate)."""
        import paddle

        if self.mode.amp and self.mode.level == "O2":
            unknown = [n for n in self.mode.excluded_layers if not isinstance(getattr(paddle.nn, n, None), type)]
            if unknown:
                raise ValueError(f"mode {self.mode.name}: excluded_layers {unknown} are not paddle.nn layer classes")
            excluded = [getattr(paddle.nn, n) for n in self.mode.excluded_layers] or None
            model, optimizer = paddle.amp.decorate(
                models=model, optimizers=optimizer, level="O2", dtype=self.mode.dtype,
                master_weight=self.mode.master_weight, excluded_layers=excluded,
            )
        if self.mode.amp and self.mode.scaler.enable:
            s = self.mode.scaler
            with self.autocast():  # GradScaler reads the AMP dtype from the global AMP state
                pass
            self.scaler = paddle.amp.GradScaler(
                enable=True, init_loss_scaling=s.init_loss_scaling, incr_ratio=s.incr_ratio,
                decr_ratio=s.decr_ratio, incr_every_n_steps=s.incr_every_n_steps,
                decr_every_n_nan_or_inf=s.decr_every_n_nan_or_inf,
                use_dynamic_loss_scaling=s.use_dynamic_loss_scaling,
            )
        self.live = self.scaler_enabled
        return model, optimizer

    def check_model(self, model: Any) -> None:
        """Refuse combinations Paddle 3.3.1 crashes on, with a message instead of a segfault.

        GradScaler can only unscale dense gradients: a live scaler plus `nn.Embedding(sparse=True)`
        raises or segfaults inside `scaler.step` (seen with the CTR suite).
        """
        import paddle

        if not self.scaler_enabled:
            return
        sparse = [name for name, layer in model.named_sublayers()
                  if isinstance(layer, paddle.nn.Embedding) and getattr(layer, "_sparse", False)]
        if sparse:
            raise ValueError(
                f"mode {self.mode.name}: GradScaler cannot unscale sparse gradients of {', '.join(sparse)}; "
                "set the workload's sparse = false, or scaler = { enable = false } (bf16)"
            )

    @property
    def scaler_enabled(self) -> bool:
        """Paddle turns the scaler off on devices without AMP and for bf16 with dynamic scaling."""
        return bool(self.scaler is not None and getattr(self.scaler, "_enable", False))

    def autocast(self) -> contextlib.AbstractContextManager:
        if not self.mode.amp:
            return _FP32
        import paddle

        return paddle.amp.auto_cast(
            enable=True, custom_white_list=self.mode.custom_white_list or None,
            custom_black_list=self.mode.custom_black_list or None, level=self.mode.amp_level,
            dtype=self.mode.dtype, use_promote=self.mode.use_promote,
        )

    def backward(self, loss: Any) -> None:
        """Backward of one micro-batch: scaled when a live scaler exists."""
        if self.live:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def step(self, optimizer: Any) -> StepOutcome:
        """One optimizer step: unscale + inf check + (maybe skipped) update + scale update."""
        if not self.live:
            optimizer.step()
            optimizer.clear_grad(set_to_zero=False)
            return NO_SCALER
        scale = self.loss_scale()
        self.scaler.step(optimizer)
        found = self._found_inf()
        self.scaler.update()
        optimizer.clear_grad(set_to_zero=False)
        return StepOutcome(loss_scale=scale, found_inf=found)

    def loss_scale(self) -> float | None:
        if not self.scaler_enabled:
            return None
        s = getattr(self.scaler, "_scale", None)
        if s is None:
            return None
        return float(s.item()) if hasattr(s, "item") else float(s)

    def _found_inf(self) -> bool:
        for attr in ("_found_inf", "_cache_found_inf"):
            v = getattr(self.scaler, attr, None)
            if v is None:
                continue
            return bool(v.item()) if hasattr(v, "item") else bool(v)
        return False

    def describe(self) -> dict[str, Any]:
        m = self.mode
        lists = default_lists(m.dtype, m.amp_level) if m.amp else {"white": [], "black": []}
        return {
            "requested": m.amp, "level": m.level, "dtype": m.dtype if m.amp else "float32",
            "use_promote": m.use_promote, "white_list": list(m.custom_white_list),
            "black_list": list(m.custom_black_list), "default_lists_hash": lists_hash(lists) if m.amp else "",
            "unknown_op_names": list(self.unknown_names),
            "scaler": m.scaler.model_dump() if m.amp else {}, "scaler_enabled": self.scaler_enabled,
        }


# ------------------------------------------------------------------ op dtype evidence


@contextlib.contextmanager
def collect_op_dtypes() -> Iterator[dict[str, dict[str, int]]]:
    """Counts forward op calls per dtype while the block runs (Paddle's operator stats).

    `paddle.amp.debugging.enable_operator_stats_collection` records calls by dtype;
    `core.get_low_precision_op_list()` returns {op: "fp16,bf16,fp32,other"}. The disable call
    prints a table, which is swallowed here (the counts go into the trial instead).
    """
    import paddle
    from paddle.base import core

    counts: dict[str, dict[str, int]] = {}
    paddle.amp.debugging.enable_operator_stats_collection()
    try:
        yield counts
    finally:
        raw = dict(core.get_low_precision_op_list())
        with contextlib.redirect_stdout(io.StringIO()):
            paddle.amp.debugging.disable_operator_stats_collection()
        counts.update(parse_op_stats(raw))


def parse_op_stats(raw: dict[str, str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for op, text in raw.items():
        parts = [int(x) for x in str(text).split(",")] + [0, 0, 0, 0]
        out[op] = {"float16": parts[0], "bfloat16": parts[1], "float32": parts[2], "other": parts[3]}
    return out


def low_precision_calls(op_calls: dict[str, dict[str, int]]) -> int:
    """Low-precision op calls, casts excluded: casting a float16 input (e.g. a label map a workload
    stored as fp16) runs a float16 `cast` even where AMP is a no-op, and proves nothing."""
    return sum(c.get("float16", 0) + c.get("bfloat16", 0) for op, c in op_calls.items() if op not in ("cast", "cast_"))
