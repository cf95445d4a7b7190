"""Trial and run records (the **contract** of DESIGN.md) and the run folder that holds them.

Every write is atomic (temp file + rename) so an interrupted run never leaves half a JSON file;
every read validates and names the file when something is wrong.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

TRIAL_SCHEMA = "ampbench.trial/1"
RUN_SCHEMA = "ampbench.run/1"
CHECK_SCHEMA = "ampbench.check/1"

Status = Literal["ok", "oom", "diverged", "crashed", "timeout"]


class ResultsError(Exception):
    """A result file that is missing, truncated or not ours; the message names the file."""


class _Open(BaseModel):
    # Readers tolerate fields added by later versions; writers always fill the known ones.
    model_config = ConfigDict(extra="allow")


class Env(_Open):
    paddle: str = ""
    paddle_commit: str = ""
    cuda: str = ""
    cudnn: str = ""
    device: str = ""
    device_name: str = ""
    driver: str = ""
    python: str = ""
    numpy: str = ""
    platform: str = ""
    cpu_count: int = 0
    git_sha: str = ""
    ampbench: str = ""


class AmpInfo(_Open):
    requested: bool = False
    active: bool = False
    level: str = "O0"
    dtype: str = "float32"
    use_promote: bool = True
    white_list: list[str] = []
    black_list: list[str] = []
    default_lists_hash: str = ""
    unknown_op_names: list[str] = []
    op_calls: dict[str, dict[str, int]] = {}
    scaler: dict[str, Any] = {}
    scaler_enabled: bool = False
    evidence: str = ""
    inactive_reason: str = ""


class StepRecord(_Open):
    step: int
    loss: float | None
    time_s: float
    loss_scale: float | None = None
    found_inf: bool = False
    samples: int = 0
    warmup: bool = False  # warm-up steps are recorded but excluded from throughput


class Throughput(_Open):
    samples_per_s: float = 0.0
    step_time_median_s: float = 0.0
    step_time_p90_s: float = 0.0
    measured_steps: int = 0
    unit: str = "samples"
    extra_per_s: dict[str, float] = {}


class Memory(_Open):
    source: Literal["cuda", "host", "none"] = "none"
    peak_allocated_bytes: int = 0
    peak_reserved_bytes: int = 0
    rss_peak_bytes: int = 0
    device_used_bytes: int = 0


class EvalRecord(_Open):
    step: int
    wall_s: float
    metrics: dict[str, float]


class Trial(_Open):
    schema_: str = Field(TRIAL_SCHEMA, alias="schema")
    suite: str
    workload: str
    mode: str
    seed: int
    profile: str = "default"
    status: Status
    error: str | None = None
    config: dict[str, Any] = {}
    config_hash: str = ""
    env: Env = Env()
    amp: AmpInfo = AmpInfo()
    steps: list[StepRecord] = []
    throughput: Throughput = Throughput()
    memory: Memory = Memory()
    metrics: dict[str, float] = {}
    evals: list[EvalRecord] = []
    time_to_target: dict[str, Any] | None = None
    skipped_steps: int = 0
    nonfinite_losses: int = 0
    wall_s: float = 0.0
    batch_size: int = 0
    grad_accum: int = 1
    world_size: int = 1
    numerics: dict[str, Any] | None = None

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @property
    def key(self) -> str:
        return trial_key(self.mode, self.seed)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def trial_key(mode: str, seed: int) -> str:
    return f"{mode}__seed{seed}"


class RunInfo(_Open):
    schema_: str = Field(RUN_SCHEMA, alias="schema")
    suite: str
    suite_file: str
    profile: str
    run_id: str
    config_hash: str
    plan: list[dict[str, Any]]
    config: dict[str, Any]
    env: Env = Env()
    started: str = ""
    finished: str | None = None
    model_config = ConfigDict(extra="allow", populate_by_name=True)


# ---------------------------------------------------------------- files


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False, allow_nan=True) + "\n")


def read_json(path: Path, what: str = "result file") -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: {what} not found") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: {what} is not valid JSON ({e}); truncated or corrupt?") from None


def _validated(model: type[BaseModel], data: Any, path: Path, schema: str) -> Any:
    if not isinstance(data, dict) or data.get("schema") != schema:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultsError(f"{path}: not an ampbench file (expected schema {schema!r}, found {got!r})")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ResultsError(f"{path}: {key}: {err['msg']}") from None


def load_trial(path: Path) -> Trial:
    return _validated(Trial, read_json(path, "trial file"), path, TRIAL_SCHEMA)


class RunDir:
    """A run folder: run.json, trials/, logs/, summary.csv, check.json, report.md, plots/."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def trials_dir(self) -> Path:
        return self.path / "trials"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    def trial_path(self, mode: str, seed: int) -> Path:
        return self.trials_dir / f"{trial_key(mode, seed)}.json"

    def log_path(self, mode: str, seed: int) -> Path:
        return self.logs_dir / f"{trial_key(mode, seed)}.log"

    def write_run(self, info: RunInfo) -> None:
        atomic_write_json(self.path / "run.json", info.model_dump(mode="json", by_alias=True))

    def load_run(self) -> RunInfo:
        if not self.path.is_dir():
            raise ResultsError(f"{self.path}: run folder not found")
        return _validated(RunInfo, read_json(self.path / "run.json", "run file"), self.path / "run.json", RUN_SCHEMA)

    def write_trial(self, trial: Trial) -> Path:
        p = self.trial_path(trial.mode, trial.seed)
        atomic_write_json(p, trial.to_json())
        return p

    def load_trials(self) -> list[Trial]:
        """All trial files, sorted by (mode order in the plan, seed); any bad file raises."""
        files = sorted(self.trials_dir.glob("*.json"))
        trials = [load_trial(p) for p in files]
        try:
            order = {m: i for i, m in enumerate(dict.fromkeys(p["mode"] for p in self.load_run().plan))}
        except ResultsError:
            order = {}
        return sorted(trials, key=lambda t: (order.get(t.mode, 999), t.mode, t.seed))

    def finished_keys(self) -> set[str]:
        """Trials that need no re-run on --resume: a readable file with a final status."""
        done = set()
        for p in self.trials_dir.glob("*.json"):
            try:
                t = load_trial(p)
            except ResultsError:
                continue
            if t.status == "ok":
                done.add(t.key)
        return done


