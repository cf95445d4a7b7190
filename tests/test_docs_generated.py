"""The docs rendered from the code are written by one command, `ampbench docs --write docs/`, and this test fails
when the committed docs differ from what the code renders (issue 57: two generated tables had to be pasted by
hand, and the reference was prose copied from the code): the reference pages of docs/reference/ (every verb and
option, suite key, rule, record field) and the tables in hand-written pages."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.commands.docs import TABLES, docs_command
from ampbench.config import Suite
from ampbench.core.field_docs import described
from ampbench.judge.rules.context import Ctx, Rule
from ampbench.judge.rules.reads import threshold_keys
from ampbench.judge.rules.registry import RULES
from ampbench.judge.rules.traits import ResultName
from ampbench.record.models import RunInfo, Trial
from ampbench.report.reference.md import sub_model
from ampbench.report.reference.pages import PAGES, render_all
from ampbench.results.file_kinds import FILES
from ampbench.results.verdicts import RuleResult

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _tree() -> object:
    return typer.main.get_command(app)


def _copy_reference(tmp_path: Path) -> Path:
    shutil.copytree(DOCS / "reference", tmp_path / "reference")
    return tmp_path


def test_every_generated_page_and_table_of_the_docs_is_current() -> None:
    text, code = docs_command(check=DOCS, cli_root=_tree())
    assert code == 0, text
    assert "all current" in text
    assert {f"reference/{p}" for p in PAGES} <= set(render_all(_tree()))


def test_the_pages_do_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """No wrapping at the terminal's width, no colour: a narrow terminal renders the same pages."""
    monkeypatch.setenv("COLUMNS", "30")
    monkeypatch.setenv("TERM", "xterm-256color")
    text, code = docs_command(check=DOCS, cli_root=_tree())   # the committed pages, written at any width
    assert code == 0, text


def test_the_check_names_a_stale_reference_page_and_the_write_renders_it(tmp_path: Path) -> None:
    folder = _copy_reference(tmp_path)
    page = folder / "reference" / "rules.md"
    good = page.read_text(encoding="utf-8")
    page.write_text(good.replace("`min_speedup`", "`min_speed`", 1), encoding="utf-8")
    r = CliRunner().invoke(app, ["docs", "--check", str(folder)])
    assert r.exit_code == 1 and "reference/rules.md: stale" in r.output and "suite.md" not in r.output
    r = CliRunner().invoke(app, ["docs", "--write", str(folder)])
    assert r.exit_code == 0 and "rewrote: reference/rules.md" in r.output
    assert page.read_text(encoding="utf-8") == good


def test_the_check_names_a_missing_page_and_a_page_no_renderer_makes(tmp_path: Path) -> None:
    folder = _copy_reference(tmp_path)
    (folder / "reference" / "suite.md").unlink()
    (folder / "reference" / "old.md").write_text("# hand-written\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["docs", "--check", str(folder)])
    assert r.exit_code == 1 and "reference/suite.md: missing" in r.output
    assert "reference/old.md: not generated" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["docs", "--write", str(folder)])
    assert r.exit_code == 0 and (folder / "reference" / "suite.md").read_text(encoding="utf-8") == \
        (DOCS / "reference" / "suite.md").read_text(encoding="utf-8")
    assert (folder / "reference" / "old.md").is_file()   # --write leaves what it did not make: a person decides
    r = CliRunner().invoke(app, ["docs", "--write", str(folder / "none")])
    assert r.exit_code == 2 and "none: not a folder of docs" in r.output and not (folder / "none").exists()


