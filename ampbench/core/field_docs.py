"""Field descriptions from the models' attribute docstrings, read when a schema or the reference asks.

A field's docstring (the string literal under its annotation) is its description: in the JSON Schemas
(`ampbench schema`) and the generated reference (docs/reference/suite.md, record.md, rules.md).  pydantic's
`use_attribute_docstrings` reads them as each class is created, on Python < 3.13 by walking the stack from the
class statement (inspect.getmodule per frame: its first call resolves the path of every loaded module) and
parsing the class's block.  Every ampbench process paid that for text only those two show: measured on the
project's 2-core machine, `import ampbench.commands.run` 0.84-1.07 -> 0.68-0.74 CPU s without it, a trial
worker's imports after Paddle's 0.40 -> 0.25 s (each trial worker, fork server and `ampbench` command imports them).

So the models leave it off, and `described` fills the descriptions in the one process that shows them, with
pydantic's own reader (`extract_docstrings_from_cls`, the class's source found by inspect), then rebuilds each
model so its JSON Schema carries them.  A field keeps a description it was given (`Field(description=...)`);
an inherited field takes the docstring of the class that declares it, as pydantic's copy of the field did.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar, get_args

from pydantic import BaseModel
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

M = TypeVar("M", bound=type[BaseModel])
MARK = "__ampbench_described__"   # set in a model's own __dict__ once it and what it holds are described


def _held(annotation: Any) -> list[type[BaseModel]]:
    """Every model an annotation names: itself, or inside list[...], dict[..., ...], X | None, Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_args(annotation):   # X | None, Optional, list[...], dict[...], Annotated: look inside
        return [m for arg in get_args(annotation) for m in _held(arg)]
    return []


def _docs(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring, from the class in the MRO that declares the field (the model's own first)."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            own = inspect.get_annotations(cls)
            docs = extract_docstrings_from_cls(cls, use_inspect=True)
            found.update({name: doc for name, doc in docs.items() if name in own})
            for name in own:   # a field declared again without a docstring has none, as pydantic's did
                if name not in docs:
                    found.pop(name, None)
    return found


def _describe(model: type[BaseModel], done: dict[type[BaseModel], bool]) -> bool:
    """Describe `model` and what it holds; True where its schema changed (then it is rebuilt)."""
    if model in done:
        return done[model]
    if MARK in model.__dict__:   # described by an earlier call: its sources are not read again
        done[model] = False
        return False
    done[model] = False   # a model that holds itself stops here
    held = [_describe(h, done) for info in model.model_fields.values() for h in _held(info.annotation)]
    docs = _docs(model)   # held models first: a model's schema is built from theirs
    blank = {name: info for name, info in model.model_fields.items() if info.description is None and name in docs}
    for name, info in blank.items():
        info.description = docs[name]
    done[model] = bool(blank) or any(held)
    if done[model]:
        model.model_rebuild(force=True)
    type.__setattr__(model, MARK, True)
    return done[model]


def described(model: M) -> M:
    """`model` and every model its fields hold, each field described by its docstring; returns `model`.

    Idempotent: a model described once is marked and not read or rebuilt again (the reference asks per key)."""
    _describe(model, {})
    return model
