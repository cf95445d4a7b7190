"""The patches the hook installs into Paddle right after the program's `import paddle`: every
optimizer's and GradScaler's step/minimize (`steps.stepping`), backward() (the loss), Layer.eval/train
(an evaluation inside the loop is not a training step), the DataLoader's iteration (data waits) and
the construction-time calls the AMP order check needs (Layer.__init__, decorate, DataParallel).

Time between a Layer.eval() and the next Layer.train() with no optimizer step between them is
subtracted from the step (a frozen submodule, `model.train(); bn.eval()` each iteration, steps while
in eval mode and is never subtracted).
"""

from __future__ import annotations

import functools
import sys
import time

from . import state as _hook
from . import steps
from .state import State

_CLOCK = time.perf_counter


def wrap_steps(st: State, cls) -> None:
    for name in ("step", "minimize"):
        fn = vars(cls).get(name)
        if callable(fn) and not getattr(fn, "_ampbench", False):
            st.patch(cls, name, steps.stepping(fn))


def patch_optimizers(st: State, paddle) -> None:
    """Every Optimizer class's own step()/minimize() (subclasses override them, and AdamW's __init__
    never calls Optimizer's), including classes defined later (__init_subclass__)."""
    base = paddle.optimizer.Optimizer
    todo, seen = [base], set()
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            wrap_steps(st, cls)
            todo.extend(cls.__subclasses__())

    def __init_subclass__(cls, **kwargs):
        super(base, cls).__init_subclass__(**kwargs)
        wrap_steps(st, cls)
    st.patch(base, "__init_subclass__", classmethod(__init_subclass__))


def patch_scalers(st: State, paddle) -> None:
    from paddle.amp import grad_scaler

    for cls in {grad_scaler.AmpScaler, grad_scaler.GradScaler}:
        for name in ("step", "minimize"):
            if name in vars(cls):
                st.patch(cls, name, steps.stepping(vars(cls)[name]))
        if "scale" in vars(cls):
            scale = vars(cls)["scale"]

            def scaled(self, var, _scale=scale):
                out = _scale(self, var)
                st = _hook.S
                if st is not None and out is not var:
                    st.scaler = self
                    st.scaled[id(out)] = var
                    st.scale_used = getattr(self, "_scale", None)   # _update() replaces it, never in place
                return out
            st.patch(cls, "scale", scaled)


def patch_tensor_and_layers(st: State, paddle) -> None:
    backward = paddle.Tensor.backward

    def patched_backward(self, *args, **kwargs):
        st = _hook.S
        if st is not None:   # kept as is (no detach, a Paddle call a step): it is read and dropped at this step's end
            st.losses.append(st.scaled.get(id(self), self) if st.scaled else self)
        return backward(self, *args, **kwargs)
    st.patch(paddle.Tensor, "backward", patched_backward)

    layer = paddle.nn.Layer
    to_eval, to_train = layer.eval, layer.train

    def eval_(self, *args, **kwargs):
        st = _hook.S
        if st is not None and st.eval_t0 is None:
            st.eval_t0 = time.perf_counter()
            if st.peaks is not None:
                st.peaks.pause()
        return to_eval(self, *args, **kwargs)

    def train_(self, *args, **kwargs):
        st = _hook.S
        if st is not None and st.eval_t0 is not None and (not args or args[0]) and kwargs.get("mode", True):
            now = time.perf_counter()
            st.eval_s += now - st.eval_t0
            st.evals.append([st.eval_t0, now])
            st.eval_t0 = None
            if st.peaks is not None:
                st.peaks.resume()
        return to_train(self, *args, **kwargs)
    st.patch(layer, "eval", eval_)
    st.patch(layer, "train", train_)


DATA_EVERY = 8   # steps of data waits per "data" line (issue 35)


