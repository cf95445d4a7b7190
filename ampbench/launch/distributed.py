"""Multi-process data parallel trials, through Paddle's own launcher.

A suite with `[distributed] nproc_per_node * nnodes > 1` runs each trial as
`python -m paddle.distributed.launch ... python -m ampbench.trial.worker SPEC`; every rank runs the
same worker, wrapped in `paddle.DataParallel`.  Only rank 0 talks to the runner and writes the
trial file; every rank reports peak memory and a weight digest to rank 0 at the end, so the
trial records memory per rank and proves the replicas stayed identical.

Inside a rank (data sharding, DataParallel or fp16-compressed all-reduce, per-rank memory and
weight digests) is trial/replicas.py; this module is the launcher's side.

Failures: each rank that raises writes `rank<r>.failure.json` in the launcher's log folder;
the runner turns the earliest one (or the rank the launcher names) into the trial's error,
with that rank's log tail.  Nothing here imports paddle at module level.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.config import ConfigError, DistributedConfig
from ampbench.core.files import tail_lines as read_tail
from ampbench.core.protocol import RANK_DIR_ENV
from ampbench.record.models import Status

# ---------------------------------------------------------------- launch (runner side)


def launch_command(cfg: DistributedConfig, worker_cmd: list[str], log_dir: Path, node_rank: int | None = None,
                   master: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The launcher command around `worker_cmd` (which starts with the Python executable, so
    the launcher runs it as given instead of as a script path) plus the env it needs.  A node of a
    multi-node trial (`node_rank`, `master` overriding the suite's) logs its ranks in a folder of its
    own below `log_dir` (Paddle numbers each node's logs from 0), failure notes stay in `log_dir`."""
    master = master or cfg.master
    if cfg.nnodes > 1 and not (master or cfg.ips):
        raise ConfigError("suite", "distributed.master",
                          f"nnodes = {cfg.nnodes} needs `master = \"HOST:PORT\"` (or `ips`, or --master) so the "
                          "nodes can meet")
    node_logs = log_dir / f"node{node_rank}" if cfg.nnodes > 1 and node_rank is not None else log_dir
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(cfg.nproc_per_node),
           "--log_dir", str(node_logs)]
    if cfg.nnodes > 1:
        cmd += ["--nnodes", str(cfg.nnodes)]
    if node_rank is not None and cfg.nnodes > 1:
        cmd += ["--rank", str(node_rank)]
    if master:
        cmd += ["--master", master]
    if cfg.ips:
        cmd += ["--ips", cfg.ips]
    env = {"PYTHONUNBUFFERED": "1", RANK_DIR_ENV: str(log_dir)}  # events reach the runner as they happen
    if cfg.backend != "auto":
        env["PADDLE_DISTRI_BACKEND"] = cfg.backend
    return cmd + list(worker_cmd), env


# ---------------------------------------------------------------- failures (runner side)


@dataclass
class RankFailure:
    rank: int
    status: Status       # a Trial status: crashed, oom, ...
    message: str         # one-paragraph error for the trial (which rank, why, which log)
    log_tail: str = ""   # the last lines of that log (the trial's `log_tail`)


_STATUSES: tuple[Status, ...] = ("ok", "oom", "diverged", "crashed", "timeout")


def _note_status(value: object) -> Status:
    """A rank's failure note's status; anything unexpected counts as a crash."""
    return next((s for s in _STATUSES if s == value), "crashed")


_FAILED_RE = re.compile(r"Container rank (\d+) status failed .*? code (-?\d+)")


def rank_failure(log_dir: Path, launcher_log: Path, returncode: int | None, world: int,
                 tail_lines: int = 30, oom_kills: int = 0) -> RankFailure | None:
    """Why a data-parallel trial failed, or None if the launcher exited 0.

    The earliest failure note a rank wrote wins (a crash on one rank makes the others fail in
    their next collective); a rank that died without a note (segfault, os._exit, kill) is
    named by the launcher's "Container rank R status failed ... code C" line.
    """
    if returncode == 0:
        return None
    notes = []
    for p in sorted(Path(log_dir).glob("rank*.failure.json")):
        with contextlib.suppress(OSError, ValueError):
            notes.append(json.loads(p.read_text()))
    named = _FAILED_RE.search(_read(launcher_log))
    if notes:
        first = min(notes, key=lambda n: n.get("time", 0.0))
        rank, status, why = int(first["rank"]), _note_status(first.get("status", "crashed")), str(first.get("error", ""))
        why_line = _last_line(why)
    elif named:
        rank, code = int(named.group(1)), int(named.group(2))
        killed = code in (-signal.SIGKILL, 128 + signal.SIGKILL)
        # SIGKILL alone is not an OOM (anyone can send it): oom only with the kernel's OOM-kill count as evidence
        status = "oom" if killed and oom_kills > 0 else "crashed"
        why_line = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        if killed:
            why_line += (f" (the kernel OOM killer fired {oom_kills} time(s) meanwhile)" if oom_kills > 0 else
                         " (killed from outside: no kernel OOM kill was recorded)")
    else:
        rank, status = -1, "crashed"
        why_line = f"the launcher exited with code {returncode}"
    head = (f"rank {rank} of {world} failed: {why_line}" if rank >= 0
            else f"data-parallel trial failed: {why_line}")
    if rank >= 0 and "TimeoutException" in _read(Path(log_dir) / f"workerlog.{rank}"):
        head += (f" (a collective timed out: another rank stopped answering, hung or dead; "
                 f"see the other workerlog.* in {log_dir})")
    tail = read_tail(Path(log_dir) / f"workerlog.{rank}", tail_lines) if rank >= 0 else read_tail(launcher_log, tail_lines)
    where = f"rank {rank} log {Path(log_dir) / f'workerlog.{rank}'}" if rank >= 0 else f"launcher log {launcher_log}"
    return RankFailure(rank=rank, status=status, message=f"{head}\n(log: {where})", log_tail=tail)


def _read(p: Path) -> str:
    try:
        return Path(p).read_text(errors="replace")
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no error text"


def apply_failure(trial_path: Path, failure: RankFailure) -> Any:
    """Rank 0's trial file, re-labelled with the failure of the rank that broke the trial (rank 0's
    own error, if it had one, is kept below).  None if the file cannot be read."""
    from ampbench.core.docs import load_doc, write_doc
    from ampbench.core.errors import ResultsError
    from ampbench.record.models import Trial

    try:
        trial = load_doc(trial_path, Trial, "trial file")
    except ResultsError:
        return None
    own = trial.error if trial.status != "ok" and failure.rank != 0 else None
    trial.status = failure.status
    trial.error = failure.message + (f"\n--- rank 0 error ---\n{own[-2000:]}" if own else "")
    trial.log_tail = failure.log_tail or None
    write_doc(Path(trial_path), trial)
    return trial
