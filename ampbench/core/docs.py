"""Versioned documents: the one base of every file ampbench writes, and the one loader.

Each file model derives from `VersionedDoc` (its `schema` tag in `SCHEMA`); `load_doc` checks the
tag on every read and names the file and the key when something is wrong (`ResultsError`, exit 2).

JSON has no NaN or infinity, and strict readers (jq, JavaScript's JSON.parse, Go, serde_json) refuse
the `NaN` Python writes by default.  A document whose model sets `STRICT_JSON` (check.json, probe.json,
diagnosis.json) is written as strict JSON: each non-finite number becomes `null`, and the reason why,
the value it stands for, goes in the top-level `nonfinite` map under the number's JSON Pointer
(`{"nonfinite": {"/verdicts/0/rules/2/observed": "NaN"}}`).  Reading puts the numbers back
(`restore_nonfinite`), so the models see what was written; files written before, with a bare `NaN`, still read.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ampbench.core.errors import ResultsError
from ampbench.core.files import FolderId, atomic_write_json
from ampbench.core.json_read import read_json


class VersionedDoc(BaseModel):
    """A file ampbench writes: `schema` names its format and version (`ampbench.trial/1`).

    Readers tolerate fields added by later versions; writers always fill the known ones.
    Subclasses set `SCHEMA` and redeclare `schema_` with that default.
    """

    SCHEMA: ClassVar[str] = ""
    STRICT_JSON: ClassVar[bool] = False  # written as strict JSON: non-finite numbers as null + `nonfinite`
    # a field's docstring is its description (JSON Schema, docs/reference/record.md: core/field_docs.py)
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field("", alias="schema")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


D = TypeVar("D", bound=BaseModel)
NONFINITE_KEY = "nonfinite"  # the top-level map of a strict document: JSON Pointer -> "NaN" | "Infinity" | "-Infinity"
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _pointer_part(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")  # RFC 6901


def nonfinite_paths(data: Any) -> dict[str, str]:
    """JSON Pointer -> "NaN" | "Infinity" | "-Infinity" of every non-finite float in `data`."""
    found: dict[str, str] = {}

    def walk(x: Any, at: str) -> None:
        if isinstance(x, float) and not math.isfinite(x):
            found[at] = "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{at}/{_pointer_part(k)}")
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{at}/{i}")

    walk(data, "")
    return found


def strict_json(data: Any, source: Any = None) -> Any:
    """`data` (a JSON-mode dump) with every non-finite float replaced by None and, when there was one, the
    top-level `nonfinite` map saying what each stood for; `source`: the same document in Python mode, whose
    non-finite numbers pydantic's JSON mode already turned into None where a field is typed Any."""
    def walk(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return x

    found = {**nonfinite_paths(data), **(nonfinite_paths(source) if source is not None else {})}
    out = walk(data)
    if found and isinstance(out, dict):
        out[NONFINITE_KEY] = found
    return out


def restore_nonfinite(data: Any) -> Any:
    """A strict document's non-finite numbers put back from its `nonfinite` map (removed); an entry that
    names no null in the document, or no known value, is ignored: the null stays (not measured)."""
    if not isinstance(data, dict) or not isinstance(data.get(NONFINITE_KEY), dict):
        return data
    reasons = data.pop(NONFINITE_KEY)
    for pointer, what in reasons.items():
        if not isinstance(pointer, str) or not pointer.startswith("/") or what not in _NONFINITE:
            continue
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]
        here: Any = data
        for p in parts[:-1]:
            here = _step(here, p)
        last = parts[-1]
        if isinstance(here, dict) and here.get(last, 0) is None:
            here[last] = _NONFINITE[what]
        elif isinstance(here, list) and last.isdigit() and int(last) < len(here) and here[int(last)] is None:
            here[int(last)] = _NONFINITE[what]
    return data


def _step(x: Any, part: str) -> Any:
    """One step down a JSON Pointer (None where the document has nothing there)."""
    if isinstance(x, dict):
        return x.get(part)
    if isinstance(x, list) and part.isdigit() and int(part) < len(x):
        return x[int(part)]
    return None


def validate_doc(model: type[D], data: Any, path: Path | str) -> D:
    """Data already read -> the model, checking the schema tag first (versioned files only)."""
    schema = getattr(model, "SCHEMA", None)
    if schema is not None and (not isinstance(data, dict) or data.get("schema") != schema):
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultsError(f"{path}: not an ampbench file (expected schema {schema!r}, found {got!r})")
    data = restore_nonfinite(data)
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
    data = doc.model_dump(mode="json", by_alias=True)
    if getattr(type(doc), "STRICT_JSON", False):
        data = strict_json(data, doc.model_dump(by_alias=True))
    atomic_write_json(path, data, root=root, root_id=root_id)
