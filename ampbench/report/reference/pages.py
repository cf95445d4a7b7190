"""The generated reference: each page of docs/reference/ and its renderer, and the index that lists them.

`render_all(cli_root)` is every page's text, keyed by its path under docs/ (`reference/cli.md`); the CLI's
command tree is handed in by cli/ (no layer below it imports the CLI).  A new generated page is one module
with a `render()` and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ampbench.report.reference import cli, record, rules, suite
from ampbench.report.reference.md import COMMAND, header, table

FOLDER = "reference"
# page -> (title, what it lists)
PAGES: dict[str, tuple[str, str]] = {
    "cli.md": (cli.TITLE, "every verb and option of `ampbench`, from the typer app"),
    "suite.md": (suite.TITLE, "every key of a suite file: type, default, bounds, meaning; the retired keys"),
    "rules.md": (rules.TITLE, "every rule `check` runs: what it judges, its thresholds keys, results, reason codes"),
    "record.md": (record.TITLE, "every field of every file ampbench writes, with its unit; the trial tables' columns"),
}


def _index() -> str:
    rows = [[f"[{title}]({name})", what] for name, (title, what) in PAGES.items()]
    return "\n\n".join([header("Reference", "the code (ampbench/report/reference/)"),
                        f"Generated from the code by `{COMMAND}`, checked by `ampbench docs --check docs/` "
                        "(tests/test_docs_generated.py): change the code, never these pages.",
                        table(["page", "what it lists"], rows)]) + "\n"


def render_all(cli_root: Any) -> dict[str, str]:
    """Every generated page's text by its path under docs/."""
    renderers: dict[str, Callable[[], str]] = {
        "cli.md": lambda: cli.render(cli_root), "suite.md": suite.render, "rules.md": rules.render,
        "record.md": record.render, "index.md": _index}
    return {f"{FOLDER}/{name}": render() for name, render in renderers.items()}
