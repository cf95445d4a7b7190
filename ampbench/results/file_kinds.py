"""The registry of every file ampbench writes or reads: its model, where it lives, what it holds.

`ampbench schema` renders each model's JSON Schema into schemas/ (commands/schema.py) and the generated
reference lists them (docs/reference/record.md, report/reference/record.py): one list for both.  Every
model it names is in results/ or below, so it sits here, above them all.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel

from ampbench.config import Suite
from ampbench.record.models import RunInfo, Trial
from ampbench.results.baselines import Baseline
from ampbench.results.bisect_file import BisectFile
from ampbench.results.compare_file import CompareFile
from ampbench.results.diagnosis_file import DiagnosisFile
from ampbench.results.history import RunSummary
from ampbench.results.probe_file import ProbeFile
from ampbench.results.tune_file import TuneFile
from ampbench.results.verdicts import CheckReport


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
