"""`ampbench run`: the command line's request and policies handed to the engine (engine/execute.py), one
run or, with --sweep, one per point of the grid (commands/sweep.py)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ampbench.config import ConfigError
from ampbench.core.text import printable
from ampbench.engine.batch import AtMaxBatch, BatchPolicy, ConfiguredBatch
from ampbench.engine.execute import Policies, execute
from ampbench.engine.launcher import Launcher
from ampbench.engine.launchers.local import LocalLauncher, parse_cpus
from ampbench.engine.launchers.multinode import MultiNodeLauncher
from ampbench.engine.launchers.slurm import SlurmLauncher, SlurmOptions
from ampbench.engine.launchers.slurm_array import SlurmArrayLauncher
from ampbench.engine.request import Output, RunRequest
from ampbench.engine.seeds.fixed import FixedSeeds
from ampbench.engine.seeds.policy import SeedPolicy
from ampbench.engine.seeds.until_decided import UntilDecided
from ampbench.judge.until import parse_duration

__all__ = ["Output", "Policies", "RunRequest", "batch_policy", "launcher", "run", "seed_policy"]


MAX_SEEDS = (2, 64)   # --max-seeds: fewer cannot add a seed, more is a week of trials per mode


def parse_max_seeds(text: str) -> int:
    """--max-seeds as typed: a whole number from 2 to 64, else one line naming the option (not click's
    three-line usage box: every option of `run` is refused the same way)."""
    s = text.strip()
    if not (s.isascii() and s.isdigit() and len(s) <= 3 and MAX_SEEDS[0] <= int(s) <= MAX_SEEDS[1]):
        raise ConfigError("--max-seeds", printable(text)[:40] or "''", f"give a whole number of seeds per mode from "
                          f"{MAX_SEEDS[0]} to {MAX_SEEDS[1]}")
    return int(s)


def seed_policy(until_decided: bool, max_seeds: str, budget: str | None, kind: str | None = None) -> SeedPolicy:
    """`--until-decided [--max-seeds N] [--budget DURATION]` as the seed policy (else the planned seeds), or
    `--seed-policy KIND`: a seed policy by its kind (engine/seeds/: a new one is one file there, found by its
    kind as a launcher is by --launcher; `until-decided` is --until-decided, `fixed` the default)."""
    try:
        budget_s = parse_duration(budget) if budget is not None else None
    except ValueError as e:
        raise ConfigError("--budget", (budget or "")[:40], str(e)) from None
    cap = parse_max_seeds(max_seeds)
    other = kind is not None and kind not in (FixedSeeds.kind, UntilDecided.kind)
    if other and until_decided:
        raise ConfigError("--seed-policy", str(kind), "not with --until-decided (that is --seed-policy until-decided)")
    until_decided = until_decided or kind == UntilDecided.kind
    if (budget is not None or cap != UntilDecided().max_seeds) and not until_decided:
        raise ConfigError("--max-seeds/--budget", budget or str(cap), "only with --until-decided")
    if other:
        return SeedPolicy.named(str(kind), "--seed-policy")
    return UntilDecided(max_seeds=cap, budget_s=budget_s) if until_decided else FixedSeeds()


def batch_policy(at_max_batch: bool, probe: Path | None) -> BatchPolicy:
    """`--at-max-batch [--probe DIR]` as the batch policy (else the suite's batch sizes)."""
    if probe is not None and not at_max_batch:
        raise ConfigError("--probe", str(probe), "only with --at-max-batch")
    return AtMaxBatch(probe=probe) if at_max_batch else ConfiguredBatch()


def launcher(kind: str, devices: str | None = None, cpus: str | None = None, master: str | None = None,
             node_rank: int | None = None, slurm: SlurmOptions | None = None) -> Launcher:
    """`--launcher KIND` and its options as the launcher object: local processes (on `--devices`, pinned to
    `--affinity CPUS`), this node of a trial started by hand (`--master`, `--node-rank`), Slurm jobs or one
    Slurm array (`--slurm-parallel`), or any other registered launcher by its kind."""
    affinity = parse_cpus(cpus) if cpus is not None else None
    if slurm is not None:
        if devices is not None or node_rank is not None or master is not None:
            raise ConfigError("--launcher", "slurm", "--devices, --master and --node-rank are for the local "
                              "launcher; under Slurm the job places the trial and names its nodes")
        return (SlurmArrayLauncher if slurm.parallel else SlurmLauncher)(options=slurm)
    if (node_rank is None) != (master is None):
        raise ConfigError("--node-rank", str(node_rank), "--master HOST:PORT and --node-rank R go together")
    if master is not None and node_rank is not None:
        return MultiNodeLauncher(devices=devices, affinity=affinity, master=master, node_rank=node_rank)
    if kind == "local":
        return LocalLauncher(devices=devices, affinity=affinity)
    found = Launcher.named(kind, "--launcher")
    if devices is not None or affinity is not None:
        raise ConfigError("--launcher", kind, "--devices and --affinity are for the local launcher")
    return found


def run(request: RunRequest, policies: Policies, sweep: list[str], console: Console) -> int:
    """One run (execute), or one per point of `--sweep`'s grid; the exit code."""
    if sweep:
        from ampbench.commands.sweep import run_sweep

        return run_sweep(request, policies, sweep, console)
    return execute(request, policies, console=console)
