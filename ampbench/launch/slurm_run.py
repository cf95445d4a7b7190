"""A run's trials as Slurm jobs (`run --launcher slurm`): submit, watch, record, cancel.

Every trial is one batch job running the worker and the spec the local launcher uses; its log is the
job's output, its trial file the worker's own, both in the run folder (which must be on a filesystem
the nodes share).  The plan is submitted seed-major at once, each seed's FP32 and AMP jobs one after
another with the same options (`--constraint` keeps a pair on one node type); the cluster decides
when they start.

The job ids are written to `slurm.json` in the run folder as each job is submitted, so `--resume`
after ampbench was killed finds the jobs still queued or running and waits for them instead of
submitting them again.  One `squeue` for all of the run's jobs per interval (`poll_s`).  A job that
ended without an ok trial file (failed, timed out, cancelled, preempted, its node lost) is recorded
with Slurm's state, exit code and reason (`trial.slurm`) and the partial curve its log holds; the
other jobs go on.  Ctrl-C or SIGTERM cancels every job of the run still queued or running (one
`scancel`), keeps the finished trials, and forgets the cancelled jobs so `--resume` submits them again.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from ampbench.core.docs import VersionedDoc, load_doc, load_optional, write_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, open_for_writing, tail_lines
from ampbench.core.records import SlurmJob, Trial, trial_key
from ampbench.launch import distributed, slurm
from ampbench.launch.launcher import TrialFiles, failure_trial, steps_from_log, write_trial
from ampbench.launch.process import worker_command
from ampbench.launch.slurm import JobState, SlurmOptions
from ampbench.trial.spec import TrialSpec

STATE_FILE = "slurm.json"
SLURM_SCHEMA = "ampbench.slurm/1"
CANCEL_WAIT_S = 60.0
MAX_MISSES = 20  # squeue failing this many intervals in a row ends the run (its jobs cancelled)


class SlurmRun(VersionedDoc):
    """`slurm.json`: the run's Slurm options and the job of every trial submitted and not yet cancelled."""

    SCHEMA = SLURM_SCHEMA
    schema_: str = Field(SLURM_SCHEMA, alias="schema")
    options: SlurmOptions
    jobs: dict[str, str] = {}  # trial key -> job id


def state_path(run_path: Path) -> Path:
    return Path(run_path) / STATE_FILE


def load_state(run_path: Path) -> SlurmRun | None:
    """The run's slurm.json, or None: a run of the local launcher."""
    return load_optional(state_path(run_path), SlurmRun, "Slurm job file", root=Path(run_path))


def save_state(run_path: Path, state: SlurmRun) -> None:
    write_doc(state_path(run_path), state, root=Path(run_path))


@dataclass
class Hooks:
    """What the run command supplies: a trial's spec and files, and where progress and results go."""

    spec: Callable[[str, int], TrialSpec]
    files: Callable[[str, int], TrialFiles]
    say: Callable[[str], None]
    finished: Callable[[str, int, Trial], None]


def _submit(spec: TrialSpec, files: TrialFiles, opts: SlurmOptions, suite_name: str) -> str:
    """Write the spec, clear what an earlier attempt left, and submit the trial's job."""
    dist = spec.suite.distributed
    atomic_write_text(files.spec, spec.model_dump_json(indent=1), root=files.root)
    Path(spec.trial_path).unlink(missing_ok=True)
    with open_for_writing(files.log, root=files.root):  # empty, in place: Slurm appends the job's output
        pass
    cmd, env = worker_command(files.spec), dict[str, str]()
    if dist.nnodes > 1:  # one launcher per node, each told its rank and the master by the job
        shutil.rmtree(files.ranks, ignore_errors=True)
        cmd = [cmd[0], "-m", "ampbench.launch.slurm_node", str(files.spec), str(files.ranks)]
    elif dist.multi_process:
        shutil.rmtree(files.ranks, ignore_errors=True)
        cmd, env = distributed.launch_command(dist, cmd, files.ranks)
    gpus = opts.gpus_per_trial if opts.gpus_per_trial is not None else (
        dist.nproc_per_node if spec.profile != "cpu" and slurm.has_gpus(opts.partition) else 0)
    timeout = spec.timeout_s or spec.suite.train.timeout_s
    options = slurm.job_options(f"ampbench-{suite_name}-{trial_key(spec.mode, spec.seed)}", files.log, opts,
                                dist.nnodes, gpus, timeout + 600, Path.cwd())
    return slurm.sbatch(slurm.batch_script(cmd, env, srun=dist.nnodes > 1), options)


