"""A run's trials as Slurm jobs (`run --launcher slurm`): submit, watch, record, cancel.

Every trial is one batch job running the worker and the spec the local launcher uses; its log is the
job's output, its trial file the worker's own, both in the run folder (which must be on a filesystem
the nodes share).  The plan is submitted seed-major at once.  A seed's arms run on one node, one after
the other, so a paired comparison measures the precision and not two nodes (or two trials sharing
one): the first arm goes where Slurm puts it, the later ones are submitted held behind it and released
onto its node once Slurm placed it.  A trial the cluster ended (preempted, its node failed) is
submitted again, up to `requeue` times.

The job ids are written to `slurm.json` in the run folder as each job is submitted, so `--resume`
after ampbench was killed finds the jobs still queued or running and waits for them instead of
submitting them again.  A recorded job is the run's own only if its name, its user and the run's
token (in the job's comment) all match: any other job is neither waited for nor cancelled.

One `squeue` for all of the run's jobs per interval (`poll_s`); a job absent from its answer, or an
answer that could not be read, is asked of `scontrol` (and `sacct`): a job is taken as ended only when
Slurm says so.  A job that ended without an ok trial file (failed, timed out, cancelled, preempted, its
node lost) is recorded with Slurm's state, exit code and reason (`trial.slurm`) and the partial curve
its log holds; the other jobs go on.  Slurm not answering for `outage_s` ends the wait (exit 2).

Ctrl-C, SIGTERM or that give-up cancels every job of the run still queued or running (one `scancel`),
keeps the finished trials, and forgets only the jobs Slurm confirms ended, so `--resume` submits those
again and waits for the others.  No trial file is written for a job Slurm has not confirmed ended, so
a job that ends later cannot overwrite a recorded trial.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from ampbench.core.docs import VersionedDoc, load_doc, load_optional, write_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, open_for_writing, tail_lines
from ampbench.launch import distributed, slurm
from ampbench.launch.launcher import TrialFiles, failure_trial, steps_from_log, write_trial
from ampbench.launch.process import worker_command
from ampbench.launch.slurm import FORGOTTEN, JobState, SlurmOptions
from ampbench.record.models import SlurmJob, Trial, trial_key
from ampbench.trial.spec import TrialSpec

STATE_FILE = "slurm.json"
SLURM_SCHEMA = "ampbench.slurm/1"
CANCEL_WAIT_S = 60.0
TOKEN_PREFIX = "ampbench-run:"


class SlurmRun(VersionedDoc):
    """`slurm.json`: the run's Slurm options and the job of every trial submitted and not yet cancelled."""

    SCHEMA = SLURM_SCHEMA
    schema_: str = Field(SLURM_SCHEMA, alias="schema")
    options: SlurmOptions
    # the run's token, every job's --comment: what makes a job with a recorded id this run's own (an old
    # slurm.json without one gets a new token, so none of its jobs is taken as the run's)
    token: str = Field(default_factory=lambda: secrets.token_hex(8))
    jobs: dict[str, str] = {}  # trial key -> job id
    # a seed's later arm, submitted held -> the job of the seed's first arm: released onto its node(s)
    held: dict[str, str] = Field(default_factory=dict)
    requeued: dict[str, int] = Field(default_factory=dict)  # trial key -> times submitted again after a preemption or a node failure
    # --slurm-parallel: an array task ("123_4") -> the trial keys it runs, in order (`jobs` maps each back to it)
    tasks: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def comment(self) -> str:
        return TOKEN_PREFIX + self.token


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


def job_name(suite_name: str, mode: str, seed: int) -> str:
    return f"ampbench-{suite_name}-{trial_key(mode, seed)}"


def _not_ours(st: JobState, name: str, state: SlurmRun) -> str:
    """Why a job with a recorded id is not this run's ("" when it is): name, user and token must match."""
    why = []
    if st.name != name:
        why.append(f"name {st.name!r}")
    if st.user != pwd.getpwuid(os.getuid()).pw_name:
        why.append(f"user {st.user!r}")
    if st.comment != state.comment:
        why.append("without this run's token")
    return ", ".join(why)


def prepare(spec: TrialSpec, files: TrialFiles, state: SlurmRun) -> tuple[list[str], dict[str, str], int]:
    """Write the spec and clear what an earlier attempt left; the trial's command, its environment and
    the GPUs per node its job asks for."""
    dist, opts = spec.suite.distributed, state.options
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
    return cmd, env, gpus


