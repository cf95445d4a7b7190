"""A precision mode -> Paddle AMP calls (auto_cast, decorate, GradScaler), plus op-name checks
and the op-dtype evidence that says whether AMP was really active.

Paddle silently ignores unknown names in custom op lists and silently runs everything in FP32
where the device has no low-precision kernels; this module makes both visible.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ampbench.config import ModeConfig
from ampbench.trackers.opstats import collect_op_dtypes, low_precision_calls, parse_op_stats


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


def effective_lists(dtype: str, level: str, custom_white: list[str], custom_black: list[str]) -> dict[str, list[str]]:
    """The white/black lists auto_cast really applies: Paddle's defaults with the custom lists merged in, by
    Paddle's own rule (`amp/auto_cast.py _update_list`: a custom white op leaves the black list and the
    reverse); Paddle without that function: the same merge over `default_lists`."""
    try:
        import importlib

        # the module (paddle.amp's `auto_cast` attribute is the function of that name); Any: Paddle types the
        # level and dtype as Literals, ours are the validated strings of the mode
        merge: Any = importlib.import_module("paddle.amp.auto_cast")._update_list
        white, black = merge(list(custom_white), list(custom_black), level, dtype)
    except ImportError:   # no Paddle in this interpreter (a command trial's parent): nothing to merge with
        return {"white": sorted(custom_white), "black": sorted(custom_black)}
    except (AttributeError, KeyError, TypeError):
        d = default_lists(dtype, level)
        white = (set(d["white"]) - set(custom_black)) | set(custom_white)
        black = (set(d["black"]) - set(custom_white)) | set(custom_black)
    return {"white": sorted(white), "black": sorted(black)}


def lists_hash(lists: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(lists, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class StepOutcome:
    """What one optimizer step tells about the scaler (read after the step's clock stopped)."""

    loss_scale: float | None
    found_inf: bool


NO_SCALER = StepOutcome(loss_scale=None, found_inf=False)  # shared, never mutated
_FP32 = contextlib.nullcontext()                           # reusable: no per-step allocation


def _host(v: Any, kind: type) -> Any:
    """A device scalar (or a plain value) as a Python value: the one host read, after the clock."""
    if v is None:
        return None
    return kind(v.item()) if hasattr(v, "item") else kind(v)


def wants_scaler(mode: ModeConfig) -> bool:
    """A GradScaler is built for float16 AMP (unless `scaler.enable = false`) and for bfloat16 only
    when the mode asks for one (`scaler = { enable = true, ... }`): bf16 has FP32's exponent
    range, and Paddle turns dynamic scaling off for it at the first `scale()` anyway."""
    return mode.scaler_wanted


@dataclass
class Precision:
    """Applies one mode to a model/optimizer and runs the scaled backward/step.

    No host read happens inside a step: `step()` returns the scaler's device tensors (the scale it
    unscaled with, the found-inf flag) and `outcome()` reads them after the step's clock stopped.
    `GradScaler.update()` replaces `_scale` by a new tensor (never writes it in place), so the
    handle still holds this step's scale."""

    mode: ModeConfig
    scaler: Any = None
    unknown_names: list[str] = field(default_factory=list)
    live: bool = False   # scaler_enabled, fixed after prepare() and refreshed after step 1
    emu: Any = None      # the emulator (trial/emulate) of an `emulate = true` mode, installed by prepare()

    @classmethod
    def build(cls, mode: ModeConfig) -> Precision:
        p = cls(mode=mode)
        if mode.amp:
            p.unknown_names = unknown_op_names(mode.custom_white_list + mode.custom_black_list)
        return p

    def prepare(self, model: Any, optimizer: Any) -> tuple[Any, Any]:
        """O2 casts parameters to low precision and keeps FP32 master weights (paddle.amp.decorate);
        `excluded_layers` keep theirs FP32, `master_grad` gives FP32 weight gradients."""
        import paddle

        if self.mode.amp and self.mode.emulate:   # before decorate and GradScaler: both then emulate
            from ampbench.trial.emulate import install

            self.emu = install(paddle)
        if self.mode.amp and self.mode.level == "O2":
            unknown = [n for n in self.mode.excluded_layers if not isinstance(getattr(paddle.nn, n, None), type)]
            if unknown:
                raise ValueError(f"mode {self.mode.name}: excluded_layers {unknown} are not paddle.nn layer classes")
            excluded = [getattr(paddle.nn, n) for n in self.mode.excluded_layers] or None
            model, optimizer = paddle.amp.decorate(
                models=model, optimizers=optimizer, level="O2", dtype=self.mode.dtype,
                master_weight=self.mode.master_weight, master_grad=self.mode.master_grad, excluded_layers=excluded,
            )
        if wants_scaler(self.mode):
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

    def close(self) -> None:
        """Take the emulator's patches out of this process's Paddle (the emulation record was read by then)."""
        if self.emu is not None:
            import paddle

            from ampbench.trial.emulate import uninstall

            uninstall(paddle)
            self.emu = None

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
                "set the workload's sparse = false, or scaler = { enable = false }"
            )

    @property
    def scaler_enabled(self) -> bool:
        """Paddle turns the scaler off on devices without AMP and, at the first `scale()`, whenever
        the global AMP dtype is not float16 with dynamic scaling."""
        return bool(self.scaler is not None and getattr(self.scaler, "_enable", False))

    def refresh(self) -> bool:
        """After the first step: follow Paddle's own decision (the scaler may have turned itself off)."""
        self.live = self.scaler_enabled
        return self.live

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

    def step(self, optimizer: Any) -> Any:
        """One optimizer step: unscale + inf check + (maybe skipped) update + scale update.

        Returns None without a live scaler, else (scale, found_inf) as device values: nothing is
        read to the host here."""
        handle = None
        if not self.live:
            optimizer.step()
        else:
            sc = self.scaler
            scale = sc._scale
            sc.step(optimizer)
            found = sc._cache_found_inf if getattr(sc, "_cache_found_inf", None) is not None else sc._found_inf
            sc.update()
            handle = scale, found
        optimizer.clear_grad(set_to_zero=False)
        if self.emu is not None:
            self.emu.end_step()
        return handle

    @staticmethod
    def outcome(handle: Any) -> StepOutcome:
        """The step's loss scale and overflow flag as Python values (after the clock stopped)."""
        if handle is None:
            return NO_SCALER
        scale, found = handle
        return StepOutcome(loss_scale=_host(scale, float), found_inf=bool(_host(found, bool)))

    def describe(self) -> dict[str, Any]:
        m = self.mode
        lists = default_lists(m.dtype, m.amp_level) if m.amp else {"white": [], "black": []}
        eff = effective_lists(m.dtype, m.amp_level, list(m.custom_white_list), list(m.custom_black_list)) \
            if m.amp else {"white": [], "black": []}
        return {
            "requested": m.amp, "level": m.level, "dtype": m.dtype if m.amp else "float32",
            "use_promote": m.use_promote, "white_list": list(m.custom_white_list),
            "black_list": list(m.custom_black_list), "default_lists_hash": lists_hash(lists) if m.amp else "",
            "effective_white_list": eff["white"], "effective_black_list": eff["black"],
            "unknown_op_names": list(self.unknown_names),
            "scaler": m.scaler.model_dump() if m.amp else {}, "scaler_enabled": self.scaler_enabled,
            "scaler_built": self.scaler is not None, "excluded_layers": list(m.excluded_layers),
            "master_grad": bool(m.master_grad), "emulated": bool(m.amp and m.emulate),
        }


# The op dtype evidence (collect_op_dtypes, parse_op_stats, low_precision_calls) lives with the
# other device evidence in trackers/opstats.py; re-exported here for the worker and tests.
__all__ = ["NO_SCALER", "Precision", "StepOutcome", "collect_op_dtypes", "low_precision_calls", "parse_op_stats",
           "wants_scaler"]