def test_a_new_option_of_a_verb_is_in_cli_md_after_write(tmp_path: Path) -> None:
    """A tiny typer app through the same command: its verb gains an option, and --write puts it in cli.md."""
    tiny = typer.Typer(rich_markup_mode=None)

    @tiny.command()
    def greet(name: str = typer.Argument(..., help="Who to greet")) -> None:
        """Say hello."""

    @tiny.command()
    def other() -> None:
        """A second verb, so the app is a group."""

    text, code = docs_command(write=tmp_path, cli_root=typer.main.get_command(tiny))
    assert code == 0 and "reference/cli.md" in text
    page = (tmp_path / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "## `ampbench greet`" in page and "Who to greet" in page and "--loud" not in page

    @tiny.command("greet")
    def greet_loud(name: str = typer.Argument(..., help="Who to greet"),
                   loud: bool = typer.Option(False, "--loud", help="Shout the greeting")) -> None:
        """Say hello."""

    text, code = docs_command(check=tmp_path, cli_root=typer.main.get_command(tiny))
    assert code == 1 and "reference/cli.md: stale" in text and "reference/rules.md" not in text
    docs_command(write=tmp_path, cli_root=typer.main.get_command(tiny))
    page = (tmp_path / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "| `--loud` | flag | off | Shout the greeting |" in page


def test_cli_md_holds_every_visible_option_of_every_verb_under_its_verb() -> None:
    """Walked independently of the renderer: each verb's section lists each of its options."""
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    checked = 0

    def walk(group: Any, ctx: Any, words: list[str]) -> None:
        nonlocal checked
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd.hidden:
                continue
            here = [*words, name]
            section = page.split(f"`ampbench {' '.join(here)}`\n", 1)[1].split("\n## ", 1)[0]
            options = [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]
            for p in options:
                assert f"`{p.opts[0]}`" in section, (here, p.opts)
            checked += len(options)
            if hasattr(cmd, "list_commands"):
                walk(cmd, type(ctx)(cmd, parent=ctx, info_name=name), here)

    root: Any = _tree()
    walk(root, root.context_class(root, info_name="ampbench"), [])
    assert checked > 100   # run alone has over 30


def test_every_suite_key_and_file_field_has_a_description() -> None:
    """The reference says what each key and field is from its docstring: a new one without one fails here."""
    missing: list[str] = []

    def walk(model: type, path: str) -> None:
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            if not info.description:
                missing.append(f"{path}.{name}")
            sub = sub_model(info.annotation)
            if sub is not None and sub[0] is not model:
                walk(sub[0], f"{path}.{name}")

    for name, kind in FILES.items():   # the suite, run.json, trial files and every other file ampbench writes
        walk(described(kind.model), name)
    assert {Suite, Trial, RunInfo} <= {k.model for k in FILES.values()}
    assert not missing, f"add a docstring under each field: {missing}"


def test_threshold_keys_are_read_from_each_rules_code() -> None:
    """rules.md's thresholds come from the code: the levels split keeps history_alpha out of speedup, and a
    new rule's judge that reads a key is listed with it without a declaration."""
    by_name = {r.name: threshold_keys(r) for r in RULES}
    assert by_name["stability"] == ["max_skipped_fraction", "loss_scale_floor", "collapse_halvings"]
    assert {"min_speedup", "confidence", "fail_alpha"} <= set(by_name["speedup"])
    assert "history_alpha" not in by_name["speedup"] and "history_alpha" in by_name["history"]
    assert by_name["completeness"] == []

    def judge(c: Ctx) -> list[RuleResult]:
        return [c.rule(ResultName("new-rule"), "PASS", c.th.metric_sigma_k, None, "read")]

    assert threshold_keys(Rule("new-rule", judge)) == ["metric_sigma_k"]


def test_a_table_block_is_checked_and_written_in_any_page(tmp_path: Path) -> None:
    """The tables inside hand-written pages: a stale block is named and rewritten; a table that must appear
    in a page (claim-figures: docs/claims.md) and appears in none is named; the reference holds the rules'."""
    _copy_reference(tmp_path)
    page = tmp_path / "checks.md"
    page.write_text("# checks\n\n<!-- generated: reason-codes -->\nold\n<!-- end: reason-codes -->\n", encoding="utf-8")
    (tmp_path / "claims.md").write_text(f"x\n<!-- generated: claim-figures -->\n{TABLES['claim-figures'][1]()}\n"
                                        "<!-- end: claim-figures -->\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["docs", "--check", str(tmp_path)])
    assert r.exit_code == 1 and "checks.md: reason-codes is stale" in r.output and "result-traits" not in r.output
    r = CliRunner().invoke(app, ["docs", "--write", str(tmp_path)])
    assert r.exit_code == 0 and "checks.md (reason-codes)" in r.output
    assert TABLES["reason-codes"][1]() in page.read_text(encoding="utf-8")
    page.unlink()   # the rules' tables live in reference/rules.md: no hand page has to hold them
    assert docs_command(check=tmp_path, cli_root=_tree())[1] == 0
    (tmp_path / "claims.md").unlink()
    r = CliRunner().invoke(app, ["docs", "--check", str(tmp_path)])
    assert r.exit_code == 1 and "claim-figures: in no page" in r.output


def test_a_block_naming_no_table_is_one_line_naming_the_page(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("x\n<!-- generated: nope -->\nold\n<!-- end: nope -->\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["docs", "--write", str(tmp_path)])
    assert r.exit_code == 2 and "a.md: a generated block names no table: 'nope'" in r.output
    assert "Traceback" not in r.output and (tmp_path / "a.md").read_text(encoding="utf-8").endswith("old\n<!-- end: nope -->\n")
