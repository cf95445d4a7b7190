"""docs/reference/suite.md: every key of a suite file, walked from the pydantic models (config/suite.py).

Each table of the file is a section (`[train]`, `[[modes]]`, `[modes.scaler]`), each key a row: its type,
default and bounds read from the field, its meaning from the field's `description`.  The keys retired
before 0.1.0 are listed from config/retired.py, each with what replaced it.
"""

from __future__ import annotations

from pydantic import BaseModel

from ampbench.config.retired import RETIRED
from ampbench.config.suite import Suite
from ampbench.core.field_docs import described
from ampbench.judge.claims import figures_table
from ampbench.report.fmt import md_code
from ampbench.report.reference.md import (
    Many,
    bounds_text,
    default_text,
    header,
    key_of,
    prose,
    sub_model,
    table,
    type_text,
)

TITLE = "Suite file reference"


def _rows(model: type[BaseModel]) -> list[list[str]]:
    # TOML has no null: an optional key is one left out (its default says `unset`)
    return [[md_code(key_of(name, info)), type_text(info.annotation).replace(" (or null)", ""), default_text(info),
             bounds_text(info),
             prose(info.description)]
            for name, info in model.model_fields.items() if sub_model(info.annotation) is None]


def _sections(model: type[BaseModel], path: str, many: Many, what: str | None) -> list[str]:
    """The section of one table of the file (`what`: the field's description, else the model's docstring)
    and those of the tables inside it."""
    title = f"[[{path}]]" if many == "list" else f"[{path}]"
    parts = [f"## `{title}`"]
    doc = what or (model.__doc__ if model.__doc__ is not BaseModel.__doc__ else None)
    if doc:
        parts.append(prose(doc.strip().split("\n\n")[0]))
    rows = _rows(model)
    if rows:
        parts.append(table(["key", "type", "default", "bounds", "what it does"], rows))
    out = ["\n\n".join(parts)]
    for name, info in model.model_fields.items():
        sub = sub_model(info.annotation)
        if sub is not None:
            out += _sections(sub[0], f"{path}.{key_of(name, info)}", sub[1], info.description)
    return out


def _top(name: str, model: type[BaseModel]) -> list[str]:
    """A top-level key of the file: its own section (a table, an array of tables, or a free table)."""
    info = model.model_fields[name]
    sub = sub_model(info.annotation)
    if sub is not None:
        return _sections(sub[0], key_of(name, info), sub[1], info.description)
    return [f"## `[{key_of(name, info)}]`\n\n{type_text(info.annotation)}, default {default_text(info)}: "
            f"{prose(info.description)}"]


def render() -> str:
    """The page."""
    parts = [header(TITLE, "the suite models (ampbench/config/suite.py)"),
             "A suite file is TOML: the tables below, each key with its type, default and bounds. Unknown keys "
             "are errors; every key may also be set for one run "
             "with `--set SECTION.KEY=VALUE` (a TOML value) or in a `[profiles.NAME]` table, merged over the base "
             "(`--profile NAME`; a profile's `modes` replaces the list). The JSON Schema of the file is "
             "`schemas/suite.schema.json` (`ampbench schema suite`)."]
    for name in described(Suite).model_fields:
        parts += _top(name, Suite)
        if name == "claims":
            parts += ["A claim's `figure` is one of:", figures_table()]
    retired = [[md_code(key), prose(why)] for key, why in sorted(RETIRED.items())]
    parts += ["## Retired keys", "A suite file (or a `--set`) that still sets one is refused in one line naming "
              "the key and what replaced it (exit 2).", table(["key", "why, and what to do"], retired)]
    return "\n\n".join(p for p in parts if p) + "\n"
