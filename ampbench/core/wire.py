"""The start-up hook's wire: every event a `command` trial's hook sends its worker, declared once.

The hook (workloads/command/hook/) runs inside the user's program, whose interpreter may not have
ampbench installed, so it cannot import the `ampbench` package; it loads this file by its path
(the hook's `_ampbench_hook/__init__.py`), which is why this module imports the standard library
only and keeps to syntax Python 3.8 reads. The worker (trial/command_record.py) reads the same
declarations, so no constant, key or column order is mirrored between the two sides.

Each event is one JSON object, one message on the hook's connection (trial/command_channel.py),
keyed by `KIND` ("e"). `validate` is the worker's gate: a message is bounded (`MAX_MESSAGE`
bytes, nesting refused past the decoder's recursion limit), every declared field is checked for
type and range (an integer within `MAX_INT`, a finite float within `MAX_FLOAT`, a string cut to
`MAX_TEXT` characters, a list or table within `MAX_ITEMS` entries) and an event with any field
that fails is dropped whole and counted (`Malformed`), never raised: a forged event may falsify a
trial (docs/command.md admits it), it must never erase one. Fields not declared here are dropped.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from array import array
from collections.abc import Callable
from typing import Any, TypedDict

KIND = "e"
ROWS_PER_LINE = 512          # steps per "steps" line: one message stays far below the socket's buffer
MAX_LINE = 256 * 1024        # the hook sends no longer line (an "error" event says one was not sent)
MAX_MESSAGE = 1 << 20        # the most the worker reads as one message
MAX_STEPS_PER_LINE = MAX_MESSAGE // 8   # a steps line's row count (each row is 8 bytes of each column)
MAX_INT = 2 ** 53            # integers a float64 holds exactly: pids, steps, byte counts
MAX_FLOAT = 1e300            # seconds, losses, scales: finite, and far from overflowing a sum
MAX_TEXT = 4000              # characters of one string field
MAX_ITEMS = 20000            # entries of one list or table field (a program's ops, layers, data waits)
HANDSHAKE_OK = b"ok"         # the worker's answer to a connection it accepts (anything else: refused)
DENIED = "ampbench hook: the worker's event channel was denied: "   # the hook's stderr line when it gives up

# A step as the hook's `_boundary` queues it: raw, so the step's path does no arithmetic
STEP_KEYS = ("step", "at", "since", "loss", "scale", "found_inf", "eval_s", "evals")
STEP_F64_KEYS = ("t", "at", "loss", "scale", "eval_s")   # the float64 columns of a "steps" line


class StartEvent(TypedDict, total=False):
    """Once, when the program's `import paddle` finished: who reports, and the program's own stack."""
    e: str
    pid: int
    rank: int
    world: int
    argv: list[str]
    paddle: str
    paddle_commit: str
    python: str
    numpy: str


class DeviceEvent(TypedDict, total=False):
    """At the end of the first step: the device the program trains on (its facts join the start's)."""
    e: str
    device: str
    device_name: str
    cuda: str
    cudnn: str
    cuda_env: dict[str, str]
    pci_bus_id: str
    cuda_uuid: str      # the CUDA device's own UUID (a MIG instance's under MIG): NVML resolves it
    ordinal: int


class StepEvent(TypedDict, total=False):
    """One optimizer step, as the worker reads it (the hook sends runs of them as a `StepsLine`)."""
    e: str
    step: int
    t: float
    at: float | None
    loss: float | None
    scale: float | None
    found_inf: bool
    loss_seen: bool
    eval_s: float | None
    evals: list[list[float]]


class OpsEvent(TypedDict, total=False):
    """Paddle's operator stats over the op window: {op: "fp16,bf16,fp32,other"}, the optimizer's apart."""
    e: str
    calls: dict[str, str]
    optimizer_calls: dict[str, str]
    steps: int
    first_step: int
    error: str


class MemoryEvent(TypedDict, total=False):
    """The measured window's allocator peak so far."""
    e: str
    source: str
    peak_allocated: int | None
    peak_reserved: int | None
    evaluations: int
    error: str


class EndEvent(TypedDict, total=False):
    e: str
    reason: str
    steps: int


class ErrorEvent(TypedDict, total=False):
    e: str
    where: str
    error: str


class ShapesEvent(TypedDict, total=False):
    """The Linear/conv layers of the model at step 1: [name, kind, in, out] rows, and how many in all."""
    e: str
    layers: list[list[Any]]
    count: int


class AmpOrderEvent(TypedDict, total=False):
    """A paddle.amp.decorate (O2) or paddle.DataParallel call, in the order the program made them."""
    e: str
    call: str
    level: str
    decorated: bool
    after_data_parallel: bool


# amp = "inject": what the hook applied for an optimizer it adopted (or why not: `error`), or that the program
# applies AMP itself (`refused`, then it ends); and one paddle.save inside step `step`, `s` seconds long
InjectEvent = TypedDict("InjectEvent", {"e": str, "optimizer": str, "models": list, "level": str, "dtype": str,
                                       "decorated": bool, "scaler": bool, "scaler_enabled": bool, "error": str,
                                       "refused": str}, total=False)
SaveEvent = TypedDict("SaveEvent", {"e": str, "step": int, "s": float}, total=False)


# emulate = true, at the end: trial/emulate's record (trial/emulate/record.py `event` / `from_event`)
EmulationEvent = TypedDict("EmulationEvent", {
    "e": str, "steps": int, "counting": bool, "decorated": bool, "master_weight": bool, "master_grad": bool,
    "low_params": int, "op_calls": dict, "layers": list, "first_overflow": list, "layers_left_out": int, "error": str},
    total=False)


class DataEvent(TypedDict, total=False):
    """Each step's wait for its DataLoader batch: {"step": seconds}."""
    e: str
    waits: dict[str, float]


class _Bad(Exception):
    """A field that fails its check: the event is dropped."""


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not -MAX_INT <= v <= MAX_INT:
        raise _Bad("an integer out of range")
    return v


def _count(v: Any) -> int:
    if _int(v) < 0:
        raise _Bad("a negative count")
    return v


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Bad("not a number")
    if isinstance(v, int):
        v = float(_int(v))
    if not (math.isfinite(v) and -MAX_FLOAT <= v <= MAX_FLOAT):
        raise _Bad("a number out of range")
    return v


def _str(v: Any, at_most: int = MAX_TEXT) -> str:
    """A string, cut to `at_most` characters (a long error message or argument is kept, bounded)."""
    if not isinstance(v, str):
        raise _Bad("not a string")
    return v[:at_most]


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad("not a boolean")
    return v


def _duration(v: Any) -> float:
    if _float(v) < 0:
        raise _Bad("a negative duration")
    return float(v)


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else check(v)


def _list(check: Callable[[Any], Any], at_most: int = MAX_ITEMS) -> Callable[[Any], list]:
    def checked(v: Any) -> list:
        if not isinstance(v, list) or len(v) > at_most:
            raise _Bad("not a short list")
        return [check(x) for x in v]
    return checked


def _table(check: Callable[[Any], Any], key: Callable[[str], str] = _str) -> Callable[[Any], dict]:
    def checked(v: Any) -> dict:
        if not isinstance(v, dict) or len(v) > MAX_ITEMS:
            raise _Bad("not a short table")
        return {key(k): check(x) for k, x in v.items()}
    return checked


def _step_key(k: str) -> str:
    """A data wait's step: ASCII digits only ("²" is a digit to str.isdigit, not to int)."""
    if not (0 < len(k) <= 15 and k.isascii() and k.isdecimal()):
        raise _Bad("not a step number")
    return k


def _interval(v: Any) -> list:
    pair = _list(_float, 2)(v)
    if len(pair) != 2:
        raise _Bad("not a [start, end] pair")
    return pair


def _row(*checks: Callable[[Any], Any]) -> Callable[[Any], list]:
    """A list of exactly len(checks) values, each checked by its own (a table's row)."""
    def checked(v: Any) -> list:
        row = _list(lambda x: x, len(checks))(v)
        if len(row) != len(checks):
            raise _Bad(f"not a row of {len(checks)}")
        return [check(x) for check, x in zip(checks, row)]
    return checked


_shape_row = _row(_str, _str, _count, _count)   # [name, kind, in, out]


_FIELDS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "start": {"pid": _int, "rank": _count, "world": _count, "argv": _list(_str, 20), "paddle": _str,
              "paddle_commit": _str, "python": _str, "numpy": _str},
    "device": {"device": _str, "device_name": _str, "cuda": _str, "cudnn": _str, "cuda_env": _table(_str),
               "pci_bus_id": _str, "cuda_uuid": _str, "ordinal": _count},
    "step": {"step": _int, "t": _float, "at": _optional(_float), "loss": _optional(_float),
             "scale": _optional(_float), "found_inf": _bool, "loss_seen": _bool, "eval_s": _optional(_float),
             "evals": _list(_interval)},
    "ops": {"calls": _table(_str), "optimizer_calls": _table(_str), "steps": _count, "first_step": _count,
            "error": _str},
    "memory": {"source": _str, "peak_allocated": _optional(_count), "peak_reserved": _optional(_count),
               "evaluations": _count, "error": _str},
    "end": {"reason": _str, "steps": _count},
    "error": {"where": _str, "error": _str},
    "shapes": {"layers": _list(_shape_row), "count": _count},
    "amp_order": {"call": _str, "level": _str, "decorated": _bool, "after_data_parallel": _bool},
    "inject": {"optimizer": _str, "models": _list(_str, 20), "level": _str, "dtype": _str, "decorated": _bool,
               "scaler": _bool, "scaler_enabled": _bool, "error": _str, "refused": _str},
    "save": {"step": _int, "s": _duration},
    "data": {"waits": _table(_duration, _step_key)},
    "emulation": {"steps": _count, "counting": _bool, "decorated": _bool, "master_weight": _bool,
                  "master_grad": _bool, "low_params": _count, "op_calls": _table(_str),
                  "layers": _list(_row(_str, _str, *[_count] * 5)), "first_overflow": _row(_count, _str, _str, _str),
                  "layers_left_out": _count, "error": _str},
}
# The vocabulary: each kind's declaration. Its fields are exactly its checks' (tests/test_hostile_channel.py).
EVENTS: dict[str, type] = {"start": StartEvent, "device": DeviceEvent, "step": StepEvent, "ops": OpsEvent,
                           "memory": MemoryEvent, "end": EndEvent, "error": ErrorEvent, "shapes": ShapesEvent,
                           "amp_order": AmpOrderEvent, "inject": InjectEvent, "save": SaveEvent, "data": DataEvent,
                           "emulation": EmulationEvent}