def _submit(spec: TrialSpec, files: TrialFiles, state: SlurmRun, suite_name: str, extra: list[str]) -> str:
    """Submit the trial's job (its files prepared first)."""
    dist = spec.suite.distributed
    cmd, env, gpus = prepare(spec, files, state)
    timeout = spec.timeout_s or spec.suite.train.timeout_s
    options = slurm.job_options(job_name(suite_name, spec.mode, spec.seed), files.log, state.options, dist.nnodes,
                                gpus, timeout + 600, Path.cwd(), comment=state.comment)
    return slurm.sbatch(slurm.batch_script(cmd, env, srun=dist.nnodes > 1), options + extra)


def _record(spec: TrialSpec, files: TrialFiles, job: str, seen: JobState | None) -> Trial:
    """The trial of an ended job: the worker's own file when it wrote one (relabelled when the scheduler,
    not the trial, ended it), else one made from Slurm's account of the job and the log."""
    end = _final_state(job, seen)
    own = _worker_trial(spec)
    if own is not None and own.key == trial_key(spec.mode, spec.seed) and (own.slurm is None or own.slurm.job_id == job):
        own = _with_rank_failure(spec, files, own, end)
        if own.status == "ok" or end.state in _TRIAL_ENDED:
            return own
    steps = own.steps if own is not None and own.steps else steps_from_log(files.log)
    trial = failure_trial(spec, slurm.trial_status(end.state), _ended_text(job, end, files.log, own),
                          tail_lines(files.log), steps, own.wall_s if own else 0.0)
    trial.slurm = _job_facts(job, end, own)
    write_trial(spec, trial)
    return trial


# Slurm states in which the trial ended itself (its worker's exit, or one Slurm cannot name): the worker's
# own file stands.  Any other end (CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL...) is the scheduler's.
_TRIAL_ENDED = ("COMPLETED", "FAILED", "UNKNOWN")


def _final_state(job: str, seen: JobState | None) -> JobState:
    """Slurm's last word on an ended job: scontrol's (it has the exit code and reason), else the state squeue
    last showed, else UNKNOWN."""
    end: JobState | None = None
    with contextlib.suppress(slurm.SlurmError):  # squeue's final state stands where scontrol cannot add to it
        end = slurm.job_info(job)
    return end or seen or JobState(state="UNKNOWN")


def _worker_trial(spec: TrialSpec) -> Trial | None:
    """The trial file the worker wrote, if any could be read (a job killed mid-write leaves none)."""
    with contextlib.suppress(ResultsError, OSError):
        return load_doc(Path(spec.trial_path), Trial, "trial file")
    return None


def _with_rank_failure(spec: TrialSpec, files: TrialFiles, own: Trial, end: JobState) -> Trial:
    """A multi-process trial whose job did not complete: the rank that failed first, from the ranks' logs, into
    the worker's record (rank 0's file alone can read as if its peers were fine)."""
    if not spec.suite.distributed.multi_process or end.state == "COMPLETED":
        return own
    rc = int(end.exit_code.split(":")[0]) if end.exit_code[:1].isdigit() else None
    failure = distributed.rank_failure(files.ranks, files.log, rc, spec.suite.distributed.world_size)
    if failure is None:
        return own
    return distributed.apply_failure(Path(spec.trial_path), failure) or own


def _ended_text(job: str, end: JobState, log: Path, own: Trial | None) -> str:
    """The error of a trial the job's end decides: Slurm's state, exit code, reason and node, where the log is,
    and the worker's own error below it when it wrote one."""
    code = f", exit code {end.exit_code}" if end.exit_code else ""
    why = f", reason {end.reason}" if end.reason and end.reason != "None" else ""
    error = (f"Slurm job {job} ended {end.state}{code}{why} on {end.nodes or 'an unknown node'} without an ok "
             f"trial file (log: {log})")
    if own is not None and own.error:
        error += f"\n--- the worker's own error ---\n{own.error[-2000:]}"
    return error


def _job_facts(job: str, end: JobState, own: Trial | None) -> SlurmJob:
    """The job as the trial records it: Slurm's account of its end, and the node, partition and GPUs the worker
    saw from inside it (Slurm's own may already be purged)."""
    info = SlurmJob(job_id=job, nodes=end.nodes, state=end.state, exit_code=end.exit_code, reason=end.reason)
    if own is not None and own.slurm is not None:
        info.node, info.partition, info.gpus = own.slurm.node, own.slurm.partition, own.slurm.gpus
    return info


