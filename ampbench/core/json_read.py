"""JSON read back by ampbench, bounded: every integer at most MAX_INT_DIGITS digits, nesting the parser's, and
any failure one ResultsError naming the file (the one parse of every file and line ampbench reads back)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError
from ampbench.core.files import read_text

MAX_INT_DIGITS = 40   # no integer ampbench writes has more digits (byte counts, seeds, steps); 10**400 is not ours


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS + 1:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def loads_bounded(text: str | bytes) -> Any:
    """json.loads with every integer bounded to MAX_INT_DIGITS digits (a longer one raises ValueError before
    Python converts it: no 4,300-digit conversion, no 10**400 reaching a numpy array)."""
    return json.loads(text, parse_int=_bounded_int)


def parse_json(text: str | bytes, where: object, what: str = "result file") -> Any:
    """JSON text -> data, or ResultsError naming `where`: malformed, nested too deeply for the parser, or a
    number Python refuses to convert (an integer of more than 4,300 digits raises ValueError, not a
    JSONDecodeError). The one parse of every file and line ampbench reads back."""
    try:
        return loads_bounded(text)
    except RecursionError:
        raise ResultsError(f"{where}: {what} is nested too deeply to be an ampbench file") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{where}: {what} is not valid JSON ({e}); truncated or corrupt?") from None
    except ValueError as e:   # an integer past MAX_INT_DIGITS (or Python's 4,300-digit conversion limit)
        raise ResultsError(f"{where}: {what} holds a number ampbench cannot read ({str(e)[:80]})") from None


def read_json(path: Path, what: str = "result file", root: Path | None = None) -> Any:
    return parse_json(read_text(path, what, root=root), path, what)
