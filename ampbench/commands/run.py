"""`ampbench run`: plan, launch every trial, then summary.csv, check.json and the report.

The use-case composes the layers below: config (the suite), the store (the run folder), the
launcher (one process per trial), the judge (check.json) and the report. Planning and up-front
validation live in run_plan.py. Ctrl-C / SIGTERM stop the current worker's whole tree, keep the
finished trials and say how to resume.  With `--devices` the trials run side by side, each seed's
modes at the same time on twin devices (launch/pool.py); without it, one after another.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ampbench.commands import until_decided as ud
from ampbench.commands.check import check_run
from ampbench.commands.run_plan import (
    NodeRole,
    RunOptions,
    check_launcher,
    check_pool,
    check_until_decided,
    device_pool,
    load_resume,
    make_spec,
    node_role,
    parse_faults,
    parse_seeds,
    plan_trials,
    preflight,
    trial_width,
)
from ampbench.commands.run_progress import STATUS_EVERY_S, RunPace, StatusTicker, prior_costs
from ampbench.config import ConfigError, LoadedSuite, Suite
from ampbench.core.errors import ResultsError
from ampbench.core.files import last_line
from ampbench.core.names import utc_now
from ampbench.core.protocol import FAULT_ENV, Fault
from ampbench.core.text import printable
from ampbench.launch.launcher import TrialFiles, launch
from ampbench.launch.pool import CPU, Job, Scheduler, batches, cpu_shares, device_env, run_jobs
from ampbench.launch.process import Interrupted
from ampbench.record.models import PlanEntry, RunInfo, Trial, trial_key
from ampbench.report.console import CRASH_LINE_CHARS, print_outcome, print_rules, print_trials
from ampbench.report.fmt import seconds
from ampbench.report.view import view_of
from ampbench.results.manifest import Manifest, load_manifest
from ampbench.results.previous import LAST, previous_run
from ampbench.results.run_dir import RunDir, new_run_dir, open_run, run_lock
from ampbench.results.summary import write_summary_csv
from ampbench.trial.spec import TrialSpec
from ampbench.workloads import extras
from ampbench.workloads.suites import load_suite

# ---------------------------------------------------------------- one trial


def trial_files(run: RunDir, mode: str, seed: int) -> TrialFiles:
    return TrialFiles(spec=run.spec_path(mode, seed), log=run.log_path(mode, seed), ranks=run.ranks_dir(mode, seed),
                      root=run.path)


def launch_trial(spec: TrialSpec, run: RunDir, on_event: Callable[[dict[str, Any]], None] | None = None,
                 env: dict[str, str] | None = None, stop: threading.Event | None = None) -> Trial:
    """One trial of a run folder through the launcher (its files where the store lays them out)."""
    return launch(spec, trial_files(run, spec.mode, spec.seed), on_event, env, stop)


# ---------------------------------------------------------------- a whole run


def load_for_run(opts: RunOptions) -> LoadedSuite:
    """The suite a new run would train (its file, profile, --seeds and --set), every check made, nothing
    written: `run` calls it first, `--sweep` for every point before the first one runs."""
    from ampbench.trackers import device

    if opts.suite_file is None:
        raise ConfigError("run", "SUITE", "give a suite file or a bundled suite name (or --resume RUN_DIR)")
    preflight(opts.suite_file, opts.out_dir)
    seeds = [f"suite.seeds={parse_seeds(opts.seeds)}"] if opts.seeds is not None else []
    loaded = load_suite(opts.suite_file, opts.profile, has_gpu=device.has_gpu_cheap(), overrides=opts.overrides + seeds)
    lacking = extras.missing(loaded.suite.suite.workload)
    if lacking is not None:   # before any folder or trial: every trial would crash on its first import
        raise ConfigError(opts.suite_file, "suite.workload", lacking)
    return loaded


def new_run(opts: RunOptions, console: Console, pool: list[str] | None = None
            ) -> tuple[RunDir, RunInfo, Suite, dict[str, Fault]]:
    """Validate everything, then (only then) create the run folder and its run.json."""
    loaded = load_for_run(opts)
    suite = loaded.suite
    if opts.until_decided:
        check_until_decided(suite, opts.suite_file)
    if opts.at_max_batch:
        from ampbench.commands.max_batch_run import at_max_batch, probe_for_run

        probe, where = probe_for_run(Path(opts.out_dir), suite.suite.name, loaded.profile, opts.probe)
        suite = at_max_batch(suite, probe, where)
        console.print(f"at the probe's largest batches ({escape(str(where))}): "
                      + ", ".join(f"{escape(m.name)} {m.batch_size}" for m in suite.modes))
    plan = plan_trials(suite, opts.modes)
    faults = parse_faults(_fault_env(), plan)
    check_launcher(suite, opts)
    if pool is not None:
        check_pool(suite, plan, pool, opts.affinity)
    if opts.run_id:
        run = RunDir(Path(opts.out_dir) / suite.suite.name / opts.run_id)
        run.path.mkdir(parents=True, exist_ok=False)
        run_id = opts.run_id
    else:
        run, run_id = new_run_dir(Path(opts.out_dir) / suite.suite.name)
    info = RunInfo(
        suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile, run_id=run_id,
        config_hash=suite.config_hash(), plan=[PlanEntry(mode=m, seed=s) for m, s in plan],
        config=suite.model_dump(mode="json"), started=utc_now(), overrides=opts.overrides, devices=pool,
    )
    run.write_run(info)
    if opts.slurm is not None:
        from ampbench.launch.slurm_run import SlurmRun, save_state

        save_state(run.path, SlurmRun(options=opts.slurm))
    why = "" if opts.profile else (" (picked automatically: no GPU found)" if loaded.profile == "cpu" else "")
    console.print(f"suite [bold]{escape(suite.suite.name)}[/] from {escape(str(opts.suite_file))}, "
                  f"profile [bold]{escape(loaded.profile)}[/]{why}", soft_wrap=True)  # a path is never cut
    console.print(f"run folder: {escape(str(run.path))}", soft_wrap=True)
    return run, info, suite, faults


def _fault_env() -> str | None:
    return os.environ.get(FAULT_ENV)


def execute(opts: RunOptions, console: Console | None = None) -> int:
    """`ampbench run`: all planned trials, then summary.csv, check.json and report.md; returns the exit code.
    Ctrl-C / SIGTERM: every running worker tree is stopped, finished trials kept, and 130 / 143 returned."""
    console = console or Console()
    if opts.resume:
        preflight(None, None)
        r = load_resume(opts)
        run, info, suite, plan = r.run, r.info, r.suite, r.plan
        faults = parse_faults(_fault_env(), plan)
        pool = device_pool(opts.devices, info.devices)
        if pool is not None:
            check_pool(suite, plan, pool, info.affinity)
            info.devices = pool
        _resume_launcher(run, opts)
        console.print(f"resuming [bold]{escape(str(run.path))}[/] (profile {escape(info.profile)})")
    else:
        run, info, suite, faults = new_run(opts, console, device_pool(opts.devices))
        plan = info.planned()
    _say_pool(info.devices, console)
    with run_lock(run.path):
        manifest = _manifest(run)
        done = run.finished_keys(config_hash=info.config_hash, suite=info.suite) if opts.resume else set()
        todo = [(m, s) for m, s in plan if trial_key(m, s) not in done]
        if done:
            console.print(f"{len(done)} finished trial(s) kept, {len(todo)} to run")
        started = time.monotonic()
        seq = ud.Sequential(opts.max_seeds, opts.budget_s, opts.baseline, tuple(opts.until_rules), tuple(opts.until_modes))
        if not opts.resume:
            if opts.until_decided:
                ud.start(info, suite, seq)
            if opts.affinity:
                info.affinity = sorted(opts.affinity)
        run.write_run(info)
        baseline = opts.baseline
        try:
            role = node_role(opts)
            ended = _run_trials(run, info, suite, plan, todo, faults, console, manifest, role, opts.status_every)
            if role is not None and role.follower:
                return _follower_done(run, ended, console)
            baseline = _resolve_baseline(run, baseline, console)
            seq = ud.Sequential(opts.max_seeds, opts.budget_s, baseline, tuple(opts.until_rules), tuple(opts.until_modes))
            if opts.until_decided and info.sequential is not None:
                def more(new: list[tuple[str, int]]) -> None:
                    _run_trials(run, info, suite, new, new, faults, console, manifest, role, opts.status_every)

                suite = ud.extend(run, info, suite, plan, seq, more, console, started)
        except (KeyboardInterrupt, Interrupted) as e:
            code = e.exit_code if isinstance(e, Interrupted) else 130
            kept = len(run.finished_keys(config_hash=info.config_hash, suite=info.suite))
            console.print(f"[yellow]interrupted[/] ({'SIGTERM' if code == 143 else 'Ctrl-C'}): the running "
                          f"trial(s) stopped, {kept} finished trial(s) kept. Continue with:\n"
                          f"  ampbench run --resume {escape(str(run.path))}", soft_wrap=True)
            return code
        info.finished = utc_now()
        run.write_run(info)
    return finish_run(run, console, strict=opts.strict, report=opts.report, baseline=baseline, manifest=manifest,
                      verbose=opts.verbose)


def _manifest(run: RunDir) -> Manifest:
    """The run's record digests in memory: a new run's empty; a resumed run's from its manifest.json,
    whose files are checked now (a record changed since is refused). A trial file it does not list (a
    run folder written before manifests, or one interrupted as a trial ended) is recorded as it is."""
    found = load_manifest(run.path) or {}
    manifest = Manifest(run.path, found)
    files = run.trial_files()
    manifest.check([p for p in files if p.relative_to(run.path).as_posix() in found])
    for p in files:
        if p.relative_to(run.path).as_posix() not in found:
            manifest.record(p)
    return manifest


def _resume_launcher(run: RunDir, opts: RunOptions) -> None:
    """--resume goes on with the launcher the run started with (slurm.json holds Slurm's options)."""
    from ampbench.launch.slurm import require_commands, require_controller
    from ampbench.launch.slurm_run import load_state

    recorded = load_state(run.path)
    if opts.slurm is not None and recorded is None:
        raise ConfigError("--launcher", "slurm", f"{run.path} was run by the local launcher; --resume finishes it "
                          "the same way (drop --launcher slurm)")
    if recorded is not None and opts.slurm is not None and opts.slurm != recorded.options:
        raise ConfigError("--resume", "--launcher slurm", f"not honoured: --resume submits the rest of {run.path} with "
                          f"the Slurm options in its slurm.json; drop the Slurm options")
    if recorded is not None:
        require_commands()
        require_controller(run.path)


def _follower_done(run: RunDir, ended: list[Trial], console: Console) -> int:
    """A follower node (--node-rank > 0) has no trials to judge: exit 0 when its part of each ended ok, else 2."""
    bad = [t.key for t in ended if t.status != "ok"]
    console.print(f"node rank done: its ranks' logs are in {escape(str(run.logs_dir))}; node 0's run folder holds "
                  f"the trials, their check and report" + (f"; this node's part failed in {escape(', '.join(bad))}"
                                                            if bad else ""), soft_wrap=True)
    return 2 if bad else 0


def _resolve_baseline(run: RunDir, baseline: Path | None, console: Console) -> Path | None:
    """`--baseline last` once the run has trials (its machine key is theirs): the previous run of the same
    suite, device and config; none yet (a first nightly) is a warning, not an error, as pytest-benchmark."""
    if baseline is None or str(baseline) != LAST:
        return baseline
    try:
        found = previous_run(run.path)
    except ResultsError as e:
        console.print(f"[yellow]warning:[/] {escape(str(e))}; judged without a baseline", soft_wrap=True)
        return None
    console.print(f"baseline: the previous run {escape(str(found))}")
    return found


def _say_pool(pool: list[str] | None, console: Console) -> None:
    if pool == [CPU]:
        console.print("--devices: no GPU visible, one slot (the CPU): the trials run one after another")
    elif pool:
        console.print(f"--devices: {len(pool)} device(s) ({escape(', '.join(pool))}): trials side by side, "
                      "each seed's modes at the same time", soft_wrap=True)


def _run_trials(run: RunDir, info: RunInfo, suite: Suite, plan: list[tuple[str, int]],
                todo: list[tuple[str, int]], faults: dict[str, Fault], console: Console, manifest: Manifest,
                node: NodeRole | None = None, status_every: float = STATUS_EVERY_S) -> list[Trial]:
    """`todo` through the device pool (run.json's; none: one slot, the plan's order), one progress task
    per running trial with its time left (a pipe: a status line every `status_every` s); or, for a run
    started with --launcher slurm, as Slurm jobs."""
    from ampbench.launch.slurm_run import load_state

    if (state := load_state(run.path)) is not None:
        from ampbench.commands.run_slurm import run_on_slurm

        run_on_slurm(run, info, suite, todo, faults, state, console, trial_files, _status_text)
        for mode, seed in todo:   # written by the Slurm jobs: recorded as the runner finds them
            if run.trial_path(mode, seed).is_file():
                manifest.record(run.trial_path(mode, seed))
        return []
    pool = info.devices or [CPU]
    shares = cpu_shares(info.affinity, len(pool))
    ended: list[Trial] = []
    sched = Scheduler(batches(todo, trial_width(suite, pool), len(pool)), len(pool))
    pace = RunPace(len(plan), len(plan) - len(todo), slots=len(pool),
                   prior=prior_costs(run.path, info.suite, info.config_hash))   # the time left before trials end
    warned: set[str] = set()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[left]}", markup=False), TextColumn("{task.fields[info]}", markup=False),
                  console=console, transient=False, disable=not console.is_terminal
                  ) as progress, StatusTicker(pace, console, 0 if console.is_terminal else status_every):
        # a pipe gets one line per trial and a status line every status_every s, no bar
        overall = progress.add_task("trials", total=len(plan), completed=len(plan) - len(todo), info="", left="")

        def start(job: Job, slots: tuple[int, ...], stop: threading.Event) -> Trial:
            devices = tuple(pool[d] for d in slots)
            cpus = sorted({c for d in slots for c in shares[d] or []}) if info.affinity else None
            spec = make_spec(info, suite, run, job.mode, job.seed, faults.get(trial_key(job.mode, job.seed)), cpus,
                             node)
            task = progress.add_task(f"  {escape(job.mode)} seed {job.seed}{_where(devices)}",
                                     total=suite.train.steps, info="starting", left="")
            pace.start(job.mode, job.seed, suite.train.steps)
            try:
                trial = launch_trial(spec, run, on_event=_on_event(progress, task, pace, job, overall, warned), stop=stop,
                                     env=device_env(devices, suite.distributed.multi_process))
            except ResultsError:
                manifest.still_there()   # a run folder the program removed: say what was lost
                raise
            finally:
                progress.remove_task(task)
                pace.finish(job.mode, job.seed)
            if Path(spec.trial_path).is_file():   # (a follower node writes none: node 0 records the trial)
                manifest.record(Path(spec.trial_path))   # the program's tree has exited: this file is the record
            return trial

        def finished(job: Job, trial: Trial) -> None:
            ended.append(trial)
            progress.advance(overall)
            where = _where(tuple(trial.interference.devices) if trial.interference else ())
            console.print(f"  {escape(job.mode)} seed {job.seed}{where}: {_status_text(trial, suite.suite.metric)}")

        run_jobs(sched, start, finished)
    return ended