def _ok_file(spec: TrialSpec, job: str) -> bool:
    with contextlib.suppress(ResultsError, OSError):
        t = load_doc(Path(spec.trial_path), Trial, "trial file")
        return t.status == "ok" and t.key == trial_key(spec.mode, spec.seed) and t.slurm is not None \
            and t.slurm.job_id == job
    return False


def _adopt(keys: dict[str, tuple[str, int]], state: SlurmRun, suite_name: str, hooks: Hooks) -> set[str]:
    """The recorded jobs to wait for rather than submit again: the run's own (name, user, token) that are
    still queued or running, or ended with their trial file ok since the caller looked (ampbench was
    away).  Slurm not answering is an SlurmError: nothing is submitted then."""
    alive = set()
    for key, job in state.jobs.items():
        if key not in keys:
            continue
        mode, seed = keys[key]
        st = slurm.job_info(job)
        if st is None:  # Slurm no longer knows it: it ended long ago
            continue
        why = _not_ours(st, job_name(suite_name, mode, seed), state)
        if why:
            hooks.say(f"{mode} seed {seed}: job {job} in slurm.json is not this run's ({why}): left alone, "
                      "the trial submitted again")
        elif not st.ended or _ok_file(hooks.spec(mode, seed), job):
            alive.add(job)
    return alive


def _states(jobs: list[str]) -> tuple[dict[str, JobState], str]:
    """Each job's state where Slurm gave an answer that could be read, and the error where it did not.
    squeue first (one call); a job missing from its answer, or every job when its answer could not be
    read, is asked of scontrol (sacct): absence from squeue is not "ended".  squeue failing outright
    (the controller unreachable) leaves every job unread this interval.  A job Slurm says it does not
    know is FORGOTTEN (it ended and was purged)."""
    try:
        now, error = slurm.squeue(jobs), ""
    except slurm.SlurmUnreadable as e:
        now, error = {}, str(e)
    except slurm.SlurmError as e:
        return {}, str(e)
    for job in jobs:
        if job in now:
            continue
        try:
            now[job] = slurm.job_info(job) or JobState(state=FORGOTTEN, reason="Slurm no longer knows the job")
        except slurm.SlurmError as e:
            error = error or str(e)
    return now, error


def _over(st: JobState) -> bool:
    return st.ended or st.state == FORGOTTEN


class _Outage:
    """How long Slurm has left some job's state unread: past `limit_s` the run stops waiting."""

    def __init__(self, limit_s: float, say: Callable[[str], None]):
        self.limit_s, self.say, self.since, self.said = limit_s, say, 0.0, ""

    def note(self, error: str, unread: int) -> None:
        if not error:
            self.since, self.said = 0.0, ""
            return
        now = time.monotonic()
        if not unread:  # every job read another way (scontrol): say it once
            if error != self.said:
                self.say(f"warning: {error}; the jobs' states read through scontrol instead")
            self.since, self.said = 0.0, error
            return
        self.since = self.since or now
        waited = now - self.since
        if waited >= self.limit_s:
            raise slurm.SlurmError(f"Slurm did not answer for {waited:.0f} s (--slurm-outage {self.limit_s:g}): {error}")
        self.say(f"warning: {unread} job(s) unread for {waited:.0f} s (gives up at {self.limit_s:g} s): {error}")


