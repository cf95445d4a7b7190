"""diagnosis.json (**contract**, docs/results-format.md): what `ampbench diagnose` found, per mode.

Kept apart from the comparison, the re-run and the rendering so that advice.py, the report and
the schema export can read a diagnosis without importing the machinery that makes one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.docs import VersionedDoc, load_optional
from ampbench.core.store import RunPaths
from ampbench.record.models import EmulatedLayer

DIAGNOSIS_SCHEMA = "ampbench.diagnosis/1"
Kind = Literal["fp32-nonfinite", "amp-nonfinite", "fp16-range", "underflow", "diverged"]
KIND_TEXT = {
    "fp32-nonfinite": "NaN/Inf already in FP32",
    "amp-nonfinite": "NaN/Inf in AMP only",
    "fp16-range": "beyond float16 range",
    "underflow": "values flushed to zero",
    "diverged": "drifts from FP32",
}


class Tolerances(BaseModel):
    """When two op outputs count as different (relative to the FP32 output's magnitude)."""

    model_config = ConfigDict(frozen=True)
    rtol: float = 1e-2          # |AMP stat - FP32 stat| / max|FP32| beyond this -> "diverged"
    zero_frac: float = 0.01     # extra zeros in AMP beyond this share of elements -> "underflow"


class Finding(BaseModel):
    """One flagged op output of the AMP run, beside its FP32 partner's statistics."""

    index: int                  # position in the AMP run's op sequence (execution order, 1-based)
    step: int
    phase: str
    op: str
    kind: Kind
    fp32_dtype: str | None = None
    amp_dtype: str | None = None
    fp32_max_abs: float | str | None = None
    amp_max_abs: float | str | None = None
    fp32_mean: float | str | None = None
    amp_mean: float | str | None = None
    fp32_nan_inf: tuple[int, int] | None = None
    amp_nan_inf: tuple[int, int] | None = None
    rel_diff: float | None = None
    numel: int = 0
    count: int = 1              # outputs of this op with this finding in the whole dump (first one shown)


class ModeDiagnosis(BaseModel):
    """One diagnosed AMP mode: the re-run pair, what was flagged, and where the dumps are."""

    model_config = ConfigDict(extra="allow")
    mode: str
    seed: int
    steps: int
    batch_size: int
    device: str = ""
    amp_active: bool = False
    amp_level: str = ""
    amp_dtype: str = ""
    loss_scale: float | None = None
    status: Literal["ok", "failed"] = "ok"
    summary: str = ""
    inactive_note: str = ""
    ops_compared: int = 0
    counts: dict[str, int] = {}
    first_by_kind: dict[str, str] = {}
    findings: list[Finding] = []
    black_list_candidates: list[str] = []
    already_black_listed: list[str] = []
    compare_accuracy: str = ""
    paddle_infinite_op_types: list[str] = []   # compare_accuracy's own list, a cross-check
    trials: dict[str, str] = {}
    files: dict[str, str] = {}
    tolerances: Tolerances = Tolerances()
    # an emulated mode (emulate = true): where its run's emulated trials lost values (diagnose/emulated.py),
    # the worst layers first, the first overflow ({step, phase, layer, op, seed}) and what to try
    emulated: bool = False
    emulated_layers: list[EmulatedLayer] = []
    emulated_first_overflow: dict[str, Any] | None = None
    emulated_advice: list[str] = []


class DiagnosisFile(VersionedDoc):
    """diagnosis.json: every mode diagnosed in one run folder (a later diagnose of a mode replaces it)."""

    SCHEMA: ClassVar[str] = DIAGNOSIS_SCHEMA
    STRICT_JSON: ClassVar[bool] = True  # strict readers read it (core.docs: null + `nonfinite`)
    schema_: str = Field(DIAGNOSIS_SCHEMA, alias="schema")
    suite: str
    run_dir: str
    modes: dict[str, ModeDiagnosis] = {}


def load_diagnosis(run_dir: Path | str) -> DiagnosisFile | None:
    """diagnosis.json of a run folder, or None when `ampbench diagnose` was never run there."""
    return load_optional(RunPaths(run_dir).diagnosis_json, DiagnosisFile, "diagnosis file", root=Path(run_dir))


def mode_diagnosis(diagnosis: Any, mode: str) -> ModeDiagnosis | None:
    """Accept a ModeDiagnosis, a DiagnosisFile (pick `mode`), or their JSON dicts."""
    if diagnosis is None:
        return None
    if isinstance(diagnosis, dict):
        diagnosis = DiagnosisFile.model_validate(diagnosis) if "modes" in diagnosis else \
            ModeDiagnosis.model_validate(diagnosis)
    if isinstance(diagnosis, DiagnosisFile):
        return diagnosis.modes.get(mode)
    return diagnosis
