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

from ampbench.core.opstat import CAST_OPS


@contextlib.contextmanager
def collect_op_dtypes() -> Iterator[dict[str, dict[str, int]]]:
    """Counts op calls per dtype while the block runs."""
    import paddle
    from paddle.base import core

    counts: dict[str, dict[str, int]] = {}
    paddle.amp.debugging.enable_operator_stats_collection()
    try:
        yield counts
    finally:
        raw = dict(core.get_low_precision_op_list())
        with contextlib.redirect_stdout(io.StringIO()):
            paddle.amp.debugging.disable_operator_stats_collection()
        counts.update(parse_op_stats(raw))


def parse_op_stats(raw: dict[str, str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for op, text in raw.items():
        parts = [int(x) for x in str(text).split(",")] + [0, 0, 0, 0]
        out[op] = {"float16": parts[0], "bfloat16": parts[1], "float32": parts[2], "other": parts[3]}
    return out


def low_precision_calls(op_calls: dict[str, dict[str, int]], ops: frozenset[str] | set[str] | None = None) -> int:
    """Low-precision op calls, casts excluded (of `ops` only when given)."""
    return sum(c.get("float16", 0) + c.get("bfloat16", 0) for op, c in op_calls.items()
               if op not in CAST_OPS and (ops is None or op in ops))
