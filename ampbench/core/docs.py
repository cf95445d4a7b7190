"""Versioned documents: the one base of every file ampbench writes, and the one loader.

Each file model derives from `VersionedDoc` (its `schema` tag in `SCHEMA`); `load_doc` checks the
tag on every read and names the file and the key when something is wrong (`ResultsError`, exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ampbench.core.errors import ResultsError
from ampbench.core.files import FolderId, atomic_write_json, read_json


class VersionedDoc(BaseModel):
    """A file ampbench writes: `schema` names its format and version (`ampbench.trial/1`).

    Readers tolerate fields added by later versions; writers always fill the known ones.
    Subclasses set `SCHEMA` and redeclare `schema_` with that default.
    """

    SCHEMA: ClassVar[str] = ""
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field("", alias="schema")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


D = TypeVar("D", bound=BaseModel)


def validate_doc(model: type[D], data: Any, path: Path | str) -> D:
    """Data already read -> the model, checking the schema tag first (versioned files only)."""
    schema = getattr(model, "SCHEMA", None)
    if schema is not None and (not isinstance(data, dict) or data.get("schema") != schema):
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultsError(f"{path}: not an ampbench file (expected schema {schema!r}, found {got!r})")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ResultsError(f"{path}: {key}: {err['msg']}") from None


def load_optional(path: Path | str, model: type[D], what: str | None = None, root: Path | None = None) -> D | None:
    """A side file that may not exist yet (probe.json, diagnosis.json, check.json): None when absent
    (a folder in the way counts as absent; a link or a FIFO is refused by the reader)."""
    p = Path(path)
    return load_doc(p, model, what, root=root) if os.path.lexists(p) and not p.is_dir() else None


def load_doc(path: Path | str, model: type[D], what: str | None = None, root: Path | None = None) -> D:
    """The one reader of every ampbench file: trial, run, check, baseline, probe, diagnosis; with `root`
    (its run folder) no symbolic link is followed below that folder."""
    label = what or f"{getattr(model, 'SCHEMA', model.__name__)} file"
    return validate_doc(model, read_json(Path(path), label, root=root), path)


def write_doc(path: Path, doc: BaseModel, root: Path | None = None, root_id: FolderId | None = None) -> None:
    """A model as its JSON file (aliases such as `schema` written by name); `root`, `root_id` as in
    atomic_write_bytes."""
    atomic_write_json(path, doc.model_dump(mode="json", by_alias=True), root=root, root_id=root_id)
