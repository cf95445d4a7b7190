"""Accepted new levels of a history: who decided that a regression is the new baseline, when and why.

A night whose history-throughput estimate is below -history_min_change stays out of the pooled
baseline (judge.pooled.select), so a regression missed on its first night cannot become the level the
later nights are judged against.  Only a person ends that: `ampbench history accept` records here
that the level from a run on is intended (a slower but correct kernel, a new data pipeline), and the
segment of the pooled baseline starts at that run.  The records sit beside the history file,
<suite>.accepted.json next to <suite>.jsonl (a separate file: the history lines keep one schema, and
the dashboard's `*.jsonl` listing never reads it); each record is kept, none is replaced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.docs import VersionedDoc, load_doc, write_doc
from ampbench.core.files import locked
from ampbench.core.store import ACCEPTED_SUFFIX, lock_of
from ampbench.results.history import HISTORY_RUN_ID

ACCEPTS_SCHEMA = "ampbench.history-accepts/1"
MAX_ACCEPTS = 10_000  # a file with more records than this is not one a person wrote a record at a time


class AcceptRecord(BaseModel):
    """One accepted level: the pooled baseline starts at `run_id`; the nights in `cleared` (those from
    `run_id` on when it was accepted, judged against the old level) join it; `by` and `why` say who
    decided and why."""

    model_config = ConfigDict(extra="allow")
    suite: str = Field(min_length=1, max_length=200)
    run_id: str = Field(pattern=HISTORY_RUN_ID)
    cleared: list[Annotated[str, Field(pattern=HISTORY_RUN_ID)]] = Field(default_factory=list, max_length=100_000)
    by: str = Field(min_length=1, max_length=200)
    why: str = Field(min_length=1, max_length=2000)
    at: str = Field(min_length=1, max_length=64)  # UTC time of the decision (ISO 8601)


class AcceptsFile(VersionedDoc):
    SCHEMA: ClassVar[str] = ACCEPTS_SCHEMA
    schema_: str = Field(ACCEPTS_SCHEMA, alias="schema")
    accepts: list[AcceptRecord] = Field(default_factory=list, max_length=MAX_ACCEPTS)


def accepts_path(history_file: Path) -> Path:
    """<suite>.accepted.json beside the history file <suite>.jsonl."""
    p = Path(history_file)
    return p.with_name(p.name.removesuffix(".jsonl") + ACCEPTED_SUFFIX)


def load_accepts(history_file: Path, suite: str | None = None) -> list[AcceptRecord]:
    """The records beside a history file (none when it has no file yet), of `suite` when given."""
    path = accepts_path(history_file)
    if not os.path.lexists(path):
        return []
    doc = load_doc(path, AcceptsFile, "history accepts file", root=path.parent)   # never read through a link
    return [a for a in doc.accepts if suite is None or a.suite == suite]


def add_accept(history_file: Path, record: AcceptRecord) -> Path:
    """Append one record (the file is rewritten atomically, never through a link; earlier records kept), under
    the file's lock: ten `history accept` at once keep ten records (without it, 3-7)."""
    path = accepts_path(history_file)
    with locked(lock_of(path), "the history's accepts file"):
        old = load_accepts(history_file)
        write_doc(path, AcceptsFile(accepts=[*old, record]))
    return path