def _where(devices: tuple[str, ...]) -> str:
    return f" on device {escape(','.join(devices))}" if devices and devices != (CPU,) else ""


def _on_event(progress: Progress, task: Any, pace: RunPace, job: Job, overall: Any, warned: set[str]
              ) -> Callable[[dict[str, Any]], None]:
    """A trial's events (from its launch thread) onto its progress task, its pace and the run's time left;
    a mode's unknown op names said once (`warned`: the modes already warned about in this run)."""
    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("event") == "step":
            loss = ev.get("loss")
            step = ev.get("step", 0)
            pace.step(job.mode, job.seed, step if isinstance(step, int) else 0)
            progress.update(task, completed=step, left=_left_text(pace.trial_left_s(job.mode, job.seed)),
                            info=f"loss {loss:.4g}" if isinstance(loss, float) else "loss non-finite")
            progress.update(overall, left=_left_text(pace.run_left_s()))
        elif ev.get("event") == "phase":
            progress.update(task, info=str(ev.get("phase", "")))
        elif ev.get("event") == "unknown_ops" and job.mode not in warned:
            text = _unknown_ops_warning(job.mode, ev.get("names"))
            if text:
                warned.add(job.mode)
                progress.console.print(text, soft_wrap=True)
    return on_event


def _left_text(left: float | None) -> str:
    return f"~{seconds(left)} left" if left is not None else "estimating"


