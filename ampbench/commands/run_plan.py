"""Planning a run before anything is written: options, the trial plan, faults, specs, the device pool
(`--devices`), and resume.

Everything that can be checked up front is checked here, so a mistake ends with exit 2 before a
run folder exists: the suite (with the workload's own checks), `--mode`, `--seeds`,
`AMPBENCH_FAULT`, `--devices`, and, for `--resume`, run.json and the arguments it cannot honour.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, field
from pathlib import Path

from ampbench.config import ConfigError, Suite
from ampbench.config.suite import MAX_SEED
from ampbench.core.errors import ResultsError
from ampbench.core.files import folder_id, safe_name
from ampbench.core.protocol import CACHE_ENV, FAULT_ENV, FAULT_RANK_ENV, Fault
from ampbench.core.store import RUNS_DIR
from ampbench.core.text import printable
from ampbench.launch.pool import CPU, batches, cpu_shares, parse_devices
from ampbench.launch.process import keep_signal_handlers
from ampbench.launch.slurm import SlurmOptions
from ampbench.record.models import RunInfo, trial_key
from ampbench.results.run_dir import RunDir, suite_of
from ampbench.trial.numerics import LEVEL_ENV, LEVELS, parse_level
from ampbench.trial.spec import TrialSpec

FAULT_KINDS: tuple[Fault, ...] = typing.get_args(Fault)
DEFAULT_OUT = RUNS_DIR


@dataclass
class RunOptions:
    suite_file: Path | None
    profile: str | None = None
    modes: list[str] = field(default_factory=list)
    seeds: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = DEFAULT_OUT
    resume: Path | None = None
    strict: bool = False
    report: bool = True
    run_id: str | None = None
    # --until-decided [--max-seeds N] [--budget DURATION] [--baseline PATH]: seeds added while they can decide
    until_decided: bool = False
    max_seeds: int = 12
    budget_s: float | None = None
    baseline: Path | None = None
    until_rules: list[str] = field(default_factory=list)  # bisect: only its rule and modes ask for seeds
    until_modes: list[str] = field(default_factory=list)
    affinity: list[int] | None = None  # --affinity: every trial pinned to this CPU set (os.sched_setaffinity)
    at_max_batch: bool = False  # --at-max-batch [--probe DIR]: every mode at the probe's largest batch
    probe: Path | None = None
    devices: str | None = None  # --devices all|0,1,...: trials side by side, one per device (launch.pool)
    verbose: bool = False  # -v: the trial table and every rule's full text before the outcome table
    slurm: SlurmOptions | None = None  # --launcher slurm: every trial a Slurm job (launch/slurm_run.py)
    master: str | None = None  # --master HOST:PORT --node-rank R: a multi-node trial's nodes started by hand
    node_rank: int | None = None
    status_every: float = 15.0  # --status-every: a piped run's status line interval (run_progress.STATUS_EVERY_S)


@dataclass(frozen=True)
class NodeRole:
    """This machine's part of a multi-node trial started by hand (run --master HOST:PORT --node-rank R)."""

    master: str
    node_rank: int

    @property
    def follower(self) -> bool:
        """Node rank > 0: its ranks join node 0's, which records the trial."""
        return self.node_rank > 0


MAX_SEEDS = (2, 64)   # --max-seeds: fewer cannot add a seed, more is a week of trials per mode


def parse_max_seeds(text: str) -> int:
    """--max-seeds as typed: a whole number from 2 to 64, else one line naming the option (not click's
    three-line usage box: every option of `run` is refused the same way)."""
    s = text.strip()
    if not (s.isascii() and s.isdigit() and len(s) <= 3 and MAX_SEEDS[0] <= int(s) <= MAX_SEEDS[1]):
        raise ConfigError("--max-seeds", printable(text)[:40] or "''", f"give a whole number of seeds per mode from "
                          f"{MAX_SEEDS[0]} to {MAX_SEEDS[1]}")
    return int(s)


def node_role(opts: RunOptions) -> NodeRole | None:
    return NodeRole(opts.master, opts.node_rank) if opts.master is not None and opts.node_rank is not None else None


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ampbench")


