"""The allocator peak of the measured window (the CUDA allocator on GPU, the host allocator on CPU)."""

from __future__ import annotations

from typing import Any

from .state import State


class Peaks:
    """The measured window's allocator peak, as of the last measured step (docs/command.md): read at
    every step's end (one or two C++ calls; the window's own memory, not the program's lifetime),
    folded when an evaluation starts (`Layer.eval()`) and reset when training resumes
    (`Layer.train()`), so an evaluation's memory, and whatever runs after the last step (a final
    evaluation, saving), is not in it: the built-in loop's pause/resume around evaluations.
    On a GPU the CUDA allocator's allocated and reserved peaks of the device the program trains on; on
    CPU the host allocator's. A Paddle without the reset API (2.x) gets null with the reason, never
    the process-lifetime peak."""

    def __init__(self, source: str, read: Any, reset: Any, error: str = "") -> None:
        self.source, self.read, self.reset, self.error = source, read, reset, error
        self.folded: tuple[int, ...] = ()
        self.last: tuple[int, ...] = ()
        self.in_eval = False
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
            peaks.reset()
        except Exception as exc:
            return cls("none", None, None, f"{type(exc).__name__}: {exc}")
        return peaks

    def at_step(self) -> None:
        if self.read is not None:
            try:
                self.last = self.read()
            except Exception as exc:
                self.read, self.error = None, f"{type(exc).__name__}: {exc}"

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
                self.reset()
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