def _status_text(t: Trial, primary: str = "") -> str:
    """Rich markup: status colours ours, every text from a file escaped; the suite's metric comes first
    (a program prints others before it: PaddleOCR's precision and recall before hmean)."""
    if t.status != "ok":   # the line that says why (a traceback's last), control characters escaped
        return f"[red]{escape(t.status)}[/]: {escape(last_line(t.error, CRASH_LINE_CHARS))}"
    names = [primary] if primary in t.metrics else []
    names += [k for k in t.metrics if k != primary][:2 - len(names)]
    metric = ", ".join(f"{k} {t.metrics[k]:.4g}" for k in names)
    info = t.workload_info if isinstance(getattr(t, "workload_info", None), dict) else {}
    warn = f" [yellow]warning:[/] {escape(printable(info['warning']))}" if info.get("warning") else ""
    rate = t.throughput.samples_per_s   # 3 significant digits below 100: a real detector on CPU does 0.035
    shown = f"{rate:.1f}" if rate >= 100 else f"{rate:.3g}"
    return f"[green]ok[/] {shown} samples/s, {escape(metric)}{warn}"


def _unknown_ops_warning(mode: str, names: object) -> str | None:
    """The worker's list of custom white/black list names its Paddle does not know (the runner does not
    import paddle to find out: that cost every run ~2 CPU s before its first trial)."""
    if not isinstance(names, list) or not names:
        return None
    shown = ", ".join(printable(str(n))[:80] for n in names[:20])
    return (f"[yellow]warning:[/] mode {escape(mode)}: Paddle does not know op name(s) {escape(shown)}; Paddle "
            "ignores them silently (did you mean lookup_table_v2 for embedding, matmul_v2 for matmul?)")


