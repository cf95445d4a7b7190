"""One node of a multi-node trial under Slurm: `srun` starts this once per node of the job.

It turns the job into Paddle's launcher arguments and then becomes that launcher (exec): the node
rank is SLURM_NODEID, the master the job's first node (its Slurm NodeAddr as an IP address) on a
port derived from the job id, so two jobs sharing a node do not meet each other.  A port given in the suite's `master` is kept.

    python -m ampbench.launch.slurm_node SPEC RANK_DIR
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from ampbench.core.docs import load_doc
from ampbench.launch import distributed
from ampbench.launch.process import worker_command
from ampbench.trial.spec import TrialSpec


def master_address(environ: dict[str, str], configured: str | None) -> str:
    """HOST:PORT of the job's first node: its NodeAddr in Slurm (its name unless the cluster says
    otherwise) as an IP address, which is what Paddle compares with its own node's address."""
    def scontrol(*args: str) -> str:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True, timeout=60).stdout

    first = scontrol("show", "hostnames", environ["SLURM_JOB_NODELIST"]).split()[0]
    fields = dict(kv.split("=", 1) for kv in scontrol("show", "node", "--oneliner", first).split() if "=" in kv)
    ip = socket.gethostbyname(fields.get("NodeAddr") or first)
    port = configured.rpartition(":")[2] if configured and ":" in configured else \
        str(20000 + int(environ["SLURM_JOB_ID"]) % 20000)
    return f"{ip}:{port}"


def main(argv: list[str]) -> None:
    spec_path, rank_dir = Path(argv[0]), Path(argv[1])
    spec = load_doc(spec_path, TrialSpec, "trial spec")
    env = dict(os.environ)
    master = master_address(env, spec.suite.distributed.master)
    cmd, extra = distributed.launch_command(spec.suite.distributed, worker_command(spec_path), rank_dir,
                                            node_rank=int(env.get("SLURM_NODEID", "0")), master=master)
    os.execvpe(cmd[0], cmd, {**env, **extra})


if __name__ == "__main__":
    main(sys.argv[1:])
