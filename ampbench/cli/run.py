"""`ampbench run`: its options parsed into the request and its policies (commands/run.py composes them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ampbench.cli.base import (
    EXIT_CODES,
    _choices,
    _suite_names,
    app,
    out,
)
from ampbench.core.store import RUNS_DIR


@app.command(epilog=EXIT_CODES)
def run(  # noqa: PLR0913  typer: one parameter per command-line option
    suite_file: Path | None = typer.Argument(
        None, help="Suite TOML file, or a bundled suite name (toy, resnet, ocr, bert, ctr); optional with --resume",
        autocompletion=_suite_names),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile name; default: cpu when no GPU"),
    modes: list[str] | None = typer.Option(None, "--mode", "-m", metavar="NAME", help="Run only these modes (fp32 is kept)"),
    seeds: str | None = typer.Option(None, "--seeds", metavar="N,N,...", help="Comma-separated seeds overriding the suite's"),
    set_: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a key: --set train.steps=5"),
    out_dir: Path = typer.Option(RUNS_DIR, "--out", help="Where run folders are created"),
    resume: Path | None = typer.Option(None, "--resume", help="Finish an interrupted run folder as its run.json "
                                          "plans it (refuses --profile/--mode/--seeds/--set)"),
    strict: bool = typer.Option(False, "--strict", help="INCONCLUSIVE exits 1 instead of 3"),
    no_report: bool = typer.Option(False, "--no-report", help="Skip report.md and plots"),
    until_decided: bool = typer.Option(False, "--until-decided", help="Add matched seeds while a speed or parity "
                                       "rule is INCONCLUSIVE and more seeds can decide it (alpha spending over the looks)"),
    seed_policy_kind: str | None = typer.Option(None, "--seed-policy", metavar="KIND", help="fixed (the default: "
                                                "--seeds or the suite's), until-decided (--until-decided), or "
                                                "another seed policy's kind (engine/seeds/)"),
    max_seeds: str = typer.Option("12", "--max-seeds", metavar="INTEGER", help="Seed cap per mode for --until-decided (2 to 64)"),
    budget: str | None = typer.Option(None, "--budget", metavar="DURATION", help="Time budget for --until-decided, e.g. 2h, 45m"),
    baseline: Path | None = typer.Option(None, "--baseline", help="Judge against this baseline too (run folder "
                                            "or baseline JSON); with --until-decided the history rules count"),
    affinity: str | None = typer.Option(None, "--affinity", metavar="CPUS", help="Pin every trial to this CPU set, e.g. 2 or 0-3"),
    at_max_batch: bool = typer.Option(False, "--at-max-batch", help="Every mode at the largest batch `ampbench "
                                      "probe` found (the newest probe of the suite, or --probe DIR)"),
    probe: Path | None = typer.Option(None, "--probe", help="The probe folder (or probe.json) for --at-max-batch"),
    sweep: list[str] | None = typer.Option(None, "--sweep", metavar="KEY=V1,V2,...", help="KEY=V1,V2: one run per value (several keys: "
                                              "a grid), e.g. --sweep train.batch_size=8,16,32"),
    devices: str | None = typer.Option(None, "--devices", metavar="all|N,N,...", help="all or 0,1,...: trials side by side, one per "
                                          "device, each seed's modes at the same time (no GPU: one slot)"),
    launcher: str = typer.Option("local", "--launcher", metavar=_choices("local", "slurm"), help="local, or slurm: every trial a Slurm job (the run "
                                 "folder on a shared filesystem; see docs/cluster.md), or another launcher's kind"),
    partition: str | None = typer.Option(None, "--partition", help="Slurm partition"),
    gpus_per_trial: int | None = typer.Option(None, "--gpus-per-trial", min=0, help="GPUs per node of a trial's "
                                                 "job (default: one per rank; none on the cpu profile)"),
    time_limit: str | None = typer.Option(None, "--time", help="Slurm time limit of a trial, e.g. 2:00:00 "
                                             "(default: the suite's timeout_s plus 10 minutes)"),
    constraint: str | None = typer.Option(None, "--constraint", help="Slurm node features (both arms of a pair "
                                             "on one GPU model), e.g. a100"),
    slurm_arg: list[str] | None = typer.Option(None, "--slurm-arg", metavar="KEY=VALUE", help="KEY=VALUE: passed to sbatch as "
                                                  "--KEY=VALUE, e.g. --slurm-arg account=proj"),
    slurm_poll: float = typer.Option(15.0, "--slurm-poll", min=0.2, help="Seconds between Slurm status queries "
                                     "(one squeue for all jobs)"),
    slurm_outage: float = typer.Option(600.0, "--slurm-outage", min=1.0, help="Seconds Slurm may leave a job's "
                                       "state unread before ampbench stops waiting (its jobs kept for --resume)"),
    slurm_requeue: int = typer.Option(2, "--slurm-requeue", min=0, help="Times a trial preempted or whose node "
                                      "failed is submitted again"),
    slurm_parallel: int | None = typer.Option(None, "--slurm-parallel", min=1, help="N: the run as one Slurm "
                                                 "array job, one task per seed (its arms in turn), N at once"),
    master: str | None = typer.Option(None, "--master", help="HOST:PORT: a multi-node trial's rendezvous, nodes "
                                         "started by hand (with --node-rank)"),
    node_rank: int | None = typer.Option(None, "--node-rank", min=0, help="This node's rank (0 records the "
                                            "trials) in a multi-node trial started by hand"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also the trial table and every rule's full text "
                                 "(default: the outcome table and one next step per rule that did not pass)"),
    status_every: float = typer.Option(15.0, "--status-every", min=0, max=30, help="Seconds between the status "
                                       "lines of a piped run (trial, step, rate, time left; 0: none)"),
) -> None:
    """Train matched FP32 and AMP trials, check them and write the report."""
    from ampbench.commands.run import Output, Policies, RunRequest, batch_policy, seed_policy
    from ampbench.commands.run import launcher as launcher_of
    from ampbench.commands.run import run as run_verb

    how = seed_policy(until_decided, max_seeds, budget, seed_policy_kind)
    request = RunRequest(suite_file=suite_file, profile=profile, modes=tuple(modes or ()), seeds=seeds,
                         overrides=tuple(set_ or ()), out_dir=out_dir, resume=resume)
    where = launcher_of(launcher, devices, affinity, master, node_rank,
                        _slurm_options(launcher, partition, gpus_per_trial, time_limit, constraint, slurm_arg,
                                       slurm_poll, (slurm_outage, slurm_requeue, slurm_parallel)))
    policies = Policies(launcher=where, seeds=how, batch=batch_policy(at_max_batch, probe),
                        output=Output(strict=strict, report=not no_report, baseline=baseline, verbose=verbose,
                                      status_every=status_every))
    raise typer.Exit(run_verb(request, policies, list(sweep or []), out))


def _slurm_options(launcher: str, partition: str | None, gpus: int | None, time_limit: str | None,
                   constraint: str | None, args: list[str] | None, poll: float,
                   patience: tuple[float, int, int | None]) -> Any:
    """The Slurm options of --launcher slurm (None for any other launcher, which refuses them)."""
    from ampbench.config import ConfigError
    from ampbench.launch.slurm import SlurmOptions, parse_slurm_args

    given = [n for n, v in (("--partition", partition), ("--gpus-per-trial", gpus), ("--time", time_limit),
                            ("--constraint", constraint), ("--slurm-arg", args or None),
                            ("--slurm-parallel", patience[2])) if v is not None]
    if launcher != "slurm":
        if given:
            raise ConfigError(given[0], "", "only with --launcher slurm")
        return None
    parse_slurm_args(list(args or []))
    return SlurmOptions(partition=partition, gpus_per_trial=gpus, time=time_limit, constraint=constraint,
                        args=list(args or []), poll_s=poll, outage_s=patience[0], requeue=patience[1],
                        parallel=patience[2])
