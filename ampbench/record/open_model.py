"""The base of every record model that is not a file of its own (a trial's `env`, `amp`, `memory`, ...).

Readers tolerate fields added by later versions (`extra="allow"`); writers always fill the known ones.  A
field's docstring is its description: in the JSON Schemas and the generated docs/reference/record.md, read when
they are made (core/field_docs.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class OpenModel(BaseModel):
    model_config = ConfigDict(extra="allow")
