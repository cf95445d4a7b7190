"""`execute`: a run request through its policies, from the suite to the judged run folder.

1. A new run: the suite loaded (its file, profile, --seeds, --set, the workload's own checks), the seed
   and batch policies applied, the plan made and every check passed, and only then the run folder and its
   run.json (the launcher recorded in it).  --resume: run.json read back, with its launcher; anything
   asked that would change the plan refused.
2. Under the run folder's lock: the trials not finished yet, through the launcher; then the seed policy
   may add seeds (until-decided) and run them the same way.
3. summary.csv, check.json, report.md and the outcome table (`finish.finish_run`); the exit code.

Ctrl-C / SIGTERM: every running worker tree (or Slurm job) is stopped, finished trials are kept, and
130 / 143 is returned with the command that continues.  Every verb that trains calls this.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ampbench.config import ConfigError, LoadedSuite, Suite
from ampbench.core.errors import ResultsError
from ampbench.core.names import utc_now
from ampbench.core.terminal import TerminalConsole
from ampbench.engine.batch import BatchPolicy, ConfiguredBatch
from ampbench.engine.finish import finish_run
from ampbench.engine.launcher import Launcher, recorded_launcher
from ampbench.engine.launchers.local import LocalLauncher
from ampbench.engine.plan import fault_env, parse_faults, parse_seeds, plan_trials, preflight
from ampbench.engine.request import Output, RunRequest
from ampbench.engine.resume import load_resume, refuse_unhonoured
from ampbench.engine.seeds.fixed import FixedSeeds
from ampbench.engine.seeds.policy import SeedPolicy
from ampbench.engine.trials import Trials
from ampbench.launch.forkserver import ForkServer
from ampbench.launch.process import Interrupted
from ampbench.record.models import PlanEntry, RunInfo, trial_key
from ampbench.results.manifest import Manifest, load_manifest
from ampbench.results.previous import LAST, previous_run
from ampbench.results.run_dir import RunDir, new_run_dir, run_lock
from ampbench.workloads import extras
from ampbench.workloads.suites import load_suite


@dataclass(frozen=True)
class Policies:
    """How a request runs: its launcher, seed policy and batch policy, and what it writes and says after."""

    launcher: Launcher = field(default_factory=LocalLauncher)
    seeds: SeedPolicy = field(default_factory=FixedSeeds)
    batch: BatchPolicy = field(default_factory=ConfiguredBatch)
    output: Output = field(default_factory=Output)

    def to_json(self) -> dict[str, Any]:
        return {"launcher": self.launcher.record(), "seeds": self.seeds.record(), "batch": self.batch.record(),
                "output": self.output.model_dump(mode="json")}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Policies:
        return cls(launcher=Launcher.from_record(data["launcher"], where),
                   seeds=SeedPolicy.from_record(data["seeds"], where),
                   batch=BatchPolicy.from_record(data["batch"], where), output=Output.model_validate(data["output"]))


@dataclass
class _Run:
    """A run folder ready for its trials."""

    run: RunDir
    info: RunInfo
    suite: Suite
    plan: list[tuple[str, int]]
    launcher: Launcher


def load_for_run(request: RunRequest, seeds: list[int] | None = None) -> LoadedSuite:
    """The suite a new run would train (its file, profile, --seeds or `seeds`, and --set), every check made,
    nothing written: `execute` calls it first, `--sweep` for every point before the first one runs."""
    from ampbench.trackers import device

    if request.suite_file is None:
        raise ConfigError("run", "SUITE", "give a suite file or a bundled suite name (or --resume RUN_DIR)")
    preflight(request.suite_file, request.out_dir)
    chosen = seeds if seeds is not None else (parse_seeds(request.seeds) if request.seeds is not None else None)
    given = [f"suite.seeds={chosen}"] if chosen is not None else []
    loaded = load_suite(request.suite_file, request.profile, has_gpu=device.has_gpu_cheap(),
                        overrides=[*request.overrides, *given])
    lacking = extras.missing(loaded.suite.suite.workload)
    if lacking is not None:   # before any folder or trial: every trial would crash on its first import
        raise ConfigError(request.suite_file, "suite.workload", lacking)
    return loaded


def _new(request: RunRequest, p: Policies, console: Console) -> _Run:
    """Validate everything, then (only then) create the run folder and its run.json."""
    launcher = p.launcher.resolved()
    loaded = load_for_run(request)
    initial = p.seeds.initial(loaded.suite)
    if initial is not None:
        loaded = load_for_run(request, initial)
    where = request.suite_file
    p.seeds.check(loaded.suite, where)
    suite = p.batch.apply(loaded.suite, Path(request.out_dir), loaded.profile, console)
    plan = plan_trials(suite, request.modes)
    parse_faults(fault_env(), plan)
    launcher.check(suite, plan, str(where or "suite"))
    if request.run_id:
        run = RunDir(Path(request.out_dir) / suite.suite.name / request.run_id)
        run.path.mkdir(parents=True, exist_ok=False)
        run_id = request.run_id
    else:
        run, run_id = new_run_dir(Path(request.out_dir) / suite.suite.name)
    info = RunInfo(
        suite=suite.suite.name, suite_file=str(where), profile=loaded.profile, run_id=run_id,
        config_hash=suite.config_hash(), plan=[PlanEntry(mode=m, seed=s) for m, s in plan],
        config=suite.model_dump(mode="json"), started=utc_now(), overrides=list(request.overrides),
        launcher=launcher.kept(),
    )
    launcher.start(run.path, info)
    run.write_run(info)
    why = "" if request.profile else (" (picked automatically: no GPU found)" if loaded.profile == "cpu" else "")
    console.print(f"suite [bold]{escape(suite.suite.name)}[/] from {escape(str(where))}, "
                  f"profile [bold]{escape(loaded.profile)}[/]{why}", soft_wrap=True)  # a path is never cut
    console.print(f"run folder: {escape(str(run.path))}", soft_wrap=True)
    return _Run(run, info, suite, info.planned(), launcher)


def _resumed(request: RunRequest, p: Policies, console: Console) -> _Run:
    """The run folder of --resume with the launcher it started with (the command line's refused when it
    asks for another)."""
    preflight(None, None)
    r = load_resume(request, lambda info, where: refuse_unhonoured(
        request, info, where, (p.launcher.unhonoured(), p.batch.unhonoured()), p.seeds.unhonoured(info)))
    launcher = recorded_launcher(r.run.path, r.info).resumed(p.launcher, r.run.path, r.info, r.suite, r.plan)
    console.print(f"resuming [bold]{escape(str(r.run.path))}[/] (profile {escape(r.info.profile)})")
    return _Run(r.run, r.info, r.suite, r.plan, launcher)


def execute(request: RunRequest, policies: Policies | None = None, console: Console | None = None) -> int:
    """All planned trials, then summary.csv, check.json and report.md; returns the exit code.
    Ctrl-C / SIGTERM: every running worker tree is stopped, finished trials kept, and 130 / 143 returned."""
    console = console or TerminalConsole()
    p = policies or Policies()
    r = _resumed(request, p, console) if request.resume else _new(request, p, console)
    faults = parse_faults(fault_env(), r.plan)
    r.launcher.announce(r.info, console)
    with run_lock(r.run.path):
        manifest = _manifest(r.run)
        done = r.run.finished_keys(config_hash=r.info.config_hash, suite=r.info.suite) if request.resume else set()
        todo = [(m, s) for m, s in r.plan if trial_key(m, s) not in done]
        if done:
            console.print(f"{len(done)} finished trial(s) kept, {len(todo)} to run")
        started = time.monotonic()
        if not request.resume:
            p.seeds.start(r.info, r.suite)
        r.run.write_run(r.info)
        forks = ForkServer(str(r.run.path.absolute()), r.suite.suite.workload)   # ps names the run
        trials = Trials(r.run, r.info, r.suite, r.plan, todo, faults, console, manifest, p.output.status_every,
                        forks=forks)
        try:
            ended = r.launcher.run(trials)
            code = r.launcher.part_done(r.run.path, ended, console)
            if code is not None:
                return code
            baseline = _resolve_baseline(r.run, p.output.baseline, console)
            p.seeds.more(r.run, r.info, r.suite, r.plan, lambda new: _more(r, trials, new), console, started,
                         baseline)
        except (KeyboardInterrupt, Interrupted) as e:
            return _interrupted(e, r, request, console)
        finally:
            forks.close()
        r.info.finished = utc_now()
        r.run.write_run(r.info)
    if not p.output.judge:
        return 0
    return finish_run(r.run, console, p.output, baseline, manifest)


def _more(r: _Run, trials: Trials, new: list[tuple[str, int]]) -> None:
    """A seed policy's new trials (already in the run's plan): the plan kept in run.json first, so a resumed
    run knows them, then through the run's launcher as the planned ones went."""
    r.info.plan = [PlanEntry(mode=m, seed=s) for m, s in r.plan]
    r.run.write_run(r.info)
    r.launcher.run(replace(trials, plan=new, todo=new, ended=[]))


def _interrupted(e: BaseException, r: _Run, request: RunRequest, console: Console) -> int:
    code = e.exit_code if isinstance(e, Interrupted) else 130
    kept = len(r.run.finished_keys(config_hash=r.info.config_hash, suite=r.info.suite))
    hint = request.resume_hint or f"ampbench run --resume {r.run.path}"
    console.print(f"[yellow]interrupted[/] ({'SIGTERM' if code == 143 else 'Ctrl-C'}): the running "
                  f"trial(s) stopped, {kept} finished trial(s) kept. Continue with:\n"
                  f"  {escape(hint)}", soft_wrap=True)
    return code


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
