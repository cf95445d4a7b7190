"""Paddle's AMP entry points, emulated: `install(paddle)` makes a program's own `paddle.amp.auto_cast`,
`decorate` and `GradScaler` (and ampbench's, built on the same calls) run the emulation on any device.

- `amp_guard` (what `auto_cast` and `autocast` call): Paddle's own guard runs with enable=False (it checks
  the arguments, merges the custom lists, and sets the AMP dtype GradScaler reads, but casts nothing, on a
  GPU too), and the emulator takes Paddle's merged lists (`_update_list`) for the ops inside.
- `amp_decorate` at O2: Paddle's own choice of the layers that stay float32 (`set_excluded_layers`,
  `need_keep_fp32`: norms, excluded layers); their parameters are marked low precision instead of cast,
  and the optimizers' updates are wrapped (master weights or not, master_grad).  O1 returns its arguments,
  as Paddle's does.
- `AmpScaler.__init__` (GradScaler's too) runs Paddle's own code as on a GPU, so the scaler is enabled and
  its loss scaling is Paddle's: `check_finite_and_unscale` (its CPU kernel) and `_update` (the dynamic
  rule), with the program's own settings.  Paddle itself still turns dynamic scaling off for bfloat16 at
  the first `scale()`, as on a GPU.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from .counts import MODEL
from .engine import LOW, Emulator, _safe_name
from .formats import FORMATS
from .policy import Policy

INSTALLED = "_ampbench_emulator"   # the installed Emulator, on the paddle.amp module (one per process)


def install(paddle: Any, counting: bool = True) -> Emulator:
    """Patch this process's Paddle so every AMP call is emulated; a second call returns the first emulator."""
    done = getattr(paddle.amp, INSTALLED, None)
    if isinstance(done, Emulator):
        return done
    emu = Emulator(paddle, counting)
    emu.patch.install()
    _patch_layers(emu)
    _patch_views(emu)
    _patch_guard(emu)
    _patch_decorate(emu)
    _patch_scaler(emu)
    emu.patch.set(paddle.amp, INSTALLED, emu)
    return emu


def uninstall(paddle: Any) -> None:
    emu = getattr(paddle.amp, INSTALLED, None)
    if isinstance(emu, Emulator):
        emu.patch.undo()


