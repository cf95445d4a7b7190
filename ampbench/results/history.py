"""The history store: one `RunSummary` JSON line per run in results/history/<suite>.jsonl.

The nightly job appends a line after each run; the trend report and the dashboard read the file
back as typed models.  A line holds per-mode figures (judge/summary.py computes them from the
trials with the one measurement definition), enough to draw a trend without the (large,
git-ignored) run folders.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ampbench.config import REFERENCE_MODE
from ampbench.core.columns import Col
from ampbench.core.docs import VersionedDoc, validate_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, locked, read_text, safe_name
from ampbench.core.json_read import loads_bounded
from ampbench.core.store import lock_of
from ampbench.record.fields import Column
from ampbench.record.models import Dtype, Level

HISTORY_SCHEMA = "ampbench.history/1"
NOT_CHECKED = "not checked"
MAX_HIST_BINS = 40  # of a mode's step-time histogram (StepTimeHist)
# Looser than a run folder's id (older tools wrote ':' and '+'), but bounded and starting with a letter or
# digit: no control character, no formula start in a CSV cell, no path trick.
HISTORY_RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,511}$"


class TrialPoint(BaseModel):
    """One ok trial of a mode as the pooled history baseline needs it (judge.pooled): the run folders are
    gone after a nightly, the history line stays.  A handful of numbers per trial."""

    # The pooled rule takes logs of the rates: a line from a hand or a tool that holds a rate <= 0 is refused
    # with its file:line and key (load_history), never a traceback.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    seed: int = Field(ge=0)
    """The trial's seed."""
    samples_per_s: float | None = Field(None, gt=0)
    """The trial's median samples/s (judge.measure); None: short."""
    floor_samples_per_s: float | None = Field(None, gt=0)
    """Its fast floor (judge.measure.judged_floor)"""
    trimmed_samples_per_s: float | None = Field(None, gt=0)
    """Its trimmed mean rate (judge.measure.judged_trimmed)"""
    metric: float | None = None
    """The trial's primary metric."""
    peak_bytes: int | None = Field(None, ge=0)
    """Its peak memory."""
    cpu_share: float | None = Field(None, ge=0)
    """Interference evidence of the baseline side (judge.interference)"""
    others_cpu: float | None = Field(None, ge=0)
    """CPU cores other processes used during its window."""
    cpu_count: int = Field(0, ge=0)
    """Cores of its machine."""
    node: str = Field("", max_length=256)
    """Where it ran (results.baselines.node_of): a pool keeps one node's runs."""


class StepTimeHist(BaseModel):
    """A mode's measured step times (all its ok trials) as a histogram of equal bins from `lo_s`: the
    dashboard draws the latest run's, like pytest-benchmark's --benchmark-histogram, after the run folder
    (and its per-step records) is gone.  Bounded to MAX_HIST_BINS counts: about 150 bytes per mode."""

    model_config = ConfigDict(allow_inf_nan=False)
    lo_s: float = Field(ge=0)
    """Left edge of the first bin, seconds."""
    width_s: float = Field(gt=0)
    """Every bin's width, seconds."""
    counts: list[int] = Field(min_length=1, max_length=MAX_HIST_BINS)
    """Measured steps per bin (1 to 40 bins; Freedman-Diaconis width, capped)."""

    @field_validator("counts")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        if any(c < 0 for c in v):
            raise ValueError("counts must be >= 0")
        return v


