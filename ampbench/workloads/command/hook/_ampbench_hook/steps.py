"""The step boundary: the end of the outermost Optimizer.step/minimize or GradScaler.step/minimize
call is one optimizer step, timed, recorded and maybe the program's last (`boundary`).

The step's own path is kept to a few microseconds (scripts/bench_command_overhead.py measures it):
on a ~1 ms CPU step every Python call there shows. With protocol.HOOK_STOP_AFTER_ENV = N > 0 the
program is ended cleanly (SystemExit(0), so `finally` blocks and atexit run) right after its N-th step.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from . import device, ops, peaks, wire
from . import state as _hook
from .state import State

MEMORY_EVERY_S = 1.0
_CLOCK = time.perf_counter   # one global load on the step's path instead of two lookups
_CPU = time.process_time     # the process's CPU seconds (all threads): a step's share of the processor

def _loss_value(losses: Any) -> float | None:
    """The step's loss when it is not one single-element tensor: the sum of what backward() ran on."""
    total, seen = 0.0, False
    for t in losses:
        try:
            total += wire.as_float(t._getitem_from_offset())
            seen = True
        except ValueError:    # more than one element (a loss backward() ran on without reducing it)
            try:
                total += float(t.sum().item())
                seen = True
            except (TypeError, ValueError, RuntimeError):
                pass
        except (TypeError, RuntimeError, AttributeError):
            try:
                total += float(t.item())
                seen = True
            except (TypeError, ValueError, RuntimeError):
                pass
    return total if seen else None


def _scaler_state(sc: Any, used: Any = None) -> tuple[float | None, bool]:
    if not getattr(sc, "_enable", False):
        return None, False
    try:
        scale: float | None = float(sc._scale if used is None else used)
    except (TypeError, ValueError, RuntimeError, AttributeError):
        scale = None
    found = getattr(sc, "_cache_found_inf", None)
    if found is None:
        found = getattr(sc, "_found_inf", False)
    try:
        return scale, bool(found)
    except (TypeError, ValueError, RuntimeError):
        return scale, False


def boundary(st: State) -> None:
    """One optimizer step ended: time it (after a device sync), record it, maybe stop the program.
    This runs once per step inside the program's loop, where each Python operation costs ~0.5 us (the
    model's work has evicted it from the caches): it reads the loss (one call on one tensor, kept raw),
    the process's CPU clock (one call: a syscall, 2.5 us on the loaded 2-vCPU VM here, 0.4% of a 0.7 ms step;
    each step's CPU time, the contention evidence), appends a
    tuple, and leaves everything else (arithmetic, conversion, JSON, the disk) to the flusher.
    Reading a tensor costs 5-40 us there (more than all the rest), so the loss is read only at steps
    1, 1 + k, 1 + 2k, ... (k = `loss_every`) and at the step the program is stopped after: fixed indices,
    so two runs of one program record their losses at the same steps and their curves line up step
    for step (the others are recorded as not seen, never as a value)."""
    if st.sync is not None:
        try:
            st.sync()
        except Exception as exc:   # never break the program: it runs on, timed without a device sync
            st.sync = None
            st.emit(e="error", where="synchronize", error=f"{type(exc).__name__}: {exc}")
    now = _CLOCK()
    step = st.step = st.step + 1
    if st.peaks is not None:
        st.peaks.at_step()
    if st.eval_t0 is not None:   # an optimizer step since eval(): a frozen submodule, not an evaluation
        st.eval_t0 = None
    losses = st.losses
    loss = None
    if step == st.loss_next:   # a fixed index: 1, 1 + k, 1 + 2k, ...
        st.loss_next = step + st.loss_every
        read = True
    else:
        read = step == st.stop_after
    if losses:
        if read:
            try:
                loss = losses[0]._getitem_from_offset() if len(losses) == 1 else _loss_value(losses)
            except Exception:   # not one element, or not a dense tensor: the slow path says which
                loss = _loss_value(losses)
        losses.clear()
    if st.scaled:
        st.scaled.clear()
    scale, found = _scaler_state(st.scaler, st.scale_used) if st.scaler is not None else (None, False)
    st.scale_used = None
    st.pending.append((step, now, st.t_prev, loss, scale, found, st.eval_s, st.evals or None, _CPU()))
    if st.evals:
        st.eval_s, st.evals = 0.0, []
    if step >= st.next_step or now >= st.memory_at:
        rare(st, step, now)
    st.t_prev = _CLOCK()


def rare(st: State, step: int, now: float) -> None:
    """The boundary's occasional work: the device named and the op window opened (first step), op
    stats off, the memory window opened (on a GPU once NVML samples it), the window's allocator peak
    reported (once a second, so a kill keeps a recent one), the program stopped after its last step."""
    if step == 1:
        device.name_device(st)
        ops.open_window(st)
        device.audit_shapes(st)
    if step == st.stats_steps + 1:
        ops.close_window(st)
    if step == max(st.warmup, 1):
        device.wait_for_sampling(st)   # on a GPU: NVML's first sample before the window opens
        st.peaks = peaks.Peaks.open(st)
    if now >= st.memory_at:
        st.memory_at = now + MEMORY_EVERY_S
        memory(st)
    if st.stop_after and step >= st.stop_after:
        finish("stopped", st)
        raise SystemExit(0)
    st.next_step = min([s for s in (st.stats_steps + 1, max(st.warmup, 1), st.stop_after) if s > step],
                       default=1 << 62)


def stepping(fn):
    """Wrap an optimizer/scaler step or minimize: the outermost call's end is one step boundary."""
    def wrapper(*args, **kwargs):
        st = _hook.S
        if st is None or st.depth:   # not recording, or inside an outer step (GradScaler.step calls Optimizer's)
            return fn(*args, **kwargs)
        st.depth = 1
        try:
            out = fn(*args, **kwargs) if not st.ops_open else ops.counted_apart(st, fn, args, kwargs)
        finally:
            st.depth = 0
        if st.emulator is not None:   # emulate = true: the emulator's step, for where it first overflowed
            st.emulator.end_step()
        boundary(st)
        return out
    functools.update_wrapper(wrapper, fn)
    wrapper._ampbench = True
    return wrapper


def memory(st: State) -> None:
    """Report the window's peak so far (nothing before the window opens)."""
    if st.peaks is not None:
        st.pending.append(st.peaks.event())


def finish(reason: str, st: State | None = None) -> None:
    st = st or _hook.S
    if st is None or os.getpid() != st.pid or st.ended:
        return
    st.ended = True
    if st.paddle is not None:
        ops.close_window(st)
        memory(st)
    if st.emulator is not None:
        try:
            from . import load_emulator

            st.emit(e="emulation", **load_emulator().record.event(st.emulator.record()))
        except Exception as exc:   # never break the program's exit: say why the record is missing
            st.emit(e="emulation", error=f"{type(exc).__name__}: {exc}")
    st.emit(e="end", reason=reason, steps=st.step)
    st.flush()
