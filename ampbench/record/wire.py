"""The start-up hook's wire: every event a `command` trial's hook sends its worker, declared once.

The hook (workloads/command/hook/) runs inside the user's program, whose interpreter may not have ampbench
installed, so it cannot import the `ampbench` package; it loads this file by its path (the hook's
`_ampbench_hook/__init__.py`), which is why this module imports the standard library only and keeps to syntax
Python 3.8 reads. The worker (trial/command_record.py) reads the same declarations: nothing is mirrored.

Each event is one JSON object, one message on the hook's connection (trial/command_channel.py), keyed by
`KIND` ("e"). Each kind is one dataclass, each field declared once: its type, its check (`_field`: an integer
within `MAX_INT`, a finite float within `MAX_FLOAT`, a string cut to `MAX_TEXT` characters, a list or table
within `MAX_ITEMS` entries) and, for a figure the trial records as it came, the record field it fills (`into`,
"part.field" of a `Trial`, copied by record/assemble.py: a new hook-measured figure is its model field, its
line here and the hook's code). The worker's gate (record/wire_read.py, not loaded by the hook) checks every
message against these, into these typed events, never dicts; a field the hook did not send is None.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from array import array
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:   # the hook on an older Python: the runtime needs no marker (it tells type checkers what __init_subclass__ does)
    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        return lambda cls: cls

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
# ("cpu": the process's CPU seconds so far at the step's end, time.process_time(); the worker takes differences)
STEP_KEYS = ("step", "at", "since", "loss", "scale", "found_inf", "eval_s", "evals", "cpu")
STEP_F64_KEYS = ("t", "at", "loss", "scale", "eval_s", "cpu")   # the float64 columns of a "steps" line


class Bad(Exception):
    """A field that fails its check: the event is dropped."""


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not -MAX_INT <= v <= MAX_INT:
        raise Bad("an integer out of range")
    return v


def _count(v: Any) -> int:
    if _int(v) < 0:
        raise Bad("a negative count")
    return v


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Bad("not a number")
    if isinstance(v, int):
        v = float(_int(v))
    if not (math.isfinite(v) and -MAX_FLOAT <= v <= MAX_FLOAT):
        raise Bad("a number out of range")
    return v


def _str(v: Any, at_most: int = MAX_TEXT) -> str:
    """A string, cut to `at_most` characters (a long error message or argument is kept, bounded)."""
    if not isinstance(v, str):
        raise Bad("not a string")
    return v[:at_most]


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise Bad("not a boolean")
    return v


def _duration(v: Any) -> float:
    if _float(v) < 0:
        raise Bad("a negative duration")
    return float(v)


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else check(v)


def _list(check: Callable[[Any], Any], at_most: int = MAX_ITEMS) -> Callable[[Any], list]:
    def checked(v: Any) -> list:
        if not isinstance(v, list) or len(v) > at_most:
            raise Bad("not a short list")
        return [check(x) for x in v]
    return checked


def _table(check: Callable[[Any], Any], key: Callable[[str], str] = _str) -> Callable[[Any], dict]:
    def checked(v: Any) -> dict:
        if not isinstance(v, dict) or len(v) > MAX_ITEMS:
            raise Bad("not a short table")
        return {key(k): check(x) for k, x in v.items()}
    return checked


def _step_key(k: str) -> str:
    """A data wait's step: ASCII digits only ("²" is a digit to str.isdigit, not to int)."""
    if not (0 < len(k) <= 15 and k.isascii() and k.isdecimal()):
        raise Bad("not a step number")
    return k


def _interval(v: Any) -> list:
    pair = _list(_float, 2)(v)
    if len(pair) != 2:
        raise Bad("not a [start, end] pair")
    return pair


def _row(*checks: Callable[[Any], Any]) -> Callable[[Any], list]:
    """A list of exactly len(checks) values, each checked by its own (a table's row)."""
    def checked(v: Any) -> list:
        row = _list(lambda x: x, len(checks))(v)
        if len(row) != len(checks):
            raise Bad(f"not a row of {len(checks)}")
        return [check(x) for check, x in zip(checks, row)]
    return checked


_shape_row = _row(_str, _str, _count, _count)   # [name, kind, in, out]


def _field(check: Callable[[Any], Any], into: str = "", required: bool = False) -> Any:
    """A field, its check and the record field it fills, if any; None when not sent, unless `required` (an
    event without it is dropped; declared first, as a dataclass's fields without a default)."""
    meta = {"check": check, "into": into}
    return field(metadata=meta) if required else field(default=None, metadata=meta)


@dataclass_transform()
class WireEvent:
    """The base of every event kind, a dataclass: `class X(WireEvent, kind="x")`, its "e" key in `KIND`."""

    KIND: ClassVar[str] = ""
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, kind: str = "", **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.KIND = kind
        dataclass(cls)