_REQUIRED = {"step": ("step", "t"), "data": ("waits",), "shapes": ("layers",), "save": ("step", "s")}


class Malformed:
    """What the reader dropped: a count per reason (a few kept), so the record says so."""

    def __init__(self) -> None:
        self.count = 0
        self.reasons: dict[str, int] = {}

    def add(self, reason: str) -> None:
        self.count += 1
        if reason in self.reasons or len(self.reasons) < 20:
            self.reasons[reason] = self.reasons.get(reason, 0) + 1


def parse(line: bytes, bad: Malformed) -> dict | None:
    """One message as a JSON object, or None (counted in `bad`): too long, not JSON, nested past
    the decoder's recursion limit, or not an object."""
    if len(line) > MAX_MESSAGE:
        bad.add("a message over MAX_MESSAGE bytes")
        return None
    try:
        ev = json.loads(line)
    except RecursionError:
        bad.add("a message nested too deep")
        return None
    except ValueError:   # not JSON, or not UTF-8, or an integer of more digits than Python converts
        bad.add("not JSON")
        return None
    if not isinstance(ev, dict):
        bad.add("not a JSON object")
        return None
    return ev


def validate(ev: dict, bad: Malformed) -> list[dict]:
    """The events one parsed message holds, each with its declared fields checked (a "steps" line is
    one `StepEvent` per row); [] when any field fails (counted in `bad`), or the kind is unknown."""
    raw = ev.get(KIND)
    kind = raw if isinstance(raw, str) and (raw in EVENTS or raw == "steps") else "?"
    try:
        if kind == "steps":
            return decode_steps(ev)
        fields = _FIELDS.get(kind)
        if fields is None:
            raise _Bad("an unknown event kind")
        if any(k not in ev for k in _REQUIRED.get(kind, ())):
            raise _Bad(f"an event without its required fields {_REQUIRED[kind]}")
        out = {KIND: kind}
        for key, check in fields.items():
            if key in ev:
                out[key] = check(ev[key])
        return [out]
    except _Bad as exc:
        bad.add(f"{kind}: {exc}")
    except (ValueError, TypeError, OverflowError, RecursionError, KeyError) as exc:   # base64, arrays
        bad.add(f"{kind}: {type(exc).__name__}")
    return []


