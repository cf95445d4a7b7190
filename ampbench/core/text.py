"""The one guard for text that came from the program under test (its errors, its log lines) before it
is shown anywhere: the terminal, report.md, the HTML page.

A program's last error can hold terminal escape sequences (a hyperlink to another address, clear
screen, colours, a title change) or Unicode direction overrides that reorder what is read. They are
neither passed through (the user's terminal would act on them) nor dropped (the text must be shown
as it was): each becomes a visible escape such as `\\x1b` or `\\u202e`. Rich markup (`[red]`, `[/]`)
is a separate matter, left to rich's `escape` or to `Text` where the text is printed.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode format characters that reorder or
# hide text (bidi embeddings, overrides and isolates, zero-width joiners aside, line/paragraph separators).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_LINE_BREAKS = re.compile("[\t\n]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(m: re.Match[str]) -> str:
    if m.group(0) in _NAMED:
        return _NAMED[m.group(0)]
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: object, newlines: bool = False) -> str:
    """`text` with every control character shown as its escape (`\\x1b`, `\\x07`, `\\u202e`), so that
    nothing in it acts on a terminal or a page and nothing is lost. With `newlines`, tabs and newlines
    are kept (a traceback in a code block); otherwise they are escaped too (one line stays one line).
    A carriage return is always escaped: it would let a line overwrite what came before it."""
    s = _CONTROL.sub(_escaped, str(text))
    return s if newlines else _LINE_BREAKS.sub(_escaped, s)
