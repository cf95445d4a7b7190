"""A run's trials as one Slurm array job (`run --launcher slurm --slurm-parallel N`): one queue entry
for the run, `--array=0-M%N` (at most N tasks at once).

One task per seed, running that seed's arms one after the other in one batch script (launch/slurm.py
`array_script`): the pairing rule (a seed's arms on one node, in sequence) holds by construction, with
no held jobs to release; N caps how many seeds run at once.  Tasks per trial would let Slurm put a
seed's arms on two nodes, or on one node at the same time, unless chained by dependencies the array
cannot express per task.

Everything else is the per-trial path's (launch/slurm_run.py): the array carries the run's token as its
comment, and a task is the run's own only if its name, user and token match; slurm.json maps each
trial to its task ("123_4", `jobs`) and each task to its trials (`tasks`); each trial's record is its
own worker's file, named by the task (trackers/scheduler.py), or one made from the task's Slurm state
and the trial's log; states come from squeue then scontrol (sacct) and an unread answer is never
"ended"; Ctrl-C cancels the array by its id; a task the cluster ended (preempted, its node failed) has
its trials without an ok file submitted again as a new one-task array on the node it ran on, up to
`requeue` times per trial.  `--resume` waits for the run's tasks still queued or running and submits
one array for the rest: a seed one of whose arms already ran ok gets an array of its own pinned to
that node (`--nodelist`), so a run resumed so can hold more than one queue entry.
"""

from __future__ import annotations

import time
from pathlib import Path

from ampbench.core.store import RunPaths
from ampbench.launch import slurm
from ampbench.launch.slurm import FORGOTTEN, JobState
from ampbench.launch.slurm_run import (
    Hooks,
    SlurmRun,
    _not_ours,
    _ok_file,
    _Outage,
    _over,
    _pair_options,
    _record,
    _states,
    cancel,
    prepare,
    save_state,
)
from ampbench.record.models import trial_key

Keys = dict[str, tuple[str, int]]


def array_name(suite_name: str) -> str:
    return f"ampbench-{suite_name}-array"


def run_array(todo: list[tuple[str, int]], run_path: Path, state: SlurmRun, suite_name: str, hooks: Hooks) -> None:
    """Every trial of `todo` through array tasks, until each has a trial file; the run's own tasks
    recorded in `state` still queued or running are waited for, not submitted again."""
    keys = {trial_key(m, s): (m, s) for m, s in todo}
    active = _adopt(keys, state, suite_name, hooks)   # task id -> the trial keys it runs that are to record
    try:
        waiting = {k for ks in active.values() for k in ks}
        seeds: dict[int, list[str]] = {}
        for key, (_, seed) in keys.items():
            if key not in waiting:
                seeds.setdefault(seed, []).append(key)
        groups: dict[tuple[str, ...], list[list[str]]] = {}   # extra sbatch options -> tasks (a seed's keys)
        for ks in seeds.values():
            mode, seed = keys[ks[0]]
            groups.setdefault(tuple(_pair_options(None, hooks.spec(mode, seed), keys)), []).append(ks)
        for extra, tasks in groups.items():
            _submit(tasks, list(extra), keys, active, run_path, state, suite_name, hooks)
        _watch(active, keys, run_path, state, suite_name, hooks)
    except BaseException:
        jobs = list(active)
        cancel(jobs, run_path, state, hooks, targets=_targets(jobs, state))
        raise


def _targets(jobs: list[str], state: SlurmRun) -> list[str]:
    """What scancel is given: an array's own id where every task of it recorded is to be cancelled,
    else the tasks themselves."""
    out: list[str] = []
    for array in dict.fromkeys(j.split("_")[0] for j in jobs):
        mine = [t for t in state.tasks if t.split("_")[0] == array]
        out += [array] if set(mine) <= set(jobs) else [j for j in jobs if j.split("_")[0] == array]
    return out


def _adopt(keys: Keys, state: SlurmRun, suite_name: str, hooks: Hooks) -> dict[str, list[str]]:
    """The recorded tasks to wait for rather than submit again: the run's own (name, user, token) still
    queued or running (all their trials of `keys`), or ended with trial files ok since the caller looked
    (those trials).  Slurm not answering is an SlurmError: nothing is submitted then."""
    out: dict[str, list[str]] = {}
    for task, ks in state.tasks.items():
        mine = [k for k in ks if k in keys and state.jobs.get(k) == task]
        if not mine:
            continue
        st = slurm.job_info(task)
        if st is None:   # Slurm no longer knows it: it ended long ago
            continue
        why = _not_ours(st, array_name(suite_name), state)
        if why:
            hooks.say(f"array task {task} in slurm.json is not this run's ({why}): left alone, its trials "
                      "submitted again")
            continue
        if st.ended:
            mine = [k for k in mine if _ok_file(hooks.spec(*keys[k]), task)]
        if mine:
            out[task] = mine
            hooks.say(f"array task {task} ({', '.join(mine)}) found queued or running, not submitted again")
    return out