def as_float(v: Any) -> float:
    """A loss as the hook read it, as a float: a 0-d numpy array from `_getitem_from_offset`
    (bfloat16 arrives as its uint16 bits, which are float32's upper half), or a float."""
    import struct

    try:
        if getattr(getattr(v, "dtype", None), "char", "") == "H":
            return float(struct.unpack("<f", struct.pack("<I", int(v) << 16))[0])
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def encode_steps(rows: list[tuple]) -> str:
    """Consecutive steps (`STEP_KEYS` tuples) as one JSON line whose float columns are base64
    float64 arrays (NaN for None): a third of the flusher's time for JSON numbers, and the flusher
    holds the GIL the program needs. `decode_steps` turns it back into one step event per row."""
    c = dict(zip(STEP_KEYS, zip(*rows)))
    nan = float("nan")
    columns = {"t": [a - b - e for a, b, e in zip(c["at"], c["since"], c["eval_s"])], "at": c["at"],
               "eval_s": c["eval_s"], "loss": [nan if v is None else as_float(v) for v in c["loss"]],
               "scale": [nan if v is None else v for v in c["scale"]]}
    line: dict[str, object] = {KIND: "steps", "first": c["step"][0], "n": len(rows), "byteorder": sys.byteorder,
                               "found_inf": base64.b64encode(bytes(bool(v) for v in c["found_inf"])).decode(),
                               "loss_seen": base64.b64encode(bytes(v is not None for v in c["loss"])).decode()}
    for key in STEP_F64_KEYS:
        line[key] = base64.b64encode(array("d", columns[key]).tobytes()).decode()
    evals = {str(k): v for k, v in enumerate(c["evals"]) if v}
    if evals:
        line["evals"] = evals
    return json.dumps(line)


