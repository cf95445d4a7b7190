"""Planning a run before anything is written: the up-front checks, the trial plan, faults and specs.

Everything that can be checked up front is checked here or by the policies, so a mistake ends with exit 2
before a run folder exists: the environment (`preflight`), `--mode`, `--seeds`, `AMPBENCH_FAULT`.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass
from pathlib import Path

from ampbench.config import ConfigError, Suite
from ampbench.config.suite import MAX_SEED
from ampbench.core.files import folder_id
from ampbench.core.protocol import CACHE_ENV, FAULT_ENV, FAULT_RANK_ENV, Fault
from ampbench.core.text import printable
from ampbench.record.models import RunInfo, trial_key
from ampbench.results.run_dir import RunDir
from ampbench.trial.numerics import LEVEL_ENV, LEVELS, parse_level
from ampbench.trial.spec import TrialSpec

FAULT_KINDS: tuple[Fault, ...] = typing.get_args(Fault)
Plan = list[tuple[str, int]]   # (mode, seed), seed-major


@dataclass(frozen=True)
class NodeRole:
    """This machine's part of a multi-node trial started by hand (run --master HOST:PORT --node-rank R)."""

    master: str
    node_rank: int

    @property
    def follower(self) -> bool:
        """Node rank > 0: its ranks join node 0's, which records the trial."""
        return self.node_rank > 0


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ampbench")


def _utf8(what: str, path: Path | str | None) -> None:
    """A path that cannot be written to run.json as text (non-UTF-8 bytes from the shell) is refused up front."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
        raise ConfigError(what, shown, "the path is not valid UTF-8; rename it (or use another folder)") from None


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


def plan_trials(suite: Suite, only_modes: list[str] | tuple[str, ...] | None = None) -> Plan:
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


def parse_faults(text: str | None, plan: Plan | None = None) -> dict[str, Fault]:
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


def fault_env() -> str | None:
    return os.environ.get(FAULT_ENV)


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