def _patch_layers(emu: Emulator) -> None:
    """Layer calls name the layer an op runs in (its dotted name in the outermost model called)."""
    layer_cls = emu.paddle.nn.Layer
    call = layer_cls.__call__

    def __call__(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        emu.enter_layer(self)
        try:
            return call(self, *inputs, **kwargs)
        finally:
            emu.layers.pop()
    emu.patch.set(layer_cls, "__call__", __call__)


def _patch_views(emu: Emulator) -> None:
    """Tensor methods that return a new handle on the same values (not an op) keep its low-precision marker:
    `adaptive_avg_pool2d` calls `x._use_gpudnn(False)` before its pool2d, which must still see float16."""
    tensor = emu.paddle.Tensor
    astype = tensor.astype
    raw_cast = emu.patch.raw["cast"]

    def emulated_astype(self: Any, dtype: Any) -> Any:
        """Paddle's astype returns the tensor itself when it already has the dtype: a float32 tensor that
        stands for float16 must become a new, float32 one; a cast to the AMP dtype is emulated (engine.cast)."""
        if getattr(self, LOW, None) is not None and _is_float32(dtype, emu.paddle):
            return raw_cast(self, emu.fp32)
        return astype(self, dtype)
    emu.patch.set(tensor, "astype", emulated_astype)
    for name in ("_use_gpudnn", "detach"):
        method = getattr(tensor, name, None)
        if method is None:
            continue

        def keeping(self: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
            out = _method(self, *args, **kwargs)
            low = getattr(self, LOW, None)
            if low is not None and out is not self:
                setattr(out, LOW, low)
            return out
        emu.patch.set(tensor, name, keeping)


def _is_float32(dtype: Any, paddle: Any) -> bool:
    return dtype in ("float32", "fp32", paddle.float32) or str(dtype) in ("paddle.float32", "float32")


def _amp_module() -> Any:
    return sys.modules["paddle.amp.auto_cast"]


def _patch_guard(emu: Emulator) -> None:
    ac = _amp_module()
    guard = ac.amp_guard

    @contextlib.contextmanager
    def amp_guard(enable: bool = True, custom_white_list: Any = None, custom_black_list: Any = None,
                  level: str = "O1", dtype: Any = "float16", use_promote: bool = True) -> Any:
        level_name = str(level).upper()
        dtype_name = (getattr(dtype, "name", None) or str(dtype)).lower().removeprefix("paddle.")
        policy = None
        if enable and level_name != "O0":
            if dtype_name not in FORMATS:
                raise ValueError("If enable amp, dtype should be 'float16' or 'bfloat16'.")
            white, black = ac._update_list(custom_white_list, custom_black_list, level_name, dtype_name)
            policy = Policy(level_name, dtype_name, frozenset(white), frozenset(black), bool(use_promote))
        with guard(False, custom_white_list, custom_black_list, level, dtype_name, use_promote):
            emu.enter(policy)
            try:
                yield
            finally:
                emu.exit()
    amp_guard._ampbench_emulated = guard   # type: ignore[attr-defined]  # a marker on our wrapper
    for owner in (ac, emu.paddle.amp):
        if getattr(owner, "amp_guard", None) is guard:
            emu.patch.set(owner, "amp_guard", amp_guard)


def _patch_decorate(emu: Emulator) -> None:
    ac = _amp_module()
    original = ac.amp_decorate

    def amp_decorate(models: Any, optimizers: Any = None, level: str = "O1", dtype: str = "float16",
                     master_weight: bool | None = None, save_dtype: str | None = None, master_grad: bool = False,
                     excluded_layers: Any = None) -> Any:
        if level not in ("O1", "O2"):
            raise ValueError("level should be O1 or O2, O1 represent AMP train mode, O2 represent Pure fp16 train mode.")
        if dtype not in FORMATS:
            raise ValueError("dtype only support float16 or bfloat16.")
        if level == "O1":
            return models if optimizers is None else (models, optimizers)
        model_list = [models] if isinstance(models, emu.paddle.nn.Layer) else list(models)
        ac.check_models(model_list)
        opt_list = [] if optimizers is None else [optimizers] if not isinstance(optimizers, list) else optimizers
        ac.check_optimizers(opt_list)
        decorate(emu, model_list, opt_list, dtype, master_weight is not False, bool(master_grad), excluded_layers)
        if save_dtype is not None:
            for model in model_list:
                for layer in model.sublayers(include_self=True):
                    layer.register_state_dict_hook(ac.StateDictHook(save_dtype))
        return models if optimizers is None else (models, optimizers)
    amp_decorate._ampbench_emulated = original   # type: ignore[attr-defined]  # a marker on our wrapper
    for owner in (ac, emu.paddle.amp):
        if getattr(owner, "amp_decorate", None) is original:
            emu.patch.set(owner, "amp_decorate", amp_decorate)


def decorate(emu: Emulator, models: list[Any], optimizers: list[Any], dtype: str, master_weight: bool,
             master_grad: bool, excluded_layers: Any) -> None:
    """O2: the parameters Paddle's decorate would cast are marked low precision (and rounded once, as the
    cast stores them); each optimizer's update goes through the emulator."""
    ac = _amp_module()
    ac.set_excluded_layers(models, excluded_layers)
    for model in models:
        names = {id(sub): _safe_name(name) or MODEL for name, sub in model.named_sublayers(include_self=True)}
        for layer in model.sublayers(include_self=True):
            if ac.need_keep_fp32(layer, dtype):
                continue
            for p in layer._parameters.values():
                if p is not None and p.dtype == emu.fp32:
                    emu.mark_param(p, dtype, names.get(id(layer), MODEL))
            for b in layer._buffers.values():
                if b is not None and b.dtype == emu.fp32:
                    emu.store(b, dtype)
    emu.decorated, emu.master_weight, emu.master_grad = True, master_weight, master_grad
    for opt in optimizers:
        _wrap_update(emu, opt)


def _wrap_update(emu: Emulator, opt: Any) -> None:
    apply = opt._apply_optimize
    if getattr(apply, "_ampbench_emulated", False):
        return

    def _apply_optimize(*args: Any, **kwargs: Any) -> Any:
        before = emu.before_update()
        out = apply(*args, **kwargs)
        emu.after_update(before)
        return out
    _apply_optimize._ampbench_emulated = True   # type: ignore[attr-defined]  # a marker on our wrapper
    opt._apply_optimize = _apply_optimize


class _GpuPlace:
    """The expected place as AmpScaler.__init__ asks it: a GPU place, so Paddle enables its scaler."""

    def is_gpu_place(self) -> bool:
        return True

    def is_xpu_place(self) -> bool:
        return False

    def is_custom_place(self) -> bool:
        return False


class _Tracer:
    _expected_place = _GpuPlace()


def _patch_scaler(emu: Emulator) -> None:
    gs: Any = sys.modules["paddle.amp.grad_scaler"]
    cls = gs.AmpScaler
    init, unscale = vars(cls)["__init__"], vars(cls)["_unscale"]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        tracer = gs._dygraph_tracer
        gs._dygraph_tracer = _Tracer    # only Paddle's own place test reads it, in this call
        try:
            init(self, *args, **kwargs)
        finally:
            gs._dygraph_tracer = tracer

    def _unscale(self: Any, optimizer: Any) -> Any:
        emu.round_grads("scaled")
        out = unscale(self, optimizer)
        if getattr(self, "_enable", False):
            emu.round_grads("unscaled")
        return out
    emu.patch.set(cls, "__init__", __init__)
    emu.patch.set(cls, "_unscale", _unscale)
