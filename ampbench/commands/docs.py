"""Every part of the docs rendered from the code, written by one command and checked by a test.

Two kinds: the reference pages of docs/reference/, each rendered whole (report/reference/: the CLI, the suite
keys, the rules, the result files), and generated tables inside hand-written pages, each between two markers
(`<!-- generated: NAME ... -->` and `<!-- end: NAME -->`).  `ampbench docs --write docs/` renders both,
`ampbench docs --check docs/` names each stale or missing page and block (exit 1; tests/test_docs_generated.py
runs it), `ampbench docs` lists them.  Nothing is pasted by hand: a change of the code a page is rendered from
is one command away from the page.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.core.errors import UserError
from ampbench.core.files import atomic_write_text, read_text


def _reason_codes() -> str:
    from ampbench.judge.rules.registry import reason_codes_table

    return reason_codes_table()


def _result_traits() -> str:
    from ampbench.judge.rules.registry import traits_table

    return traits_table()


def _claim_figures() -> str:
    from ampbench.judge.claims import figures_table

    return figures_table()


# name -> (what it is, its renderer); a new generated table is one entry here and a block in a page.
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "reason-codes": ("each result's reason codes (declared on its rule)", _reason_codes),
    "result-traits": ("what each result is to the other verbs (judge/rules/registry.py)", _result_traits),
    "claim-figures": ("the figures a published claim can name (config.suite.CLAIM_FIGURES)", _claim_figures),
}
# Tables docs/reference/rules.md also holds: a hand-written page may quote them in a block, none has to.
IN_REFERENCE = frozenset({"reason-codes", "result-traits"})
BLOCK = re.compile(r"(?P<begin><!-- generated: (?P<name>[a-z0-9-]+)[^\n]*-->\n)(?P<body>.*?)(?P<end><!-- end: (?P=name) -->)",
                   re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One generated block of a page: its table's name and whether it holds the table as the code renders it."""

    page: Path
    name: str
    current: bool


def render(text: str, page: Path) -> tuple[str, list[Block]]:
    """`text` with every generated block filled from its table, and the blocks found; a block naming no
    table is an error naming the page and the name."""
    blocks: list[Block] = []

    def fill(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in TABLES:
            raise UserError(f"{page}: a generated block names no table: {name!r} (known: {', '.join(TABLES)})")
        table = TABLES[name][1]().rstrip("\n") + "\n"
        blocks.append(Block(page, name, m["body"] == table))
        return m["begin"] + table + m["end"]

    return BLOCK.sub(fill, text), blocks


def pages(folder: Path) -> list[Path]:
    """The markdown pages of a docs folder (a folder that is not there is an error naming it)."""
    if not Path(folder).is_dir():
        raise UserError(f"{folder}: not a folder of docs")
    return sorted(p for p in Path(folder).glob("*.md") if p.is_file() and not p.is_symlink())


def generate(folder: Path, write: bool) -> list[Block]:
    """Every generated block of the pages in `folder`, each page rewritten (atomically) when `write` and stale."""
    found: list[Block] = []
    for page in pages(folder):
        text = read_text(page, "docs page")
        new, blocks = render(text, page)
        if write and new != text:
            atomic_write_text(page, new, root=Path(folder))   # no link below the folder is followed
        found += blocks
    return found


def reference(folder: Path, cli_root: Any, write: bool) -> list[tuple[str, str]]:
    """(page, why) of each generated page (`reference/NAME.md`) whose file in `folder` is missing or differs
    from the code's, each rewritten (atomically) when `write`; a page there that no renderer makes is named too
    (`--write` leaves it: a person decides)."""
    from ampbench.report.reference.pages import FOLDER, render_all

    if cli_root is None:   # the CLI hands its tree down; nothing below cli/ may import it
        raise UserError("ampbench docs: the reference needs the CLI's command tree (run `ampbench docs`)")
    wanted = render_all(cli_root)
    pages(folder)   # a folder that is not there is one line naming it, before anything is written
    sub = Path(folder) / FOLDER
    if sub.is_symlink() or (os.path.lexists(sub) and not sub.is_dir()):
        raise UserError(f"{sub}: not a folder (the generated reference goes there)")
    out = []
    for rel, text in wanted.items():
        page = Path(folder) / rel
        if os.path.lexists(page) and read_text(page, "docs page") == text:
            continue
        out.append((rel, "stale" if os.path.lexists(page) else "missing"))
        if write:
            sub.mkdir(exist_ok=True)
            atomic_write_text(page, text, root=Path(folder))   # no link below the folder is followed
    extra = sorted(f"{FOLDER}/{p.name}" for p in sub.glob("*.md")) if sub.is_dir() else []
    return out + [(rel, "not generated by `ampbench docs`: remove it") for rel in extra if rel not in wanted]


def docs_command(write: Path | None = None, check: Path | None = None, cli_root: Any = None) -> tuple[str, int]:
    """What `ampbench docs` prints and its exit code: what it generates; what --write rewrote; --check's stale
    or missing pages and blocks (exit 1 when any, or when a table appears in no page).  `cli_root`: the
    CLI's command tree (`typer.main.get_command(app)`), which cli/ hands in."""
    if write is not None:
        pages_done = [rel for rel, why in reference(write, cli_root, write=True) if why in ("stale", "missing")]
        blocks = generate(write, write=True)
        stale = sorted({f"{b.page.name} ({b.name})" for b in blocks if not b.current})
        return (f"{len(blocks)} generated table(s) and the reference pages in {write}; "
                f"rewrote: {', '.join([*pages_done, *stale]) or 'none'}"), 0
    if check is not None:
        bad_pages = [f"{rel}: {why}" for rel, why in reference(check, cli_root, write=False)]
        blocks = generate(check, write=False)
        stale = [f"{b.page.name}: {b.name} is stale" for b in blocks if not b.current]
        missing = [f"{name}: in no page of {check}" for name in TABLES
                   if name not in {b.name for b in blocks} and name not in IN_REFERENCE]
        if bad_pages or stale or missing:
            return "\n".join([*bad_pages, *stale, *missing, f"run: ampbench docs --write {check}"]), 1
        return f"{len(blocks)} generated table(s) and the reference pages in {check}, all current", 0
    from ampbench.report.reference.pages import FOLDER, PAGES

    lines = [f"{name:<14}  {what}" for name, (what, _) in TABLES.items()]
    lines += [f"{FOLDER}/{name:<14}  {what}" for name, (_, what) in PAGES.items()]
    return "\n".join([*lines, "", "ampbench docs --write docs/ renders each: the tables into the pages' generated "
                      "blocks, the reference pages whole."]), 0
