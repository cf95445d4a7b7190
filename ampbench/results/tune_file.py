"""tune.json (**contract**): the state of an `ampbench tune` ladder, written after every rung.

It is what `tune --resume DIR` continues from: the suite as loaded, the rungs judged so far (each
with its run folder, verdict and numbers) and the mode the next rung will run.  A rung's trials
live in its own run folder (`rung-K/`); the FP32 arm lives in `rung-0/` only and is reused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ampbench.config.suite import ModeConfig, Suite
from ampbench.core.docs import VersionedDoc, load_doc, write_doc
from ampbench.core.errors import ResultsError

TUNE_SCHEMA = "ampbench.tune/1"


class RungRecord(BaseModel):
    """One judged rung: the change it made, the verdict the rules gave and the numbers behind it."""

    model_config = ConfigDict(extra="allow")
    index: int
    """The rung's place in the ladder."""
    rung: str
    """"start", or the ladder rung's name (docs/tune.md)"""
    why: str = ""
    """The change in words."""
    mode: dict[str, Any]
    """The ModeConfig it ran."""
    run_dir: str
    """Its run folder (`rung-K`, relative)."""
    verdict: str = ""
    """The mode's verdict."""
    failure: str = ""
    """What kind of failure the rung's verdict is (judge.ladder.Failure): `pass`, `inactive`, `error`,
    `stability`, `parity`, `speed`, `data-bound`, `launch-bound`."""
    reason: str = ""
    """The reason the rules gave."""
    speedup: float | None = None
    """The rung's speedup."""
    memory_reduction: float | None = None
    """Its memory reduction."""
    metric_delta: float | None = None
    """Its metric against fp32's."""
    cost_s: float = 0.0
    """Wall time of the rung's trials."""
    skipped: list[str] = []
    """Rungs passed over before this one, each "name: why"."""


class TuneFile(VersionedDoc):
    SCHEMA: ClassVar[str] = TUNE_SCHEMA
    schema_: str = Field(TUNE_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.tune/1`."""
    suite: str
    """The suite tuned."""
    suite_file: str
    """Its file."""
    profile: str
    """The profile."""
    config: dict[str, Any]
    """The suite as loaded (fp32 + the starting mode)"""
    budget_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    """The time budget of the ladder's judged rungs (`--budget`; null: none), a finite number."""
    max_rungs: int = Field(8, ge=1, le=32)
    """Rungs at most."""
    rungs: list[RungRecord] = []
    """Every judged rung."""
    pending: dict[str, Any] | None = None
    """The next rung: {"rung", "why", "mode", "skipped"}."""
    stopped: str = ""
    """Why the ladder ended ("" while it can go on)"""
    winner: int | None = None
    """Index of the first rung that passed every rule."""

    def write(self, folder: Path) -> None:
        write_doc(Path(folder) / "tune.json", self, root=Path(folder))


def load_tune(folder: Path) -> TuneFile:
    """tune.json, every part `tune --resume` goes on with validated here (the suite, each rung's mode, the
    pending rung): a tampered file is one line naming its key, never a traceback half-way up the ladder."""
    path = Path(folder) / "tune.json"
    doc = load_doc(path, TuneFile, "tune file", root=Path(folder))
    parts: list[tuple[str, type[BaseModel], Any]] = [("config", Suite, doc.config)]
    parts += [(f"rungs.{i}.mode", ModeConfig, r.mode) for i, r in enumerate(doc.rungs)]
    if doc.pending is not None:
        missing = [k for k in ("rung", "why", "mode") if k not in doc.pending]
        if missing:
            raise ResultsError(f"{path}: pending.{missing[0]}: Field required")
        parts.append(("pending.mode", ModeConfig, doc.pending["mode"]))
    for key, model, data in parts:
        try:
            model.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise ResultsError(f"{path}: {key}{'.' + loc if loc else ''}: {err['msg']}") from None
    if doc.winner is not None and not 0 <= doc.winner < len(doc.rungs):
        raise ResultsError(f"{path}: winner: {doc.winner} is not the index of one of its {len(doc.rungs)} rung(s)")
    return doc
