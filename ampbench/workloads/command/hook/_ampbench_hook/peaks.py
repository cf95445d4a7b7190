"""The allocator peak of the measured window (the CUDA allocator on GPU, the host allocator on CPU)."""

from __future__ import annotations

from typing import Any

from . import state as _hook
from .state import State

# Where a program resets the allocator's peaks: every Python entry point Paddle 3.3.1 has (paddle.device.cuda's
# and paddle.device's reset_max_memory_*; paddle.cuda's and paddle.device.reset_peak_memory_stats call
# paddle.device's at call time) ends in these two core functions (paddle/device/cuda/__init__.py:407,444).
RESETS = (("device.cuda", "reset_max_memory_allocated"), ("device.cuda", "reset_max_memory_reserved"),
          ("device", "reset_max_memory_allocated"), ("device", "reset_max_memory_reserved"),
          ("base.core", "device_memory_stat_reset_peak_value"), ("base.core", "host_memory_stat_reset_peak_value"))


def watch_resets(st: State, paddle: Any) -> None:
    """A program that resets the peaks for its own logs (trainers print the peak since their last log) would
    leave the window only the peak since its last reset (issue 58.4): each reset first folds the peak so far
    into the window's (`Peaks.before_reset`). The hook's own resets (the window's opening, after an evaluation)
    go through too and are told apart by `Peaks.resetting`."""
    for where, name in RESETS:
        owner: Any = paddle
        for part in where.split("."):
            owner = getattr(owner, part, None)
        own = getattr(owner, name, None)
        if owner is None or not callable(own):
            continue

        def reset(*args: Any, _own: Any = own, **kwargs: Any) -> Any:
            live = _hook.S
            if live is st and st.peaks is not None:
                st.peaks.before_reset()
            return _own(*args, **kwargs)
        st.patch(owner, name, reset)


class Peaks:
    """The measured window's allocator peak, as of the last measured step (docs/command.md): read at
    every step's end (one or two C++ calls; the window's own memory, not the program's lifetime) and before
    any reset of the program's own (`watch_resets`), the largest reading kept, folded when an evaluation
    starts (`Layer.eval()`) and reset when training resumes (`Layer.train()`), so an evaluation's memory,
    and whatever runs after the last step (a final evaluation, saving), is not in it: the built-in loop's
    pause/resume around evaluations.
    On a GPU the CUDA allocator's allocated and reserved peaks of the device the program trains on; on
    CPU the host allocator's. A Paddle without the reset API (2.x) gets null with the reason, never
    the process-lifetime peak."""

    def __init__(self, source: str, read: Any, reset: Any, error: str = "") -> None:
        self.source, self.read, self.reset, self.error = source, read, reset, error
        self.folded: tuple[int, ...] = ()
        self.last: tuple[int, ...] = ()
        self.in_eval = False
        self.resetting = False   # inside the hook's own reset (not the program's)
        self.evals = 0   # evaluations inside the window: what they left cached stays in the reserved peak

    @classmethod
    def open(cls, st: State) -> Peaks:
        """The window opens at the end of the last warm-up step: reset the peaks there."""
        paddle = st.paddle
        try:
            if st.ordinal is not None:
                cuda, dev = paddle.device.cuda, st.ordinal
                if not (hasattr(cuda, "reset_max_memory_allocated") and hasattr(cuda, "reset_max_memory_reserved")):
                    return cls("cuda", None, None, (
                        f"paddle {paddle.__version__} has no paddle.device.cuda.reset_max_memory_allocated/reserved "
                        "(Paddle >= 3.0): the window's allocator peaks are not measured (the process-lifetime "
                        "peak would include loading and any evaluation)"))
                peaks = cls("cuda", lambda: (int(cuda.max_memory_allocated(dev)), int(cuda.max_memory_reserved(dev))),
                            lambda: (cuda.reset_max_memory_allocated(dev), cuda.reset_max_memory_reserved(dev)))
            else:
                core = paddle.base.core
                peaks = cls("host", lambda: (int(core.host_memory_stat_peak_value("Allocated", 0)),),
                            lambda: core.host_memory_stat_reset_peak_value("Allocated", 0))
            peaks.own_reset()
        except Exception as exc:
            return cls("none", None, None, f"{type(exc).__name__}: {exc}")
        return peaks

    def own_reset(self) -> None:
        self.resetting = True
        try:
            self.reset()
        finally:
            self.resetting = False

    def at_step(self) -> None:
        """The peak so far, kept as the largest reading since the window (re)opened."""
        if self.read is not None:
            try:
                got = self.read()
            except Exception as exc:
                self.read, self.error = None, f"{type(exc).__name__}: {exc}"
                return
            self.last = tuple(max(a, b) for a, b in zip(self.last, got)) if self.last else got

    def before_reset(self) -> None:
        """The program resets the allocator's peaks: the peak until then is kept (not during an evaluation,
        whose memory is not the window's, nor during the hook's own reset)."""
        if not self.resetting and not self.in_eval:
            self.at_step()

    def pause(self) -> None:
        """Layer.eval(): keep the training peak as of the last step."""
        if not self.in_eval:
            self.in_eval = True
            self.folded = tuple(max(a, b) for a, b in zip(self.folded or self.last, self.last or self.folded))

    def resume(self) -> None:
        """Layer.train() after an evaluation: its peak is dropped."""
        if self.in_eval and self.reset is not None:
            self.in_eval, self.last, self.evals = False, (), self.evals + 1
            try:
                self.own_reset()
            except Exception as exc:
                self.read, self.reset, self.error = None, None, f"{type(exc).__name__}: {exc}"

    def event(self) -> dict:
        got = tuple(max(a, b) for a, b in zip(self.folded or self.last, self.last or self.folded))
        ev: dict = {"e": "memory", "source": self.source, "peak_allocated": None, "peak_reserved": None,
                    "evaluations": self.evals}
        if self.error:
            ev["error"] = self.error
        elif got:
            ev["peak_allocated"] = got[0]
            ev["peak_reserved"] = got[1] if len(got) > 1 else None
        return ev
