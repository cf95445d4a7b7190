"""JSON Schemas of every file ampbench writes or reads, generated from the pydantic models.

The models are the contract; these schemas are its language-neutral form, committed under
schemas/ at the repository root (tests/test_schemas.py keeps them in sync) and described in
docs/results-format.md.  `ampbench schema NAME` prints one; `ampbench schema --write schemas/`
refreshes the committed copies after a model changes.

This registry is the one module of results/ that imports the other layers' file models (check,
baseline, history, probe, diagnosis); nothing in ampbench imports it but the CLI, so it cannot
close an import cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel

from ampbench.config import ConfigError, Suite
from ampbench.core.files import atomic_write_text
from ampbench.record.models import RunInfo, Trial
from ampbench.results.baselines import Baseline
from ampbench.results.bisect_file import BisectFile
from ampbench.results.compare_file import CompareFile
from ampbench.results.diagnosis_file import DiagnosisFile
from ampbench.results.history import RunSummary
from ampbench.results.probe_file import ProbeFile
from ampbench.results.tune_file import TuneFile
from ampbench.results.verdicts import CheckReport

DRAFT = "https://json-schema.org/draft/2020-12/schema"


class FileKind(NamedTuple):
    model: type[BaseModel]
    file: str          # where the file lives
    what: str


FILES: dict[str, FileKind] = {
    "suite": FileKind(Suite, "SUITE.toml (any name)", "a suite: workload, training, precision modes, thresholds"),
    "run": FileKind(RunInfo, "<run>/run.json", "the plan, effective config and environment of a run"),
    "trial": FileKind(Trial, "<run>/trials/<mode>__seed<k>.json", "one trial: steps, throughput, memory, metrics"),
    "check": FileKind(CheckReport, "<run>/check.json", "the verdicts: one entry per suite x mode x rule"),
    "baseline": FileKind(Baseline, "results/baselines/<device>/<suite>.json", "a compact run for --baseline"),
    "history": FileKind(RunSummary, "results/history/<suite>.jsonl (one per line)", "one run's summary line"),
    "probe": FileKind(ProbeFile, "<probe run>/probe.json", "the largest batch each mode fits"),
    "diagnosis": FileKind(DiagnosisFile, "<run>/diagnosis.json", "the op-level FP32/AMP comparison"),
    "tune": FileKind(TuneFile, "<tune folder>/tune.json", "an `ampbench tune` ladder: its rungs and the next one"),
    "bisect": FileKind(BisectFile, "<bisect folder>/bisect.json", "an `ampbench bisect` search: its commits, looks and result"),
    "compare": FileKind(CompareFile, "`ampbench compare RUN OTHER --format json`", "two runs per mode, each change "
                        "marked significant or not"),
}


def schema_tag(model: type[BaseModel]) -> str | None:
    """The `schema` value a versioned file carries (None for the suite, a TOML file without one)."""
    tag = getattr(model, "SCHEMA", None)
    if tag is None and "schema_" in model.model_fields:
        tag = model.model_fields["schema_"].default
    return tag if isinstance(tag, str) else None


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
    body = kind.model.model_json_schema(by_alias=True, mode="validation")
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
