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
    rtol: float = 1e-2
    """|AMP stat - FP32 stat| / max|FP32| beyond this -> "diverged"."""
    zero_frac: float = 0.01
    """Extra zeros in AMP beyond this share of elements -> "underflow"."""


class Finding(BaseModel):
    """One flagged op output of the AMP run, beside its FP32 partner's statistics."""

    index: int
    """Position in the AMP run's op sequence (execution order, 1-based)"""
    step: int
    """The step it was in."""
    phase: str
    """`forward` or `backward`."""
    op: str
    """Paddle's kernel name."""
    kind: Kind
    """`fp32-nonfinite`, `amp-nonfinite`, `fp16-range`, `underflow` or `diverged`."""
    fp32_dtype: str | None = None
    """The FP32 output's dtype."""
    amp_dtype: str | None = None
    """The AMP output's dtype."""
    fp32_max_abs: float | str | None = None
    """Largest |value| of the FP32 output (a number, or "nan"/"inf"/"-inf"; backward outputs divided by the
    loss scale)."""
    amp_max_abs: float | str | None = None
    """Largest |value| of the AMP output."""
    fp32_mean: float | str | None = None
    """Mean of the FP32 output."""
    amp_mean: float | str | None = None
    """Mean of the AMP output."""
    fp32_nan_inf: tuple[int, int] | None = None
    """[NaN count, Inf count] of the FP32 output."""
    amp_nan_inf: tuple[int, int] | None = None
    """[NaN count, Inf count] of the AMP output."""
    rel_diff: float | None = None
    """Largest difference of the two outputs' max, min and mean, over the FP32 output's magnitude."""
    numel: int = 0
    """Elements of the output."""
    count: int = 1
    """Outputs of this op with this finding in the whole dump (first one shown)"""


class ModeDiagnosis(BaseModel):
    """One diagnosed AMP mode: the re-run pair, what was flagged, and where the dumps are."""

    model_config = ConfigDict(extra="allow")
    mode: str
    """The AMP mode."""
    seed: int
    """The seed both re-runs used."""
    steps: int
    """Steps each re-run trained."""
    batch_size: int
    """Both re-runs use the smaller of the two modes' batch sizes."""
    device: str = ""
    """Where they ran."""
    amp_active: bool = False
    """AMP really ran in the AMP re-run."""
    amp_level: str = ""
    """Its level."""
    amp_dtype: str = ""
    """Its dtype."""
    loss_scale: float | None = None
    """The AMP run's first loss scale."""
    status: Literal["ok", "failed"] = "ok"
    """`ok`, or `failed` when a re-run left no dump."""
    summary: str = ""
    """The finding in words."""
    inactive_note: str = ""
    """Set when AMP was inactive, so the pair could not diverge."""
    ops_compared: int = 0
    """Op outputs with an FP32 partner."""
    counts: dict[str, int] = {}
    """Finding kind -> outputs."""
    first_by_kind: dict[str, str] = {}
    """Kind -> the first op."""
    findings: list[Finding] = []
    """The flagged outputs, first first."""
    black_list_candidates: list[str] = []
    """Legacy op names to try in `custom_black_list`."""
    already_black_listed: list[str] = []
    """Candidates the mode already keeps in float32."""
    compare_accuracy: str = ""
    """What Paddle's compare_accuracy did."""
    paddle_infinite_op_types: list[str] = []
    """Paddle compare_accuracy's own list of ops with infinite outputs, a cross-check."""
    trials: dict[str, str] = {}
    """Mode -> status of its re-run."""
    files: dict[str, str] = {}
    """Dumps, logs, workbook, relative to the run folder."""
    tolerances: Tolerances = Tolerances()
    """When two outputs count as different."""
    emulated: bool = False
    """An emulated mode (emulate = true): where its run's emulated trials lost values (diagnose/emulated.py),
    the worst layers first, the first overflow ({step, phase, layer, op, seed}) and what to try."""
    emulated_layers: list[EmulatedLayer] = []
    """An emulated mode's worst layers."""
    emulated_first_overflow: dict[str, Any] | None = None
    """An emulated mode's first overflow."""
    emulated_advice: list[str] = []
    """An emulated mode's lines to try."""


class DiagnosisFile(VersionedDoc):
    """diagnosis.json: every mode diagnosed in one run folder (a later diagnose of a mode replaces it)."""

    SCHEMA: ClassVar[str] = DIAGNOSIS_SCHEMA
    STRICT_JSON: ClassVar[bool] = True  # strict readers read it (core.docs: null + `nonfinite`)
    schema_: str = Field(DIAGNOSIS_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.diagnosis/1`."""
    suite: str
    """The suite."""
    run_dir: str
    """The run folder diagnosed."""
    modes: dict[str, ModeDiagnosis] = {}
    """Mode -> its diagnosis."""


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