def _columns(ev: dict, n: int) -> tuple[dict[str, list], bytes, bytes]:
    order = ev.get("byteorder")
    if order not in ("little", "big"):
        raise _Bad("steps: no byte order")
    cols: dict[str, list] = {}
    for key in STEP_F64_KEYS:
        raw = base64.b64decode(_str(ev.get(key, 0), 2 * MAX_MESSAGE), validate=True)
        if len(raw) != 8 * n:
            raise _Bad(f"steps: a {key} column of the wrong length")
        arr = array("d", raw)
        if order != sys.byteorder:
            arr.byteswap()
        cols[key] = [None if math.isnan(v) else v for v in arr]
    found = base64.b64decode(_str(ev.get("found_inf", 0), 2 * MAX_MESSAGE), validate=True)
    seen = base64.b64decode(_str(ev.get("loss_seen", 0), 2 * MAX_MESSAGE), validate=True)
    if len(found) != n or len(seen) != n:
        raise _Bad("steps: a flag column of the wrong length")
    return cols, found, seen


def decode_steps(ev: dict) -> list[dict]:
    """A "steps" line (`encode_steps`) as one checked `StepEvent` per row; raises _Bad when malformed."""
    first, n = ev.get("first"), ev.get("n")
    if isinstance(first, bool) or isinstance(n, bool) or not (isinstance(first, int) and isinstance(n, int)
                                                              and 0 < n <= MAX_STEPS_PER_LINE):
        raise _Bad("steps: no first step or row count")
    _int(first + n)
    cols, found, seen = _columns(ev, n)
    evals = ev.get("evals")
    evals = _table(_list(_interval), _step_key_or_zero)(evals) if evals is not None else {}
    step_check = _FIELDS["step"]
    out = []
    for i in range(n):
        step = {KIND: "step", "step": first + i, "found_inf": bool(found[i]), "loss_seen": bool(seen[i])}
        for key in STEP_F64_KEYS:
            v = cols[key][i]
            step[key] = None if v is None else step_check[key](v)
        if step["t"] is None:
            raise _Bad("steps: a step without its time")
        if evals.get(str(i)):
            step["evals"] = evals[str(i)]
        out.append(step)
    return out


def _step_key_or_zero(k: str) -> str:
    """A row index of a steps line's evaluations (0 is a row, never a step)."""
    return k if k == "0" else _step_key(k)
