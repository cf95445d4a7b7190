"""The console every verb prints to: text shown, never obeyed by the terminal.

rich escapes its markup (`escape`), not the control characters of the text it prints: an ESC in a commit
subject, a run's error, a `--why` or a path reached the terminal as is (a hyperlink, a screen clear, a
title change) and U+202E reordered what was read.  `TerminalConsole` applies core.text's `printable` to
every text segment rich renders, after markup and layout, so no call site can forget it: each control
character becomes its visible escape (`\\x1b`, `\\u202e`), newlines and tabs stay.  rich's own styles and
cursor moves are not text segments and pass as they are.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from ampbench.core.text import printable


class TerminalConsole(Console):
    """A rich Console whose printed text cannot act on the terminal (see the module docstring)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            Segment(printable(text, newlines=True), style, control) if text and not control else
            Segment(text, style, control) for text, style, control in buffer)
