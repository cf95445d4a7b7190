"""Field descriptions are read from docstrings when a schema or the reference asks (core/field_docs.py), not by
every process that imports the models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from ampbench.core.field_docs import described

ROOT = Path(__file__).resolve().parents[1]


class Inner(BaseModel):
    depth: int = 0
    """How deep."""


class Base(BaseModel):
    name: str = ""
    """The name."""
    kept: int = Field(0, description="given in Field")
    """a docstring that does not replace it"""
    again: int = 0
    """The base's word, which a redeclaration without a docstring drops."""


class Outer(Base):
    inner: Inner = Inner()
    """What it holds."""
    many: list[Inner] | None = None
    again: int = 1
    plain: int = 0


def test_descriptions_reach_the_fields_the_held_models_and_the_json_schema() -> None:
    assert Outer.model_fields["name"].description is None   # nothing read at class creation
    described(Outer)
    f = Outer.model_fields
    assert f["name"].description == "The name." and f["inner"].description == "What it holds."
    assert f["kept"].description == "given in Field"
    assert f["again"].description is None and f["plain"].description is None and f["many"].description is None
    assert Inner.model_fields["depth"].description == "How deep."
    schema = Outer.model_json_schema()
    assert schema["properties"]["name"]["description"] == "The name."
    assert schema["$defs"]["Inner"]["properties"]["depth"]["description"] == "How deep."
    assert Outer(name="x", inner={"depth": 2}).inner.depth == 2   # rebuilt models still validate
    before = Outer.__pydantic_validator__
    described(Outer)   # a second call changes nothing and rebuilds nothing
    assert Outer.__pydantic_validator__ is before


def test_no_model_reads_its_docstrings_on_import() -> None:
    """pydantic's reader is not called when the run, check and worker modules are imported (it cost every
    ampbench process 0.2-0.3 CPU s); `ampbench schema` still describes every field (tests/test_schemas.py)."""
    code = (
        "import pydantic._internal._docs_extraction as d, pydantic._internal._fields as f\n"
        "calls = []\n"
        "real = f._update_fields_from_docstrings\n"
        "f._update_fields_from_docstrings = lambda *a, **k: (calls.append(a[0].__qualname__), real(*a, **k))\n"
        "import ampbench.commands.run, ampbench.commands.check, ampbench.commands.reporting, ampbench.trial.worker\n"
        "import ampbench.results.file_kinds\n"
        "print(calls)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stdout
