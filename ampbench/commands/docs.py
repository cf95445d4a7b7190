"""Every table the docs hold that is rendered from the code, written by one command and checked by a test.

A generated table sits between two markers in a page of docs/ (`<!-- generated: NAME ... -->` and
`<!-- end: NAME -->`); `ampbench docs --write docs/` renders each `TABLES` entry into every block that names
it, `ampbench docs --check docs/` says which blocks are stale (tests/test_docs_generated.py runs it), and
`ampbench docs` lists them.  No table is pasted by hand: a change of the code the table is rendered from is
one command away from the page.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


# name -> (what it is, its renderer); a new generated table is one entry here and a block in a page
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "reason-codes": ("each result's reason codes (declared on its rule)", _reason_codes),
    "result-traits": ("what each result is to the other verbs (judge/rules/registry.py)", _result_traits),
    "claim-figures": ("the figures a published claim can name (config.suite.CLAIM_FIGURES)", _claim_figures),
}
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


def docs_command(write: Path | None = None, check: Path | None = None) -> tuple[str, int]:
    """What `ampbench docs` prints and its exit code: the tables; what --write rewrote; --check's stale blocks
    (exit 1 when any, or when a table appears in no page)."""
    if write is not None:
        blocks = generate(write, write=True)
        stale = sorted({f"{b.page.name} ({b.name})" for b in blocks if not b.current})
        return f"{len(blocks)} generated table(s) in {write}; rewrote: {', '.join(stale) or 'none'}", 0
    if check is not None:
        blocks = generate(check, write=False)
        stale = [f"{b.page.name}: {b.name} is stale" for b in blocks if not b.current]
        missing = [f"{name}: in no page of {check}" for name in TABLES if name not in {b.name for b in blocks}]
        if stale or missing:
            return "\n".join([*stale, *missing, f"run: ampbench docs --write {check}"]), 1
        return f"{len(blocks)} generated table(s) in {check}, all current", 0
    lines = [f"{name:<14}  {what}" for name, (what, _) in TABLES.items()]
    return "\n".join([*lines, "", "ampbench docs --write docs/ renders each into the pages' generated blocks."]), 0
