"""The base of every record model that is not a file of its own (a trial's `env`, `amp`, `memory`, ...).

Readers tolerate fields added by later versions (`extra="allow"`); writers always fill the known ones.  A
field's docstring is its description (`use_attribute_docstrings`): in the JSON Schemas and the generated
docs/reference/record.md.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class OpenModel(BaseModel):
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)