class ModeSummary(BaseModel):
    # every number finite (a line is JSON; json.loads reads Infinity, NaN and 1e999): a floor of inf or a
    # speedup of NaN would decide a comparison; rates and the speedup are positive when present
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    # the `Col` markers: the per-mode tables' columns (report.md's summary, the trend, the outcome,
    # `compare --format md`, the dashboard's runs, the sweep report; record/fields.py)
    mode: Annotated[str, Col("Mode", "code", rank=10, shows=("modes", "outcome", "compare", "dashboard",
                                                                    "sweep"))]
    """The mode."""
    amp_requested: bool = False
    """The mode asks for AMP."""
    amp_active: bool = False
    """AMP really ran in some ok trial."""
    amp_emulated: bool = False
    """Emulated AMP (a mode's emulate = true): no speedup or memory figure of its own."""
    level: Level = "O0"
    """AMP level."""
    dtype: Dtype = "float32"
    """AMP dtype."""
    batch_size: Annotated[int, Col("Batch", "size", rank=20, shows=("modes",))] = 0
    """Micro-batch per device."""
    trials: int = 0
    """Trials planned."""
    ok: int = 0
    """Trials that ended ok."""
    statuses: dict[str, int] = {}
    """Status -> trials."""
    unit: str = "samples"
    """What a sample is."""
    samples_per_s: Annotated[float | None, Col("Samples/s {ci}", "rate", rank=30,
                                               shows=("modes", "trend", "compare", "dashboard", "sweep"),
                                               ci="samples_per_s_ci")] = Field(None, gt=0)
    """The mode's samples/s: the geometric mean of its trials' median rates (judge/measure.py); positive
    when present."""
    samples_per_s_ci: tuple[float, float] | None = None
    """Its interval [low, high] at `confidence`."""
    floor_samples_per_s: float | None = Field(None, gt=0)
    """The run's fast floor: the median of its trials' floors (judge/measure.py run_floor; the pooled
    history selects runs by it)."""
    speedup: Annotated[float | None, Col("Speedup {ci}", "ratio", rank=40, shows=("modes", "trend", "outcome", "sweep"),
                                         ci="speedup_ci")] = Field(None, gt=0)
    """Samples/s against fp32's: the ratio of the geometric means (the speed rule's estimate); positive."""
    speedup_ci: tuple[float, float] | None = None
    """Its interval."""
    peak_bytes: Annotated[int | None, Col("Peak memory", "bytes", rank=50,
                                          shows=("modes", "trend", "compare", "dashboard"),
                                          note="memory_source")] = None
    """Peak memory: the largest over the ok trials that recorded one (unset when none did)."""
    memory_source: str = "none"
    """Where the peak comes from."""
    memory_reduction: Annotated[float | None, Col("Memory vs fp32", "reduction", rank=55,
                                                  shows=("modes", "outcome"))] = None
    """1 - AMP/FP32 peak memory."""
    metric_mean: float | None = None
    """Mean primary metric over the ok trials."""
    metric_std: float | None = None
    """Its seed-to-seed standard deviation (null for a single value)."""
    metric_n: int = 0
    """Ok trials with a finite metric."""
    metric_delta: float | None = None
    """Mean metric minus fp32's, in the metric's units."""
    skipped_steps: int = 0
    """Skipped steps over the ok trials."""
    total_steps: int = 0
    """Recorded steps over the ok trials."""
    verdict: str = NOT_CHECKED
    """The mode's verdict, or `not checked`."""
    flagged_rules: list[str] = []
    """Results that did not PASS."""
    history_status: str | None = Field(None, max_length=32)
    """What check's history-throughput decided for this mode (judge.series reads it: a FAILed night stays out
    of the pooled baseline until `ampbench history accept`, a pending one until the next night)"""
    history_change: float | None = Field(None, allow_inf_nan=False)
    """The change history-throughput observed for this mode."""
    history_hold: Literal["fail", "pending"] | None = None
    """Whether it holds the night out of later pools (judge.series): "fail" (a regression) or "pending" (a
    slowdown shown at the PASS level only, or slow steps the next night must confirm); None: kept."""
    per_trial: list[TrialPoint] = []
    """Ok trials, for `check --history`'s pooled baseline."""
    step_time_hist: StepTimeHist | None = None
    """Measured step times of the ok trials (the dashboard's histogram)"""


def _skipped(m: ModeSummary, view: Any) -> str | None:
    return f"{m.skipped_steps} / {m.total_steps}" if m.total_steps else None


# A mode's columns computed from several fields (a field's own column is a `Col` on the field)
MODE_COMPUTED: tuple[Column, ...] = (
    Column("metric", Col("{metric} (mean ± sd)", "metric_pm", rank=60,
                         shows=("modes", "trend", "compare", "dashboard")),
           lambda m, v: (m.metric_mean, m.metric_std, m.metric_n)),
    Column("metric_delta", Col("Δ {metric}\nvs fp32", "metric_delta", rank=65, shows=("modes", "outcome")),
           lambda m, v: None if m.mode == REFERENCE_MODE else m.metric_delta),
    Column("skipped", Col("Skipped steps", "text", rank=70, shows=("modes", "compare"), align="r"), _skipped),
)


