"""The docs stay a manual (issue 57: 395 KB of pages that were a log): the hand-written pages, README included,
at most 200 KB; generated blocks and docs/reference/ (written by `ampbench docs --write docs/`) do not count."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 200_000
BLOCK = re.compile(r"<!-- generated: ([a-z0-9-]+).*?<!-- end: \1 -->", re.DOTALL)


def hand_written(text: str) -> int:
    return len(BLOCK.sub("", text).encode("utf-8"))


def test_hand_written_docs_stay_under_200_kb():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    sizes = {p.name: hand_written(p.read_text(encoding="utf-8")) for p in pages}
    assert sum(sizes.values()) <= LIMIT, sorted(sizes.items(), key=lambda kv: -kv[1])[:5]


def test_generated_blocks_do_not_count():
    assert hand_written("a\n<!-- generated: t (x) -->\n" + "x" * 500 + "\n<!-- end: t -->\nb\n") == len("a\n\nb\n")
