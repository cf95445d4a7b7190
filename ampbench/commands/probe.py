"""`ampbench probe`: the largest batch size each precision mode trains without running out of memory.

The seed's claim "AMP lets batch 32 fit where FP32 fits 8" is a statement about a memory
ceiling, so it is measured as one: per mode, try the configured batch size, double until an
attempt runs out of memory (or --max-batch is reached), then binary-search between the last
fit and the first failure.  Each attempt is a short training trial in its own subprocess
(`runner.launch_trial`), so an OOM cannot poison the next attempt's allocator.  On a GPU the
device's memory is the ceiling; on CPU a `--memory-limit` is applied to each subprocess (the
runner kills it when its RSS exceeds the limit), which makes the search testable here.

The search itself (`max_batch.search_max_batch`) is a pure function of an
`attempt(batch) -> (fits, peak_bytes)` callable.  Results go to `<out>/<suite>/<run-id>-probe/probe.json`
(`max_batch.ProbeFile`; fields in docs/reference/record.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ampbench.config import ConfigError, LoadedSuite, ModeConfig, Suite
from ampbench.core.docs import write_doc
from ampbench.core.files import last_line
from ampbench.core.names import new_run_id, utc_now
from ampbench.core.store import PROBE_TAG, RUNS_DIR
from ampbench.core.units import parse_bytes
from ampbench.engine.plan import default_cache_dir
from ampbench.engine.trials import ForkServer, launch_trial
from ampbench.record.models import PlanEntry, RunInfo, Trial
from ampbench.report.console import cell_text, table_box
from ampbench.results.probe_file import (
    FITS_STATUSES,
    PROBE_SCHEMA,
    Attempt,
    AttemptFailed,
    ProbeAttempt,
    ProbeFile,
    ProbeMode,
    SearchResult,
    load_probe,
    search_max_batch,
)
from ampbench.results.run_dir import RunDir
from ampbench.trial.spec import TrialSpec
from ampbench.workloads.suites import load_suite


@dataclass
class ProbeOptions:
    suite_file: Path
    profile: str | None = None
    modes: list[str] = field(default_factory=list)
    max_batch: int = 256
    memory_limit: str | None = None  # e.g. "6GiB"; required on CPU
    steps: int = 3
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = RUNS_DIR


# ------------------------------------------------------------------ real attempts


def peak_bytes(trial: Trial) -> int | None:
    """The memory figure the ceiling applies to: device memory on GPU, process RSS on CPU."""
    m = trial.memory
    if m.source == "cuda":
        return m.device_used_bytes or m.peak_reserved_bytes or m.peak_allocated_bytes or None
    return m.rss_peak_bytes or None


def probe_config(suite: Suite, steps: int) -> dict[str, Any]:
    """The suite as an attempt runs it: `steps` steps, all measured (memory from step 1), no evals."""
    cfg = suite.model_dump(mode="json")
    cfg["train"].update(steps=steps, warmup_steps=0, eval_every=0, target=None)
    return cfg


class TrialAttempts:
    """attempt(batch) for one mode: a real training trial in a subprocess, kept in a sub-folder."""

    def __init__(self, run: RunDir, cfg: dict[str, Any], suite_file: str, profile: str, config_hash: str,
                 mode: str, seed: int, memory_limit_bytes: int | None, timeout_s: float, cache_dir: Path):
        self.run, self.suite, self.mode, self.seed = run, Suite.model_validate(cfg), mode, seed
        self.suite_file, self.profile, self.config_hash = suite_file, profile, config_hash
        self.limit, self.timeout_s, self.cache_dir = memory_limit_bytes, timeout_s, cache_dir
        self.forks: ForkServer | None = None   # the probe's fork server: attempts forked from one Paddle import
        self.records: list[ProbeAttempt] = []

    def __call__(self, batch: int) -> tuple[bool, int | None]:
        sub = RunDir(self.run.attempt_dir(self.mode, batch))
        spec = TrialSpec(
            suite=self.suite, suite_file=self.suite_file, profile=self.profile, config_hash=self.config_hash,
            mode=self.mode, seed=self.seed, trial_path=str(sub.trial_path(self.mode, self.seed)),
            cache_dir=str(self.cache_dir), batch_size=batch, steps=self.suite.train.steps,
            timeout_s=self.timeout_s, memory_limit_bytes=self.limit,
        )
        t0 = time.monotonic()
        trial = launch_trial(spec, sub, forks=self.forks)
        fits = trial.status in FITS_STATUSES
        peak = peak_bytes(trial)
        self.records.append(ProbeAttempt(
            batch_size=batch, fits=fits, status=trial.status, peak_bytes=peak, memory=trial.memory,
            amp_active=trial.amp.active, steps_done=len(trial.steps), wall_s=round(time.monotonic() - t0, 2),
            trial=str(Path(spec.trial_path).relative_to(self.run.path)),
            error=None if fits else last_line(trial.error, 300),
        ))
        if not fits and trial.status != "oom":
            raise AttemptFailed(f"batch {batch}: trial {trial.status}: {last_line(trial.error, 300)}")
        return fits, peak


# ------------------------------------------------------------------ the verb


def _gib(b: int | None) -> str:
    return "-" if not b else f"{b / 2**30:.2f} GiB"


def _ceiling(opts: ProbeOptions, gpu: bool) -> int | None:
    """The per-attempt memory limit in bytes (None: the GPU's own memory); refuses a CPU probe without one."""
    if opts.steps < 1:
        raise ConfigError("--steps", "", f"must be >= 1, got {opts.steps}")
    if opts.max_batch < 1:
        raise ConfigError("--max-batch", "", f"must be >= 1, got {opts.max_batch}")
    if not opts.memory_limit:
        if gpu:
            return None
        raise ConfigError("--memory-limit", "", "no GPU found: give a ceiling for the CPU probe, e.g. --memory-limit 6GiB "
                                                "(without one every batch 'fits' up to --max-batch)")
    try:
        limit = parse_bytes(opts.memory_limit)
    except ValueError:
        raise ConfigError("--memory-limit", "", f"cannot read {opts.memory_limit!r}; write e.g. 6GiB or 512MiB") from None
    if limit <= 0:
        raise ConfigError("--memory-limit", "", "must be positive")
    return limit


def _selected_modes(suite: Suite, wanted: list[str]) -> list[ModeConfig]:
    names = [m.name for m in suite.modes]
    unknown = [m for m in wanted if m not in names]
    if unknown:
        raise ConfigError("--mode", unknown[0], f"unknown mode; suite modes: {', '.join(names)}")
    return [m for m in suite.modes if not wanted or m.name in wanted]


def _new_probe(opts: ProbeOptions, loaded: LoadedSuite, gpu: bool, limit: int | None,
               modes: list[ModeConfig]) -> tuple[RunDir, ProbeFile, dict[str, Any]]:
    """The probe's run folder (run.json of kind "probe", planning each probed mode at the first seed),
    its probe.json (not yet written), the attempts' config."""
    suite = loaded.suite
    seed = suite.suite.seeds[0]
    cfg = probe_config(suite, opts.steps)
    config_hash = Suite.model_validate(cfg).config_hash()
    run_id = new_run_id(PROBE_TAG)
    run = RunDir(Path(opts.out_dir) / suite.suite.name / run_id)
    run.path.mkdir(parents=True, exist_ok=False)
    started = utc_now()
    run.write_run(RunInfo(suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile,
                          run_id=run_id, config_hash=config_hash, config=cfg, started=started,
                          plan=[PlanEntry(mode=m.name, seed=seed) for m in modes],
                          kind="probe"))
    doc = ProbeFile(
        suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile, run_id=run_id,
        device="gpu" if gpu else "cpu", ceiling="memory_limit" if limit else "device", memory_limit_bytes=limit,
        steps=opts.steps, max_batch_limit=opts.max_batch, seed=seed, config_hash=config_hash,
        started=started,
    )
    return run, doc, cfg


def _probe_mode(run: RunDir, doc: ProbeFile, cfg: dict[str, Any], suite: Suite, mode: ModeConfig,
                limit: int | None, console: Console, forks: ForkServer | None = None) -> ProbeMode:
    """Search one mode; a crashed or timed-out attempt ends it with status error."""
    start = suite.batch_size(mode)
    attempt = TrialAttempts(run, cfg, doc.suite_file, doc.profile, doc.config_hash, mode.name, doc.seed, limit,
                            suite.train.timeout_s, default_cache_dir())
    attempt.forks = forks
    console.print(f"  {escape(mode.name)}: starting at batch {start}")
    entry = ProbeMode(configured_batch=start, amp_requested=mode.amp)
    try:
        res = search_max_batch(attempt, start=start, max_batch=doc.max_batch_limit)
        entry.max_batch, entry.capped, entry.peak_bytes_at_max = res.max_batch, res.capped, res.peak_at_max
    except AttemptFailed as e:
        entry.status, entry.error = "error", str(e)
    entry.attempts = attempt.records
    actives = [a.amp_active for a in attempt.records if a.status in FITS_STATUSES]
    entry.amp_active = bool(actives and all(actives)) if mode.amp else False
    return entry


def run_probe(opts: ProbeOptions, console: Console) -> int:
    """Probe every selected mode; writes probe.json; 0 when every mode was probed, 2 when an
    attempt crashed or timed out (that mode's result is then missing)."""
    from ampbench.trackers import device

    gpu = device.has_gpu_cheap()
    limit = _ceiling(opts, gpu)
    loaded = load_suite(opts.suite_file, opts.profile, has_gpu=gpu, overrides=opts.overrides)
    modes = _selected_modes(loaded.suite, opts.modes)
    run, doc, cfg = _new_probe(opts, loaded, gpu, limit, modes)
    console.print(f"probe [bold]{escape(doc.suite)}[/] profile [bold]{escape(doc.profile)}[/], "
                  f"{'device memory' if gpu and not limit else f'ceiling {_gib(limit)} per attempt'}, "
                  f"{opts.steps} step(s) per attempt; folder {escape(str(run.path))}")
    with ForkServer(str(run.path.absolute()), loaded.suite.suite.workload) as forks:
        for mode in modes:
            doc.modes[mode.name] = entry = _probe_mode(run, doc, cfg, loaded.suite, mode, limit, console, forks)
            write_doc(run.probe_json, doc)  # partial results survive an interrupt
            console.print(f"  {mode.name}: {summary_line(entry)}", markup=False)
    doc.finished = utc_now()
    write_doc(run.probe_json, doc)
    print_probe(doc, console)
    return 2 if any(e.status != "ok" for e in doc.modes.values()) else 0


def summary_line(e: ProbeMode) -> str:
    if e.status != "ok":
        return f"not probed ({e.error})"
    if not e.max_batch:
        return "even batch 1 ran out of memory"
    more = "+" if e.capped else ""
    return f"fits {e.max_batch}{more} (peak {_gib(e.peak_bytes_at_max)})"


def print_probe(doc: ProbeFile, console: Console) -> None:
    t = Table(title=f"max batch size ({doc.device}, {doc.steps} step(s) per attempt)", box=table_box(console))
    for c in ("mode", "max batch", "peak at max", "attempts", "AMP"):
        t.add_column(c)
    for name, e in doc.modes.items():
        mb = "error" if e.status != "ok" else f"{e.max_batch}{'+' if e.capped else ''}"
        tries = " ".join(f"{a.batch_size}{'✓' if a.fits else '✗'}" for a in e.attempts)
        amp = "-" if not e.amp_requested else ("active" if e.amp_active else "inactive")
        t.add_row(*(cell_text(x, console) for x in (escape(name), mb, _gib(e.peak_bytes_at_max), tries, amp)))
    console.print(t)
    if any(e.amp_requested and not e.amp_active for e in doc.modes.values()):
        console.print("AMP inactive on this device: AMP modes ran in float32, so their batch limits show the "
                      "search works, not what AMP saves.")
    console.print("+ = fitted up to --max-batch; the real limit may be higher.")


__all__ = [
    "PROBE_SCHEMA",
    "Attempt",
    "AttemptFailed",
    "ProbeAttempt",
    "ProbeFile",
    "ProbeMode",
    "ProbeOptions",
    "SearchResult",
    "load_probe",
    "run_probe",
    "search_max_batch",
]