def summary_rows(trials: list[Trial]) -> list[dict[str, Any]]:
    """One flat row per trial (the summary.csv columns)."""
    rows = []
    for t in trials:
        row: dict[str, Any] = {
            "suite": t.suite, "mode": t.mode, "seed": t.seed, "profile": t.profile, "status": t.status,
            "batch_size": t.batch_size, "samples_per_s": t.throughput.samples_per_s,
            "step_time_median_s": t.throughput.step_time_median_s,
            "step_time_p90_s": t.throughput.step_time_p90_s,
            "measured_steps": t.throughput.measured_steps,
            "memory_source": t.memory.source, "peak_allocated_bytes": t.memory.peak_allocated_bytes,
            "peak_reserved_bytes": t.memory.peak_reserved_bytes, "rss_peak_bytes": t.memory.rss_peak_bytes,
            "amp_requested": t.amp.requested, "amp_active": t.amp.active, "amp_level": t.amp.level,
            "amp_dtype": t.amp.dtype, "skipped_steps": t.skipped_steps, "nonfinite_losses": t.nonfinite_losses,
            "final_loss": next((s.loss for s in reversed(t.steps) if s.loss is not None), None),
            "wall_s": t.wall_s, "error": (t.error or "").strip().splitlines()[-1][:200] if t.error else "",
        }
        for k, v in t.metrics.items():
            row[f"metric_{k}"] = v
        rows.append(row)
    return rows


def write_summary_csv(run: RunDir, trials: list[Trial]) -> Path:
    import csv
    import io

    rows = summary_rows(trials)
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    p = run.path / "summary.csv"
    atomic_write_text(p, buf.getvalue())
    return p


def load_summary(run_path: str | Path):  # -> pandas.DataFrame
    """summary.csv as a DataFrame (pandas imported lazily: the CLI must start fast)."""
    import pandas as pd

    return pd.read_csv(Path(run_path) / "summary.csv")
