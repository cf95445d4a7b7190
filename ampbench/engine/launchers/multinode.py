"""Nodes started by hand (`run --master HOST:PORT --node-rank R`): a multi-node trial's ranks on this
machine, the other nodes' started the same way on theirs.

Each node runs the plan with the local launcher's processes, its ranks joining the rendezvous at
`--master`; node 0's ranks record the trials (its run folder is judged), a follower's run folder keeps
only its ranks' logs, and it exits 0 when its part of every trial ended ok, else 2.  The node's role is
kept in run.json, so `--resume` on that node goes on in the same role.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console
from rich.markup import escape

from ampbench.config import ConfigError, Suite
from ampbench.engine.launchers.local import LocalLauncher, check_master
from ampbench.engine.plan import NodeRole
from ampbench.record.models import Trial
from ampbench.results.run_dir import RunDir


class MultiNodeLauncher(LocalLauncher):
    """The local launcher as one node of a trial started by hand on every node."""

    kind: ClassVar[str] = "multi-node"
    master: str
    node_rank: int

    def kept(self) -> dict[str, Any]:
        return {"kind": self.kind, "master": self.master, "node_rank": self.node_rank}

    def asked(self) -> bool:
        return True

    def options_given(self) -> str:
        return "--master and --node-rank"

    def node(self) -> NodeRole:
        return NodeRole(self.master, self.node_rank)

    def check(self, suite: Suite, plan: list[tuple[str, int]], where: str) -> None:
        check_master("--master", "", self.master)
        nnodes = suite.distributed.nnodes
        if not 0 <= self.node_rank < nnodes:
            raise ConfigError("--node-rank", str(self.node_rank), f"the suite has nnodes = {nnodes}: node ranks "
                              f"0..{nnodes - 1}")
        super().check(suite, plan, where)

    def part_done(self, run_path: Path, ended: list[Trial], console: Console) -> int | None:
        """A follower node (--node-rank > 0) has no trials to judge: exit 0 when its part of each ended ok, else 2."""
        if not self.node().follower:
            return None
        bad = [t.key for t in ended if t.status != "ok"]
        console.print(f"node rank done: its ranks' logs are in {escape(str(RunDir(run_path).logs_dir))}; node 0's run "
                      f"folder holds the trials, their check and report" + (
                          f"; this node's part failed in {escape(', '.join(bad))}" if bad else ""), soft_wrap=True)
        return 2 if bad else 0