def _write_report(run_dir: Path) -> Path:
    """report.md + self-contained report.html of one finished run."""
    from ampbench.report.markdown import write_report  # matplotlib: imported only when a report is made

    return write_report([run_dir], also_html=True)


def finish_run(run: RunDir, console: Console, strict: bool = False, report: bool = True,
               baseline: Path | None = None, manifest: Manifest | None = None, verbose: bool = False) -> int:
    """summary.csv, check.json (+ report.md) and the outcome table; returns the exit code.
    `verbose` (-v): the trial table and every rule's full text before the outcome. With the runner's
    `manifest`, a trial file changed since its trial ended (by a later trial's program) is refused."""
    if manifest is not None:
        manifest.check(run.trial_files())
    opened = open_run(run.path)  # validated: nothing foreign reaches the summary
    write_summary_csv(run, opened.trials)
    if verbose:
        print_trials(opened.trials, console, opened.suite.suite.metric)
    result = check_run(run.path, strict=strict)  # the run's own check.json
    if baseline is not None:  # and the comparison in its own file (check-vs-<baseline>.json), shown
        result = check_run(run.path, baseline=baseline, strict=strict)
    if verbose:
        print_rules(result, console)
    print_outcome(view_of(opened, result), console)
    if report:
        try:
            path = _write_report(run.path)
            console.print(f"report: {escape(str(path))}", soft_wrap=True)
        except Exception as e:  # noqa: BLE001  a report bug must not hide the verdict
            console.print(f"[yellow]warning:[/] report failed: {escape(f'{type(e).__name__}: {e}')}")
    return result.exit_code