class _TimedBatches:
    """A DataLoader's iterator whose next() is timed: the wait is the data wait of the step about to run
    (`st.step` counts finished steps), inside that step's time. Written every DATA_EVERY steps and when
    the loader is exhausted as one "data" line (a program stopped mid-epoch leaves its last few steps
    without a figure: unknown, never zero)."""

    def __init__(self, it, st: State):
        self._it, self._st = it, st
        self._waits: dict[int, float] = {}

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):   # anything else the program asks of Paddle's iterator
        return getattr(self._it, name)

    def __next__(self):
        t0, ended = _CLOCK(), True
        try:
            item = next(self._it)
            ended = False
            return item
        finally:   # an exhausted loader (an epoch's end) reports what it holds, the step under way too
            st, waits = self._st, self._waits
            step = st.step + 1
            waits[step] = waits.get(step, 0.0) + (_CLOCK() - t0)
            if ended or len(waits) > DATA_EVERY:
                done = {str(k): v for k, v in waits.items() if ended or k <= st.step}
                for k in done:
                    del waits[int(k)]
                st.emit(e="data", waits=done)


def patch_loader(st: State, paddle) -> None:
    """paddle.io.DataLoader's iteration timed (`_TimedBatches`): the data-wait share of each step (issue 35)."""
    cls = getattr(getattr(paddle, "io", None), "DataLoader", None)
    own = getattr(cls, "__iter__", None)
    if own is None:
        return

    def __iter__(self):
        it = own(self)
        return _TimedBatches(it, st) if _hook.S is st else it
    st.patch(cls, "__iter__", __iter__)


MAX_SHAPES = 2000   # Linear/conv layers the "shapes" event lists (its count says how many in all)


def patch_model_building(st: State, paddle) -> None:
    """Construction-time patches only, never on a step's path (issue 35): every paddle.nn.Layer built
    before the first step is remembered, weakly, for the shape audit at step 1 (`_audit_shapes`); and the
    order of paddle.amp.decorate (O2) and paddle.DataParallel is recorded. Paddle's AMP guide asks for
    decorate first; its check_models (python/paddle/amp/auto_cast.py) refuses a DataParallel model on a
    GPU, but not the model a DataParallel already wraps, so that order is only seen here."""
    layer = paddle.nn.Layer
    init = vars(layer)["__init__"]

    def layer_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if st.step == 0 and _hook.S is st:
            st.layers[id(self)] = self
    functools.update_wrapper(layer_init, init)
    st.patch(layer, "__init__", layer_init)
    dp = getattr(paddle, "DataParallel", None)
    if isinstance(dp, type) and "__init__" in vars(dp):
        dp_init = vars(dp)["__init__"]

        def data_parallel_init(self, layers, *args, **kwargs):
            st.wrapped.add(id(layers))
            st.emit(e="amp_order", call="data_parallel", decorated=id(layers) in st.decorated)
            return dp_init(self, layers, *args, **kwargs)
        functools.update_wrapper(data_parallel_init, dp_init)
        st.patch(dp, "__init__", data_parallel_init)
    module = sys.modules.get("paddle.amp.auto_cast")   # decorate() calls this module's amp_decorate
    own = getattr(module, "amp_decorate", None)
    if callable(own):
        def amp_decorate(models, *args, **kwargs):
            level = kwargs.get("level", args[1] if len(args) > 1 else "O1")
            if str(level) == "O2":
                many = models if isinstance(models, list) else [models]
                # a model decorated before it was wrapped and decorated again later (for its optimizer: the
                # injected O2 of a program that wraps first) had its parameters cast before the reducer was built
                after = any((isinstance(dp, type) and isinstance(m, dp))
                            or (id(m) in st.wrapped and id(m) not in st.decorated) for m in many)
                st.decorated.update(id(m) for m in many)
                st.emit(e="amp_order", call="decorate", level="O2", after_data_parallel=after,
                        dtype=str(kwargs.get("dtype", args[2] if len(args) > 2 else "float16")),
                        master_weight=_flag(kwargs.get("master_weight", args[3] if len(args) > 3 else None)),
                        master_grad=bool(kwargs.get("master_grad", args[5] if len(args) > 5 else False)))
            return own(models, *args, **kwargs)
        functools.update_wrapper(amp_decorate, own)
        st.patch(module, "amp_decorate", amp_decorate)


def _flag(v: object) -> bool | None:
    """decorate's master_weight as recorded: True, False or None (Paddle's default: master weights at O2)."""
    return None if v is None else bool(v)