class RunSummary(VersionedDoc):
    """One line of results/history/<suite>.jsonl (schema HISTORY_SCHEMA), read through validate_doc."""

    SCHEMA: ClassVar[str] = HISTORY_SCHEMA
    schema_: str = Field(HISTORY_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.history/1`."""
    # the `Col` markers: the overview of several runs (report/trend.py), a run a row
    suite: Annotated[str, Col("Suite", "code", rank=10, shows=("overview",))]
    """The suite."""
    workload: str = ""
    """Its workload."""
    run_id: str = Field(pattern=HISTORY_RUN_ID)
    """The run's id: starts with a letter or digit; letters, digits, `_ . : + -` only, at most 512 characters."""
    run_dir: str = ""
    """Where the run folder was."""
    profile: Annotated[str, Col("Profile", "code", rank=30, shows=("overview",))] = ""
    """The profile."""
    started: str = ""
    """UTC start."""
    finished: str | None = None
    """UTC end."""
    config_hash: str = ""
    """The config hash."""
    device: Annotated[str, Col("Device", "text", rank=40, shows=("overview",))] = ""
    """A slug of the device name."""
    device_name: str = ""
    """The device's name."""
    driver: str = ""
    """NVIDIA driver."""
    paddle: str = ""
    """Paddle's version."""
    cuda: str = ""
    """CUDA version."""
    cudnn: str = ""
    """cuDNN version."""
    git_sha: str = ""
    """The ampbench checkout's commit."""
    metric: str = ""
    """The primary metric."""
    metric_goal: str = "max"
    """`max` or `min`."""
    verdict: str = NOT_CHECKED
    """The run's overall verdict, or `not checked`."""
    exit_code: int | None = None
    """Its check's exit code."""
    confidence: float = 0.95
    """Of the intervals below."""
    history_min_change: float | None = Field(None, ge=0, lt=1)
    """The suite's history_min_change: the one segmentation of the series (judge.series) reads it, so the
    dashboard and history bisect cut the series where check --history did."""
    modes: dict[str, ModeSummary] = {}
    """Mode -> its summary; every number finite (a line that breaks this is refused naming file:line and the
    key)."""

    def to_line(self) -> str:
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, separators=(",", ":"), allow_nan=False)


# ---------------------------------------------------------------- the history file


def history_file(history_dir: Path, suite: str) -> Path:
    return Path(history_dir) / f"{safe_name(suite, 'suite')}.jsonl"  # a name from a file: no path tricks


def append_history(summary: RunSummary, history_dir: Path) -> Path:
    """Add (or replace, if the run is already there) the run's summary line; returns the file.

    Re-appending the same run replaces its line, so a re-checked nightly does not count twice.
    The file is rewritten atomically (a crash never leaves half a line behind) under its lock (core.store.lock_of:
    two appends at once each keep their line).
    """
    path = history_file(history_dir, summary.suite)
    Path(history_dir).mkdir(parents=True, exist_ok=True)
    with locked(lock_of(path), "the history file"):   # concurrent appends each keep their line
        lines: list[str] = []
        if path.is_file():
            for i, line in enumerate(read_text(path, "history file", root=path.parent).splitlines(), 1):
                if not line.strip():
                    continue
                if _parse_line(line, path, i).run_id != summary.run_id:  # a corrupt file is refused
                    lines.append(line)
        lines.append(summary.to_line())
        atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def _parse_line(line: str, path: Path, lineno: int) -> RunSummary:
    """One history line through the versioned loader (the error names file:line and the key)."""
    try:
        data = loads_bounded(line)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}:{lineno}: not valid JSON ({e.msg}); fix or delete that line") from None
    except (ValueError, RecursionError) as e:   # an integer past core.json_read.MAX_INT_DIGITS; nesting past the parser's
        what = "is nested too deeply" if isinstance(e, RecursionError) else f"holds {str(e)[:80]}"
        raise ResultsError(f"{path}:{lineno}: {what}; fix or delete that line") from None
    return validate_doc(RunSummary, data, f"{path}:{lineno}")


def iter_history_rows(path: Path, trials: bool = True) -> Iterator[dict[str, Any]]:
    """Each line of one history file, validated, as a plain dict without default values (the dashboard
    holds 100,000 of them: one model at a time, never all).  `trials` false leaves out each mode's
    `per_trial` (validated all the same): the pooled baseline's figures, which a dashboard does not draw
    and which took publish over 1 GB at 100,000 runs (scripts/bench_publish.py --per-trial 3)."""
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"{path}: history file not found")
    drop = None if trials else {"modes": {"__all__": {"per_trial"}}}
    for i, line in enumerate(read_text(path, "history file", root=path.parent).splitlines(), 1):
        if line.strip():
            yield _parse_line(line, path, i).model_dump(mode="json", by_alias=True, exclude_defaults=True,
                                                        exclude=drop)


def load_history(path: Path) -> list[RunSummary]:
    """All lines of one history file, oldest first (by start time), one entry per run id."""
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"{path}: history file not found")
    entries: dict[str, RunSummary] = {}
    for i, line in enumerate(read_text(path, "history file", root=path.parent).splitlines(), 1):
        if line.strip():
            data = _parse_line(line, path, i)
            entries[data.run_id] = data
    return sorted(entries.values(), key=lambda d: (d.started or "", d.run_id))


def history_sources(history: Path, suites: list[str]) -> list[Path]:
    """`--history` is a jsonl file or a folder of <suite>.jsonl; only existing files are returned."""
    history = Path(history)
    if history.is_file():
        return [history]
    if history.is_dir():
        return [p for s in suites if (p := history_file(history, s)).is_file()]
    raise ResultsError(f"{history}: history file or folder not found")
