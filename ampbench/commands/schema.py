"""JSON Schemas of every file ampbench writes or reads, generated from the pydantic models.

The models are the contract; these schemas are its language-neutral form, committed under
schemas/ at the repository root (tests/test_schemas.py keeps them in sync), and every field is listed in
docs/reference/record.md (generated from the same models; versioning in docs/results-format.md).  `ampbench schema NAME` prints one; `ampbench schema --write schemas/`
refreshes the committed copies after a model changes.

The file kinds and their models are listed once, in results/file_kinds.py (the generated reference reads
the same list).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ampbench.config import ConfigError, Suite
from ampbench.core.field_docs import described
from ampbench.core.files import atomic_write_text
from ampbench.results.file_kinds import FILES, FileKind, schema_tag

__all__ = ["FILES", "FileKind", "json_schema", "schema_command", "schema_tag", "schema_text", "write_schemas"]

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _profiles_schema() -> dict[str, Any]:
    """A suite file's `[profiles.NAME]` tables: partial sections deep-merged over the base (`seeds` for short)."""
    sections: dict[str, Any] = {k: {"type": "array" if k == "modes" else "object"} for k in Suite.model_fields}
    sections["seeds"] = {"type": "array", "items": {"type": "integer"}}
    profile = {"type": "object", "properties": sections, "additionalProperties": False}
    return {"type": "object", "additionalProperties": profile,
            "description": "Named profiles (--profile NAME), each merged over the base before validation; "
                           "`modes` replaces the list."}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one file kind; a versioned file's `schema` tag is a const."""
    if name not in FILES:
        raise ConfigError("ampbench schema", name, f"unknown file kind; known: {', '.join(FILES)}")
    kind = FILES[name]
    body = described(kind.model).model_json_schema(by_alias=True, mode="validation")
    tag = schema_tag(kind.model)
    if tag is not None:
        body["properties"]["schema"]["const"] = tag
    if kind.model is Suite:  # the file, not only the effective suite: its profiles too
        body["properties"]["profiles"] = _profiles_schema()
    head = {"$schema": DRAFT, "$id": f"{name}.schema.json", "x-ampbench-file": kind.file}
    if tag is not None:
        head["x-ampbench-schema-tag"] = tag
    return {**head, **body}


def schema_text(name: str) -> str:
    """A schema as committed under schemas/: indented JSON with a final newline."""
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    """Every schema as folder/NAME.schema.json (atomic writes)."""
    paths = []
    for name in FILES:
        p = Path(folder) / f"{name}.schema.json"
        atomic_write_text(p, schema_text(name))
        paths.append(p)
    return paths


def schema_command(name: str | None = None, write: Path | None = None) -> str:
    """What `ampbench schema` prints: one schema, the list of kinds, or what --write wrote."""
    if write is not None:
        paths = write_schemas(write)
        return f"wrote {len(paths)} schemas to {write}: " + ", ".join(p.name for p in paths)
    if name is not None:
        return schema_text(name).rstrip("\n")
    width = max(map(len, FILES))
    lines = [f"{n:<{width}}  {schema_tag(k.model) or '(TOML, no tag)':<22}  {k.file}: {k.what}" for n, k in FILES.items()]
    return "\n".join(lines + ["", "ampbench schema NAME prints one (JSON Schema draft 2020-12)."])
