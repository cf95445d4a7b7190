"""Numbers and text formatted for people, and markdown made safe.

One place decides how a byte count, a ratio or a metric delta looks, so every table and
plot in a report uses the same precision.  Everything that comes from a trial (error text,
op names, mode names) goes through `md_text` / `md_code` / `md_block` before it reaches
markdown: a `|` cannot split a table cell, a `<script>` cannot become HTML, a newline cannot
end a table row.
"""

from __future__ import annotations

import math
import re
from urllib.parse import quote

from ampbench.core.text import printable
from ampbench.core.units import (
    DASH,
    _missing,
    bytes_h,
    bytes_unit,
    metric,
    metric_delta,
    metric_pm,
    num,
    pct,
    pt,
    ratio,
    ratio_ci,
    seconds,
)

__all__ = ["DASH", "bytes_h", "bytes_unit", "metric", "metric_delta", "metric_pm", "num", "pct", "pt", "ratio",
           "ratio_ci", "seconds"]


# Emulated AMP (judge/rules/emulated.py): the mark after an emulated mode's figures, and what it means.
EMULATED_MARK = "†"
EMULATED_LEGEND = ("emulated AMP: float16/bfloat16 numerics reproduced in float32 kernels and judged; speed, "
                   "memory and energy not measured under emulation (docs/emulation.md)")
# the column kinds an emulated mode measured of the emulation itself (time, memory, their ratios): marked
DEVICE_KINDS = frozenset({"rate", "ms", "bytes", "ratio", "reduction"})


def mark_emulated(text: str, kind: str, emulated: bool) -> str:
    """A figure cell of an emulated mode or trial, marked: its time or memory is the emulation's, not AMP's."""
    return text + EMULATED_MARK if emulated and kind in DEVICE_KINDS and text != DASH else text


def num_g(x: float | None, digits: int = 4) -> str:
    """Up to `digits` significant digits without trailing zeros (thresholds, observed values)."""
    if _missing(x):
        return DASH
    x = float(x)
    if math.isfinite(x) and 1e-4 <= abs(x) < 1e6 or x == 0:
        return f"{x:.{digits}g}"
    return num(x, digits)


def is_fraction_metric(values: list[float]) -> bool:
    """Accuracy-like metrics (all values in [0, 1]) are shown in percent and deltas in points."""
    vals = [v for v in values if not _missing(v)]
    return bool(vals) and all(0.0 <= v <= 1.0 for v in vals)


def short_sha(sha: str | None, n: int = 10) -> str:
    return (sha or "")[:n]


# ---------------------------------------------------------------- markdown safety

# The characters that can start inline markdown (CommonMark lets a backslash escape any ASCII
# punctuation; GitHub's table extension honours `\|` before cell splitting; `$` starts GitHub math).
# Parentheses and `!` need no escape once `[` and `]` are escaped: no link or image can form; `_`
# only matters at a word boundary (intraword `_` is never emphasis), so op names stay readable.
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>#|~&$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_WS = re.compile(r"\s+")


def md_text(text: object, max_len: int | None = None) -> str:
    """Arbitrary text as one inline markdown run: safe in a paragraph, a list item or a table cell
    (control characters shown escaped: core/text.py)."""
    s = printable(_WS.sub(" ", str(text)).strip())
    if max_len is not None and len(s) > max_len:
        s = s[: max_len - 1].rstrip() + "…"
    s = _MD_SPECIAL.sub(r"\\\1", s)
    # A leading '-', '+' or '=' could start a list or a heading underline if the text ever begins
    # a line; escaping the first character costs nothing.
    if s[:1] in {"-", "+", "="}:
        s = "\\" + s
    return s


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def md_prose(text: object, max_len: int | None = None) -> str:
    r"""Text ampbench wrote with `code` spans (rule messages, advice, notes): each span stays code (its
    content shown as typed), the rest is escaped like md_text; escaped backticks never show as `\``."""
    s = printable(_WS.sub(" ", str(text)).strip())
    if max_len is not None and len(s) > max_len:
        s = s[: max_len - 1].rstrip() + "…"
    def plain(seg: str) -> str:  # md_text of a piece, keeping the spaces around it
        core = seg.strip()
        return seg[:len(seg) - len(seg.lstrip())] + md_text(core) + seg[len(seg.rstrip()):] if core else seg

    out, pos = [], 0
    for m in _CODE_SPAN.finditer(s):
        out += [plain(s[pos:m.start()]), md_code(m.group(1))]
        pos = m.end()
    out.append(plain(s[pos:]))
    return "".join(out)


def md_code(text: object) -> str:
    """Inline code for a name (op, mode, path): backticks in the name lengthen the fence,
    pipes are escaped for tables, whitespace is collapsed so a cell stays one line."""
    s = printable(_WS.sub(" ", str(text)).strip())
    if not s:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s.replace('|', chr(92) + '|')}{pad}{fence}"


def md_block(text: str, info: str = "text") -> str:
    """A fenced code block that no content can close early (fence longer than any backtick run)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = printable(text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n"), newlines=True)
    return f"{fence}{info}\n{body}\n{fence}"


def md_link(label: str, target: str) -> str:
    """A link with an escaped label and a percent-encoded relative target."""
    return f"[{md_text(label)}]({quote(target, safe='/._-#~')})"


def md_code_link(name: str, target: str) -> str:
    """A link whose label is a code span (trial keys, file names)."""
    return f"[{md_code(name)}]({quote(target, safe='/._-#~')})"


def md_image(alt: str, target: str) -> str:
    return "!" + md_link(alt, target)


def md_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A GitHub table from already-escaped cells; every row gets exactly len(header) cells."""
    n = len(header)
    align = align or ["l"] * n
    sep = {"l": "---", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(sep[a] for a in align) + "|"]
    for r in rows:
        cells = [(c if c != "" else " ") for c in (list(r) + [""] * n)[:n]]
        if len(r) > n:
            raise ValueError(f"table row has {len(r)} cells, header has {n}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def error_tail(error: str | None, lines: int = 12, width: int = 300) -> str:
    """The last non-empty lines of an error (where the exception is), each cut to `width`."""
    if not error:
        return ""
    kept = [ln.rstrip() for ln in error.replace("\r\n", "\n").split("\n") if ln.strip()]
    tail = kept[-lines:]
    return "\n".join(ln if len(ln) <= width else ln[: width - 1] + "…" for ln in tail)
