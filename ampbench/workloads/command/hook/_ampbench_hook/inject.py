"""AMP applied by ampbench's start-up hook to a program that has no AMP switch (a mode's `amp = "inject"`).

Installed by the hook (boot.install) right after the program's `import paddle`,
only when protocol.HOOK_INJECT_ENV holds the mode's AMP settings (JSON, written by ampbench's
trial/command.py). Like the hook it imports nothing of ampbench, and it applies AMP only through
Paddle's own APIs, where a user would put them (Paddle's AMP guide, python/paddle/amp):

- the model(s) the optimizer trains are found when the optimizer is built (the end of the outermost
  `Optimizer.__init__`): the Layers built so far whose parameters the optimizer holds, the outermost
  of them (a paddle.DataParallel stands for the model it wraps, as in Paddle's check_models);
- O2: `paddle.amp.decorate(models, optimizer, level="O2", dtype, master_weight, master_grad,
  excluded_layers, save_dtype="float32")` right then, so checkpoints stay float32 as the program wrote them;
  a model that `paddle.DataParallel` wraps before its optimizer is built (Paddle's own DataParallel example
  does) is decorated as the wrapper is built, before Paddle's DataParallel.__init__ runs: its reducer fixes
  each gradient bucket's dtype from the parameters it is given (reducer.cc, EagerReducer::InitializeDenseGroups:
  `group.dtype_ = tensor.dtype()`) and concatenates the bucket's gradients as that dtype at the first
  backward (EagerGroup::ConcatTensors), so a cast after it would crash that backward. The optimizer, built
  later, is then decorated with the model already cast (decorate's casts are no-ops on it, Layer._transform)
  only for its master weights;
- each model's forward runs inside `paddle.amp.auto_cast(level, dtype, custom lists, use_promote)`
  (its `forward` replaced on the instance, so `model(x)` and a direct `model.forward(x)` both run under
  it), and its floating outputs leave it as float32, so a loss computed outside the forward runs in
  float32 as it would under auto_cast's black list;
- float16 (or scaler.enable = true): a `paddle.amp.GradScaler` with the mode's settings; the loss's
  `backward()` runs on `scaler.scale(loss)` and the optimizer's `step()` / `minimize()` become
  `scaler.step(optimizer); scaler.update()` / `scaler.minimize(optimizer, loss)` (dynamic scaling; a
  step whose gradients hold inf/nan is skipped by Paddle and recorded as found_inf by the hook).

A program that already applies AMP itself (auto_cast/amp_guard with enable=True, a GradScaler with
enable=True, decorate at O2) is refused: injecting on top of its own AMP would measure neither. The
hook then sends one "inject" event with `refused` and ends the program (exit 2); ampbench's trial
says that line. Paddle itself keeps AMP off on a device without it (CPU: amp_guard sets level O0 and
GradScaler disables itself), which ampbench's op evidence then reports as AMP inactive.
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

from . import protocol
from .device import held_layer_ids

ENV = protocol.HOOK_INJECT_ENV
REFUSED_EXIT = 2
# Paddle code that re-enters AMP on the program's behalf (recompute replays the forward under the AMP state
# it saved, python/paddle/distributed/fleet/recompute): not the program applying AMP of its own
_PADDLE_REENTRY = ("paddle.distributed", "paddle.incubate")


def _by_program() -> bool:
    """Whether the AMP call under way comes from the program (its code, or a Paddle API it asked for AMP,
    such as paddle.hapi's amp_configs), not from Paddle re-entering AMP itself: the first caller outside
    paddle.amp and this module decides."""
    f: Any = sys._getframe(2)   # walks to None past the outermost frame
    while f is not None and (f.f_globals.get("__name__", "").startswith("paddle.amp")
                             or f.f_globals.get("__name__") == __name__):
        f = f.f_back
    return f is None or not f.f_globals.get("__name__", "").startswith(_PADDLE_REENTRY)


class Injection:
    """The mode's AMP settings and what was applied (one per process)."""

    def __init__(self, paddle: Any, cfg: dict, patch: Callable[[Any, str, Any], None],
                 emit: Callable[..., None], end: Callable[[], None]):
        self.paddle, self.cfg, self.patch, self.emit, self.end = paddle, cfg, patch, emit, end
        self.ours = 0            # >0: inside our own call of Paddle's AMP API (not the program's)
        self.init_depth = 0      # nested Optimizer.__init__ calls (subclasses call their base's)
        self.layers: Any = weakref.WeakValueDictionary()   # every Layer built so far, by id
        self.hooked: set[int] = set()   # ids of the models whose forward runs under auto_cast
        self.scaler: Any = None
        self.inside_step = False
        self.early: set[int] = set()   # ids of the models decorated (O2) as a DataParallel wrapped them

    # ------------------------------------------------------------ the program's own AMP is refused

    def refuse(self, what: str) -> None:
        self.emit(e="inject", refused=(f"the program already applies AMP itself ({what}): amp = \"inject\" would "
                                       "apply it twice; give this mode the program's own AMP switch in `args` "
                                       "instead of amp = \"inject\""))
        self.end()
        raise SystemExit(REFUSED_EXIT)

    def watch_program_amp(self) -> None:
        """Paddle's AMP entry points, wrapped to tell the program's own calls from ours."""
        module = sys.modules.get("paddle.amp.auto_cast")
        guard = getattr(module, "amp_guard", None)
        if callable(guard):
            def amp_guard(enable: Any = True, *args: Any, **kwargs: Any) -> Any:
                if not self.ours and enable and _by_program():
                    self.refuse("it calls paddle.amp.auto_cast/amp_guard with enable=True")
                return guard(enable, *args, **kwargs)
            self.patch(module, "amp_guard", amp_guard)
            if getattr(self.paddle.amp, "amp_guard", None) is guard:
                self.patch(self.paddle.amp, "amp_guard", amp_guard)
        decorate = getattr(module, "amp_decorate", None)
        if callable(decorate):
            def amp_decorate(models: Any, *args: Any, **kwargs: Any) -> Any:
                level = kwargs.get("level", args[1] if len(args) > 1 else "O1")
                if not self.ours and str(level) == "O2" and _by_program():
                    self.refuse("it calls paddle.amp.decorate(level='O2')")
                return decorate(models, *args, **kwargs)
            self.patch(module, "amp_decorate", amp_decorate)
        scaler_cls = self.paddle.amp.grad_scaler.AmpScaler
        init = vars(scaler_cls)["__init__"]

        def scaler_init(this: Any, enable: Any = True, *args: Any, **kwargs: Any) -> None:
            if not self.ours and enable and _by_program():
                self.refuse("it builds a paddle.amp.GradScaler")
            init(this, enable, *args, **kwargs)
        self.patch(scaler_cls, "__init__", scaler_init)

    # ------------------------------------------------------------ finding what the optimizer trains

    def watch_building(self) -> None:
        """Layers are remembered (weakly) as they are built; every Optimizer class's __init__ (subclasses
        such as AdamW do not call Optimizer's) adopts the optimizer when its outermost call ends."""
        layer = self.paddle.nn.Layer
        layer_init = vars(layer)["__init__"]

        def remember(this: Any, *args: Any, **kwargs: Any) -> None:
            layer_init(this, *args, **kwargs)
            self.layers[id(this)] = this
        self.patch(layer, "__init__", remember)
        base = self.paddle.optimizer.Optimizer
        todo, seen = [base], set()
        while todo:
            cls = todo.pop()
            if cls not in seen:
                seen.add(cls)
                self.wrap_init(cls)
                todo.extend(cls.__subclasses__())
        earlier = vars(base).get("__init_subclass__")

        def __init_subclass__(cls: Any, **kwargs: Any) -> None:
            if isinstance(earlier, classmethod):
                earlier.__func__(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            self.wrap_init(cls)
        self.patch(base, "__init_subclass__", classmethod(__init_subclass__))

    def watch_data_parallel(self) -> None:
        """O2: a model is decorated before paddle.DataParallel's own __init__ builds its reducer over it."""
        dp = getattr(self.paddle, "DataParallel", None)
        if self.cfg.get("level") != "O2" or not isinstance(dp, type) or "__init__" not in vars(dp):
            return
        dp_init = vars(dp)["__init__"]

        def data_parallel_init(this: Any, layers: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(layers, self.paddle.nn.Layer) and not isinstance(layers, dp) and id(layers) not in self.hooked \
                    and id(layers) not in self.early:
                self.decorate_early(layers)
            return dp_init(this, layers, *args, **kwargs)
        self.patch(dp, "__init__", data_parallel_init)

    def decorate_early(self, model: Any) -> None:
        """decorate(model) with no optimizer yet (Paddle's decorate takes `optimizers=None`); a failure ends the
        program in one line (exit 2) before the reducer is built, never a crash at its first backward."""
        cfg = self.cfg
        self.ours += 1
        try:
            self.paddle.amp.decorate(models=model, level="O2", dtype=cfg["dtype"], save_dtype="float32",
                                     master_grad=bool(cfg.get("master_grad")),
                                     excluded_layers=self.excluded(cfg.get("excluded_layers") or []))
        except Exception as exc:
            self.emit(e="inject", refused=(f"paddle.amp.decorate (O2) of the model paddle.DataParallel wraps failed "
                                           f"({type(exc).__name__}: {exc})"[:400]))
            self.end()
            raise SystemExit(REFUSED_EXIT) from None
        finally:
            self.ours -= 1
        self.early.add(id(model))

    def wrap_init(self, cls: Any) -> None:
        own = vars(cls).get("__init__")
        if not callable(own) or getattr(own, "_ampbench_inject", False):
            return

        def init(this: Any, *args: Any, **kwargs: Any) -> None:
            self.init_depth += 1
            try:
                own(this, *args, **kwargs)
            finally:
                self.init_depth -= 1
            if not self.init_depth:
                self.adopt(this)
        init._ampbench_inject = True  # type: ignore[attr-defined]  # a marker on our wrapper
        self.patch(cls, "__init__", init)

    def trained_models(self, opt: Any) -> list[Any]:
        """The outermost Layers built so far that hold parameters this optimizer updates."""
        params = getattr(opt, "_parameter_list", None) or []
        ids = {id(p) for group in params for p in (group.get("params", []) if isinstance(group, dict) else [group])}
        dp = getattr(self.paddle, "DataParallel", None)
        built = [x for x in list(self.layers.values()) if not (isinstance(dp, type) and isinstance(x, dp))]
        inner = held_layer_ids(built)
        return [x for x in built if id(x) not in inner and any(id(p) in ids for p in x.parameters())]

    def adopt(self, opt: Any) -> None:
        """A new optimizer: AMP around the models it trains (decorate at O2, auto_cast, the scaler)."""
        trained = self.trained_models(opt)
        models = [m for m in trained if id(m) not in self.hooked]
        cfg = self.cfg
        info: dict[str, Any] = {"e": "inject", "optimizer": type(opt).__name__, "level": cfg["level"],
                                "dtype": cfg["dtype"], "models": [type(m).__name__ for m in models][:20],
                                "decorated": False, "scaler": False}
        if not trained:
            info["error"] = "no model built before the optimizer holds its parameters: nothing to apply AMP to"
            self.emit(**info)
            return
        if not models:   # an optimizer wrapping another's parameters (LookAhead): already under AMP
            return
        self.ours += 1
        try:
            if cfg["level"] == "O2":
                self.decorate_with(opt, [m for m in models if id(m) not in self.early], fresh=True)
                self.decorate_with(opt, [m for m in models if id(m) in self.early], fresh=False)
                info["decorated"] = True
                info["before_data_parallel"] = any(id(m) in self.early for m in models)
            if cfg.get("scaler") is not None:
                if self.scaler is None:
                    self.scaler = self.paddle.amp.GradScaler(enable=True, **cfg["scaler"])
                self.route_through_scaler(opt)
                info["scaler"] = True
                info["scaler_enabled"] = bool(getattr(self.scaler, "_enable", False))
        finally:
            self.ours -= 1
        for m in models:
            self.hooked.add(id(m))
            self.wrap_forward(m)
        self.emit(**info)

    def decorate_with(self, opt: Any, models: list[Any], fresh: bool) -> None:
        """decorate(models, opt) at O2. A model decorated as its DataParallel was built (`fresh` False) is
        decorated again only for the optimizer's master weights: its parameters already have the low dtype (the
        casts are no-ops), its save hook and master-grad list are not added twice."""
        if not models:
            return
        cfg = self.cfg
        self.paddle.amp.decorate(models=models, optimizers=opt, level="O2", dtype=cfg["dtype"],
                                 master_weight=cfg.get("master_weight"), save_dtype="float32" if fresh else None,
                                 master_grad=bool(cfg.get("master_grad")) and fresh,
                                 excluded_layers=self.excluded(cfg.get("excluded_layers") or []))

    def excluded(self, names: list[str]) -> Any:
        return [getattr(self.paddle.nn, n) for n in names if isinstance(getattr(self.paddle.nn, n, None), type)] or None

    # ------------------------------------------------------------ auto_cast around the forward

    def wrap_forward(self, model: Any) -> None:
        """The model's own forward, as an instance attribute: Layer.__call__ calls `self.forward`, and so
        does a program that calls `model.forward(...)` directly (PaddleRec's train_forward does, so a
        forward hook would never run there)."""
        inner, cfg, paddle = model.forward, self.cfg, self.paddle
        white, black = cfg.get("custom_white_list") or None, cfg.get("custom_black_list") or None

        def forward(*args: Any, **kwargs: Any) -> Any:
            self.ours += 1
            try:
                ctx = paddle.amp.auto_cast(enable=True, custom_white_list=white, custom_black_list=black,
                                           level=cfg["level"], dtype=cfg["dtype"],
                                           use_promote=bool(cfg.get("use_promote", True)))
            finally:
                self.ours -= 1
            with ctx:
                out = inner(*args, **kwargs)
            return self.as_float32(out)
        object.__setattr__(model, "forward", forward)

    def as_float32(self, out: Any) -> Any:
        """The forward's float16/bfloat16 tensors as float32 (tuples, lists and dicts of them too)."""
        paddle = self.paddle
        if isinstance(out, paddle.Tensor):
            return out.astype("float32") if out.dtype in (paddle.float16, paddle.bfloat16) else out
        if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
            return type(out)(self.as_float32(x) for x in out)
        if isinstance(out, dict):
            return type(out)({k: self.as_float32(v) for k, v in out.items()}) if type(out) is dict else out
        return out

    # ------------------------------------------------------------ the loss through the GradScaler

    def route_through_scaler(self, opt: Any) -> None:
        """This optimizer's step()/minimize() through the scaler (instance attributes, so Paddle's own
        class methods, the hook's step boundary included, still run inside it); every backward() scaled."""
        cls, scaler = type(opt), self.scaler

        def step(*args: Any, **kwargs: Any) -> Any:
            if self.inside_step:
                return cls.step(opt, *args, **kwargs)
            self.inside_step = True
            try:
                scaler.step(opt)
                scaler.update()
            finally:
                self.inside_step = False
            return None

        def minimize(loss: Any, *args: Any, **kwargs: Any) -> Any:
            if self.inside_step:
                return cls.minimize(opt, loss, *args, **kwargs)
            self.inside_step = True
            try:
                return scaler.minimize(opt, loss, *args, **kwargs)
            finally:
                self.inside_step = False
        opt.step, opt.minimize = step, minimize
        if not any(getattr(fn, "_ampbench_scaled", False) for fn in [vars(self.paddle.Tensor).get("backward")]):
            backward = self.paddle.Tensor.backward

            def scaled_backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
                return backward(scaler.scale(tensor), *args, **kwargs)
            scaled_backward._ampbench_scaled = True  # type: ignore[attr-defined]  # a marker on our wrapper
            self.patch(self.paddle.Tensor, "backward", scaled_backward)


def install(paddle: Any, patch: Callable[[Any, str, Any], None], emit: Callable[..., None],
            end: Callable[[], None]) -> Injection | None:
    """From the hook's start-up, once `import paddle` finished: nothing unless the mode asks for it.
    `patch(owner, name, new)` is the hook's own (so its overhead benchmark can undo ours too), `emit` queues
    an event, `end` flushes before a refusal ends the program."""
    raw = os.environ.get(ENV)
    if not raw:
        return None
    inj = Injection(paddle, json.loads(raw), patch, emit, end)
    inj.watch_program_amp()
    inj.watch_building()
    inj.watch_data_parallel()
    return inj
