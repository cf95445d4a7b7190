"""A run's per-mode step times as a pytest-benchmark JSON file (`ampbench compare RUN --format pytest-benchmark`).

Then `pytest-benchmark compare run-a.json run-b.json` (or `--group-by=param`) lines modes and runs
up in pytest-benchmark's own tables and histograms.  Two groups per run:

- `<suite>: seconds per step`: each measured (non-warm-up) step of every ok trial of the mode;
- `<suite>: seconds per sample`: the same steps divided by their sample count, so modes with
  different batch sizes compare fairly; there pytest-benchmark's OPS column is samples/s.

Statistics are pytest-benchmark's own (`pytest_benchmark.stats.Stats`), computed from the raw step
times, which are kept in the file (`data`), as pytest-benchmark does.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_json, check_output, os_reason, safe_name
from ampbench.core.install import install_hint
from ampbench.core.store import RunPaths
from ampbench.record import fields
from ampbench.record.models import Trial
from ampbench.results.run_dir import RunDir

UNITS = {"step": "seconds per step", "sample": "seconds per sample"}


def _stats(samples: list[float]) -> dict[str, Any]:
    try:
        from pytest_benchmark.stats import Stats
    except ImportError:
        raise ResultsError(f"--format pytest-benchmark needs pytest-benchmark: {install_hint('bench')}") from None
    st = Stats()
    for x in samples:
        st.update(x)
    out = st.as_dict()
    out["data"] = list(samples)
    out["iterations"] = 1
    return out


def _samples(trials: list[Trial], per: str) -> list[float]:
    out = []
    for t in trials:
        for s in t.steps:
            if s.warmup or s.time_s <= 0:
                continue
            if per == "sample":
                if s.samples <= 0:
                    continue
                out.append(s.time_s / s.samples)
            else:
                out.append(s.time_s)
    return out


def _benchmark(suite: str, mode: str, per: str, trials: list[Trial]) -> dict[str, Any] | None:
    samples = _samples(trials, per)
    if not samples:
        return None
    active = all(t.amp.active for t in trials)
    requested = any(t.amp.requested for t in trials)
    extra: dict[str, Any] = {
        "unit": UNITS[per], "seeds": sorted(t.seed for t in trials), "batch_size": sorted({t.batch_size for t in trials}),
        "amp_level": trials[0].amp.level, "amp_dtype": trials[0].amp.dtype, "amp_active": active,
        "device": trials[0].env.device, "world_size": trials[0].world_size,
    }
    # each trial's figures, one list per column the catalog exports (record/fields.py), in seed order as above
    ordered = sorted(trials, key=lambda t: t.seed)
    extra.update({c.csv_name: [c.value(t) for t in ordered] for c in fields.columns("export")})
    emulated = any(t.amp.emulated for t in trials)
    extra["amp_emulated"] = emulated
    if emulated:
        extra["note"] = "emulated AMP (emulate = true): float32 kernels plus rounding; not an AMP timing"
    elif requested and not active:
        extra["note"] = "AMP inactive on this device: this mode ran the FP32 path; not an AMP timing"
    return {
        "group": f"{suite}: {UNITS[per]}", "name": f"{suite}[{mode}]", "fullname": f"ampbench/{suite}::{per}[{mode}]",
        "params": {"mode": mode}, "param": mode, "extra_info": extra,
        "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": 1, "max_time": 0.0, "min_time": 0.0,
                    "warmup": False},
        "stats": _stats(samples),
    }


def _machine_info(t: Trial) -> dict[str, Any]:
    e = t.env
    return {
        "node": "", "processor": e.device_name or e.device, "machine": e.platform, "python_compiler": "",
        "python_implementation": "CPython", "python_implementation_version": e.python, "python_version": e.python,
        "python_build": [], "release": "", "system": e.platform, "cpu": {"count": e.cpu_count},
        "ampbench": {"device": e.device, "device_name": e.device_name, "paddle": e.paddle, "cuda": e.cuda,
                     "cudnn": e.cudnn, "driver": e.driver, "numpy": e.numpy},
    }


def export_document(run_dir: Path) -> dict[str, Any]:
    """The pytest-benchmark JSON document for one run folder (ok trials only)."""
    run = RunDir(run_dir)
    info = run.load_run()
    trials = [t for t in run.load_trials() if t.status == "ok"]
    if not trials:
        raise ResultsError(f"{run.path}: no ok trial to export")
    by_mode: dict[str, list[Trial]] = {}
    for t in trials:
        by_mode.setdefault(t.mode, []).append(t)
    benches = [b for per in UNITS for mode, ts in by_mode.items()
               if (b := _benchmark(info.suite, mode, per, ts)) is not None]
    if not benches:
        raise ResultsError(f"{run.path}: no measured (non-warm-up) steps to export")
    try:
        from pytest_benchmark import __version__ as pb_version
    except ImportError:
        pb_version = "unknown"
    first = trials[0]
    return {
        "machine_info": _machine_info(first),
        "commit_info": {"id": first.env.git_sha, "time": info.started, "author_time": info.started, "dirty": False,
                        "project": "ampbench", "branch": ""},
        "benchmarks": benches,
        "datetime": info.started or dt.datetime.now(dt.timezone.utc).isoformat(),
        "version": pb_version,
        "ampbench": {"suite": info.suite, "run_id": info.run_id, "profile": info.profile,
                     "config_hash": info.config_hash},
    }


def export_run(run_dir: Path, output: Path, folder: bool = False) -> Path:
    """Write the run's step times as pytest-benchmark JSON to `output` (a file, or a folder to put <run_id>.json
    in: an existing folder, or any path given with a trailing slash, `-o exports/`, made if missing)."""
    doc = export_document(Path(run_dir))
    out = Path(output)
    if folder and not out.is_dir():
        if out.exists():
            raise ResultsError(f"{out}: is a file; `-o {out}/` asks for a folder")
        try:
            out.mkdir(parents=True)
        except OSError as e:
            raise ResultsError(f"{out}: cannot create the folder: {os_reason(e)}") from None
    if out.is_dir():
        out = out / f"{safe_name(doc['ampbench']['run_id'], 'run_id')}.json"  # a name from run.json
    check_output(out, [RunPaths(run_dir).run_json], kinds=(".json",))
    atomic_write_json(out, doc)
    return out
