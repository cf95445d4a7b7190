"""Plans trials (modes x seeds) and runs each in its own subprocess.

One process per trial keeps peak memory clean and turns a crash, an OOM or a hang into that
trial's status while the others go on. The runner listens to the worker's event lines (progress
bar, and the steps done so far, so a trial killed mid-way still keeps its partial curve) and
enforces the timeout and an optional memory ceiling (used by `ampbench probe` on CPU).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ampbench.config import ConfigError, LoadedSuite, Suite, load_suite
from ampbench.launch import distributed
from ampbench.launch.spec import EVENT_PREFIX, TrialSpec
from ampbench.results import (
    ResultsError,
    RunDir,
    RunInfo,
    StepRecord,
    Trial,
    load_trial,
    trial_key,
    write_summary_csv,
)

__all__ = ["RunOptions", "TrialSpec", "execute", "launch_trial", "plan_trials", "parse_faults"]

FAULT_ENV = "AMPBENCH_FAULT"  # "MODE:SEED:KIND[,MODE:SEED:KIND...]", KIND in crash|hang|oom|exit|nan
CACHE_ENV = "AMPBENCH_CACHE"


@dataclass
class RunOptions:
    suite_file: Path
    profile: str | None = None
    modes: list[str] = field(default_factory=list)
    seeds: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = Path("results/runs")
    resume: Path | None = None
    strict: bool = False
    report: bool = True
    run_id: str | None = None


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ampbench")


def plan_trials(suite: Suite, only_modes: list[str] | None = None) -> list[tuple[str, int]]:
    """Seed-major order (fp32 and every AMP mode for seed 0, then seed 1...): a run cut short
    still holds matched pairs."""
    names = [m.name for m in suite.modes]
    if only_modes:
        unknown = [m for m in only_modes if m not in names]
        if unknown:
            raise ConfigError("--mode", unknown[0], f"unknown mode; suite modes: {', '.join(names)}")
        names = [n for n in names if n in only_modes or n == "fp32"]
    return [(m, s) for s in suite.suite.seeds for m in names]


def parse_faults(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (text or "").split(",")):
        try:
            mode, seed, kind = item.rsplit(":", 2)
            out[trial_key(mode, int(seed))] = kind
        except ValueError:
            raise ConfigError(FAULT_ENV, item, "expected MODE:SEED:KIND, e.g. amp-o1-fp16:0:crash") from None
    return out


def parse_bytes(text: str) -> int:
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(float(t))


# ---------------------------------------------------------------- one trial


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reader(stream: Any, q: "queue.Queue[dict[str, Any] | None]") -> None:
    for line in stream:
        if line.startswith(EVENT_PREFIX):
            try:
                q.put(json.loads(line[len(EVENT_PREFIX):]))
            except json.JSONDecodeError:
                pass
    q.put(None)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def worker_command(spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "ampbench.trial.worker", str(spec_path)]


def launch_trial(
    spec: TrialSpec,
    run: RunDir,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
) -> Trial:
    """Run one trial in a fresh process; always returns a Trial (written to spec.trial_path)."""
    run.logs_dir.mkdir(parents=True, exist_ok=True)
    key = trial_key(spec.mode, spec.seed)
    spec_path = run.path / "specs" / f"{key}.json"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(spec.model_dump_json(indent=1))
    log_path = run.logs_dir / f"{key}.log"
    trial_path = Path(spec.trial_path)
    trial_path.unlink(missing_ok=True)
    timeout = spec.timeout_s or Suite.model_validate(spec.suite).train.timeout_s
    cmd, dist_env, rank_dir = worker_command(spec_path), {}, None
    dist_cfg = Suite.model_validate(spec.suite).distributed
    if distributed.is_multi_process(dist_cfg):  # N ranks under paddle.distributed.launch, one trial
        rank_dir = run.logs_dir / f"{key}.ranks"
        shutil.rmtree(rank_dir, ignore_errors=True)
        cmd, dist_env = distributed.launch_command(dist_cfg, cmd, rank_dir)
    q: "queue.Queue[dict[str, Any] | None]" = queue.Queue()
    steps: list[StepRecord] = []
    killed: str | None = None
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            text=True, env={**os.environ, **dist_env, **(env or {})}, start_new_session=True,
        )
        reader = threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True)
        reader.start()
        peak_rss = 0
        while True:
            try:
                ev = q.get(timeout=0.2)
            except queue.Empty:
                ev = {}
            if ev is None:
                break
            if ev and ev.get("event") == "step" and steps and ev.get("step", 0) <= steps[-1].step:
                ev = {}  # a repeat: paddle.distributed.launch re-prints a failed rank's log tail
            if ev:
                if ev.get("event") == "step":
                    steps.append(StepRecord.model_validate({k: v for k, v in ev.items() if k != "event"}))
                if on_event:
                    on_event(ev)
            if spec.memory_limit_bytes:
                rss = distributed.ranks_rss_bytes(proc.pid) if rank_dir else _rss_bytes(proc.pid)
                peak_rss = max(peak_rss, rss)
                if rss > spec.memory_limit_bytes:
                    killed = "oom"
            if time.monotonic() - t0 > timeout:
                killed = "timeout"
            if killed:
                distributed.kill_tree(proc.pid) if rank_dir else _kill(proc)
                break
        proc.wait()
        reader.join(timeout=5)
    failure = None if killed or rank_dir is None else distributed.rank_failure(
        rank_dir, log_path, proc.returncode, distributed.world_size_of(dist_cfg))
    if failure is not None and trial_path.exists():  # rank 0 wrote its view; the failing rank decides
        merged = distributed.apply_failure(trial_path, failure)
        if merged is not None:
            return merged
    if not killed and trial_path.exists() and failure is None:
        try:
            return load_trial(trial_path)
        except ResultsError:
            pass  # a half-written file cannot happen (atomic), but a foreign one could: rewrite below
    suite = Suite.model_validate(spec.suite)
    if failure is not None:
        status, error = failure.status, failure.message
    elif killed == "timeout":
        status, error = "timeout", f"trial exceeded its timeout of {timeout:.0f} s and was killed"
    elif killed == "oom":
        status, error = "oom", (f"process memory {peak_rss / 2**20:.0f} MiB exceeded the ceiling of "
                                f"{spec.memory_limit_bytes / 2**20:.0f} MiB and was killed")
    else:
        rc = proc.returncode
        sig = -rc if rc is not None and rc < 0 else None
        status = "oom" if sig == signal.SIGKILL else "crashed"
        error = (f"worker died with {'signal ' + signal.Signals(sig).name if sig else f'exit code {rc}'} "
                 f"before writing its result")
    tail = "" if failure is not None else _tail(log_path)
    trial = Trial(
        suite=suite.suite.name, workload=suite.suite.workload, mode=spec.mode, seed=spec.seed,
        profile=spec.profile, status=status, error=error + ("\n--- last log lines ---\n" + tail if tail else ""),
        config=spec.suite, config_hash=spec.config_hash, steps=steps,
        batch_size=spec.batch_size or suite.batch_size(suite.mode(spec.mode)),
        wall_s=time.monotonic() - t0,
    )
    trial.memory.rss_peak_bytes = peak_rss or None  # None: not measured (no memory ceiling was set)
    run.write_trial(trial) if trial_path == run.trial_path(spec.mode, spec.seed) else \
        trial_path.write_text(json.dumps(trial.to_json()))
    return trial


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# ---------------------------------------------------------------- a whole run


def _new_run_id(suite: str) -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def prepare_run(opts: RunOptions, console: Console) -> tuple[RunDir, RunInfo, Suite]:
    """A new run folder (plan + effective config in run.json), or the one given to --resume."""
    from ampbench.trackers import device

    if opts.resume:
        run = RunDir(opts.resume)
        info = run.load_run()
        suite = Suite.model_validate(info.config)
        console.print(f"resuming [bold]{run.path}[/] (profile {info.profile})")
        return run, info, suite
    loaded: LoadedSuite = load_suite(opts.suite_file, opts.profile, has_gpu=device.has_gpu_cheap(),
                                     overrides=opts.overrides + ([f"suite.seeds=[{opts.seeds}]"] if opts.seeds else []))
    suite = loaded.suite
    plan = plan_trials(suite, opts.modes)
    run_id = opts.run_id or _new_run_id(suite.suite.name)
    run = RunDir(Path(opts.out_dir) / suite.suite.name / run_id)
    run.path.mkdir(parents=True, exist_ok=False)
    info = RunInfo(
        suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile, run_id=run_id,
        config_hash=suite.config_hash(), plan=[{"mode": m, "seed": s} for m, s in plan],
        config=suite.model_dump(mode="json"), started=_now(), overrides=opts.overrides,
    )
    run.write_run(info)
    why = "" if opts.profile else (" (picked automatically: no GPU found)" if loaded.profile == "cpu" else "")
    console.print(f"suite [bold]{suite.suite.name}[/] from {opts.suite_file}, profile [bold]{loaded.profile}[/]{why}")
    console.print(f"run folder: {run.path}")
    return run, info, suite


def execute(opts: RunOptions, console: Console | None = None) -> int:
    """`ampbench run`: all planned trials, then summary.csv, check.json and report.md; returns the exit code."""
    console = console or Console()
    faults = parse_faults(os.environ.get(FAULT_ENV))
    run, info, suite = prepare_run(opts, console)
    plan = [(p["mode"], int(p["seed"])) for p in info.plan]
    done = run.finished_keys() if opts.resume else set()
    todo = [(m, s) for m, s in plan if trial_key(m, s) not in done]
    if done:
        console.print(f"{len(done)} finished trial(s) kept, {len(todo)} to run")
    _warn_unknown_ops(suite, console)
    cache = default_cache_dir()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[info]}"), console=console, transient=False) as progress:
        overall = progress.add_task("trials", total=len(plan), completed=len(plan) - len(todo), info="")
        for mode, seed in todo:
            spec = TrialSpec(
                suite=info.config, suite_file=info.suite_file, profile=info.profile, config_hash=info.config_hash,
                mode=mode, seed=seed, trial_path=str(run.trial_path(mode, seed)), cache_dir=str(cache),
                fault=faults.get(trial_key(mode, seed)),  # type: ignore[arg-type]
            )
            task = progress.add_task(f"  {mode} seed {seed}", total=suite.train.steps, info="starting")

            def on_event(ev: dict[str, Any], task: Any = task) -> None:
                if ev.get("event") == "step":
                    loss = ev.get("loss")
                    progress.update(task, completed=ev["step"],
                                    info=f"loss {loss:.4g}" if isinstance(loss, float) else "loss non-finite")
                elif ev.get("event") == "phase":
                    progress.update(task, info=ev.get("phase", ""))

            trial = launch_trial(spec, run, on_event=on_event)
            progress.update(task, info=_status_text(trial), visible=True)
            progress.remove_task(task)
            progress.advance(overall)
            console.print(f"  {mode} seed {seed}: {_status_text(trial)}")
    info.finished = _now()
    run.write_run(info)
    return finish_run(run, console, strict=opts.strict, report=opts.report)


def _status_text(t: Trial) -> str:
    if t.status != "ok":
        last = (t.error or "").strip().splitlines()
        return f"[red]{t.status}[/]: {last[0] if last else ''}"
    metric = ", ".join(f"{k} {v:.4g}" for k, v in list(t.metrics.items())[:2])
    return f"[green]ok[/] {t.throughput.samples_per_s:.1f} samples/s, {metric}"


def _warn_unknown_ops(suite: Suite, console: Console) -> None:
    from ampbench.trial.precision import unknown_op_names

    for m in suite.modes:
        if m.amp and (m.custom_white_list or m.custom_black_list):
            bad = unknown_op_names(m.custom_white_list + m.custom_black_list)
            if bad:
                console.print(f"[yellow]warning:[/] mode {m.name}: Paddle does not know op name(s) "
                              f"{', '.join(bad)}; Paddle ignores them silently (did you mean lookup_table_v2 for "
                              f"embedding, matmul_v2 for matmul?)")


def finish_run(run: RunDir, console: Console, strict: bool = False, report: bool = True) -> int:
    """summary.csv, the table, check.json (+ report.md); returns the exit code."""
    from ampbench.judge.check import check_run, print_check
    from ampbench.report.console import print_trials

    trials = run.load_trials()
    write_summary_csv(run, trials)
    print_trials(trials, console)
    result = check_run(run.path, strict=strict)
    print_check(result, console)
    if report:
        try:
            from ampbench.report.markdown import write_report

            path = write_report([run.path])
            console.print(f"report: {path}")
        except Exception as e:  # a report bug must not hide the verdict
            console.print(f"[yellow]warning:[/] report failed: {type(e).__name__}: {e}")
    return result.exit_code