class StartEvent(WireEvent, kind="start"):
    """Once, when the program's `import paddle` finished: who reports, and the program's own stack."""
    pid: int | None = _field(_int)
    rank: int | None = _field(_count)
    world: int | None = _field(_count)
    argv: list[str] | None = _field(_list(_str, 20))
    paddle: str | None = _field(_str, into="env.paddle")
    paddle_commit: str | None = _field(_str, into="env.paddle_commit")
    python: str | None = _field(_str, into="env.python")
    numpy: str | None = _field(_str, into="env.numpy")


class DeviceEvent(WireEvent, kind="device"):
    """At the end of the first step: the device the program trains on (its facts join the start's)."""
    device: str | None = _field(_str, into="env.device")
    device_name: str | None = _field(_str, into="env.device_name")
    cuda: str | None = _field(_str, into="env.cuda")
    cudnn: str | None = _field(_str, into="env.cudnn")
    cuda_env: dict[str, str] | None = _field(_table(_str))   # the CUDA variables NVML needs (trial/command_gpu.py)
    pci_bus_id: str | None = _field(_str)
    cuda_uuid: str | None = _field(_str)   # the CUDA device's own UUID (a MIG instance's under MIG): NVML resolves it
    ordinal: int | None = _field(_count)


class StepEvent(WireEvent, kind="step"):
    """One optimizer step, as the worker reads it (the hook sends runs of them as a "steps" line)."""
    step: int = _field(_int, required=True)
    t: float = _field(_float, required=True)
    at: float | None = _field(_optional(_float))
    loss: float | None = _field(_optional(_float))
    scale: float | None = _field(_optional(_float))
    found_inf: bool | None = _field(_bool)
    loss_seen: bool | None = _field(_bool)
    eval_s: float | None = _field(_optional(_float))
    evals: list[list[float]] | None = _field(_list(_interval))
    cpu: float | None = _field(_optional(_float))   # the process's CPU seconds at the step's end (its CPU: a difference)


class OpsEvent(WireEvent, kind="ops"):
    """Paddle's operator stats over the op window: {op: "fp16,bf16,fp32,other"}, the optimizer's apart."""
    calls: dict[str, str] | None = _field(_table(_str))
    optimizer_calls: dict[str, str] | None = _field(_table(_str))
    steps: int | None = _field(_count)
    first_step: int | None = _field(_count)   # the first step of the op window
    error: str | None = _field(_str)


class MemoryEvent(WireEvent, kind="memory"):
    """The measured window's allocator peak so far."""
    source: str | None = _field(_str, into="memory.source")
    peak_allocated: int | None = _field(_optional(_count), into="memory.peak_allocated_bytes")
    peak_reserved: int | None = _field(_optional(_count), into="memory.peak_reserved_bytes")
    evaluations: int | None = _field(_count)
    error: str | None = _field(_str)


class EndEvent(WireEvent, kind="end"):
    reason: str | None = _field(_str)
    steps: int | None = _field(_count)


class ErrorEvent(WireEvent, kind="error"):
    where: str | None = _field(_str)
    error: str | None = _field(_str)


class ShapesEvent(WireEvent, kind="shapes"):
    """The Linear/conv layers of the model at step 1: [name, kind, in, out] rows, and how many in all."""
    layers: list[list[Any]] = _field(_list(_shape_row), required=True)
    count: int | None = _field(_count)


class AmpOrderEvent(WireEvent, kind="amp_order"):
    """A paddle.amp.decorate (O2) or paddle.DataParallel call, in the order the program made them, or the settings
    of a distinct auto_cast (its custom and Paddle's effective op lists) or GradScaler call (the hook's ampcalls.py:
    trial/command_amp.py keeps each kind's first as the record's amp.program)."""
    call: str | None = _field(_str)   # "decorate", "data_parallel", "auto_cast" or "grad_scaler"
    level: str | None = _field(_str)
    decorated: bool | None = _field(_bool)
    after_data_parallel: bool | None = _field(_bool)   # decorate() of a model a DataParallel already wraps
    dtype: str | None = _field(_str)
    master_weight: bool | None = _field(_optional(_bool))   # decorate's: None is Paddle's default (per level)
    master_grad: bool | None = _field(_bool)
    white: list[str] | None = _field(_list(_str))   # auto_cast's custom lists
    black: list[str] | None = _field(_list(_str))
    use_promote: bool | None = _field(_bool)
    effective_white: list[str] | None = _field(_list(_str))   # the lists the program's own Paddle merges them into
    effective_black: list[str] | None = _field(_list(_str))
    scaler: dict[str, float] | None = _field(_table(_float))   # GradScaler's settings


class InjectEvent(WireEvent, kind="inject"):
    """amp = "inject": what the hook applied for an optimizer it adopted (or why not: `error`), or that the
    program applies AMP itself (`refused`, then it ends)."""
    optimizer: str | None = _field(_str)
    models: list[str] | None = _field(_list(_str, 20))
    level: str | None = _field(_str)
    dtype: str | None = _field(_str)
    decorated: bool | None = _field(_bool)
    before_data_parallel: bool | None = _field(_bool)   # O2 decorated as paddle.DataParallel wrapped the model
    scaler: bool | None = _field(_bool)
    scaler_enabled: bool | None = _field(_bool)
    error: str | None = _field(_str)
    refused: str | None = _field(_str)


