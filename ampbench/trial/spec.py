"""TrialSpec: everything one worker process needs, handed over as a JSON file.

The runner resolves the suite (profile, overrides) once; workers never re-read the TOML, so
`--resume` and retries use exactly the config recorded in run.json.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ampbench.config.suite import Suite
from ampbench.core.protocol import Fault


class TrialSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: Suite                    # the effective suite (profile + overrides applied), validated once
    suite_file: str
    profile: str
    config_hash: str
    mode: str
    seed: int
    trial_path: str
    cache_dir: str
    batch_size: int | None = None   # probe: override the mode's batch size
    steps: int | None = None        # probe: override train.steps
    timeout_s: float | None = None
    memory_limit_bytes: int | None = None
    fault: Fault | None = None      # injected failure (tests, `AMPBENCH_FAULT`)
    fault_step: int = 2
    # a multi-node trial started by hand (run --master HOST:PORT --node-rank R): this node's rank and the
    # rendezvous; under Slurm the node helper (launch/slurm_node.py) takes both from the job instead
    node_rank: int | None = Field(None, ge=0)
    master: str | None = None
    cpu_affinity: list[int] | None = None  # run --affinity: pin the worker to these CPUs before it starts
    # the run folder's (st_dev, st_ino) when the runner made this spec: the trial file is written into that
    # folder only, never into one the program under test put in its place (record/trial_file.py)
    run_folder: tuple[int, int] | None = None
