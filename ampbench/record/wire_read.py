"""The worker's gate on the start-up hook's wire: every message a `command` trial's program sends, checked.

A message is bounded (`wire.MAX_MESSAGE` bytes, nesting refused past the decoder's recursion limit), every
field the vocabulary declares (record/wire.py) is checked for type and range by its declared check, and an
event with any field that fails is dropped whole and counted (`Malformed`), never raised: a forged event may
falsify a trial (docs/command.md admits it), it must never erase one.  Fields not declared are dropped.
What passes is a typed event of the vocabulary (a "steps" line: one `StepEvent` per row).  The hook never
loads this module (it only sends).
"""

from __future__ import annotations

import json

from ampbench.record import wire

_DECLARED = {kind: wire.declared(cls) for kind, cls in wire.EVENTS.items()}


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
    if len(line) > wire.MAX_MESSAGE:
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


def validate(ev: dict, bad: Malformed) -> list[wire.WireEvent]:
    """The typed events one parsed message holds, each with its declared fields checked (a "steps" line is
    one `StepEvent` per row); [] when any field fails (counted in `bad`), or the kind is unknown."""
    raw = ev.get(wire.KIND)
    kind = raw if isinstance(raw, str) and (raw in wire.EVENTS or raw == "steps") else "?"
    try:
        if kind == "steps":
            return list(wire.decode_steps(ev))
        declared = _DECLARED.get(kind)
        if declared is None:
            raise wire.Bad("an unknown event kind")
        required = tuple(k for k, (_, _, needed) in declared.items() if needed)
        if any(k not in ev for k in required):
            raise wire.Bad(f"an event without its required fields {required}")
        return [wire.EVENTS[kind](**{k: check(ev[k]) for k, (check, _, _) in declared.items() if k in ev})]
    except wire.Bad as exc:
        bad.add(f"{kind}: {exc}")
    except (ValueError, TypeError, OverflowError, RecursionError, KeyError) as exc:   # base64, arrays
        bad.add(f"{kind}: {type(exc).__name__}")
    return []
