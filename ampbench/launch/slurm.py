"""Slurm, through its own commands: `sbatch` submits, `squeue` reads every job's state in one call,
`scontrol show job` (or `sacct`) says how a job ended, `scancel` stops jobs.

Why the commands and not submitit: submitit reads job states through `sacct`, which needs Slurm's
accounting daemon (slurmdbd) and a MariaDB behind it; many small clusters and every test cluster run
without them.  `squeue --states=all` and `scontrol show job` work on any Slurm, and ampbench already has
a worker command and a spec file to hand over, so there is nothing to pickle.  `sacct` is only asked,
when it works, about a job that `scontrol` has forgotten (Slurm keeps a finished job for MinJobAge,
300 s by default).

Every command has a timeout; a Slurm command that fails is an `SlurmError` naming the command and
Slurm's own message (the CLI turns it into one line and exit 2).  An answer ampbench cannot read (not
UTF-8, a line not in the format asked for) is an `SlurmError` too, never "the job is gone": a job is
taken as ended only when Slurm says so (a final state, or the controller itself saying it does not know
the job).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ampbench.core.errors import ConfigError, UserError
from ampbench.record.models import Status

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
TIMEOUT_S = 60.0
# Job states after which a job runs no more (squeue's %T names them so); anything else may still run.
ENDED = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
         "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"}
# A job Slurm says it does not know (scontrol and sacct): it ended and was purged, how is not known.
FORGOTTEN = "UNKNOWN"
# Ends the cluster chose, not the trial: a trial ended so is submitted again (SlurmOptions.requeue times).
REQUEUE = {"PREEMPTED", "NODE_FAIL", "BOOT_FAIL"}
# The trial status a job that left no trial file gets (its Slurm state is recorded beside it).
_STATUS: dict[str, Status] = {"TIMEOUT": "timeout", "DEADLINE": "timeout", "OUT_OF_MEMORY": "oom",
                              "CANCELLED": "cancelled", "PREEMPTED": "cancelled"}
# sbatch options ampbench sets itself or relies on: --slurm-arg may not replace them (the run folder relies on
# them: the job's log, its working folder, its ownership token in the comment, one task per node, one job not an
# array, sbatch returning at once). sbatch reads options with getopt_long: a unique prefix IS the option
# (`--outp=x` is `--output=x`) and of two given the later wins, so any prefix of these is refused, unless it is
# the full name of another sbatch option (getopt_long takes an exact name as that option): `ntasks` is the one
# such name in sbatch's table (src/common/slurm_opt.c, Slurm 22.05 to 24.x). A one-letter key is such a prefix
# too (ampbench passes `--KEY`, never a short option).
_OWN = ("output", "error", "open-mode", "parsable", "wrap", "job-name", "chdir", "nodes", "ntasks-per-node",
        "export", "comment", "hold", "dependency", "array", "wait")
_OTHER_EXACT = {"ntasks"}
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
# a job id as squeue prints it: "51", an array task "123_4", or an array's pending tasks "123_[5-7%1]"
_JOB_ID = re.compile(r"^\d+(_(\d+|\[[0-9,%-]+\]))?$")
_STATE = re.compile(r"^[A-Z_]+$")
# scontrol saying it does not know a job: a definite answer (the job ended long enough ago to be purged)
_UNKNOWN_JOB = "Invalid job id"
# scancel on a job that ended meanwhile: nothing left to cancel, not a failure
_GONE = ("already completed", "already finished", "Invalid job id", "has already")



class SlurmError(UserError):
    """A Slurm command failed; the message names it and quotes Slurm."""


class SlurmUnreadable(SlurmError):
    """A Slurm command answered (exit 0) in a form ampbench could not read: another command may still
    say what it could not."""


class SlurmOptions(BaseModel):
    """`run --launcher slurm` options, kept in the run folder so `--resume` submits the rest alike."""

    model_config = ConfigDict(extra="forbid")
    partition: str | None = None
    gpus_per_trial: int | None = Field(None, ge=0)  # None: one per rank of the node on a GPU profile, none on cpu
    time: str | None = None                      # --time; None: the suite's train.timeout_s plus 10 minutes
    constraint: str | None = None                # --constraint: both arms of a pair on one node type
    args: list[str] = []                         # --slurm-arg KEY=VALUE, passed as --KEY=VALUE
    poll_s: float = Field(15.0, ge=0.2)          # one squeue for all jobs per interval
    outage_s: float = Field(600.0, ge=1.0)       # Slurm not answering this long: ampbench stops waiting
    requeue: int = Field(2, ge=0)                # a trial preempted or whose node failed: submitted again this often
    parallel: int | None = Field(None, ge=1)     # --slurm-parallel N: one array job per run, N seeds at a time


def parse_slurm_args(items: list[str]) -> list[str]:
    """`--slurm-arg KEY=VALUE` (or a bare KEY, a flag) -> sbatch's `--KEY=VALUE`; the options ampbench
    sets itself are refused rather than silently overridden."""
    out = []
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not _KEY.match(key):
            raise ConfigError("--slurm-arg", item, "expected KEY=VALUE (an sbatch option without its dashes), "
                              "e.g. --slurm-arg account=proj or --slurm-arg exclusive")
        own = _owned(key)
        if own is not None:
            what = f"--{own}" if own == key.lower() else f"a prefix of --{own} (sbatch takes it as --{own})"
            raise ConfigError("--slurm-arg", item, f"{what} is set by ampbench (the run folder relies on it)")
        out.append(f"--{key}={value}" if eq else f"--{key}")
    return out


def _owned(key: str) -> str | None:
    """The guarded sbatch option `--KEY` would set (getopt_long's unique-prefix rule), None when none."""
    k = key.lower()
    if k in _OTHER_EXACT:
        return None
    return next((o for o in _OWN if o.startswith(k)), None)


def require_commands() -> None:
    """Refused up front (exit 2) where Slurm's client commands are not on PATH."""
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        raise ConfigError("--launcher", "slurm", f"{', '.join(missing)} not found on PATH: run ampbench on a Slurm "
                          "login node (Debian: apt-get install slurm-client)")


def require_controller(run_path: Path) -> None:
    """Refused up front (exit 2, one line) where slurmctld does not answer `scontrol ping`: `--resume` would
    otherwise ask about each job and then wait out --slurm-outage with a warning every poll.  Nothing has been
    submitted, cancelled or forgotten by then."""
    p = _run(["scontrol", "ping"], check=False)
    said = " ".join((p.stdout or p.stderr).split())
    if p.returncode == 0 and " is UP" in said and "DOWN" not in said:
        return
    raise SlurmError(f"Slurm's controller (slurmctld) is unreachable (scontrol ping: {said[:160] or 'no answer'}): "
                     f"nothing was submitted, cancelled or forgotten; the run's jobs and finished trials are kept. Run "
                     f"`ampbench run --resume {run_path}` again once it answers")


def _decode(cmd: list[str], what: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SlurmUnreadable(f"{cmd[0]}: its {what} is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}); "
                         "is this Slurm's own command?") from None


def _run(cmd: list[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        raw = subprocess.run(cmd, input=stdin.encode() if stdin is not None else None, capture_output=True,
                             timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SlurmError(f"{cmd[0]}: {e}") from None
    p = subprocess.CompletedProcess(cmd, raw.returncode, _decode(cmd, "answer", raw.stdout),
                                    _decode(cmd, "error output", raw.stderr))
    if check and p.returncode != 0:
        said = (p.stderr or p.stdout).strip().splitlines()
        raise SlurmError(f"{shlex.join(cmd[:3])}...: exit {p.returncode}: {said[-1] if said else 'no message'}")
    return p


def sbatch(script: str, options: list[str]) -> str:
    """Submit a batch script (on stdin: sbatch keeps its own copy); returns the job id."""
    out = _run(["sbatch", "--parsable", *options], stdin=script).stdout.strip()
    job = out.split(";")[0]  # --parsable: "ID" or "ID;CLUSTER"
    if not job.isdigit():
        raise SlurmError(f"sbatch: unexpected answer {out!r} (expected a job id)")
    return job


@dataclass(frozen=True)
class JobState:
    """One job as Slurm reports it; `exit_code` and `reason` only once it ended; `name`, `user` and
    `comment` (scontrol's) say whose job it is."""

    state: str
    nodes: str = ""
    reason: str = ""
    exit_code: str = ""
    name: str = ""
    user: str = ""
    comment: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def task_ids(text: str) -> list[str]:
    """The job ids one squeue line stands for: "51" and "123_4" themselves, an array's pending tasks
    "123_[5-7%1]" (or "123_[1,3-4]") each of its tasks; [] where the text is not such an id."""
    if not _JOB_ID.match(text):
        return []
    base, _, tasks = text.partition("_")
    if not tasks.startswith("["):
        return [text]
    return [f"{base}_{i}" for i in _indices(tasks[1:-1])]


def _indices(spec: str) -> list[int]:
    """Slurm's array index list ("5-7%1", "1,3-4") as the indices it holds (the %N cap dropped)."""
    out: list[int] = []
    for part in spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return []
        out += range(int(lo), int(hi or lo) + 1)
    return out


def squeue(jobs: list[str]) -> dict[str, JobState]:
    """Every given job (or array task, "123_4") Slurm still knows, in one call (finished ones too, for
    MinJobAge).  Arrays are asked by their id and their pending tasks read from Slurm's "123_[5-7%1]".
    A job absent from the answer is not concluded ended here (`job_info` asks the controller about it);
    an answer in another format than the one asked for is an SlurmError."""
    if not jobs:
        return {}
    asked = ",".join(dict.fromkeys(j.split("_")[0] for j in jobs))
    cmd = ["squeue", "--noheader", "--array", "--states=all", f"--jobs={asked}", "--format=%i|%T|%N|%r"]
    p = _run(cmd, check=False)
    if p.returncode != 0:
        if _UNKNOWN_JOB in p.stderr:  # none of them is known any more
            return {}
        said = p.stderr.strip().splitlines()
        raise SlurmError(f"squeue: exit {p.returncode}: {said[-1] if said else 'no message'}")
    out: dict[str, JobState] = {}
    for n, line in enumerate(p.stdout.splitlines(), 1):
        parts = line.strip().split("|", 3)
        if not line.strip():
            continue
        ids = task_ids(parts[0])
        if len(parts) != 4 or not ids or not _STATE.match(parts[1].split(" ")[0]):
            raise SlurmUnreadable(f"squeue: unexpected answer, line {n}: {line[:120]!r} (asked for "
                             "JOBID|STATE|NODES|REASON); job states not read from it")
        for job in ids:
            if job in jobs:
                out[job] = JobState(state=parts[1].split(" ")[0], nodes=parts[2], reason=parts[3])
    return out


def _fields(text: str) -> dict[str, str]:
    """scontrol's one-line KEY=VALUE list: a value runs to the next " Key=", so a job name or a reason
    with spaces is read whole."""
    items = re.split(r"\s+(?=[A-Za-z][A-Za-z0-9/:_]*=)", text.strip())
    return dict(kv.split("=", 1) for kv in items if "=" in kv)


def _user(text: str) -> str:
    return text.split("(")[0]   # "root(0)" -> "root"


def job_info(job: str) -> JobState | None:
    """A job as the controller has it (scontrol; sacct, where accounting runs, for one scontrol has
    forgotten); None only when Slurm says it does not know the job (it ended and was purged).  An
    answer that could not be read is an SlurmError, never None."""
    p = _run(["scontrol", "show", "job", "--oneliner", job], check=False)
    if p.returncode == 0:
        f = next((f for f in map(_fields, p.stdout.splitlines()) if _is_job(f, job)), {})
        if not f or not _STATE.match(f.get("JobState", "")):
            raise SlurmUnreadable(f"scontrol show job {job}: unexpected answer {p.stdout.strip()[:120]!r}")
        nodes = f.get("NodeList", "")
        return JobState(state=f["JobState"], nodes="" if nodes == "(null)" else nodes, reason=f.get("Reason", ""),
                        exit_code=f.get("ExitCode", ""), name=f.get("JobName", ""), user=_user(f.get("UserId", "")),
                        comment=f.get("Comment", ""))
    if _UNKNOWN_JOB not in p.stderr:
        said = p.stderr.strip().splitlines()
        raise SlurmError(f"scontrol show job {job}: exit {p.returncode}: {said[-1] if said else 'no message'}")
    return _sacct(job)


def _is_job(f: dict[str, str], job: str) -> bool:
    """Whether scontrol's record `f` is this job: its JobId, or for an array task "123_4" the array's
    record that holds task 4 (a task not started yet is still in the array's "5-7%1")."""
    if f.get("JobId") == job:
        return True
    base, _, task = job.partition("_")
    return bool(task) and f.get("ArrayJobId") == base and task.isdigit() and \
        int(task) in _indices(f.get("ArrayTaskId", ""))


def _sacct(job: str) -> JobState | None:
    if shutil.which("sacct") is None:
        return None
    p = _run(["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={job}",
              "--format=JobID,State,ExitCode,NodeList,User,JobName,Comment"], check=False)
    lines = p.stdout.strip().splitlines() if p.returncode == 0 else []
    parts = lines[0].split("|", 6) if lines else []
    if len(parts) != 7 or parts[0] != job or not _STATE.match(parts[1].split(" ")[0]):
        return None   # no accounting, or it does not know the job either
    return JobState(state=parts[1].split(" ")[0], exit_code=parts[2], nodes=parts[3], user=parts[4], name=parts[5],
                    comment=parts[6])


def scancel(jobs: list[str]) -> None:
    """Cancel these jobs (one call); a job already gone is not an error, any other failure is."""
    if not jobs:
        return
    p = _run(["scancel", *jobs], check=False)
    if p.returncode != 0:
        said = [ln for ln in p.stderr.strip().splitlines() if not any(g in ln for g in _GONE)]
        if said or not p.stderr.strip():
            raise SlurmError(f"scancel: exit {p.returncode}: {said[-1] if said else 'no message'}")


def check_partition(partition: str | None, nnodes: int) -> None:
    """Refused before a run folder exists (exit 2): a partition the cluster does not have (or none given
    where it has no default), or a trial over more nodes than the partition holds (it would pend forever,
    reason PartitionConfig)."""
    p = _run(["sinfo", "--noheader", "--format=%P|%D"])
    nodes: dict[str, int] = {}
    default = ""
    for line in p.stdout.split():
        name, _, count = line.partition("|")
        if not count.isdigit():
            raise SlurmError(f"sinfo: unexpected answer {line[:120]!r} (asked for PARTITION|NODES)")
        if name.endswith("*"):
            name = default = name[:-1]
        nodes[name] = nodes.get(name, 0) + int(count)
    where = partition or default
    if not where:
        raise ConfigError("--partition", "", f"the cluster has no default partition: give one of "
                          f"{', '.join(sorted(nodes)) or '(none)'}")
    if where not in nodes:
        raise ConfigError("--partition", where, f"no such partition on this cluster (it has "
                          f"{', '.join(sorted(nodes)) or 'none'})")
    if nnodes > nodes[where]:
        raise ConfigError("suite", "distributed.nnodes", f"nnodes = {nnodes}, but partition {where} has "
                          f"{nodes[where]} node(s): the trial's job could never start")


def place(job: str, nodes: str | None) -> None:
    """A held job released, restricted first to these nodes (None: wherever Slurm starts it)."""
    if nodes:
        _run(["scontrol", "update", f"JobId={job}", f"ReqNodeList={nodes}"])
    _run(["scontrol", "release", job])


def has_gpus(partition: str | None) -> bool:
    """Whether any node (of the partition) offers GPUs as Slurm resources (gres gpu)."""
    cmd = ["sinfo", "--noheader", "--format=%G"] + ([f"--partition={partition}"] if partition else [])
    p = _run(cmd, check=False)
    return p.returncode == 0 and "gpu" in p.stdout


def trial_status(state: str) -> Status:
    """The trial status of a job that ended without a trial file of its own."""
    return _STATUS.get(state, "crashed")


def job_options(job_name: str, log: Path, opts: SlurmOptions, nnodes: int, gpus: int, time_s: float,
                workdir: Path, comment: str = "") -> list[str]:
    """sbatch's options for one trial: its log in the run folder, one task per node, the run's token as
    the job's comment (what makes the job the run's own), the user's choices."""
    minutes = int(time_s // 60) + 1
    out = [f"--job-name={job_name}", f"--output={log}", "--open-mode=append", f"--chdir={workdir}",
           *([f"--comment={comment}"] if comment else []),
           f"--nodes={nnodes}", "--ntasks-per-node=1", f"--time={opts.time or minutes}", "--export=ALL"]
    if opts.partition:
        out.append(f"--partition={opts.partition}")
    if opts.constraint:
        out.append(f"--constraint={opts.constraint}")
    if gpus > 0:
        out.append(f"--gpus-per-node={gpus}")
    return out + parse_slurm_args(opts.args)


def batch_script(cmd: list[str], env: dict[str, str], srun: bool) -> str:
    """The job's script: the worker command, or (a multi-node trial) `srun` starting it once per node."""
    lines = ["#!/bin/bash", "# written by ampbench run --launcher slurm", "set -u"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    lines.append(("exec srun --kill-on-bad-exit=1 " if srun else "exec ") + shlex.join(cmd))
    return "\n".join(lines) + "\n"


def array_range(count: int, parallel: int) -> str:
    """sbatch's `--array`: tasks 0..count-1, at most `parallel` of them running at once."""
    return f"--array=0-{count - 1}%{parallel}"


@dataclass(frozen=True)
class Arm:
    """One trial of an array task: its worker command, environment, and the log its output goes to."""

    cmd: list[str]
    env: dict[str, str]
    log: Path
    srun: bool = False
    trial: Path | None = None  # its trial file: an arm that already ended ok in this task is not run again
    key: str = ""              # its trial key (mode__seedN)


def array_script(tasks: list[list[Arm]]) -> str:
    """An array job's script: task i runs its arms one after the other (a seed's arms on one node, in
    sequence), each in a subshell of its own with its output appended to its own log; a failing arm
    does not stop the next one, and the task's exit code is the last failing arm's.  After Slurm's own
    requeue the task starts from the top: an arm whose trial file is already this task's ok trial
    (launch/array_done.py) is skipped, with a line in its log, not measured twice."""
    lines = ["#!/bin/bash", "# written by ampbench run --launcher slurm --slurm-parallel: one task per seed", "set -u",
             "rc=0", 'case "${SLURM_ARRAY_TASK_ID:-}" in']
    for i, arms in enumerate(tasks):
        lines.append(f"{i})")
        for arm in arms:
            exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(arm.env.items()))
            run = ("srun --kill-on-bad-exit=1 " if arm.srun else "") + shlex.join(arm.cmd)
            log = shlex.quote(str(arm.log))
            line = f"({exports}exec {run}) >>{log} 2>&1 || rc=$?"
            if arm.trial is not None:
                trial = shlex.quote(str(arm.trial))
                done = shlex.join([arm.cmd[0], "-m", "ampbench.launch.array_done", str(arm.trial), arm.key])
                said = shlex.quote(f"ampbench: {arm.key} already ended ok in this array task (Slurm requeued the "
                                   "task): not run again")
                line = f"if [ -e {trial} ] && {done} 2>/dev/null; then echo {said} >>{log}; else {line}; fi"
            lines.append(f"  {line}")
        lines.append("  ;;")
    lines += ['*) echo "ampbench: no trials for array task ${SLURM_ARRAY_TASK_ID:-}" >&2; exit 2;;', "esac",
              'exit "$rc"']
    return "\n".join(lines) + "\n"
