"""docs/reference/record.md: every field of the files ampbench writes, walked from their models.

The files are results/file_kinds.py's list (the one `ampbench schema --write schemas/` renders); each file's
model and the models it holds are a section each (a model held in two places, such as `Env`, once), every
field a row: its key, type, unit, default and its `description` (a field's docstring).  A field's unit
follows from its name (the convention docs/results-format.md states: `_s` seconds, `_bytes` bytes, ...).
The trial tables' columns are the field catalog's (record/fields.py), listed last.
"""

from __future__ import annotations

import inspect
import re

from pydantic import BaseModel

from ampbench.core.columns import Output
from ampbench.core.field_docs import described
from ampbench.record.fields import COMPUTED, PLAIN, Column, columns
from ampbench.record.models import Trial
from ampbench.report.fmt import md_code
from ampbench.report.reference.md import (
    default_text,
    header,
    key_of,
    prose,
    sub_model,
    sub_path,
    table,
    type_text,
)
from ampbench.results.file_kinds import FILES, schema_tag

TITLE = "Result file reference"
# A field's unit from its name: the naming convention every model follows, most specific first
UNITS: tuple[tuple[str, str], ...] = (
    (r"_j_per_sample$", "J/sample"), (r"_per_s(_|$)", "per s"), (r"_unix$", "s since the epoch"), (r"_bytes$", "bytes"),
    (r"(^|_)s$|_s_", "s"), (r"_j$", "J"), (r"_w(_|$)", "W"), (r"_mhz(_|$)", "MHz"), (r"_c_max$", "°C"),
    (r"_pct$", "%"))
OUTPUTS: dict[Output, str] = {"md": "report.md", "console": "console (`run -v`)", "csv": "summary.csv",
                              "export": "pytest-benchmark export", "history": "history line"}


def unit_of(name: str) -> str:
    return next((unit for pattern, unit in UNITS if re.search(pattern, name)), "")


def _rows(model: type[BaseModel], path: str, done: dict[type[BaseModel], str]) -> list[list[str]]:
    rows = []
    for name, info in model.model_fields.items():
        key = key_of(name, info)
        sub = sub_model(info.annotation)
        kind = type_text(info.annotation)
        if sub is not None:
            where = done.get(sub[0], sub_path(path, key, sub[1]))
            kind = {"one": "", "list": "list of ", "map": "table of "}[sub[1]] + f"[{sub[0].__name__}](#{_anchor(where)})"
        rows.append([md_code(key), kind, unit_of(name), default_text(info, "null"), prose(info.description)])
    return rows


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", path.lower().replace(".", "-").replace(" ", "-"))


def _model_sections(model: type[BaseModel], path: str, done: dict[type[BaseModel], str]) -> list[str]:
    """The section of `model` at `path` and of every model it holds not shown yet."""
    done.setdefault(model, path)
    doc = model.__doc__ if model.__doc__ and model.__doc__ is not BaseModel.__doc__ else ""
    title = f"### {path}" if "." in path or "[]" in path else f"## {path}"
    parts = [f'<a id="{_anchor(path)}"></a>\n\n{title} ({model.__name__})' if "." in path else
             f'<a id="{_anchor(path)}"></a>\n\n{title}',
             prose(doc.strip().split("\n\n")[0]) if doc and "." in path else "",
             table(["field", "type", "unit", "default", "what it is"], _rows(model, path, done))]
    derived = _derived(model)
    if derived:
        parts += [f"Figures derived on read (methods of `{model.__name__}`, one definition each):", derived]
    out = ["\n\n".join(p for p in parts if p)]
    for name, info in model.model_fields.items():
        sub = sub_model(info.annotation)
        if sub is not None and sub[0] not in done:
            out += _model_sections(sub[0], sub_path(path, key_of(name, info), sub[1]), done)
    return out


def _derived(model: type[BaseModel]) -> str:
    """The model's own public methods and properties that say what they compute (their docstrings)."""
    rows = []
    for name, member in vars(model).items():
        fn = member.fget if isinstance(member, property) else member
        if name.startswith("_") or not inspect.isfunction(fn) or not fn.__doc__:
            continue
        call = "" if isinstance(member, property) else "()"
        rows.append([md_code(f"{name}{call}"), prose(fn.__doc__.strip().split("\n\n")[0])])
    return table(["figure", "what it is"], rows) if rows else ""


def _files() -> str:
    rows = [[md_code(kind.file), md_code(schema_tag(kind.model) or "") if schema_tag(kind.model) else "TOML, no tag",
             f"[`{name}`](#{_anchor(name)}), `schemas/{name}.schema.json`", prose(kind.what)]
            for name, kind in FILES.items()]
    return table(["file", "schema tag", "fields, JSON Schema", "what it holds"], rows)


def _catalog() -> str:
    every: dict[str, tuple[Column, list[str]]] = {}
    for output, label in OUTPUTS.items():
        for c in columns(output):
            shown = f"{label} ({md_code(c.csv_name)})" if output == "csv" else label
            every.setdefault(c.key, (c, []))[1].append(shown)
    computed = {c.key for c in COMPUTED}
    rows = [[prose(c.header(PLAIN)),
             "computed" if key in computed else md_code(key), c.col.kind, ", ".join(shown)]
            for key, (c, shown) in every.items()]
    return table(["column", "field", "shown as", "in"], rows)


def render() -> str:
    """The page."""
    parts = [header(TITLE, "the file models (results/file_kinds.py) and the field catalog (record/fields.py)"),
             "Every file ampbench writes, and every field of it: type, unit, default (what a reader assumes when a "
             "file of an earlier version lacks it) and meaning. `null` means not measured or not applicable, "
             "never zero. How files are versioned and laid out: docs/results-format.md. The JSON Schemas of these "
             "models are committed under `schemas/` (`ampbench schema --write schemas/` writes them; "
             "`ampbench schema NAME` prints one).", _files()]
    for kind in FILES.values():
        described(kind.model)   # every file's fields with their docstrings, once, before either pass below
    done: dict[type[BaseModel], str] = {}
    for name, kind in FILES.items():
        if kind.model is not Trial and name != "run":
            continue   # the trial and the run first: the records every other file is built from
        parts += _model_sections(kind.model, name, done)
    parts += ["## The trial tables' columns",
              "The field catalog (record/fields.py): each column a trial shows, from its field's `Col` marker or "
              "computed from several fields, and the tables that show it (summary.csv under its CSV name; columns "
              "are only ever added to summary.csv at the end, then one `metric_NAME` column per metric).", _catalog()]
    for name, kind in FILES.items():
        if kind.model is not Trial and name not in ("run", "suite"):
            parts += _model_sections(kind.model, name, done)
    return "\n\n".join(parts) + "\n"