def _submit(tasks: list[list[str]], extra: list[str], keys: Keys, active: dict[str, list[str]], run_path: Path,
            state: SlurmRun, suite_name: str, hooks: Hooks) -> str:
    """One array job, task i running the trials of tasks[i] in order; recorded in `active` and
    slurm.json at once (an interrupt from here on cancels it)."""
    arms: list[list[slurm.Arm]] = []
    gpus, time_s = 0, 600.0
    for ks in tasks:
        arms.append([])
        task_s = 600.0   # the task runs the seed's arms in turn: its time limit covers all of them
        for key in ks:
            spec, files = hooks.spec(*keys[key]), hooks.files(*keys[key])
            cmd, env, gpus = prepare(spec, files, state)
            arms[-1].append(slurm.Arm(cmd, env, files.log, srun=spec.suite.distributed.nnodes > 1,
                                      trial=Path(spec.trial_path), key=key))
            task_s += spec.timeout_s or spec.suite.train.timeout_s
        time_s = max(time_s, task_s)
    nnodes = hooks.spec(*keys[tasks[0][0]]).suite.distributed.nnodes
    options = slurm.job_options(array_name(suite_name), RunPaths(run_path).array_log, state.options, nnodes, gpus,
                                time_s, Path.cwd(), comment=state.comment)
    array = slurm.sbatch(slurm.array_script(arms), [*options, slurm.array_range(len(tasks), state.options.parallel or 1),
                                                     *extra])
    submitted = {k for ks in tasks for k in ks}   # these trials leave an older task (ended, or not the run's)
    state.tasks = {t: left for t, ks in state.tasks.items() if (left := [k for k in ks if k not in submitted])}
    for i, ks in enumerate(tasks):
        task = f"{array}_{i}"
        active[task], state.tasks[task] = list(ks), list(ks)
        for key in ks:
            state.jobs[key] = task
    save_state(run_path, state)
    where = f", {extra[0].removeprefix('--')}" if extra else ""
    hooks.say(f"submitted as array job {array}: {len(tasks)} task(s), one per seed, at most "
              f"{state.options.parallel or 1} at once{where}")
    for i, ks in enumerate(tasks):
        hooks.say(f"  task {array}_{i}: {', '.join(ks)}")
    return array


def _watch(active: dict[str, list[str]], keys: Keys, run_path: Path, state: SlurmRun, suite_name: str,
           hooks: Hooks) -> None:
    """Poll until every active task ended and each of its trials is recorded."""
    seen: dict[str, str] = {}
    outage = _Outage(state.options.outage_s, hooks.say)
    while active:
        now, error = _states(list(active))
        outage.note(error, sum(t not in now for t in active))
        for task, ks in list(active.items()):
            st = now.get(task)
            if st is None:   # unread this interval: asked again next one
                continue
            if not _over(st):
                if seen.get(task) != st.state:
                    where = f" on {st.nodes}" if st.state == "RUNNING" and st.nodes else \
                        (f" ({st.reason})" if st.reason and st.reason != "None" else "")
                    hooks.say(f"array task {task} ({', '.join(ks)}): {st.state}{where}")
                seen[task] = st.state
                continue
            del active[task]
            if st.state in slurm.REQUEUE and _requeue(task, st, ks, keys, active, run_path, state, suite_name, hooks):
                continue
            _record_all(task, ks, keys, None if st.state == FORGOTTEN else st, hooks)
        if active:
            time.sleep(state.options.poll_s)


def _record_all(task: str, ks: list[str], keys: Keys, st: JobState | None, hooks: Hooks) -> None:
    for key in ks:
        mode, seed = keys[key]
        hooks.finished(mode, seed, _record(hooks.spec(mode, seed), hooks.files(mode, seed), task, st))


def _requeue(task: str, st: JobState, ks: list[str], keys: Keys, active: dict[str, list[str]], run_path: Path,
             state: SlurmRun, suite_name: str, hooks: Hooks) -> bool:
    """A task the cluster ended: its trials with an ok file recorded, the others submitted again as a
    one-task array on the node the task ran on (their pair's), up to `requeue` times per trial.  False
    when none is left to run or a trial reached the cap: the task's trials are recorded as it ended."""
    ok = [k for k in ks if _ok_file(hooks.spec(*keys[k]), task)]
    rest = [k for k in ks if k not in ok]
    if not rest or any(state.requeued.get(k, 0) >= state.options.requeue for k in rest):
        return False
    _record_all(task, ok, keys, st, hooks)
    single = hooks.spec(*keys[rest[0]]).suite.distributed.nnodes == 1
    extra = [f"--nodelist={st.nodes}"] if st.nodes and single else []
    for key in rest:
        state.requeued[key] = state.requeued.get(key, 0) + 1
    new = _submit([rest], extra, keys, active, run_path, state, suite_name, hooks)
    hooks.say(f"array task {task} ended {st.state}: {', '.join(rest)} submitted again as array job {new} "
              f"(requeue {state.requeued[rest[0]]} of {state.options.requeue}, on {st.nodes or 'any node'})")
    return True
