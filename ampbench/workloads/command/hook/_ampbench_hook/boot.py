"""The hook's start: connect to the worker (`activate`), then install the patches right after the
program's own `import paddle` has finished (`install`, through `_PaddleFinder`)."""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import time

from . import ampcalls, device, inject, patches, peaks, protocol, saves, steps
from . import state as _hook


def install(paddle) -> None:
    """Called once, right after the program's `import paddle` finished."""
    st = _hook.S
    if st is None or st.paddle is not None:
        return
    st.paddle = paddle
    patches.patch_optimizers(st, paddle)
    patches.patch_scalers(st, paddle)
    patches.patch_tensor_and_layers(st, paddle)
    patches.patch_loader(st, paddle)
    patches.patch_model_building(st, paddle)
    ampcalls.install(st, paddle)   # what the AMP calls made (the program's, or the injected ones) used
    saves.install(paddle, st)   # paddle.save inside a step is left out as an evaluation is
    peaks.watch_resets(st, paddle)   # the program's own peak resets never shrink the window's peak
    if os.environ.get(protocol.HOOK_EMULATE_ENV):   # emulate = true: the program's AMP (or inject's) emulated
        emulate(st, paddle)
    if os.environ.get(protocol.HOOK_INJECT_ENV):   # a mode's amp = "inject": AMP applied by the hook
        inject.install(paddle, st.patch, st.emit, lambda: steps.finish("refused", st))
    try:
        paddle.amp.debugging.enable_operator_stats_collection()
        st.stats_on = True
    except Exception as exc:
        st.emit(e="ops", calls={}, error=f"{type(exc).__name__}: {exc}")
    st.emit(e="start", pid=os.getpid(), rank=_env_int("PADDLE_TRAINER_ID", 0), world=_env_int("PADDLE_TRAINERS_NUM", 1),
            argv=sys.argv[:20], **device.facts(paddle))
    st.flush()
    st.start_flusher()
    st.t_prev = time.perf_counter()


def emulate(st, paddle) -> None:
    """Install ampbench's emulated AMP (trial/emulate) before the program's own AMP calls; a failure is
    reported and leaves the program's AMP as Paddle's (the trial then reads inactive, never emulated)."""
    from . import load_emulator

    try:
        st.emulator = load_emulator().install(paddle)
    except Exception as exc:
        st.emit(e="emulation", error=f"{type(exc).__name__}: {exc}")


def _env_int(name: str, default: int) -> int:
    """A launcher's variable as an integer (the default when it is not one: never break the program)."""
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


class _PaddleFinder:
    """A meta-path finder that lets the real finder load `paddle`, then installs the patches."""

    def find_spec(self, name, path=None, target=None):
        if name != "paddle":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            try:
                install(module)
            except Exception as exc:  # never break the user's program: report and run unmeasured
                if _hook.S is not None:
                    _hook.S.emit(e="error", where="install", error=f"{type(exc).__name__}: {exc}")
                    _hook.S.flush()
        loader.exec_module = exec_and_patch
        return spec


def activate() -> None:
    """Nothing unless the worker's channel is named in the environment and accepts this process."""
    if _hook.S is not None:
        return
    sock = _hook.connect()
    if sock is None:
        return
    _hook.S = _hook.State(sock)
    if "paddle" in sys.modules:
        install(sys.modules["paddle"])
    else:
        sys.meta_path.insert(0, _PaddleFinder())
    atexit.register(steps.finish, "exit")