def _utf8(what: str, path: Path | str | None) -> None:
    """A path that cannot be written to run.json as text (non-UTF-8 bytes from the shell) is refused up front."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
        raise ConfigError(what, shown, "the path is not valid UTF-8; rename it (or use another folder)") from None


def check_until_decided(suite: Suite, where: Path | str | None) -> None:
    """--until-decided adds seeds: refused up front where a seed cannot reach the trials (a command that
    never uses {seed} would run the same program again and count it as another seed)."""
    from ampbench.workloads.command.params import CommandParams, fields_of, placeholder_texts

    if suite.suite.workload != "command":
        return
    texts = placeholder_texts(CommandParams.model_validate(suite.workload), suite)
    if not any("seed" in fields_of(t) for k, t in texts.items() if k != "workload.metric.json_file"):
        raise ConfigError(str(where), "workload.command", "--until-decided adds seeds, but the command never uses "
                          "{seed}: every added seed would run the same training (pass e.g. --seed {seed})")


def _worker_env() -> None:
    """The variables every worker reads (AMPBENCH_FAULT_RANK, AMPBENCH_NUMERICS_LEVEL), checked once up
    front: a bad value is one line here, not the same traceback in every trial."""
    rank = os.environ.get(FAULT_RANK_ENV, "").strip()
    if rank and not (rank.isascii() and rank.isdigit() and len(rank) <= 6):
        raise ConfigError(FAULT_RANK_ENV, printable(rank)[:40], "give a rank number (0, 1, ...), or leave it unset "
                          "for every rank")
    level = os.environ.get(LEVEL_ENV, "")
    if level:
        try:
            parse_level(level)
        except ValueError:
            raise ConfigError(LEVEL_ENV, printable(level)[:40], f"expected one of {', '.join(LEVELS)} (or 1, 2, 3), "
                              "or leave it unset") from None


def preflight(suite_file: Path | str | None, out_dir: Path | None) -> None:
    """What would otherwise fail only after a trial crashed, refused before any run folder exists:
    a deleted working folder, AMPBENCH_CACHE that is a file, an --out that is a dangling link or a file,
    paths that are not UTF-8."""
    try:
        os.getcwd()
    except OSError:
        raise ConfigError("run", "working folder", f"the current folder {os.environ.get('PWD', '')!s} no longer "
                          "exists (deleted?); cd to an existing folder") from None
    _worker_env()
    cache = default_cache_dir()
    _utf8(CACHE_ENV, cache)
    blocker = next((p for p in (cache, *cache.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConfigError(CACHE_ENV, str(cache), f"{blocker} is a file, not a folder; point {CACHE_ENV} at a folder")
    if suite_file is not None:
        _utf8("SUITE", suite_file)
    if out_dir is not None:
        out = Path(out_dir)
        _utf8("--out", out)
        for p in (out, *out.parents):
            if p.is_symlink() and not p.exists():
                raise ConfigError("--out", str(out), f"{p} is a symbolic link to {os.readlink(p)}, which does not "
                                  "exist; create it or choose another folder")
            if p.exists() and not p.is_dir():
                raise ConfigError("--out", str(out), f"{p} is a file, not a folder")


def plan_trials(suite: Suite, only_modes: list[str] | None = None) -> list[tuple[str, int]]:
    """Seed-major order (fp32 and every AMP mode for seed 0, then seed 1...): a run cut short
    still holds matched pairs."""
    names = [m.name for m in suite.modes]
    if only_modes:
        unknown = [m for m in only_modes if m not in names]
        if unknown:
            raise ConfigError("--mode", unknown[0], f"unknown mode; suite modes: {', '.join(names)}")
        names = [n for n in names if n in only_modes or n == "fp32"]
    return [(m, s) for s in suite.suite.seeds for m in names]


def parse_seeds(text: str) -> list[int]:
    """`--seeds 0,1,2` -> [0, 1, 2]: integers in numpy's seed range, no repeats."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError("--seeds", text, "expected comma-separated integers, e.g. --seeds 0,1,2") from None
    if not seeds:
        raise ConfigError("--seeds", text, "no seed given")
    bad = [s for s in seeds if not 0 <= s <= MAX_SEED]
    if bad:
        raise ConfigError("--seeds", str(bad[0]), f"out of range: seeds must be in 0..{MAX_SEED}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError("--seeds", text, "seeds must be unique")
    return seeds


def parse_faults(text: str | None, plan: list[tuple[str, int]] | None = None) -> dict[str, Fault]:
    """AMPBENCH_FAULT -> {trial key: kind}; unknown kinds (and, given a plan, trials not in it) refused."""
    out: dict[str, Fault] = {}
    keys = {trial_key(m, s) for m, s in plan} if plan is not None else None
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        try:
            mode, seed, kind = item.rsplit(":", 2)
            key = trial_key(mode, int(seed))
        except ValueError:
            raise ConfigError(FAULT_ENV, item, "expected MODE:SEED:KIND, e.g. amp-o1-fp16:0:crash") from None
        fault = next((f for f in FAULT_KINDS if f == kind), None)
        if fault is None:
            raise ConfigError(FAULT_ENV, item, f"unknown fault kind {kind!r}; kinds: {', '.join(FAULT_KINDS)}")
        if keys is not None and key not in keys:
            raise ConfigError(FAULT_ENV, item, "no such trial in this run's plan")
        out[key] = fault
    return out


MAX_CPU = 2**16  # no machine has more CPUs; a larger number is a typo, never a range to expand


def parse_cpus(text: str) -> list[int]:
    """`--affinity 0-3,6` -> [0, 1, 2, 3, 6]; every CPU must be one this process may use (each bound is
    checked before a range is expanded: `0-99999999999` is refused, not a MemoryError)."""
    cpus: set[int] = set()
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = set(range(os.cpu_count() or 1))
    shown = ",".join(map(str, sorted(allowed)))
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ConfigError("--affinity", text, "expected CPU numbers or ranges, e.g. --affinity 2 or "
                              "0-3,6" + (" (an empty item)" if not part else "")) from None
        if a < 0 or b < a:
            raise ConfigError("--affinity", text, f"{part}: a range runs from a CPU number up to a larger one")
        if b > MAX_CPU or not set(range(a, b + 1)) <= allowed:
            bad = min(set(range(a, min(b, MAX_CPU) + 1)) - allowed, default=b)
            raise ConfigError("--affinity", text, f"CPU {bad} is not available to this process (allowed: {shown})")
        cpus.update(range(a, b + 1))
    return sorted(cpus)


def make_spec(info: RunInfo, suite: Suite, run: RunDir, mode: str, seed: int, fault: Fault | None,
              cpus: list[int] | None = None, node: NodeRole | None = None, here: bool = True) -> TrialSpec:
    """The spec of one planned trial; `cpus`: its share of --affinity (the run's whole set by default).
    `here`: the worker runs on this machine, so the run folder's (device, inode) names it there too (a
    Slurm job's node sees a shared filesystem under another device number: no identity is passed)."""
    return TrialSpec(
        suite=suite, suite_file=info.suite_file, profile=info.profile, config_hash=info.config_hash,
        mode=mode, seed=seed, trial_path=str(run.trial_path(mode, seed)), cache_dir=str(default_cache_dir()),
        fault=fault,
        cpu_affinity=(cpus if cpus is not None else info.affinity) or None,
        node_rank=node.node_rank if node else None, master=node.master if node else None,
        run_folder=folder_id(run.path) if here else None,
    )


def check_launcher(suite: Suite, opts: RunOptions) -> None:
    """What the chosen launcher cannot run, refused before a run folder exists: Slurm's commands missing,
    --devices with Slurm (the cluster places trials), a multi-node trial with no way for its nodes to meet."""
    dist = suite.distributed
    if opts.slurm is not None:
        from ampbench.launch.slurm import check_partition, require_commands

        if opts.devices is not None or opts.node_rank is not None or opts.master is not None:
            raise ConfigError("--launcher", "slurm", "--devices, --master and --node-rank are for the local "
                              "launcher; under Slurm the job places the trial and names its nodes")
        require_commands()
        check_partition(opts.slurm.partition, dist.nnodes)
        return
    if opts.master is not None:
        check_master("--master", "", opts.master)
    elif dist.master and dist.nnodes > 1:
        check_master(str(opts.suite_file or "suite"), "distributed.master", dist.master)
    if (opts.node_rank is None) != (opts.master is None):
        raise ConfigError("--node-rank", str(opts.node_rank), "--master HOST:PORT and --node-rank R go together")
    if dist.nnodes > 1 and not (opts.master or dist.master or dist.ips):
        raise ConfigError("suite", "distributed.nnodes", f"nnodes = {dist.nnodes}: start each node with --master "
                          "HOST:PORT --node-rank R (or set distributed.master), or run with --launcher slurm")
    if opts.node_rank is not None and not 0 <= opts.node_rank < dist.nnodes:
        raise ConfigError("--node-rank", str(opts.node_rank), f"the suite has nnodes = {dist.nnodes}: node ranks "
                          f"0..{dist.nnodes - 1}")


def check_master(where: str, key: str, text: str) -> None:
    """A rendezvous HOST:PORT refused up front when it cannot be one (no port, a port out of range), not
    after a run folder exists and a trial failed at Paddle's launcher."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or any(c.isspace() for c in host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(where, key, f"{text!r}: expected HOST:PORT, a port from 1 to 65535 (e.g. 10.0.0.1:29400)")


# ---------------------------------------------------------------- --devices


def device_pool(text: str | None, recorded: list[str] | None = None) -> list[str] | None:
    """`--devices` -> the pool (None: not given, trials one after another as always).  `--resume` without
    --devices runs the rest on the run's recorded pool, if its devices are still visible."""
    if text is None and not recorded:
        return None
    from ampbench.trackers.cuda import visible_devices

    with keep_signal_handlers():  # with a GPU, counting imports paddle, which would take over SIGTERM
        visible = visible_devices()
    if text is not None:
        return parse_devices(text, visible)
    assert recorded is not None
    gone = [d for d in recorded if d != CPU and d not in visible]
    if gone:
        raise ConfigError("--resume", ",".join(recorded), f"the run's device pool is not visible here now (device "
                          f"{gone[0]}); give the pool to use with --devices")
    return recorded


def trial_width(suite: Suite, pool: list[str]) -> int:
    """Devices one trial takes: a data-parallel trial one per rank of this node; on the CPU slot, one."""
    return suite.distributed.nproc_per_node if suite.distributed.multi_process and pool != [CPU] else 1


def check_pool(suite: Suite, plan: list[tuple[str, int]], pool: list[str], affinity: list[int] | None) -> None:
    """What the pool cannot run, refused before a run folder exists: a trial wider than the pool, an
    --affinity set smaller than it."""
    batches(plan, trial_width(suite, pool), len(pool))
    cpu_shares(affinity, len(pool))


# ---------------------------------------------------------------- --resume


@dataclass(frozen=True)
class Resumed:
    run: RunDir
    info: RunInfo
    suite: Suite
    plan: list[tuple[str, int]]


def _same_suite(given: Path, info: RunInfo) -> bool:
    if given.exists() and Path(info.suite_file).exists():
        return given.resolve() == Path(info.suite_file).resolve()
    return str(given) in (info.suite_file, info.suite, f"{info.suite}.toml")


def refuse_unhonoured(opts: RunOptions, info: RunInfo, where: Path) -> None:
    """--resume finishes the run exactly as run.json plans it; arguments that would change the plan
    or the config are refused rather than silently ignored."""
    given = [name for name, value in (("--profile", opts.profile), ("--mode", opts.modes), ("--seeds", opts.seeds),
                                      ("--set", opts.overrides), ("--affinity", opts.affinity),
                                      ("--at-max-batch", opts.at_max_batch or None), ("--probe", opts.probe),
                                      ("--out", None if Path(opts.out_dir) == DEFAULT_OUT else opts.out_dir))
             if value not in (None, [])]
    if opts.until_decided and info.sequential is None:
        given.append("--until-decided (the run was not started with it)")
    if given:
        raise ConfigError("--resume", ", ".join(given),
                          f"not honoured: --resume finishes {where} as planned in its run.json (profile "
                          f"{info.profile!r}, {len(info.plan)} trials); start a new run to change the plan")
    if opts.suite_file is not None and not _same_suite(Path(opts.suite_file), info):
        raise ConfigError("--resume", str(opts.suite_file),
                          f"{where} was run from suite {info.suite_file!r}; --resume always uses the config "
                          "recorded in run.json: drop the SUITE argument or give that one")


def load_resume(opts: RunOptions) -> Resumed:
    """The run folder given to --resume, run.json validated (schema, config, plan, names)."""
    assert opts.resume is not None
    run = RunDir(opts.resume)
    info = run.load_run()
    where = run.run_json
    refuse_unhonoured(opts, info, run.path)
    safe_name(info.suite, f"{where}: suite")
    suite = suite_of(info, where)
    if suite.suite.name != info.suite:
        raise ResultsError(f"{where}: suite {info.suite!r} but its config is suite {suite.suite.name!r}")
    plan = info.planned()
    unknown = sorted({m for m, _ in plan} - {m.name for m in suite.modes})
    if unknown:
        raise ResultsError(f"{where}: plan names mode(s) {unknown} that its config does not define")
    return Resumed(run=run, info=info, suite=suite, plan=plan)
