"""The launcher: one TrialSpec in, one Trial out, in a fresh process (or N ranks).

One process per trial keeps peak memory clean and turns a crash, an OOM or a hang into that
trial's status while the others go on. The launcher listens to the worker's event lines (progress,
and the steps done so far, so a trial killed mid-way still keeps its partial curve) and always
leaves a trial file at `spec.trial_path`: the worker's own, or one it writes for a worker that
could not. Where those files live is the store's business (results/), not the launcher's.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.core.docs import load_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, tail_lines
from ampbench.core.protocol import EVENT_PREFIX
from ampbench.core.text import printable
from ampbench.launch import distributed
from ampbench.launch.forkserver import ForkServer
from ampbench.launch.pool import VISIBLE_ENV
from ampbench.launch.process import Limits, Outcome, run_worker, worker_command
from ampbench.record.models import Interference, Status, StepRecord, Trial, trial_key
from ampbench.record.trial_file import write_trial_file
from ampbench.trial.spec import TrialSpec


@dataclass(frozen=True)
class TrialFiles:
    """Where the launcher puts the spec it hands over, the worker's log and the ranks' log folder."""

    spec: Path
    log: Path
    ranks: Path
    root: Path | None = None   # the folder they live in (the run folder): no link below it is followed


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


def _killed_status(out: Outcome, spec: TrialSpec, timeout: float) -> tuple[Status, str]:
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


def _launch_cmd(spec: TrialSpec, files: TrialFiles) -> tuple[list[str], dict[str, str], Path | None]:
    cmd, rank_dir = worker_command(files.spec), None
    env: dict[str, str] = {}
    if spec.suite.distributed.multi_process:  # N ranks under paddle.distributed.launch
        rank_dir = files.ranks
        shutil.rmtree(rank_dir, ignore_errors=True)
        cmd, env = distributed.launch_command(spec.suite.distributed, cmd, rank_dir, spec.node_rank, spec.master)
    return cmd, env, rank_dir


def launch(
    spec: TrialSpec,
    files: TrialFiles,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    stop: threading.Event | None = None,
    forks: ForkServer | None = None,
) -> Trial:
    """Run one trial in a fresh process; always returns a Trial (written to spec.trial_path). `env` is
    added to the worker's environment (run --devices pins it with CUDA_VISIBLE_DEVICES); `stop` set
    ends it without a trial file (process.Cancelled: the run was interrupted); `forks`, the run's fork
    server, forks a single worker where it can (never a data-parallel trial's launcher)."""
    atomic_write_text(files.spec, spec.model_dump_json(indent=1), root=files.root)
    trial_path = Path(spec.trial_path)
    trial_path.unlink(missing_ok=True)
    timeout = spec.timeout_s or spec.suite.train.timeout_s
    cmd, dist_env, rank_dir = _launch_cmd(spec, files)
    steps: list[StepRecord] = []
    log_path = files.log
    out = run_worker(cmd, {**dist_env, **(env or {})}, log_path, Limits(timeout, spec.memory_limit_bytes),
                     _step_collector(steps, on_event), log_root=files.root, stop=stop,
                     forks=None if rank_dir is not None else forks)
    if spec.node_rank:  # a follower node: its ranks joined node 0's, whose rank 0 records the trial there
        return _follower(spec, out, steps, log_path, timeout)
    failure = None if out.killed or rank_dir is None else distributed.rank_failure(
        rank_dir, log_path, out.returncode, spec.suite.distributed.world_size, oom_kills=max(out.oom_kills, 0))
    if failure is not None and trial_path.exists():  # rank 0 wrote its view; the failing rank decides
        merged = distributed.apply_failure(trial_path, failure)
        if merged is not None:
            return merged
    if not out.killed and trial_path.exists() and failure is None:
        try:
            return load_doc(trial_path, Trial, "trial file")
        except ResultsError:
            pass  # a half-written file cannot happen (atomic), but a foreign one could: rewrite below
    return _record_failure(spec, out, failure, steps, log_path, timeout, (env or {}).get(VISIBLE_ENV))


def _follower(spec: TrialSpec, out: Outcome, steps: list[StepRecord], log_path: Path, timeout: float) -> Trial:
    """What a follower node knows of its part (never written: node 0 holds the trial file)."""
    if out.returncode == 0 and not out.killed:
        return failure_trial(spec, "ok", None, "", steps, out.wall_s)
    status, error = _killed_status(out, spec, timeout)
    return failure_trial(spec, status, f"node rank {spec.node_rank}: {error}", tail_lines(log_path), steps, out.wall_s)


def _record_failure(spec: TrialSpec, out: Outcome, failure: Any, steps: list[StepRecord],
                    log_path: Path, timeout: float, visible: str | None = None) -> Trial:
    """The trial file for a worker that could not write one itself; a finished ok trial the worker did
    write is never replaced (ampbench stopped with Ctrl-Z past the timeout while the worker finished)."""
    with contextlib.suppress(ResultsError, OSError):
        done = load_doc(Path(spec.trial_path), Trial, "trial file")
        if failure is None and done.status == "ok" and done.key == trial_key(spec.mode, spec.seed) \
                and done.config_hash == spec.config_hash:
            return done
    if failure is not None:
        status, error, tail = failure.status, failure.message, failure.log_tail
    else:
        (status, error), tail = _killed_status(out, spec, timeout), tail_lines(log_path)
        said = _said_last(tail) if out.signal is None and not out.killed else ""
        if said:   # the cause it printed (a full disk, `ulimit -f`: EFBIG), not only in logs/
            error += f"; its output ends: {said}"
    if out.leftovers:
        error += (f"; its processes left {len(out.leftovers)} running ({', '.join(out.leftovers[:5])}"
                  + (", ..." if len(out.leftovers) > 5 else "") + "): ampbench killed them")
    trial = failure_trial(spec, status, error, tail, steps, out.wall_s)
    trial.memory.rss_peak_bytes = out.peak_rss or None  # None: never read
    if visible:  # where it ran (run --devices), as a worker records it itself
        trial.interference = Interference(devices=[d.strip() for d in visible.split(",") if d.strip()])
    write_trial(spec, trial)
    return trial


def _said_last(tail: str, limit: int = 300) -> str:
    """The last line a worker that died printed (its exception: `... File too large (EFBIG)`), events left
    out, its end kept when long (the reason and its errno close the line), control characters escaped."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith(EVENT_PREFIX)]
    if not lines:
        return ""
    line = lines[-1]
    return printable(line if len(line) <= limit else "..." + line[-(limit - 3):])


def failure_trial(spec: TrialSpec, status: Status, error: str | None, tail: str, steps: list[StepRecord],
                  wall_s: float) -> Trial:
    """The trial of a worker that could not write one itself: what is known of it (the steps its events or
    log showed), nothing more.  Shared by the local launcher and the Slurm one (launch/slurm_run.py)."""
    suite = spec.suite
    return Trial(
        suite=suite.suite.name, workload=suite.suite.workload, mode=spec.mode, seed=spec.seed,
        profile=spec.profile, status=status, error=error, log_tail=tail or None,
        config=suite.model_dump(mode="json"), config_hash=spec.config_hash, steps=steps,
        batch_size=spec.batch_size or suite.batch_size(suite.mode(spec.mode)), wall_s=wall_s,
    )


def write_trial(spec: TrialSpec, trial: Trial) -> None:
    """A trial file the runner writes, at spec.trial_path, no link followed below the run folder."""
    write_trial_file(Path(spec.trial_path), trial, spec.run_folder)  # inside its run folder, no link followed


def steps_from_log(log_path: Path) -> list[StepRecord]:
    """The step events a worker left in its log (a Slurm job's stdout is its log): the partial curve of
    a trial that ended without writing its own file."""
    steps: list[StepRecord] = []
    keep = _step_collector(steps, None)
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                if line.startswith(EVENT_PREFIX):
                    with contextlib.suppress(ValueError):
                        ev = json.loads(line[len(EVENT_PREFIX):])
                        if isinstance(ev, dict):
                            keep(ev)
    except OSError:
        pass
    return steps
