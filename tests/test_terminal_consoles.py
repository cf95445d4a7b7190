"""Every console a verb prints through is core.terminal's TerminalConsole (issue 59: the pytest plugin, the
engine's child and bisect's per-look log printed through a plain rich Console, so a commit subject or an error
holding ESC reached the terminal and bisect.log as is). A plain `Console(...)` built anywhere in ampbench/ is
named here; `Console(quiet=True)` prints nothing and is allowed."""

from __future__ import annotations

import ast
from pathlib import Path

from rich.console import Console

from ampbench.core.terminal import TerminalConsole

PACKAGE = Path(__file__).resolve().parent.parent / "ampbench"


def _plain_consoles(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Console":
            quiet = any(k.arg == "quiet" and isinstance(k.value, ast.Constant) and k.value.value is True
                        for k in node.keywords)
            if not quiet:
                found.append(node.lineno)
    return found


def test_no_verb_prints_through_a_plain_rich_console():
    bad = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
           if (lines := _plain_consoles(ast.parse(p.read_text(encoding="utf-8"))))}
    assert bad == {}, f"use core.terminal.TerminalConsole: {bad}"


def test_the_guard_sees_a_plain_console():
    assert _plain_consoles(ast.parse("from rich.console import Console\nc = Console(width=80)\n")) == [2]
    assert _plain_consoles(ast.parse("c = Console(quiet=True)\n")) == []


def test_a_control_character_in_printed_text_is_shown_not_obeyed(tmp_path):
    import io

    buf = io.StringIO()
    TerminalConsole(file=buf, width=160, no_color=True).print("subject \x1b]8;;http://x\x07 \u202e end")
    assert "\x1b" not in buf.getvalue() and "\u202e" not in buf.getvalue() and "\\x1b" in buf.getvalue()
    plain = io.StringIO()
    Console(file=plain, width=160, no_color=True).print("subject \x1b]8;;http://x\x07 end")
    assert "\x1b" in plain.getvalue()   # why the guard exists: rich alone passes it through
