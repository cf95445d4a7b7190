"""report.md's "Where values were lost (emulated AMP)" section: for each emulated mode, its layers that
overflowed, flushed values to zero or lost weight updates (diagnose/emulated.py sums them over its trials),
the first overflow, and what to try; a mode that lost nothing says so in one line."""

from __future__ import annotations

from ampbench.diagnose.emulated import KINDS, ModeLosses, advice, mode_losses
from ampbench.report.fmt import md_code, md_prose, md_table, md_text
from ampbench.report.view import RunView, h

MAX_ROWS = 12
HEADERS = ("Layer", "Type", "Overflowed", "Flushed to 0", "Grad overflowed", "Grad flushed to 0", "Lost updates")


def _first(m: ModeLosses) -> str:
    f = m.first_overflow
    if not f:
        return "No value overflowed."
    return (f"First overflow: step {f.get('step')} ({md_text(str(f.get('phase', '')))}), layer "
            f"{md_code(str(f.get('layer', '')))}, op {md_code(str(f.get('op', '')))} (seed {f.get('seed')}).")


def _mode(m: ModeLosses) -> str:
    calls = f"{m.low_calls} of {m.calls} op calls under auto_cast emulated in {m.dtype}"
    head = f"Mode {md_code(m.mode)} ({m.level} {m.dtype}, emulated; {calls})."
    rows = [[md_code(r.layer), md_text(r.type or ""), *(str(getattr(r, k)) for k in KINDS)]
            for r in m.layers if any(getattr(r, k) for k in KINDS)][:MAX_ROWS]
    if not rows:
        return f"{head} No value overflowed, flushed to zero or lost an update."
    more = len([r for r in m.layers if any(getattr(r, k) for k in KINDS)]) - len(rows)
    parts = [head + " " + _first(m), md_table(list(HEADERS), rows, ["l", "l", "r", "r", "r", "r", "r"])]
    if more > 0:
        parts.append(f"({more} more layer(s) in the trial files' `amp.emulation.layers`.)")
    if m.layers_left_out:
        parts.append(f"({m.layers_left_out} more layer(s) lost values past the trials' record of 2000 layers.)")
    parts += [f"- Try: {md_prose(tip, 600)}" for tip in advice(m)]
    return "\n\n".join(parts)


def emulation_section(v: RunView, level: int) -> str:
    """'' when no mode of the run was emulated."""
    found = [m for m in (mode_losses(mode.name, v.trials) for mode in v.suite.modes) if m is not None]
    if not found:
        return ""
    intro = ("Counted in the emulated trials before each rounding to the AMP dtype, summed over seeds (values that "
             "were already inf or zero upstream are not counted again); what emulation leaves out is listed in "
             "docs/emulation.md.")
    return "\n\n".join([h(level, "Where values were lost (emulated AMP)"), intro, *(_mode(m) for m in found)])
