"""Paddle's operator stats: how many calls of each op ran in each dtype (the kernel's dtype).

`paddle.amp.debugging.enable_operator_stats_collection` records calls by dtype;
`core.get_low_precision_op_list()` returns {op: "fp16,bf16,fp32,other"}. The disable call prints
a table, which is swallowed here (the counts go into the trial instead). Collection cannot nest:
enabling it clears the counts.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field

from ampbench.core.opstat import is_cast, on_list


@dataclass
class OpsApart:
    """The ops run inside the optimizer's step (the update, a regularizer's `scale`, gradient clipping),
    counted apart from the forward and backward ops while a collection runs: they run in float32 by
    design, so in the low-precision share they would only dilute it. The command hook does the same."""

    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    on: bool = False

    @contextlib.contextmanager
    def around(self) -> Iterator[None]:
        if not self.on:
            yield
            return
        from paddle.base import core

        before = parse_op_stats(dict(core.get_low_precision_op_list()))
        try:
            yield
        finally:
            for op, c in parse_op_stats(dict(core.get_low_precision_op_list())).items():
                was = before.get(op, {})
                acc = self.calls.setdefault(op, dict.fromkeys(c, 0))
                for k, v in c.items():
                    acc[k] += v - was.get(k, 0)


@contextlib.contextmanager
def collect_op_dtypes(apart: OpsApart | None = None) -> Iterator[dict[str, dict[str, int]]]:
    """Counts op calls per dtype while the block runs (those `apart` counted left out of them)."""
    import paddle
    from paddle.base import core

    counts: dict[str, dict[str, int]] = {}
    paddle.amp.debugging.enable_operator_stats_collection()
    if apart is not None:
        apart.on = True
    try:
        yield counts
    finally:
        raw = dict(core.get_low_precision_op_list())
        with contextlib.redirect_stdout(io.StringIO()):
            paddle.amp.debugging.disable_operator_stats_collection()
        left = apart.calls if apart is not None else {}
        if apart is not None:
            apart.on = False
        for op, c in parse_op_stats(raw).items():
            rest = {k: v - left.get(op, {}).get(k, 0) for k, v in c.items()}
            if any(rest.values()):
                counts[op] = rest


def parse_op_stats(raw: dict[str, str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for op, text in raw.items():
        parts = [int(x) for x in str(text).split(",")] + [0, 0, 0, 0]
        out[op] = {"float16": parts[0], "bfloat16": parts[1], "float32": parts[2], "other": parts[3]}
    return out


def low_precision_calls(op_calls: dict[str, dict[str, int]], ops: frozenset[str] | set[str] | None = None) -> int:
    """Low-precision op calls, casts excluded (of `ops` only when given); op names in any spelling (eager's
    legacy names, PIR's `pd_op.*` under to_static: core/opstat.py canonical_op)."""
    return sum(c.get("float16", 0) + c.get("bfloat16", 0) for op, c in op_calls.items()
               if not is_cast(op) and (ops is None or on_list(op, ops)))
