"""Emulated AMP: float16/bfloat16 training numerics on any device, judged for real (issue 56).

On a device without AMP (a CPU) Paddle's auto_cast, decorate and GradScaler turn themselves off.  This
package reproduces AMP's numerics there: the ops Paddle's lists send to float16/bfloat16 run in float32
with their inputs and outputs rounded to the format (`paddle.cast` there and back, so the backward
rounds the gradients at the same points), O2 parameters are stored rounded (with or without float32
master weights), and loss scaling is Paddle's own GradScaler, enabled as on a GPU.  It also counts,
per layer, the values that overflowed, flushed to zero or were lost as updates.

A mode asks for it (`emulate = true`); it is never switched on silently.  Standard library only at
import, Paddle passed in: the `command` hook loads this package into a user's program by its path.
Modules: formats (the formats' thresholds), policy (Paddle's per-op rule), ops (the op wrappers),
counts (what was lost, where), engine (the Emulator), api (paddle.amp's entry points, install), record (the
record on the command hook's wire).
"""

from . import record
from .api import INSTALLED, install, uninstall
from .engine import Emulator
from .formats import BFLOAT16, FLOAT16, FORMATS, Format

__all__ = ["BFLOAT16", "FLOAT16", "FORMATS", "INSTALLED", "Emulator", "Format", "install", "record", "uninstall"]
