"""`python -m ampbench.launch.array_done TRIAL_FILE KEY`: exit 0 when TRIAL_FILE is an ok trial `KEY` that
this very Slurm array task recorded, else 1.

An array task runs its seed's arms in turn (launch/slurm.py `array_script`).  When Slurm itself
requeues the task (`scontrol requeue`, a preemption in REQUEUE mode, a node failure with --requeue),
the task starts again from the top under the same task id; the arms that already ended ok would run
again, each replacing its trial with a second measurement the run never asked for, and spending the
node's time.  The script asks this first for each arm whose trial file exists, and skips it when it is
the task's own ok trial (a trial of another task, an attempt that failed, or a file that cannot be read
runs the arm again).  It imports no Paddle, so the check costs a fraction of a second.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ampbench.core.docs import load_doc
from ampbench.core.errors import ResultsError
from ampbench.record.models import Trial
from ampbench.trackers.scheduler import slurm_job


def done(trial_file: Path, key: str) -> bool:
    """Whether the trial file holds an ok trial `key` recorded by the Slurm job this process runs in."""
    job = slurm_job()
    if job is None:
        return False
    with contextlib.suppress(ResultsError, OSError):
        t = load_doc(trial_file, Trial, "trial file")
        return t.status == "ok" and t.key == key and t.slurm is not None and t.slurm.job_id == job.job_id
    return False


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ampbench.launch.array_done TRIAL_FILE KEY", file=sys.stderr)
        return 2
    return 0 if done(Path(argv[0]), argv[1]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