def run_trials(todo: list[tuple[str, int]], run_path: Path, state: SlurmRun, suite_name: str, hooks: Hooks) -> None:
    """Every trial of `todo` as a Slurm job, until each has a trial file; the run's own jobs recorded in
    `state` that are still queued or running are waited for, not submitted again.  A seed's arms form a
    chain on one node: the first goes where Slurm puts it, each later one is submitted held, after the
    one before it (`afterany`), and released onto the first one's node(s) once Slurm has placed it."""
    keys = {trial_key(m, s): (m, s) for m, s in todo}
    alive = _adopt(keys, state, suite_name, hooks)
    active: dict[str, str] = {}  # job id -> trial key
    chain: dict[int, tuple[str, str]] = {}  # seed -> (its first arm's job, the last arm's job)
    try:
        for key, (mode, seed) in _chain_order(keys, state, alive):  # seed-major: each seed's arms together
            job = state.jobs.get(key)
            if job in alive:
                hooks.say(f"{mode} seed {seed}: job {job} found queued or running, not submitted again")
            else:
                extra = _pair_options(chain.get(seed), hooks.spec(mode, seed), keys)
                job = _submit(hooks.spec(mode, seed), hooks.files(mode, seed), state, suite_name, extra)
                active[job] = key   # at once: an interrupt from here on cancels it
                state.jobs[key] = job
                if seed in chain:
                    state.held[job] = chain[seed][0]
                save_state(run_path, state)
                hooks.say(f"{mode} seed {seed}: submitted as job {job}" + (
                    f" (held: after job {chain[seed][1]}, on its pair's node)" if seed in chain else ""))
            chain[seed] = (chain[seed][0] if seed in chain else job, job)
            active[job] = key
        _watch(active, keys, run_path, state, suite_name, hooks)
    except BaseException:
        cancel(list(active), run_path, state, hooks)
        raise


def _chain_order(keys: dict[str, tuple[str, int]], state: SlurmRun,
                 alive: set[str]) -> list[tuple[str, tuple[str, int]]]:
    """The plan seed-major, each seed's jobs still queued or running first: an arm submitted now (again)
    queues after them, so a seed's arms never overlap, whichever of them ampbench was away for."""
    seeds = list(dict.fromkeys(seed for _, seed in keys.values()))
    return [(k, ms) for seed in seeds for k, ms in sorted(
        ((k, ms) for k, ms in keys.items() if ms[1] == seed), key=lambda kv: state.jobs.get(kv[0]) not in alive)]


def _pair_options(chain: tuple[str, str] | None, spec: TrialSpec, keys: dict[str, tuple[str, int]]) -> list[str]:
    """sbatch options that keep a seed's arms on one node, one after the other: a later arm held after
    the one before it; a first arm whose pair already ran (--resume) on the node that pair ran on."""
    if chain is not None:
        return ["--hold", f"--dependency=afterany:{chain[1]}"]
    if spec.suite.distributed.nnodes > 1:
        return []
    for other in spec.suite.modes:   # an arm of this seed recorded ok earlier: this one on its node
        path = Path(spec.trial_path).with_name(f"{trial_key(other.name, spec.seed)}.json")
        if trial_key(other.name, spec.seed) in keys or other.name == spec.mode:
            continue
        with contextlib.suppress(ResultsError, OSError):
            t = load_doc(path, Trial, "trial file")
            if t.status == "ok" and t.slurm is not None and t.slurm.node:
                return [f"--nodelist={t.slurm.node}"]
    return []


def _release(now: dict[str, JobState], run_path: Path, state: SlurmRun, hooks: Hooks) -> None:
    """Each held later arm released once its seed's first arm has a node: onto that node (the pair
    measured on one node; `afterany` keeps them one after the other), or anywhere when the first arm
    ended without running."""
    for job, first in list(state.held.items()):
        if job in now and _over(now[job]):   # cancelled while held
            del state.held[job]
            continue
        lead = now.get(first)
        if lead is None or (_over(lead) and not lead.nodes):
            try:
                lead = slurm.job_info(first) or JobState(state=FORGOTTEN)
            except slurm.SlurmError:
                continue   # asked again next interval
        if not lead.nodes and not _over(lead):
            continue       # not placed yet
        try:
            slurm.place(job, lead.nodes or None)
        except slurm.SlurmError as e:
            hooks.say(f"warning: job {job} not released yet: {e}")
            continue
        del state.held[job]
        save_state(run_path, state)
        hooks.say(f"job {job} released " + (f"onto {lead.nodes}, after its pair's job {first}" if lead.nodes else
                                            f"to run anywhere: its pair's job {first} ended without a node"))