class SaveEvent(WireEvent, kind="save"):
    """One paddle.save inside step `step`, `s` seconds long."""
    step: int = _field(_int, required=True)
    s: float = _field(_duration, required=True)


class DataEvent(WireEvent, kind="data"):
    """Each step's wait for its DataLoader batch: {"step": seconds}."""
    waits: dict[str, float] = _field(_table(_duration, _step_key), required=True)


class EmulationEvent(WireEvent, kind="emulation"):
    """At the end, emulate = true: trial/emulate's record (trial/emulate/record.py: `event`, `from_event`)."""
    steps: int | None = _field(_count)
    counting: bool | None = _field(_bool)
    decorated: bool | None = _field(_bool)
    master_weight: bool | None = _field(_bool)
    master_grad: bool | None = _field(_bool)
    low_params: int | None = _field(_count)
    op_calls: dict[str, str] | None = _field(_table(_str))   # op -> "low,float32"
    layers: list[list[Any]] | None = _field(_list(_row(_str, _str, *[_count] * 5)))   # [layer, type, 5 counts]
    first_overflow: list[Any] | None = _field(_row(_count, _str, _str, _str))   # [step, phase, layer, op]
    layers_left_out: int | None = _field(_count)
    error: str | None = _field(_str)


# The vocabulary: each kind's declaration, by its "e" key.
EVENTS: dict[str, type[WireEvent]] = {cls.KIND: cls for cls in (
    StartEvent, DeviceEvent, StepEvent, OpsEvent, MemoryEvent, EndEvent, ErrorEvent, ShapesEvent, AmpOrderEvent,
    InjectEvent, SaveEvent, DataEvent, EmulationEvent)}


def declared(kind: type[WireEvent]) -> dict[str, tuple[Callable[[Any], Any], str, bool]]:
    """A kind's fields: name -> (check, the record field it fills or "", required)."""
    return {f.name: (f.metadata["check"], f.metadata["into"], f.default is MISSING) for f in fields(kind)}


_DECLARED = {kind: declared(cls) for kind, cls in EVENTS.items()}


def filled(ev: WireEvent) -> dict[str, Any]:
    """The record fields an event fills ("part.field" -> value) with the values it carries (None: not sent)."""
    return {into: getattr(ev, name) for name, (_, into, _) in _DECLARED[ev.KIND].items()
            if into and getattr(ev, name) is not None}


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
               "scale": [nan if v is None else v for v in c["scale"]],
               "cpu": [nan if v is None else v for v in c.get("cpu") or [None] * len(rows)]}
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
        raise Bad("steps: no byte order")
    cols: dict[str, list] = {}
    for key in STEP_F64_KEYS:
        if key == "cpu" and key not in ev:   # a hook from before the column: no CPU times, the steps still read
            cols[key] = [None] * n
            continue
        raw = base64.b64decode(_str(ev.get(key, 0), 2 * MAX_MESSAGE), validate=True)
        if len(raw) != 8 * n:
            raise Bad(f"steps: a {key} column of the wrong length")
        arr = array("d", raw)
        if order != sys.byteorder:
            arr.byteswap()
        cols[key] = [None if math.isnan(v) else v for v in arr]
    found = base64.b64decode(_str(ev.get("found_inf", 0), 2 * MAX_MESSAGE), validate=True)
    seen = base64.b64decode(_str(ev.get("loss_seen", 0), 2 * MAX_MESSAGE), validate=True)
    if len(found) != n or len(seen) != n:
        raise Bad("steps: a flag column of the wrong length")
    return cols, found, seen


def decode_steps(ev: dict) -> list[StepEvent]:
    """A "steps" line (`encode_steps`) as one checked `StepEvent` per row; raises Bad when malformed."""
    first, n = ev.get("first"), ev.get("n")
    if isinstance(first, bool) or isinstance(n, bool) or not (isinstance(first, int) and isinstance(n, int)
                                                              and 0 < n <= MAX_STEPS_PER_LINE):
        raise Bad("steps: no first step or row count")
    _int(first + n)
    cols, found, seen = _columns(ev, n)
    evals = ev.get("evals")
    evals = _table(_list(_interval), _step_key_or_zero)(evals) if evals is not None else {}
    step_check = {k: check for k, (check, _, _) in _DECLARED["step"].items()}
    out = []
    for i in range(n):
        step: dict[str, Any] = {"step": first + i, "found_inf": bool(found[i]), "loss_seen": bool(seen[i])}
        for key in STEP_F64_KEYS:
            v = cols[key][i]
            step[key] = None if v is None else step_check[key](v)
        if step["t"] is None:
            raise Bad("steps: a step without its time")
        if evals.get(str(i)):
            step["evals"] = evals[str(i)]
        out.append(StepEvent(**step))
    return out


def _step_key_or_zero(k: str) -> str:
    """A row index of a steps line's evaluations (0 is a row, never a step)."""
    return k if k == "0" else _step_key(k)
