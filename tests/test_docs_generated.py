"""The docs tables rendered from the code are written by one command, `ampbench docs --write docs/`, and this
test fails when a page holds a stale one (issue 57: two generated tables had to be pasted by hand)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.commands.docs import TABLES, docs_command

ROOT = Path(__file__).resolve().parents[1]


def test_every_generated_table_of_the_docs_is_current() -> None:
    text, code = docs_command(check=ROOT / "docs")
    assert code == 0, text
    assert f"{len(TABLES)} generated table(s)" in text


def test_the_check_names_a_stale_table_and_the_write_renders_it(tmp_path: Path) -> None:
    shutil.copy(ROOT / "docs" / "checks.md", tmp_path / "checks.md")
    page = tmp_path / "checks.md"
    good = page.read_text(encoding="utf-8")
    page.write_text(good.replace("| history-memory | `within`, `grew`", "| history-memory | `within`"),
                    encoding="utf-8")
    r = CliRunner().invoke(app, ["docs", "--check", str(tmp_path)])
    assert r.exit_code == 1 and "checks.md: reason-codes is stale" in r.output and "result-traits" not in r.output
    r = CliRunner().invoke(app, ["docs", "--write", str(tmp_path)])
    assert r.exit_code == 0 and "rewrote: checks.md (reason-codes)" in r.output
    assert page.read_text(encoding="utf-8") == good
    (tmp_path / "other.md").write_text("# other\n", encoding="utf-8")
    page.unlink()
    r = CliRunner().invoke(app, ["docs", "--check", str(tmp_path)])
    assert r.exit_code == 1 and "reason-codes: in no page" in r.output


def test_a_block_naming_no_table_is_one_line_naming_the_page(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("x\n<!-- generated: nope -->\nold\n<!-- end: nope -->\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["docs", "--write", str(tmp_path)])
    assert r.exit_code == 2 and "a.md: a generated block names no table: 'nope'" in r.output
    assert "Traceback" not in r.output and (tmp_path / "a.md").read_text(encoding="utf-8").endswith("old\n<!-- end: nope -->\n")
