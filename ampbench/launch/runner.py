"""Runs a planned run: each trial in its own subprocess, then summary, check and report.

One process per trial keeps peak memory clean and turns a crash, an OOM or a hang into that
trial's status while the others go on. The runner listens to the worker's event lines (progress
bar, and the steps done so far, so a trial killed mid-way still keeps its partial curve).
Planning and up-front validation live in plan.py, the worker process itself in process.py.
Ctrl-C / SIGTERM stop the current worker's whole tree, keep the finished trials and say how to resume.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ampbench.config import ConfigError, Suite, load_suite
from ampbench.launch import distributed
from ampbench.launch.plan import (
    CACHE_ENV,
    FAULT_ENV,
    RunOptions,
    default_cache_dir,
    load_resume,
    make_spec,
    parse_bytes,
    parse_faults,
    parse_seeds,
    plan_trials,
)
from ampbench.launch.process import (
    Interrupted,
    Limits,
    Outcome,
    keep_signal_handlers,
    run_worker,
    worker_command,
)
from ampbench.launch.spec import TrialSpec
from ampbench.results import (
    ResultsError,
    RunDir,
    RunInfo,
    StepRecord,
    Trial,
    atomic_write_json,
    atomic_write_text,
    load_trial,
    new_run_dir,
    open_run,
    run_lock,
    tail_lines,
    trial_key,
    write_summary_csv,
)

__all__ = [
    "CACHE_ENV",
    "FAULT_ENV",
    "RunOptions",
    "TrialSpec",
    "default_cache_dir",
    "execute",
    "launch_trial",
    "parse_bytes",
    "parse_faults",
    "plan_trials",
    "worker_command",
]


# ---------------------------------------------------------------- one trial


def _step_collector(steps: list[StepRecord], on_event: Callable[[dict[str, Any]], None] | None
                    ) -> Callable[[dict[str, Any]], None]:
    """Keeps each step event once (paddle.distributed.launch re-prints a failed rank's log tail)."""
    def handle(ev: dict[str, Any]) -> None:
        if ev.get("event") == "step":
            step = ev.get("step", 0)
            if not isinstance(step, int) or (steps and step <= steps[-1].step):
                return
            try:
                steps.append(StepRecord.model_validate({k: v for k, v in ev.items() if k != "event"}))
            except ValueError:
                return
        if on_event:
            on_event(ev)
    return handle


def _killed_status(out: Outcome, spec: TrialSpec, timeout: float) -> tuple[str, str]:
    """Status and error for a worker that left no result: only what is known (who killed it, why)."""
    mib = out.peak_rss / 2**20
    if out.killed == "timeout":
        return "timeout", f"trial exceeded its timeout of {timeout:.0f} s and was killed"
    if out.killed == "oom":
        limit = (spec.memory_limit_bytes or 0) / 2**20
        return "oom", f"process memory {mib:.0f} MiB exceeded the ceiling of {limit:.0f} MiB and was killed"
    sig = out.signal
    if sig is None:
        return "crashed", f"worker died with exit code {out.returncode} before writing its result"
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    if out.oom_kills > 0:
        return "oom", (f"worker killed by {name}: the kernel OOM killer fired {out.oom_kills} time(s) in this "
                       f"cgroup meanwhile (peak RSS seen {mib:.0f} MiB)")
    ceiling = "no memory ceiling was set" if not spec.memory_limit_bytes else \
        f"below the ceiling of {spec.memory_limit_bytes / 2**20:.0f} MiB"
    oom = "no kernel OOM kill was recorded" if out.oom_kills == 0 else "kernel OOM kills not observable here"
    return "crashed", (f"worker killed by {name}, not by ampbench (peak RSS seen {mib:.0f} MiB, {ceiling}; "
                       f"{oom})")


def _launch_cmd(spec: TrialSpec, spec_path: Path, run: RunDir, key: str) -> tuple[list[str], dict[str, str], Path | None]:
    cmd, env, rank_dir = worker_command(spec_path), {}, None
    if distributed.is_multi_process(spec.suite.distributed):  # N ranks under paddle.distributed.launch
        rank_dir = run.logs_dir / f"{key}.ranks"
        shutil.rmtree(rank_dir, ignore_errors=True)
        cmd, env = distributed.launch_command(spec.suite.distributed, cmd, rank_dir)
    return cmd, env, rank_dir


def launch_trial(
    spec: TrialSpec,
    run: RunDir,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
) -> Trial:
    """Run one trial in a fresh process; always returns a Trial (written to spec.trial_path)."""
    key = trial_key(spec.mode, spec.seed)
    spec_path, log_path = run.path / "specs" / f"{key}.json", run.logs_dir / f"{key}.log"
    atomic_write_text(spec_path, spec.model_dump_json(indent=1))
    run.logs_dir.mkdir(parents=True, exist_ok=True)
    trial_path = Path(spec.trial_path)
    trial_path.unlink(missing_ok=True)
    timeout = spec.timeout_s or spec.suite.train.timeout_s
    cmd, dist_env, rank_dir = _launch_cmd(spec, spec_path, run, key)
    steps: list[StepRecord] = []
    out = run_worker(cmd, {**dist_env, **(env or {})}, log_path, Limits(timeout, spec.memory_limit_bytes),
                     _step_collector(steps, on_event))
    failure = None if out.killed or rank_dir is None else distributed.rank_failure(
        rank_dir, log_path, out.returncode, distributed.world_size_of(spec.suite.distributed))
    if failure is not None and trial_path.exists():  # rank 0 wrote its view; the failing rank decides
        merged = distributed.apply_failure(trial_path, failure)
        if merged is not None:
            return merged
    if not out.killed and trial_path.exists() and failure is None:
        try:
            return load_trial(trial_path)
        except ResultsError:
            pass  # a half-written file cannot happen (atomic), but a foreign one could: rewrite below
    return _record_failure(spec, run, out, failure, steps, log_path, timeout)


def _record_failure(spec: TrialSpec, run: RunDir, out: Outcome, failure: Any, steps: list[StepRecord],
                    log_path: Path, timeout: float) -> Trial:
    """The trial file for a worker that could not write one itself."""
    suite = spec.suite
    if failure is not None:
        status, error, tail = failure.status, failure.message, failure.log_tail
    else:
        (status, error), tail = _killed_status(out, spec, timeout), tail_lines(log_path)
    trial = Trial(
        suite=suite.suite.name, workload=suite.suite.workload, mode=spec.mode, seed=spec.seed,
        profile=spec.profile, status=status, error=error, log_tail=tail or None,
        config=suite.model_dump(mode="json"), config_hash=spec.config_hash, steps=steps,
        batch_size=spec.batch_size or suite.batch_size(suite.mode(spec.mode)), wall_s=out.wall_s,
    )
    trial.memory.rss_peak_bytes = out.peak_rss or None  # None: never read
    if Path(spec.trial_path) == run.trial_path(spec.mode, spec.seed):
        run.write_trial(trial)
    else:
        atomic_write_json(Path(spec.trial_path), trial.to_json())
    return trial


# ---------------------------------------------------------------- a whole run


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run(opts: RunOptions, console: Console) -> tuple[RunDir, RunInfo, Suite, dict[str, str]]:
    """Validate everything, then (only then) create the run folder and its run.json."""
    from ampbench.trackers import device

    if opts.suite_file is None:
        raise ConfigError("run", "SUITE", "give a suite file or a bundled suite name (or --resume RUN_DIR)")
    seeds = [f"suite.seeds={parse_seeds(opts.seeds)}"] if opts.seeds else []
    loaded = load_suite(opts.suite_file, opts.profile, has_gpu=device.has_gpu_cheap(),
                        overrides=opts.overrides + seeds)
    suite = loaded.suite
    plan = plan_trials(suite, opts.modes)
    faults = parse_faults(_fault_env(), plan)
    if opts.run_id:
        run = RunDir(Path(opts.out_dir) / suite.suite.name / opts.run_id)
        run.path.mkdir(parents=True, exist_ok=False)
        run_id = opts.run_id
    else:
        run, run_id = new_run_dir(Path(opts.out_dir) / suite.suite.name)
    info = RunInfo(
        suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile, run_id=run_id,
        config_hash=suite.config_hash(), plan=[{"mode": m, "seed": s} for m, s in plan],
        config=suite.model_dump(mode="json"), started=_now(), overrides=opts.overrides,
    )
    run.write_run(info)
    why = "" if opts.profile else (" (picked automatically: no GPU found)" if loaded.profile == "cpu" else "")
    console.print(f"suite [bold]{escape(suite.suite.name)}[/] from {escape(str(opts.suite_file))}, "
                  f"profile [bold]{escape(loaded.profile)}[/]{why}")
    console.print(f"run folder: {escape(str(run.path))}")
    return run, info, suite, faults


def _fault_env() -> str | None:
    return os.environ.get(FAULT_ENV)


def execute(opts: RunOptions, console: Console | None = None) -> int:
    """`ampbench run`: all planned trials, then summary.csv, check.json and report.md; returns the exit code.
    Ctrl-C / SIGTERM: the worker tree is stopped, finished trials kept, and 130 / 143 returned."""
    console = console or Console()
    if opts.resume:
        r = load_resume(opts)
        run, info, suite, plan = r.run, r.info, r.suite, r.plan
        faults = parse_faults(_fault_env(), plan)
        console.print(f"resuming [bold]{escape(str(run.path))}[/] (profile {escape(info.profile)})")
    else:
        run, info, suite, faults = new_run(opts, console)
        plan = [(m, s) for m, s in ((p["mode"], p["seed"]) for p in info.plan)]
    with run_lock(run.path):
        done = run.finished_keys(config_hash=info.config_hash, suite=info.suite) if opts.resume else set()
        todo = [(m, s) for m, s in plan if trial_key(m, s) not in done]
        if done:
            console.print(f"{len(done)} finished trial(s) kept, {len(todo)} to run")
        with keep_signal_handlers():  # it imports paddle, which would take over SIGTERM
            _warn_unknown_ops(suite, console)
        try:
            _run_trials(run, info, suite, plan, todo, faults, console)
        except (KeyboardInterrupt, Interrupted) as e:
            code = e.exit_code if isinstance(e, Interrupted) else 130
            kept = len(run.finished_keys(config_hash=info.config_hash, suite=info.suite))
            console.print(f"[yellow]interrupted[/] ({'SIGTERM' if code == 143 else 'Ctrl-C'}): the running trial "
                          f"was stopped, {kept} finished trial(s) kept. Continue with:\n"
                          f"  ampbench run --resume {escape(str(run.path))}", soft_wrap=True)
            return code
        info.finished = _now()
        run.write_run(info)
    return finish_run(run, console, strict=opts.strict, report=opts.reporter if opts.report else None)


def _run_trials(run: RunDir, info: RunInfo, suite: Suite, plan: list[tuple[str, int]],
                todo: list[tuple[str, int]], faults: dict[str, str], console: Console) -> None:
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[info]}", markup=False), console=console, transient=False) as progress:
        overall = progress.add_task("trials", total=len(plan), completed=len(plan) - len(todo), info="")
        for mode, seed in todo:
            spec = make_spec(info, suite, run, mode, seed, faults.get(trial_key(mode, seed)))
            task = progress.add_task(f"  {escape(mode)} seed {seed}", total=suite.train.steps, info="starting")

            def on_event(ev: dict[str, Any], task: Any = task) -> None:
                if ev.get("event") == "step":
                    loss = ev.get("loss")
                    progress.update(task, completed=ev.get("step", 0),
                                    info=f"loss {loss:.4g}" if isinstance(loss, float) else "loss non-finite")
                elif ev.get("event") == "phase":
                    progress.update(task, info=str(ev.get("phase", "")))

            try:
                trial = launch_trial(spec, run, on_event=on_event)
            finally:
                progress.remove_task(task)
            progress.advance(overall)
            console.print(f"  {escape(mode)} seed {seed}: {_status_text(trial)}")


