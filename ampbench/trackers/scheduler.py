"""The batch scheduler a trial runs under, as its own environment says (Slurm's SLURM_* variables).

Recorded by the worker itself, so a trial that ran as a Slurm job names its job, node and GPUs
whether it ended ok or not; Slurm's end state is added by the runner only when it has to record a
failure (launch/slurm_run.py). Nothing here talks to Slurm.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ampbench.record.models import SlurmJob


def slurm_job(environ: Mapping[str, str] | None = None) -> SlurmJob | None:
    """The Slurm job this process runs in, or None outside Slurm."""
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID", "").strip()
    if not job:
        return None
    array, task = env.get("SLURM_ARRAY_JOB_ID", "").strip(), env.get("SLURM_ARRAY_TASK_ID", "").strip()
    if array and task:   # a task of an array job: named as Slurm's commands name it ("123_4"), not by its own id
        job = f"{array}_{task}"
    return SlurmJob(job_id=job, node=env.get("SLURMD_NODENAME", ""), nodes=env.get("SLURM_JOB_NODELIST", ""),
                    partition=env.get("SLURM_JOB_PARTITION", ""), gpus=env.get("SLURM_JOB_GPUS", ""))
