"""`ampbench probe`: the largest batch size each precision mode trains without running out of memory.

The seed's claim "AMP lets batch 32 fit where FP32 fits 8" is a statement about a memory
ceiling, so it is measured as one: per mode, try the configured batch size, double until an
attempt runs out of memory (or --max-batch is reached), then binary-search between the last
fit and the first failure.  Each attempt is a short training trial in its own subprocess
(`runner.launch_trial`), so an OOM cannot poison the next attempt's allocator.  On a GPU the
device's memory is the ceiling; on CPU a `--memory-limit` is applied to each subprocess (the
runner kills it when its RSS exceeds the limit), which makes the search testable here.

The search itself is a pure function of an `attempt(batch) -> (fits, peak_bytes)` callable.
Results go to `<out>/<suite>/<run-id>/probe.json` (shape in docs/ocr.md).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from ampbench.config import ConfigError, Suite, load_suite
from ampbench.results import RunDir, RunInfo, Trial, atomic_write_json

PROBE_SCHEMA = "ampbench.probe/1"
FITS_STATUSES = ("ok", "diverged")  # diverging in a few steps still means the batch fitted in memory


@dataclass
class ProbeOptions:
    suite_file: Path
    profile: str | None = None
    modes: list[str] = field(default_factory=list)
    max_batch: int = 256
    memory_limit: str | None = None  # e.g. "6GiB"; required on CPU
    steps: int = 3
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = Path("results/runs")


# ------------------------------------------------------------------ the search (pure)


@dataclass
class Attempt:
    batch_size: int
    fits: bool
    peak_bytes: int | None


@dataclass
class SearchResult:
    max_batch: int        # largest batch that fitted; 0 when even batch 1 did not
    capped: bool          # every tried size fitted up to the --max-batch limit (the true limit may be higher)
    attempts: list[Attempt]

    @property
    def peak_at_max(self) -> int | None:
        return next((a.peak_bytes for a in self.attempts if a.batch_size == self.max_batch and a.fits), None)


class AttemptFailed(Exception):
    """An attempt ended neither fitting nor out of memory (crash, timeout): the search stops."""


def search_max_batch(attempt: Callable[[int], tuple[bool, int | None]], start: int = 1,
                     max_batch: int = 256) -> SearchResult:
    """Doubling from `start` until a failure or `max_batch`, then binary search; assumes that
    memory grows with batch size.  No size is tried twice.  `attempt` may raise AttemptFailed."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    attempts: list[Attempt] = []

    def tried(b: int) -> bool:
        fits, peak = attempt(b)
        attempts.append(Attempt(b, bool(fits), peak))
        return bool(fits)

    lo, hi = 0, None  # largest known fit, smallest known failure
    b = max(1, min(start, max_batch))
    while True:
        if not tried(b):
            hi = b
            break
        lo = b
        if b >= max_batch:
            break
        b = min(2 * b, max_batch)
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if tried(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(max_batch=lo, capped=hi is None, attempts=attempts)


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
        self.run, self.cfg, self.mode, self.seed = run, cfg, mode, seed
        self.suite_file, self.profile, self.config_hash = suite_file, profile, config_hash
        self.limit, self.timeout_s, self.cache_dir = memory_limit_bytes, timeout_s, cache_dir
        self.records: list[dict[str, Any]] = []

    def __call__(self, batch: int) -> tuple[bool, int | None]:
        from ampbench.launch.runner import launch_trial
        from ampbench.launch.spec import TrialSpec

        sub = RunDir(self.run.path / "attempts" / self.mode / f"bs{batch}")
        spec = TrialSpec(
            suite=self.cfg, suite_file=self.suite_file, profile=self.profile, config_hash=self.config_hash,
            mode=self.mode, seed=self.seed, trial_path=str(sub.trial_path(self.mode, self.seed)),
            cache_dir=str(self.cache_dir), batch_size=batch, steps=self.cfg["train"]["steps"],
            timeout_s=self.timeout_s, memory_limit_bytes=self.limit,
        )
        t0 = time.monotonic()
        trial = launch_trial(spec, sub)
        fits = trial.status in FITS_STATUSES
        peak = peak_bytes(trial)
        self.records.append({
            "batch_size": batch, "fits": fits, "status": trial.status, "peak_bytes": peak,
            "memory": trial.memory.model_dump(mode="json"), "amp_active": trial.amp.active,
            "steps_done": len(trial.steps), "wall_s": round(time.monotonic() - t0, 2),
            "trial": str(Path(spec.trial_path).relative_to(self.run.path)),
            "error": _first_line(trial.error) if trial.status not in FITS_STATUSES else None,
        })
        if trial.status not in FITS_STATUSES and trial.status != "oom":
            raise AttemptFailed(f"batch {batch}: trial {trial.status}: {_first_line(trial.error)}")
        return fits, peak


def _first_line(text: str | None) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


# ------------------------------------------------------------------ the verb


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _gib(b: int | None) -> str:
    return "-" if not b else f"{b / 2**30:.2f} GiB"


def run_probe(opts: ProbeOptions, console: Console) -> int:
    """Probe every selected mode; writes probe.json; 0 when every mode was probed, 2 when an
    attempt crashed or timed out (that mode's result is then missing)."""
    from ampbench.launch.runner import default_cache_dir, parse_bytes
    from ampbench.trackers import device

    if opts.steps < 1:
        raise ConfigError("--steps", "", f"must be >= 1, got {opts.steps}")
    if opts.max_batch < 1:
        raise ConfigError("--max-batch", "", f"must be >= 1, got {opts.max_batch}")
    gpu = device.has_gpu_cheap()
    limit = None
    if opts.memory_limit:
        try:
            limit = parse_bytes(opts.memory_limit)
        except ValueError:
            raise ConfigError("--memory-limit", "", f"cannot read {opts.memory_limit!r}; write e.g. 6GiB or 512MiB") from None
        if limit <= 0:
            raise ConfigError("--memory-limit", "", "must be positive")
    elif not gpu:
        raise ConfigError("--memory-limit", "", "no GPU found: give a ceiling for the CPU probe, e.g. --memory-limit 6GiB "
                                                "(without one every batch 'fits' up to --max-batch)")
    loaded = load_suite(opts.suite_file, opts.profile, has_gpu=gpu, overrides=opts.overrides)
    suite = loaded.suite
    names = [m.name for m in suite.modes]
    unknown = [m for m in opts.modes if m not in names]
    if unknown:
        raise ConfigError("--mode", unknown[0], f"unknown mode; suite modes: {', '.join(names)}")
    modes = [m for m in suite.modes if not opts.modes or m.name in opts.modes]
    cfg = probe_config(suite, opts.steps)
    config_hash = Suite.model_validate(cfg).config_hash()
    run_id = dt.datetime.now().strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}-probe"
    run = RunDir(Path(opts.out_dir) / suite.suite.name / run_id)
    run.path.mkdir(parents=True, exist_ok=False)
    seed = suite.suite.seeds[0]
    run.write_run(RunInfo(suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile,
                          run_id=run_id, config_hash=config_hash, plan=[], config=cfg, started=_now(),
                          kind="probe"))
    console.print(f"probe [bold]{suite.suite.name}[/] profile [bold]{loaded.profile}[/], "
                  f"{'device memory' if gpu and not limit else f'ceiling {_gib(limit)} per attempt'}, "
                  f"{opts.steps} step(s) per attempt; folder {run.path}")
    doc: dict[str, Any] = {
        "schema": PROBE_SCHEMA, "suite": suite.suite.name, "suite_file": str(opts.suite_file),
        "profile": loaded.profile, "run_id": run_id, "device": "gpu" if gpu else "cpu",
        "ceiling": "memory_limit" if limit else "device", "memory_limit_bytes": limit,
        "steps": opts.steps, "max_batch_limit": opts.max_batch, "seed": seed, "config_hash": config_hash,
        "started": _now(), "finished": None, "modes": {},
    }
    code = 0
    for mode in modes:
        start = suite.batch_size(mode)
        attempt = TrialAttempts(run, cfg, str(opts.suite_file), loaded.profile, config_hash, mode.name, seed,
                                limit, suite.train.timeout_s, default_cache_dir())
        console.print(f"  {mode.name}: starting at batch {start}")
        entry: dict[str, Any] = {"configured_batch": start, "max_batch": None, "capped": False,
                                 "peak_bytes_at_max": None, "status": "ok", "error": None,
                                 "amp_requested": mode.amp, "amp_active": None, "attempts": attempt.records}
        try:
            res = search_max_batch(attempt, start=start, max_batch=opts.max_batch)
            entry.update(max_batch=res.max_batch, capped=res.capped, peak_bytes_at_max=res.peak_at_max)
        except AttemptFailed as e:
            entry.update(status="error", error=str(e))
            code = 2
        actives = [r["amp_active"] for r in attempt.records if r["status"] in FITS_STATUSES]
        entry["amp_active"] = bool(actives and all(actives)) if mode.amp else False
        doc["modes"][mode.name] = entry
        atomic_write_json(run.path / "probe.json", doc)  # partial results survive an interrupt
        console.print(f"  {mode.name}: {summary_line(mode.name, entry)}")
    doc["finished"] = _now()
    atomic_write_json(run.path / "probe.json", doc)
    print_probe(doc, console)
    return code