def _watch(active: dict[str, str], keys: dict[str, tuple[str, int]], run_path: Path, state: SlurmRun,
           suite_name: str, hooks: Hooks) -> None:
    """Poll until every active job ended and its trial is recorded (jobs leave `active` as they do)."""
    seen: dict[str, JobState] = {}
    outage = _Outage(state.options.outage_s, hooks.say)
    while active:
        now, error = _states(list(active))
        outage.note(error, sum(j not in now for j in active))
        if state.held:
            _release(now, run_path, state, hooks)
        for job, key in list(active.items()):
            st = now.get(job)
            if st is None:  # unread this interval: asked again next one
                continue
            mode, seed = keys[key]
            if not _over(st):
                if seen.get(job) is None or seen[job].state != st.state:
                    where = f" on {st.nodes}" if st.state == "RUNNING" and st.nodes else \
                        (f" ({st.reason})" if st.reason and st.reason != "None" else "")
                    hooks.say(f"{mode} seed {seed}: job {job} {st.state}{where}")
                seen[job] = st
                continue
            del active[job]
            if st.state in slurm.REQUEUE and _requeue(job, st, key, active, keys, run_path, state, suite_name, hooks):
                continue
            trial = _record(hooks.spec(mode, seed), hooks.files(mode, seed), job,
                            None if st.state == FORGOTTEN else st)
            hooks.finished(mode, seed, trial)
        if active:
            time.sleep(state.options.poll_s)


def _requeue(job: str, st: JobState, key: str, active: dict[str, str], keys: dict[str, tuple[str, int]],
             run_path: Path, state: SlurmRun, suite_name: str, hooks: Hooks) -> bool:
    """A trial the cluster ended (preempted, its node failed) submitted again, up to `requeue` times per
    trial: held after the seed's other active jobs and released onto the node it ran on (its pair's).
    False when the cap is reached or its trial file is ok: the trial is recorded as it ended."""
    mode, seed = keys[key]
    done = state.requeued.get(key, 0)
    if done >= state.options.requeue or _ok_file(hooks.spec(mode, seed), job):
        return False
    others = [j for j, k in active.items() if keys[k][1] == seed]
    extra = ["--hold"] + ([f"--dependency=afterany:{':'.join(others)}"] if others else [])
    new = _submit(hooks.spec(mode, seed), hooks.files(mode, seed), state, suite_name, extra)
    active[new] = key
    state.jobs[key], state.held[new], state.requeued[key] = new, job, done + 1
    save_state(run_path, state)
    hooks.say(f"{mode} seed {seed}: job {job} ended {st.state}: submitted again as job {new} "
              f"(requeue {done + 1} of {state.options.requeue}, on {st.nodes or 'any node'})")
    return True


def cancel(jobs: list[str], run_path: Path, state: SlurmRun, hooks: Hooks, targets: list[str] | None = None) -> None:
    """Ctrl-C / SIGTERM / Slurm gone: every job of the run still queued or running cancelled (one
    `scancel` of `targets`, default the jobs: an array's id where every task of it is one of them) and
    waited out (bounded); the ones Slurm confirms ended are forgotten, so `--resume` submits those
    trials again; the others stay in slurm.json (and get no trial file), so `--resume` waits for them."""
    if not jobs:
        return
    ended = _cancel_and_wait(jobs, targets or jobs, hooks)
    _forget(state, ended)
    save_state(run_path, state)
    if ended:
        hooks.say(f"cancelled {len(ended)} Slurm job(s): {', '.join(j for j in jobs if j in ended)}")
    kept = [j for j in jobs if j not in ended]
    if kept:
        hooks.say(f"warning: {len(kept)} Slurm job(s) not confirmed ended, kept in slurm.json: {', '.join(kept)} "
                  f"(`ampbench run --resume {run_path}` waits for them once Slurm answers, or scancel them)")


def _cancel_and_wait(jobs: list[str], targets: list[str], hooks: Hooks) -> set[str]:
    """One `scancel` of `targets`, then the jobs Slurm confirms ended within CANCEL_WAIT_S.  A failed scancel
    is said and confirms nothing: every job stays the run's."""
    try:
        slurm.scancel(targets)
    except slurm.SlurmError as e:
        hooks.say(f"error: could not cancel job(s) {', '.join(jobs)}: {e}")
        return set()
    ended: set[str] = set()
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline:
        now, _ = _states(jobs)
        ended = {j for j, st in now.items() if _over(st)}
        if len(ended) == len(jobs):
            break
        time.sleep(0.5)
    return ended


def _forget(state: SlurmRun, ended: set[str]) -> None:
    """The jobs Slurm confirmed ended out of slurm.json: their trials, their holds behind an earlier arm, their
    array tasks (`--resume` then submits those trials again)."""
    state.jobs = {k: j for k, j in state.jobs.items() if j not in ended}
    state.held = {j: f for j, f in state.held.items() if j not in ended}
    state.tasks = {t: ks for t, ks in state.tasks.items() if t not in ended}