def _record(spec: TrialSpec, files: TrialFiles, job: str, seen: JobState | None) -> Trial:
    """The trial of an ended job: the worker's own file when it wrote one (relabelled when the scheduler,
    not the trial, ended it), else one made from Slurm's account of the job and the log."""
    end = slurm.job_end(job) or seen or JobState(state="UNKNOWN")
    info = SlurmJob(job_id=job, nodes=end.nodes, state=end.state, exit_code=end.exit_code, reason=end.reason)
    own: Trial | None = None
    with contextlib.suppress(ResultsError, OSError):
        own = load_doc(Path(spec.trial_path), Trial, "trial file")
    if own is not None and own.key == trial_key(spec.mode, spec.seed) and (own.slurm is None or own.slurm.job_id == job):
        failure = None
        if spec.suite.distributed.multi_process and end.state != "COMPLETED":
            rc = int(end.exit_code.split(":")[0]) if end.exit_code[:1].isdigit() else None
            failure = distributed.rank_failure(files.ranks, files.log, rc, spec.suite.distributed.world_size)
        if failure is not None:
            own = distributed.apply_failure(Path(spec.trial_path), failure) or own
        scheduler_ended = end.state not in ("COMPLETED", "FAILED", "UNKNOWN")
        if own.status == "ok" or not scheduler_ended:
            return own
    status = slurm.trial_status(end.state)
    code = f", exit code {end.exit_code}" if end.exit_code else ""
    why = f", reason {end.reason}" if end.reason and end.reason != "None" else ""
    error = (f"Slurm job {job} ended {end.state}{code}{why} on {end.nodes or 'an unknown node'} without an ok "
             f"trial file (log: {files.log})")
    if own is not None and own.error:
        error += f"\n--- the worker's own error ---\n{own.error[-2000:]}"
    steps = own.steps if own is not None and own.steps else steps_from_log(files.log)
    trial = failure_trial(spec, status, error, tail_lines(files.log), steps, own.wall_s if own else 0.0)
    if own is not None and own.slurm is not None:
        info.node, info.partition, info.gpus = own.slurm.node, own.slurm.partition, own.slurm.gpus
    trial.slurm = info
    write_trial(spec, trial)
    return trial


def _ok_file(spec: TrialSpec, job: str) -> bool:
    with contextlib.suppress(ResultsError, OSError):
        t = load_doc(Path(spec.trial_path), Trial, "trial file")
        return t.status == "ok" and t.key == trial_key(spec.mode, spec.seed) and t.slurm is not None \
            and t.slurm.job_id == job
    return False


def run_trials(todo: list[tuple[str, int]], run_path: Path, state: SlurmRun, suite_name: str, hooks: Hooks) -> None:
    """Every trial of `todo` as a Slurm job, until each has a trial file; jobs recorded in `state` that
    are still queued or running are waited for, not submitted again."""
    keys = {trial_key(m, s): (m, s) for m, s in todo}
    recorded = {k: j for k, j in state.jobs.items() if k in keys}
    known = slurm.squeue(list(recorded.values()))
    # a job still queued or running is waited for; one that ended with its trial file ok since the caller
    # looked (ampbench was away) is recorded as it is; anything else is submitted again
    alive = {j for k, j in recorded.items() if j in known and (not known[j].ended or _ok_file(hooks.spec(*keys[k]), j))}
    active: dict[str, str] = {}  # job id -> trial key
    seen: dict[str, JobState] = {}
    try:
        for key, (mode, seed) in keys.items():  # seed-major: each seed's arms submitted together
            job = recorded.get(key)
            if job in alive:
                hooks.say(f"{mode} seed {seed}: job {job} found queued or running, not submitted again")
            else:
                job = _submit(hooks.spec(mode, seed), hooks.files(mode, seed), state.options, suite_name)
                state.jobs[key] = job
                save_state(run_path, state)
                hooks.say(f"{mode} seed {seed}: submitted as job {job}")
            active[job] = key
        misses = 0
        while active:
            try:
                now = slurm.squeue(list(active))
                misses = 0
            except slurm.SlurmError as e:  # the controller busy or restarting: ask again next interval
                misses += 1
                if misses >= MAX_MISSES:
                    raise
                hooks.say(f"warning: {e} (try {misses} of {MAX_MISSES})")
                time.sleep(state.options.poll_s)
                continue
            for job, key in list(active.items()):
                st = now.get(job)
                if st is not None and not st.ended:
                    if seen.get(job) is None or seen[job].state != st.state:
                        where = f" on {st.nodes}" if st.state == "RUNNING" and st.nodes else \
                            (f" ({st.reason})" if st.reason and st.reason != "None" else "")
                        hooks.say(f"{keys[key][0]} seed {keys[key][1]}: job {job} {st.state}{where}")
                    seen[job] = st
                    continue
                mode, seed = keys[key]
                trial = _record(hooks.spec(mode, seed), hooks.files(mode, seed), job, st or seen.get(job))
                del active[job]
                hooks.finished(mode, seed, trial)
            if active:
                time.sleep(state.options.poll_s)
    except BaseException:
        _cancel(list(active), run_path, state, hooks)
        raise


def _cancel(jobs: list[str], run_path: Path, state: SlurmRun, hooks: Hooks) -> None:
    """Ctrl-C / SIGTERM: every job of the run still queued or running cancelled and waited out (bounded),
    then forgotten, so `--resume` submits those trials again; finished trials stay as they are."""
    if not jobs:
        return
    slurm.scancel(jobs)
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(slurm.SlurmError):
            if all(st.ended for st in slurm.squeue(jobs).values()):
                break
        time.sleep(0.5)
    state.jobs = {k: j for k, j in state.jobs.items() if j not in jobs}
    save_state(run_path, state)
    hooks.say(f"cancelled {len(jobs)} Slurm job(s): {', '.join(jobs)}")
