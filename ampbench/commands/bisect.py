"""`ampbench bisect SUITE --good REV --bad REV --repo PATH`: the first commit that made a rule fail.

A command suite (`workload = "command"`) runs a program of the user's repository; bisect runs that suite on
commits of the repository and judges each by one rule (`--rule`, default history-throughput):

1. Both endpoints first. The good endpoint's run becomes the reference (its baseline, `good-baseline.json`)
   for the history rules; the bad endpoint must FAIL the rule against it, and for a rule judged inside a run
   (speedup, accuracy-parity, memory) the good endpoint must PASS. Otherwise the search stops and says so:
   it never names a first bad commit when the endpoints do not bracket a change.
2. Each candidate (judge.bisection picks it) runs through the usual runner with `--until-decided` against
   that reference: seeds are added while the rule can still be decided, up to `--max-seeds`; a candidate
   still INCONCLUSIVE then is skipped, like `git bisect skip`, and the search goes on around it.
3. The boundary pair is judged again on fresh runs before the result is named; a recheck that disagrees
   replaces the first look and the search continues.
4. The result names the first bad commit with its evidence and a bound on the probability that some step
   went the wrong way (judge.bisection.wrong_step_bound).

Every candidate is checked out in `src/`, ampbench's own clone of the repository (commands.bisect_repo):
the user's repository and working tree are only read.  bisect.json is written after every candidate, so
`--resume DIR` continues where a kill left off without re-running a decided candidate.

This module is the use case (a new search or a resumed one, then the search); one look is
commands.bisect_look, the search loop commands.bisect_search, the repository commands.bisect_repo.

With `--parallel K` (and a pool of at least K devices, `--devices`), each round judges K candidates side by
side (judge.bisection's next_batch, k-section), each in its own clone (`src/`, `src-1/`, ...) and its own child
process on its share of the pool (engine.side_by_side); each is still decided alone at the rule's levels.

With `--package NAME=A..B` (`--paddle A..B`) the range is the versions of a package that the user's index
offers, each run in its own environment (commands.bisect_packages); with `--launcher slurm` every candidate's
trials are Slurm jobs, and `--parallel K` submits K candidates' runs at once (engine.side_by_side).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.commands import bisect_packages, bisect_repo
from ampbench.commands.bisect_look import Ctx, history, src_name
from ampbench.commands.bisect_search import endpoints, finish, search
from ampbench.config import REFERENCE_MODE, ConfigError, Suite
from ampbench.core.files import ensure_folder, locked, open_for_append, refuse_link
from ampbench.core.names import new_run_id
from ampbench.core.store import RUNS_DIR, lock_of
from ampbench.core.terminal import TerminalConsole
from ampbench.engine import side_by_side
from ampbench.engine.execute import load_for_run
from ampbench.engine.launchers.local import device_pool
from ampbench.engine.launchers.slurm import SlurmLauncher, SlurmOptions
from ampbench.engine.request import RunRequest
from ampbench.judge.rules import registry
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.results.bisect_file import BISECT_JSON, BisectFile, load_bisect
from ampbench.results.verdicts import EXIT_ERROR


@dataclass
class BisectOptions:
    suite_file: Path | None
    good: str | None = None
    bad: str | None = None
    repo: Path | None = None
    rule: str = HISTORY_THROUGHPUT
    modes: list[str] = field(default_factory=list)
    max_seeds: int = 6
    profile: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = RUNS_DIR
    resume: Path | None = None
    parallel: int = 1             # candidates side by side (k-section), each on its share of `devices`
    devices: str | None = None    # --devices all|0,1,...: the pool they share
    package: str | None = None    # --package NAME=A..B: the range is package versions (commands.bisect_packages)
    paddle: str | None = None     # --paddle A..B: --package paddlepaddle=A..B
    index_url: str | None = None  # the user's index for --package (pip's --index-url / --find-links / --no-index)
    find_links: str | None = None
    no_index: bool = False
    slurm: SlurmOptions | None = None  # --launcher slurm: every candidate's trials as Slurm jobs


def _check_rule(suite: Suite, rule: str, modes: list[str]) -> list[str]:
    if registry.result(rule).bisect is None:
        raise ConfigError("--rule", rule, f"bisect searches one of {', '.join(registry.bisectable())}")
    names = [m.name for m in suite.modes]
    for m in modes:
        if m not in names:
            raise ConfigError("--mode", m, f"no such mode in suite {suite.suite.name!r} ({', '.join(names)})")
    if modes:
        return modes
    if history(rule):
        return names
    amp = [n for n in names if n != REFERENCE_MODE]
    if not amp:
        raise ConfigError("--rule", rule, f"is judged on an AMP mode and suite {suite.suite.name!r} has none")
    return amp


def _new(opts: BisectOptions, console: Console) -> tuple[Path, BisectFile, list[str]]:
    pkg = _package_range(opts)
    loaded = load_for_run(RunRequest(suite_file=opts.suite_file, profile=opts.profile,
                                     overrides=tuple(opts.overrides), out_dir=opts.out_dir))
    suite = loaded.suite
    if suite.suite.workload != "command":
        raise ConfigError(str(opts.suite_file), "suite.workload", "bisect searches the commits of your program: "
                          "it needs a workload = \"command\" suite (docs/command.md)")
    modes = _check_rule(suite, opts.rule, opts.modes)
    if pkg is not None:
        return _new_versions(opts, loaded.profile, suite, modes, pkg, console)
    rng = bisect_repo.read_range(opts.repo, opts.good, opts.bad)
    pool = _side_pool(opts)
    folder = Path(opts.out_dir).resolve() / suite.suite.name / f"bisect-{new_run_id()}"  # absolute: {out} is read elsewhere
    folder.mkdir(parents=True, exist_ok=False)
    retarget = bisect_repo.retarget(suite, rng.root, folder / "src")
    slots = [[*opts.overrides, *bisect_repo.retarget(suite, rng.root, folder / src_name(j))] for j in range(opts.parallel)]
    token = bisect_repo.new_token()
    for j in range(opts.parallel):
        bisect_repo.clone(rng.root, folder / src_name(j), token)
    doc = BisectFile(suite=suite.suite.name, suite_file=str(opts.suite_file), repo=str(rng.root), good=str(opts.good),
                     bad=str(opts.bad), rule=opts.rule, modes=modes, max_seeds=opts.max_seeds, commits=rng.commits,
                     subjects=rng.subjects, overrides=[*opts.overrides, *retarget], profile=loaded.profile,
                     parallel=opts.parallel, devices=pool, slot_overrides=slots if opts.parallel > 1 else [],
                     slurm=opts.slurm.model_dump() if opts.slurm else None, clone_token=token)
    doc.write(folder)
    console.print(f"bisecting {len(rng.commits)} commits of {escape(str(rng.root))} on {escape(opts.rule)} "
                  f"({', '.join(escape(m) for m in modes)}): {escape(str(folder))}", soft_wrap=True)
    if opts.parallel > 1:
        console.print(f"k-section: {opts.parallel} candidates a round, side by side on "
                      f"{escape(', '.join(pool)) or 'Slurm (each its own jobs)'}", soft_wrap=True)
    if rng.dirty:
        console.print("note: --repo has uncommitted changes; they are not part of any candidate (only commits are "
                      "checked out, in bisect's own clone)", soft_wrap=True)
    return folder, doc, [*opts.overrides, *retarget]


def _package_range(opts: BisectOptions) -> bisect_packages.PackageRange | None:
    """--package / --paddle and the index options, checked before anything runs (None: a range of commits)."""
    got = bisect_packages.parse_range(opts.package, opts.paddle)
    if got is None:
        given = [k for k, v in (("--index-url", opts.index_url), ("--find-links", opts.find_links),
                                ("--no-index", opts.no_index or None)) if v is not None]
        if given:
            raise ConfigError(given[0], "", "is the package index of --package NAME=A..B (or --paddle A..B)")
        return None
    key = "--paddle" if opts.paddle is not None else "--package"
    if opts.repo is not None or opts.good or opts.bad:
        raise ConfigError(key, f"{got[1]}..{got[2]}", "searches package versions: give no --repo, --good or --bad")
    return bisect_packages.PackageRange(got[0], got[1], got[2],
                                        bisect_packages.index_options(opts.index_url, opts.find_links, opts.no_index))


def _new_versions(opts: BisectOptions, profile: str | None, suite: Suite, modes: list[str],
                  pkg: bisect_packages.PackageRange, console: Console) -> tuple[Path, BisectFile, list[str]]:
    """A search over the versions of a package the index offers (each candidate's environment made when it runs)."""
    got = bisect_packages.read_versions(pkg, suite)
    pool = _side_pool(opts)
    folder = Path(opts.out_dir).resolve() / suite.suite.name / f"bisect-{new_run_id()}"  # absolute: {out} is read elsewhere
    folder.mkdir(parents=True, exist_ok=False)
    doc = BisectFile(suite=suite.suite.name, suite_file=str(opts.suite_file), repo="", kind="package",
                     package=pkg.name, index=pkg.index, python=got.python,
                     command=[str(c) for c in suite.workload.get("command", [])], good=pkg.low, bad=pkg.high,
                     rule=opts.rule, modes=modes, max_seeds=opts.max_seeds, commits=got.versions,
                     subjects=[f"{pkg.name}=={v}" for v in got.versions], overrides=list(opts.overrides),
                     profile=profile, parallel=opts.parallel, devices=pool,
                     slurm=opts.slurm.model_dump() if opts.slurm else None)
    doc.write(folder)
    console.print(f"bisecting {len(got.versions)} versions of {escape(pkg.name)} ({escape(', '.join(got.versions))}) "
                  f"on {escape(opts.rule)} ({', '.join(escape(m) for m in modes)}), each in its own environment "
                  f"made from {escape(got.python)}: {escape(str(folder))}", soft_wrap=True)
    return folder, doc, list(opts.overrides)


def _side_pool(opts: BisectOptions) -> list[str]:
    """The device pool k candidates share (refused before anything is written when it is too small); with
    Slurm none: each candidate's jobs go where Slurm puts them."""
    if opts.slurm is not None:
        if opts.devices is not None:
            raise ConfigError("--devices", opts.devices, "not with --launcher slurm: Slurm places the candidates' jobs")
        SlurmLauncher.require_commands()
        return []
    if opts.parallel <= 1:
        if opts.devices is not None:
            raise ConfigError("--devices", opts.devices, "is the pool of --parallel K (candidates side by side)")
        return []
    pool = device_pool(opts.devices or "all") or []
    side_by_side.share(pool, opts.parallel)
    return pool


def _resumed(opts: BisectOptions, console: Console) -> tuple[Path, BisectFile, list[str]]:
    assert opts.resume is not None
    given = (opts.package, opts.paddle, opts.index_url, opts.find_links, opts.slurm, opts.devices)
    if opts.suite_file is not None or opts.good or opts.bad or opts.repo or opts.overrides or opts.parallel > 1 \
            or opts.no_index or any(v is not None for v in given):
        raise ConfigError("--resume", str(opts.resume), "continues the search as bisect.json records it: give no "
                          "SUITE, --good, --bad, --repo, --set, --parallel, --devices, --launcher or a package range")
    folder = Path(opts.resume)
    refuse_link(folder)
    doc = load_bisect(folder)
    _own_folder(folder, doc)
    console.print(f"resuming the search in {escape(str(folder))}: {len(doc.candidates)} commit(s) judged")
    return folder, doc, list(doc.overrides)


def _own_folder(folder: Path, doc: BisectFile) -> None:
    """Before a resumed search runs anything: every clone it checks out in is its own (bisect_repo.own_clone),
    and no folder or file it writes below its folder is a link (refused, never followed)."""
    if doc.kind == "commits":
        for j in range(doc.parallel):
            bisect_repo.own_clone(folder, src_name(j), doc.clone_token)
    for sub in ("runs", f"runs/{doc.suite}", "side", "baselines", "envs"):
        if os.path.lexists(folder / sub):
            ensure_folder(folder / sub, folder, create=False)
    for name in ("bisect.log", "bisect.md", "good-baseline.json"):
        refuse_link(folder / name)


def run_bisect(opts: BisectOptions, console: Console | None = None) -> int:
    """The search; returns 1 when it named the first bad commit (a regression found, as `check`'s FAIL), 3 when
    it could not (endpoints not bracketing a change, the boundary undecided), 2 on a crashed endpoint, 130/143
    when interrupted (continue with --resume)."""
    console = console or TerminalConsole()
    with contextlib.ExitStack() as hold:   # one process a search: a second --resume of it is refused, not raced
        if opts.resume:
            hold.enter_context(_search_lock(Path(opts.resume)))
        folder, doc, overrides = _resumed(opts, console) if opts.resume else _new(opts, console)
        if not opts.resume:
            hold.enter_context(_search_lock(folder))
        return _search_in(folder, doc, overrides, console)


def _search_lock(folder: Path) -> contextlib.AbstractContextManager[None]:
    refuse_link(folder)
    return locked(lock_of(folder / BISECT_JSON), f"the search in {folder} (another `bisect --resume` runs it)",
                  timeout=0)


def _search_in(folder: Path, doc: BisectFile, overrides: list[str], console: Console) -> int:
    suite_file = Path(doc.suite_file)
    with open_for_append(folder / "bisect.log", folder) as log:
        ctx = Ctx(folder, doc, suite_file, doc.profile, overrides, console, log)
        code = endpoints(ctx) if not doc.stopped else None
        if code is None and not doc.stopped:
            code = search(ctx)
    if code is not None:
        doc.write(folder)
        console.print(f"interrupted: decided commits kept. Continue with:\n  ampbench bisect --resume "
                      f"{escape(str(folder))}", soft_wrap=True)
        return code
    if any(c.status == "ERROR" for c in doc.candidates if c.role.endswith("endpoint")):
        doc.stopped = doc.stopped or "an endpoint's trials did not finish ok (logs in runs/)"
        finish(ctx)
        return EXIT_ERROR
    return finish(ctx)