def _status_text(t: Trial) -> str:
    """Rich markup: status colours ours, every text from a file escaped."""
    if t.status != "ok":
        last = (t.error or "").strip().splitlines()
        return f"[red]{escape(t.status)}[/]: {escape(last[0] if last else '')}"
    metric = ", ".join(f"{k} {v:.4g}" for k, v in list(t.metrics.items())[:2])
    info = t.workload_info if isinstance(getattr(t, "workload_info", None), dict) else {}
    warn = f" [yellow]warning:[/] {escape(str(info['warning']))}" if info.get("warning") else ""
    return f"[green]ok[/] {t.throughput.samples_per_s:.1f} samples/s, {escape(metric)}{warn}"


def _warn_unknown_ops(suite: Suite, console: Console) -> None:
    from ampbench.trial.precision import unknown_op_names

    for m in suite.modes:
        if m.amp and (m.custom_white_list or m.custom_black_list):
            bad = unknown_op_names(m.custom_white_list + m.custom_black_list)
            if bad:
                console.print(f"[yellow]warning:[/] mode {escape(m.name)}: Paddle does not know op name(s) "
                              f"{escape(', '.join(bad))}; Paddle ignores them silently (did you mean "
                              "lookup_table_v2 for embedding, matmul_v2 for matmul?)")


def finish_run(run: RunDir, console: Console, strict: bool = False,
               report: Callable[[Path], Path] | None = None) -> int:
    """summary.csv, the table, check.json (+ report.md); returns the exit code."""
    from ampbench.judge.check import check_run
    from ampbench.report.console import print_check, print_trials

    trials = open_run(run.path).trials  # validated: nothing foreign reaches the summary
    write_summary_csv(run, trials)
    print_trials(trials, console)
    result = check_run(run.path, strict=strict)
    print_check(result, console)
    if report is not None:
        try:
            path = report(run.path)
            console.print(f"report: {escape(str(path))}")
        except Exception as e:  # a report bug must not hide the verdict
            console.print(f"[yellow]warning:[/] report failed: {escape(f'{type(e).__name__}: {e}')}")
    return result.exit_code