def summary_line(name: str, e: dict[str, Any]) -> str:
    if e["status"] != "ok":
        return f"not probed ({e['error']})"
    if not e["max_batch"]:
        return "even batch 1 ran out of memory"
    more = "+" if e["capped"] else ""
    return f"fits {e['max_batch']}{more} (peak {_gib(e['peak_bytes_at_max'])})"


def print_probe(doc: dict[str, Any], console: Console) -> None:
    t = Table(title=f"max batch size ({doc['device']}, {doc['steps']} step(s) per attempt)")
    for c in ("mode", "max batch", "peak at max", "attempts", "AMP"):
        t.add_column(c)
    for name, e in doc["modes"].items():
        mb = "error" if e["status"] != "ok" else f"{e['max_batch']}{'+' if e['capped'] else ''}"
        tries = " ".join(f"{a['batch_size']}{'✓' if a['fits'] else '✗'}" for a in e["attempts"])
        amp = "-" if not e["amp_requested"] else ("active" if e["amp_active"] else "inactive")
        t.add_row(name, mb, _gib(e["peak_bytes_at_max"]), tries, amp)
    console.print(t)
    if any(e["amp_requested"] and not e["amp_active"] for e in doc["modes"].values()):
        console.print("AMP inactive on this device: AMP modes ran in float32, so their batch limits show the "
                      "search works, not what AMP saves.")
    console.print("+ = fitted up to --max-batch; the real limit may be higher.")


def load_probe(run_dir: str | Path) -> dict[str, Any] | None:
    """probe.json of a run folder, or None when it has none (for the report)."""
    from ampbench.results import ResultsError, read_json

    p = Path(run_dir) / "probe.json"
    if not p.is_file():
        return None
    doc = read_json(p, "probe file")
    if not isinstance(doc, dict) or doc.get("schema") != PROBE_SCHEMA:
        raise ResultsError(f"{p}: not an ampbench probe file (expected schema {PROBE_SCHEMA!r})")
    return doc


__all__ = ["ProbeOptions", "run_probe", "search_max_batch", "SearchResult", "Attempt", "AttemptFailed",
           "load_probe"]
