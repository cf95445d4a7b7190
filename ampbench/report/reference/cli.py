"""docs/reference/cli.md: every verb and every option, walked from the command tree typer builds.

The tree is handed in (`typer.main.get_command(app)`, by cli/: this layer cannot import the CLI), so no
option is listed by hand: an option added to a verb is in the page after `ampbench docs --write docs/`.
Verbs keep the order they are registered in; hidden verbs and options (the retired ones that only say what
replaced them) are left out.  Typer ships its own click, so the objects are read by their attributes
(`params`, `opts`, `default`, `help`, `list_commands`), the same in click and in typer's copy.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import PurePath
from typing import Any

from ampbench.report.fmt import md_code
from ampbench.report.reference.md import header, paragraphs, prose, table

TITLE = "Command-line reference"


def _default(p: Any) -> str:
    """An option's default as typed on the command line (a flag: on/off; none: empty)."""
    if getattr(p, "required", False):
        return "required"
    value = p.default
    if callable(value):   # computed when the command runs: not a fixed default
        return "computed"
    if getattr(p, "is_flag", False) and isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == () or value == []:
        return ""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, (list, tuple)):
        return ", ".join(md_code(str(v)) for v in value)
    if isinstance(value, PurePath):
        value = value.as_posix()
    return md_code(value if isinstance(value, str) else json.dumps(value))


def _type(p: Any, ctx: Any) -> str:
    """The value an option takes (`path`, `int`, a choice's values); a flag takes none."""
    if getattr(p, "is_flag", False):
        return "flag"
    shown = p.display_type(ctx).strip("<>") if hasattr(p, "display_type") else str(getattr(p.type, "name", ""))
    shown = shown.replace("list[", "").rstrip("]") if getattr(p, "multiple", False) else shown
    if shown.endswith(" range"):   # an int or float with bounds: the bounds, as --help says them
        lo, hi = getattr(p, "min", None), getattr(p, "max", None)
        shown = shown.removesuffix(" range")
        return md_code(shown) + "".join(f", {op} {v}" for op, v in (("≥", lo), ("≤", hi)) if v is not None)
    text = " \\| ".join(md_code(c) for c in shown.split("|")) if "|" in shown else md_code(shown)
    return text + (", repeatable" if getattr(p, "multiple", False) else "")


def _names(p: Any) -> str:
    names = [*p.opts, *getattr(p, "secondary_opts", [])]
    return ", ".join(md_code(n) for n in names)


def _arguments(cmd: Any, ctx: Any) -> str:
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    if not args:
        return ""
    rows = [[md_code(p.name.upper() + ("..." if p.nargs == -1 else "")), _type(p, ctx),
             "required" if p.required else "optional", prose(getattr(p, "help", ""))] for p in args]
    return table(["argument", "type", "", "what it is"], rows)


def _options(cmd: Any, ctx: Any) -> str:
    opts = [p for p in cmd.params if p.param_type_name == "option" and not getattr(p, "hidden", False)]
    if not opts:
        return ""
    rows = [[_names(p), _type(p, ctx), _default(p), prose(getattr(p, "help", ""))] for p in opts]
    return table(["option", "type", "default", "what it does"], rows)


def _verbs(group: Any, ctx: Any, path: list[str]) -> list[tuple[list[str], Any, Any]]:
    """(words, command, its context) of every visible command under `group`, depth first in registration order."""
    out: list[tuple[list[str], Any, Any]] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or getattr(cmd, "hidden", False):
            continue
        sub = type(ctx)(cmd, parent=ctx, info_name=name)
        out.append(([*path, name], cmd, sub))
        if hasattr(cmd, "list_commands"):
            out += _verbs(cmd, sub, [*path, name])
    return out


def _section(words: list[str], cmd: Any, ctx: Any) -> str:
    level = "#" * min(2 + len(words) - 1, 4)
    parts = [f"{level} `ampbench {' '.join(words)}`", paragraphs(cmd.help)]
    if hasattr(cmd, "list_commands"):
        subs = [n for n in cmd.list_commands(ctx) if not getattr(cmd.get_command(ctx, n), "hidden", False)]
        parts.append("Subcommands: " + ", ".join(md_code(f"{words[-1]} {n}") for n in subs) + ".")
    parts += [_arguments(cmd, ctx), _options(cmd, ctx)]
    return "\n\n".join(p for p in parts if p)


def render(root: Any) -> str:
    """The page for the tree `root` (the `ampbench` group)."""
    ctx_class = getattr(root, "context_class", None)
    ctx = ctx_class(root, info_name="ampbench") if ctx_class is not None else None
    verbs = _verbs(root, ctx, [])
    index = ", ".join(md_code(" ".join(w)) for w, _, _ in verbs if len(w) == 1)
    parts = [header(TITLE, "the typer app (ampbench/cli/)"), paragraphs(root.help),
             f"Verbs: {index}. `ampbench VERB --help` prints the same text in a terminal.",
             _options(root, ctx)]
    if getattr(root, "epilog", None):
        parts.append(paragraphs(root.epilog))
    parts += [_section(w, cmd, c) for w, cmd, c in verbs]
    return "\n\n".join(p for p in parts if p) + "\n"
