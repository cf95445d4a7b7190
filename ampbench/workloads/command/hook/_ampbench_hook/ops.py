"""Op dtype counts from Paddle's operator stats over protocol.HOOK_STATS_STEPS_ENV training steps from
the end of the first one (never model building or step 1's lazy optimizer state: `open_window`), with
the ops run inside the optimizer's step (optimizer, regularizer such as L2Decay's `scale`, clipping)
counted apart (`counted_apart`)."""

from __future__ import annotations

from typing import Any

from .state import State


def counts(st: State) -> dict[str, list[int]]:
    """Paddle's cumulative op counts, {op: [fp16, bf16, fp32, other]}."""
    raw = st.paddle.base.core.get_low_precision_op_list()
    return {str(k): [int(x) for x in str(v).split(",")[:4]] for k, v in raw.items()}


def open_window(st: State) -> None:
    """The end of step 1 opens the op window: the counts so far (model building's initialisers, step 1's
    lazily created optimizer state) are cleared, so the table shows training steps only."""
    if not st.stats_on:
        return
    try:
        st.paddle.base.core.clear_low_precision_op_list()
        st.ops_open = True
    except Exception as exc:
        st.emit(e="error", where="ops_open", error=f"{type(exc).__name__}: {exc}")


def counted_apart(st: State, fn: Any, args: Any, kwargs: Any) -> Any:
    """An optimizer step inside the op window: the ops it runs (update, regularizer, clipping) are
    added to `opt_ops` so the record lists them apart from the forward and backward ops."""
    before = counts(st)
    out = fn(*args, **kwargs)
    for op, after in counts(st).items():
        was = before.get(op, [0, 0, 0, 0])
        delta = [a - b for a, b in zip(after, was)]
        if any(delta):
            acc = st.opt_ops.setdefault(op, [0, 0, 0, 0])
            st.opt_ops[op] = [a + d for a, d in zip(acc, delta)]
    return out


def close_window(st: State) -> None:
    if not st.stats_on:
        return
    paddle = st.paddle
    st.ops_open = False
    try:
        now = counts(st)
        paddle.set_flags({"FLAGS_low_precision_op_list": 0})  # off without printing Paddle's table
    except Exception as exc:
        st.emit(e="ops", calls={}, error=f"{type(exc).__name__}: {exc}")
        return
    st.stats_on = False
    apart = st.opt_ops
    rest = {op: [a - b for a, b in zip(c, apart.get(op, [0, 0, 0, 0]))] for op, c in now.items()}
    st.emit(e="ops", calls={op: ",".join(map(str, c)) for op, c in rest.items() if any(c)},
            optimizer_calls={op: ",".join(map(str, c)) for op, c in apart.items()}, steps=st.step,
            first_step=2 if st.step > 1 else 1)
