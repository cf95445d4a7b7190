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

With `--parallel K` (and a pool of at least K devices, `--devices`), each round judges K candidates side by
side (judge.bisection's next_batch, k-section), each in its own clone (`src/`, `src-1/`, ...) and its own child
process on its share of the pool (commands.bisect_side); each is still decided alone at the rule's levels.

With `--package NAME=A..B` (`--paddle A..B`) the range is the versions of a package that the user's index
offers, each run in its own environment (commands.bisect_packages); with `--launcher slurm` every candidate's
trials are Slurm jobs, and `--parallel K` submits K candidates' runs at once (commands.bisect_side).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from rich.console import Console
from rich.markup import escape

from ampbench.commands import bisect_packages, bisect_repo, bisect_side
from ampbench.commands.check import check_run
from ampbench.commands.run import execute, load_for_run
from ampbench.commands.run_plan import RunOptions, device_pool
from ampbench.config import REFERENCE_MODE, ConfigError, Suite
from ampbench.core.docs import write_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import ensure_folder, locked, open_for_append, refuse_link
from ampbench.core.names import new_run_id
from ampbench.core.store import RUNS_DIR, RunPaths, lock_of
from ampbench.core.text import printable
from ampbench.judge.bisection import Search, Verdict, wrong_step_bound
from ampbench.judge.rules import registry
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.launch.process import Interrupted
from ampbench.launch.slurm import SlurmOptions
from ampbench.report.bisect_md import write_bisect_md
from ampbench.results.baselines import load_baseline, save_baseline
from ampbench.results.bisect_file import BISECT_JSON, BisectFile, Candidate, load_bisect
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import EXIT_ERROR, EXIT_FAIL, EXIT_INCONCLUSIVE, RuleResult


def _history(rule: str) -> bool:
    """Judged against the good endpoint's baseline in every mode (its rule object declares bisect="history")."""
    return registry.result(rule).bisect == "history"


def _in_run(rule: str) -> bool:
    """Judged inside each candidate's own run, in the AMP modes (bisect="in-run")."""
    return registry.result(rule).bisect == "in-run"


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


# ---------------------------------------------------------------- the suite on a candidate


def _toml_string(text: str) -> str:
    """A --set value that TOML reads back as exactly `text` (written by the TOML library, never by hand)."""
    import tomli_w

    return tomli_w.dumps({"v": text}).split("=", 1)[1].strip()


def _retarget(suite: Suite, root: Path, src: Path) -> list[str]:
    """--set overrides that run the suite's program from the clone instead of the user's repository."""
    wl = suite.workload
    cwd = wl.get("cwd")
    if not cwd:
        raise ConfigError("workload.cwd", "", "bisect runs the program from each commit: set workload.cwd to "
                          "the folder of --repo the command runs in")
    where = Path(cwd).resolve()
    try:
        rel = where.relative_to(root.resolve())
    except ValueError:
        raise ConfigError("workload.cwd", str(cwd), f"is not inside --repo {root}: bisect can only move a "
                          "program that lives in the repository it searches") from None
    out = [f"workload.cwd={_toml_string(str(src / rel))}"]
    command = [str(c) for c in wl.get("command", [])]
    moved = [str(src / Path(c).resolve().relative_to(root.resolve())) if _inside(c, root) else c for c in command]
    if moved != command:
        import tomli_w

        out.append("workload.command=" + tomli_w.dumps({"v": moved}).split("=", 1)[1].strip())
    return out


def _inside(arg: str, root: Path) -> bool:
    p = Path(arg)
    if not p.is_absolute():
        return False
    try:
        p.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _check_rule(suite: Suite, rule: str, modes: list[str]) -> list[str]:
    if registry.result(rule).bisect is None:
        raise ConfigError("--rule", rule, f"bisect searches one of {', '.join(registry.bisectable())}")
    names = [m.name for m in suite.modes]
    for m in modes:
        if m not in names:
            raise ConfigError("--mode", m, f"no such mode in suite {suite.suite.name!r} ({', '.join(names)})")
    if modes:
        return modes
    if _history(rule):
        return names
    amp = [n for n in names if n != REFERENCE_MODE]
    if not amp:
        raise ConfigError("--rule", rule, f"is judged on an AMP mode and suite {suite.suite.name!r} has none")
    return amp


# ---------------------------------------------------------------- one candidate


@dataclass
class _Ctx:
    folder: Path
    doc: BisectFile
    suite_file: Path
    profile: str | None
    overrides: list[str]
    console: Console
    log: IO[str]


def _baseline(ctx: _Ctx) -> Path | None:
    path = ctx.folder / "good-baseline.json"
    refuse_link(path)
    return path if _history(ctx.doc.rule) and path.is_file() else None


Role = Literal["good-endpoint", "bad-endpoint", "candidate", "recheck"]
Look = tuple[int, Role, str]   # (commit index, role, run-id tag)


def _src_name(slot: int) -> str:
    """The clone a candidate of a round is checked out in: `src` for the first, `src-<slot>` for the others."""
    return "src" if slot == 0 else f"src-{slot}"


def _run_id(ctx: _Ctx, index: int, tag: str) -> tuple[str, Path]:
    point = re.sub(r"[^A-Za-z0-9._-]", "_", ctx.doc.commits[index][:10])   # a version may hold + or !
    run_id = f"{index:03d}-{point}{tag}"
    return run_id, ctx.folder / "runs" / ctx.doc.suite / run_id


def _runs_folder(ctx: _Ctx, run_dir: Path) -> None:
    """runs/<suite>/ (and a candidate's run folder, when a kill left one) are real folders of this search:
    a link there is refused before the runner writes a candidate's files through it."""
    ensure_folder(run_dir.parent, ctx.folder)
    if os.path.lexists(run_dir):
        ensure_folder(run_dir, ctx.folder, create=False)


def _options(ctx: _Ctx, index: int, tag: str, overrides: list[str], devices: str | None = None) -> RunOptions:
    """The usual runner's options for one commit: a new run, or the rest of one a kill interrupted."""
    run_id, run_dir = _run_id(ctx, index, tag)
    _runs_folder(ctx, run_dir)
    rules, modes = [ctx.doc.rule], list(ctx.doc.modes)   # seeds only while the searched rule is undecided
    if RunPaths(run_dir).run_json.is_file():
        base = _look_baseline(ctx, open_run(run_dir).info.config_hash) if _baseline(ctx) else None
        return RunOptions(suite_file=None, resume=run_dir, until_decided=True, max_seeds=ctx.doc.max_seeds,
                          baseline=base, report=False, devices=devices, until_rules=rules, until_modes=modes)
    seeds = _reference_seeds(ctx, overrides) if index == 0 and _history(ctx.doc.rule) else None
    new = RunOptions(suite_file=ctx.suite_file, profile=ctx.profile, overrides=overrides, seeds=seeds,
                     out_dir=ctx.folder / "runs", run_id=run_id, report=False, max_seeds=ctx.doc.max_seeds,
                     devices=devices, slurm=SlurmOptions.model_validate(ctx.doc.slurm) if ctx.doc.slurm else None,
                     until_rules=rules, until_modes=modes)
    new.baseline = _look_baseline(ctx, load_for_run(new).suite.config_hash()) if _baseline(ctx) else None
    new.until_decided = new.baseline is not None or _in_run(ctx.doc.rule)
    return new


def _reference_seeds(ctx: _Ctx, overrides: list[str]) -> str:
    """The good endpoint's seeds for a history rule: the suite's, extended to --max-seeds.  Its trials are the
    baseline of every later comparison and no candidate's seeds can add to them: with 3, a real search on a
    loaded machine skipped 6 good commits in a row ("the baseline's 3 trials keep this comparison undecided,
    whatever this run adds")."""
    seeds = list(load_for_run(RunOptions(suite_file=ctx.suite_file, profile=ctx.profile, overrides=overrides))
                 .suite.suite.seeds)
    while len(seeds) < ctx.doc.max_seeds:
        seeds.append(max(seeds) + 1)
    return ",".join(str(x) for x in seeds)


def _look_baseline(ctx: _Ctx, config_hash: str) -> Path | None:
    """The good endpoint's baseline as the reference of a look whose suite hashes to `config_hash`.  A look
    runs the good endpoint's suite with only where its program lives changed (its clone `src-<slot>/` in a
    round of --parallel, or its version's environment `envs/<v>/`): that changes the config hash, which check
    would refuse as not comparable.  The reference is then a copy of the good baseline under that hash
    (`baselines/<hash>.json`); the device and the suite are still compared."""
    base = _baseline(ctx)
    if base is None or not config_hash:
        return base
    good = load_baseline(base)
    if good.config_hash == config_hash:
        return base
    path = ctx.folder / "baselines" / f"{config_hash.removeprefix('sha256:')}.json"
    if not ensure_folder(path.parent, ctx.folder).joinpath(path.name).is_file():
        write_doc(path, good.model_copy(update={"config_hash": config_hash}), root=ctx.folder)
    return path


def _prepare(ctx: _Ctx, slot: int, index: int) -> list[str]:
    """Put one look's code in place and return the --set overrides that run it: its commit checked out in the
    slot's clone, or its version's environment made (or reused) and its Python as the suite's interpreter."""
    doc = ctx.doc
    if doc.kind == "package":
        py = bisect_packages.ensure_env(ctx.folder, doc.python, doc.package, doc.commits[index], doc.index)
        return [*doc.overrides, bisect_packages.command_override(doc.command, py)]
    bisect_repo.checkout(ctx.folder, _src_name(slot), doc.clone_token, doc.commits[index])
    return doc.slot_overrides[slot] if doc.parallel > 1 else ctx.overrides


def _run_candidate(ctx: _Ctx, index: int, role: Role, tag: str) -> tuple[Candidate, int]:
    """Check out one commit and run the suite on it; returns its record and the run's exit code."""
    sha = ctx.doc.commits[index]
    overrides = _prepare(ctx, 0, index)
    log = Console(file=ctx.log, width=160, no_color=True)
    started = time.monotonic()
    code = execute(_options(ctx, index, tag, overrides), console=log)
    cand = Candidate(index=index, sha=sha, role=role, run_dir=str(_run_id(ctx, index, tag)[1]),
                     cost_s=time.monotonic() - started)
    return cand, code


def _run_round(ctx: _Ctx, looks: list[Look]) -> list[Candidate] | int:
    """k-section: every look of the round in its own clone and child process, side by side on the pool;
    their records in commit order, or the exit code of an interrupt (nothing of the round recorded: the
    run folders keep their finished trials, and the same round is resumed)."""
    doc = ctx.doc
    pool, per = _round_pool(doc)
    runs = []
    for slot, (index, _role, tag) in enumerate(looks):
        opts = _options(ctx, index, tag, _prepare(ctx, slot, index), devices="all" if per > 1 else None)
        name = _run_id(ctx, index, tag)[0]
        runs.append(bisect_side.SideRun(index, bisect_side.options_json(opts), ctx.folder / "side" / f"{name}.json",
                                        ctx.folder / "side" / f"{name}.log"))
    ensure_folder(ctx.folder / "side", ctx.folder)
    started = time.monotonic()
    try:
        codes = bisect_side.run_side_by_side(runs, pool, per, visible=not doc.slurm)
    except (KeyboardInterrupt, Interrupted) as e:
        if doc.slurm:
            bisect_side.cancel_left_jobs([_run_id(ctx, i, tag)[1] for i, _r, tag in looks], ctx.console)
        return e.exit_code if isinstance(e, Interrupted) else 130
    wall = time.monotonic() - started
    out = []
    for index, role, tag in looks:
        run_dir = _run_id(ctx, index, tag)[1]
        if codes.get(index) in (130, 143):
            return int(codes[index] or 130)
        if not RunPaths(run_dir).run_json.is_file():
            raise ResultsError(f"{run_dir}: the candidate's run did not start (exit {codes.get(index)}); its "
                               f"output is in {ctx.folder / 'side'}")
        out.append(Candidate(index=index, sha=doc.commits[index], role=role, run_dir=str(run_dir), cost_s=wall))
    return out


def _round_pool(doc: BisectFile) -> tuple[list[str], int]:
    """The slots a round's candidates share and the devices each gets: the device pool, or with Slurm K slots
    and no local device (each candidate's jobs go where Slurm puts them)."""
    if doc.slurm:
        return [f"slurm-{j}" for j in range(doc.parallel)], 1
    return doc.devices, bisect_side.share(doc.devices, doc.parallel)


def _judge(ctx: _Ctx, cand: Candidate) -> Candidate:
    """The rule's outcome over the judged modes: any FAIL -> bad, every mode PASS -> good, else skip."""
    base = _look_baseline(ctx, open_run(Path(cand.run_dir)).info.config_hash)
    report = check_run(Path(cand.run_dir), baseline=base) if base is not None or _in_run(ctx.doc.rule) else None
    trials = open_run(Path(cand.run_dir)).trials
    cand.seeds = sum(1 for t in trials if t.status == "ok" and t.mode in ctx.doc.modes)
    if report is None:   # the good endpoint of a history rule: the reference itself
        _judge_reference(cand)
        return cand
    results = [r for v in report.verdicts if v.mode in ctx.doc.modes for r in v.rules if r.rule == ctx.doc.rule]
    _judge_results(cand, ctx.doc.rule, results)
    return cand


def _judge_reference(cand: Candidate) -> None:
    """The reference of a history rule has nothing to be judged against: good when any of its trials finished
    ok (later commits are compared with those), skip when none did (there is no reference)."""
    ok = cand.seeds > 0
    cand.status, cand.verdict = ("PASS", "good") if ok else ("ERROR", "skip")
    cand.message = "the reference every later commit is judged against" if ok else "no trial finished ok"


def _judge_results(cand: Candidate, rule: str, results: list[RuleResult]) -> None:
    """The rule's results over the judged modes as one verdict, with the figure and message of the mode that
    decided it: the first FAIL (bad), else the first mode when all PASS (good), else the first mode that did
    not PASS (skip: an informational or inconclusive result proves neither side).  No result at all: skip."""
    statuses = ["INCONCLUSIVE" if r.informational else r.status for r in results]
    if not results:
        cand.status, cand.verdict, cand.message = "ERROR", "skip", f"{rule} was not judged (no ok trial?)"
        return
    if "FAIL" in statuses:
        cand.status, cand.verdict, decided = "FAIL", "bad", results[statuses.index("FAIL")]
    elif all(s == "PASS" for s in statuses):
        cand.status, cand.verdict, decided = "PASS", "good", results[0]
    else:
        first_other = next(i for i, s in enumerate(statuses) if s != "PASS")
        cand.status, cand.verdict, decided = "INCONCLUSIVE", "skip", results[first_other]
    cand.observed, cand.message = decided.observed, decided.message


def _evaluate(ctx: _Ctx, index: int, role: Role, tag: str = "") -> Candidate | int:
    """Run and judge one commit; an interrupted run returns its exit code (the record is kept as it is)."""
    if ctx.doc.parallel > 1:
        got = _evaluate_round(ctx, [(index, role, tag)])
        return got if isinstance(got, int) else got[0]
    cand, code = _run_candidate(ctx, index, role, tag)
    if code in (130, 143):
        return code
    return _record(ctx, cand)


def _evaluate_round(ctx: _Ctx, looks: list[Look]) -> list[Candidate] | int:
    """The looks of one round: side by side with --parallel, else one after another."""
    if ctx.doc.parallel <= 1:
        done = []
        for index, role, tag in looks:
            got = _evaluate(ctx, index, role, tag)
            if isinstance(got, int):
                return got
            done.append(got)
        return done
    ran = _run_round(ctx, looks)
    return ran if isinstance(ran, int) else [_record(ctx, c) for c in ran]


def _record(ctx: _Ctx, cand: Candidate) -> Candidate:
    """Judge a finished run, keep its record (bisect.json rewritten) and say its outcome."""
    cand = _judge(ctx, cand)
    if ctx.doc.kind == "package":
        cand.version, cand.env = cand.sha, str(bisect_packages.env_dir(ctx.folder, cand.sha))
    ctx.doc.candidates.append(cand)
    ctx.doc.write(ctx.folder)
    figure = "" if cand.observed is None else f" ({_figure(cand.observed)})"
    ctx.console.print(f"  [{cand.index:>3}] {cand.sha[:10]} {printable(ctx.doc.subjects[cand.index][:50])}: "
                      f"{cand.status}{figure} -> {cand.verdict}, {cand.seeds} trial(s), {cand.cost_s:.0f} s",
                      soft_wrap=True, markup=False)
    return cand


def _figure(observed: object) -> str:
    return f"{observed:+.1%}" if isinstance(observed, float) else str(observed)[:40]


# ---------------------------------------------------------------- the search


def _endpoints(ctx: _Ctx) -> int | None:
    """Judge good then bad; None when both are as given, else the exit code of a stopped search."""
    doc = ctx.doc
    last = len(doc.commits) - 1
    ends: tuple[tuple[int, Role], ...] = ((0, "good-endpoint"), (last, "bad-endpoint"))
    for index, role in ends:
        if doc.judged(index, role) is not None:
            continue
        got = _evaluate(ctx, index, role)
        if isinstance(got, int):
            return got
        if index == 0 and _history(doc.rule) and got.verdict == "good":
            save_baseline(Path(got.run_dir), ctx.folder / "good-baseline.json")
    good, bad = doc.judged(0, "good-endpoint"), doc.judged(last, "bad-endpoint")
    assert good is not None and bad is not None
    if good.verdict != "good":
        doc.stopped = (f"good endpoint {doc.good} is not good: {doc.rule} {good.status} ({good.message[:200]}); "
                       "give an older --good")
    elif bad.verdict != "bad":
        doc.stopped = (f"bad endpoint {doc.bad} is not bad against {doc.good}: {doc.rule} {bad.status} "
                       f"({bad.message[:200]}). Nothing to search between them: if the regression is older than "
                       f"{doc.good}, give an older --good")
    return None


def _search(doc: BisectFile) -> Search:
    """The search as the records so far decide it (a recheck replaces the first look at its commit)."""
    s = Search(n=len(doc.commits))
    for c in doc.candidates:
        if c.verdict and 0 < c.index < len(doc.commits) - 1:
            s.record(c.index, c.verdict, recheck=c.role == "recheck")
    return s


def _recheck_tag(doc: BisectFile, index: int) -> str:
    """A second look's run is a new run: `-recheck`, then `-recheck2` (a retried skip that became a boundary
    commit is looked at twice); the same tag resumed the first recheck's run and repeated its verdict."""
    n = sum(1 for c in doc.candidates if c.index == index and c.role == "recheck")
    return "-recheck" if n == 0 else f"-recheck{n + 1}"


def _bisect(ctx: _Ctx) -> int | None:
    """Candidates and rechecks until judge.bisection says the search is over; an exit code when interrupted."""
    doc = ctx.doc
    while steps := _search(doc).next_batch(max(doc.parallel, 1)):
        looks: list[Look] = [(i, "recheck", _recheck_tag(doc, i)) if kind == "recheck" else (i, "candidate", "")
                             for kind, i in steps]
        got = _evaluate_round(ctx, looks)
        if isinstance(got, int):
            return got
    doc.last_good, doc.first_bad = _search(doc).bounds()
    return None


def _finish(ctx: _Ctx) -> int:
    doc = ctx.doc
    th = Suite.model_validate(open_run(Path(doc.candidates[0].run_dir)).info.config).thresholds
    alpha = th.history_alpha if _history(doc.rule) else th.fail_alpha
    verdicts: dict[int, Verdict] = {c.index: c.verdict for c in doc.candidates if c.verdict in ("good", "bad")}
    doc.wrong_step_bound = wrong_step_bound(verdicts, alpha, 1 - th.confidence) if not doc.stopped else None
    doc.write(ctx.folder)
    path = write_bisect_md(ctx.folder, doc)
    out = ctx.console
    if doc.stopped:
        out.print(f"bisect stopped: {printable(doc.stopped)}", soft_wrap=True, markup=False)
        code = EXIT_INCONCLUSIVE
    elif doc.first_bad is not None and doc.last_good is not None and doc.first_bad == doc.last_good + 1:
        ev = doc.judged(doc.first_bad)
        out.print(f"first bad {_named(doc, doc.first_bad)}\n  {doc.rule}: "
                  f"{ev.status if ev else ''} {_figure(ev.observed) if ev and ev.observed is not None else ''}; "
                  f"P(a wrong step) <= {doc.wrong_step_bound:.3f} over {len(verdicts)} decisions",
                  soft_wrap=True, markup=False)
        code = EXIT_FAIL
    else:
        lo, hi = doc.last_good or 0, doc.first_bad or len(doc.commits) - 1
        what = "versions" if doc.kind == "package" else "commits"
        out.print(f"the first bad one is one of {hi - lo} {what} {doc.commits[lo + 1][:10]}..{doc.commits[hi][:10]}"
                  f": every commit between was undecided at --max-seeds {doc.max_seeds}", soft_wrap=True, markup=False)
        code = EXIT_INCONCLUSIVE
    out.print(f"bisect: {escape(str(path))}", soft_wrap=True)
    return code


def _named(doc: BisectFile, index: int) -> str:
    """How the result names a point of the range: `commit SHA subject`, or `version NAME==V`."""
    if doc.kind == "package":
        return f"version: {printable(doc.subjects[index])}"
    return f"commit: {doc.commits[index]} {printable(doc.subjects[index])}"


def _new(opts: BisectOptions, console: Console) -> tuple[Path, BisectFile, list[str]]:
    pkg = _package_range(opts)
    loaded = load_for_run(RunOptions(suite_file=opts.suite_file, profile=opts.profile, overrides=opts.overrides,
                                     out_dir=opts.out_dir))
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
    retarget = _retarget(suite, rng.root, folder / "src")
    slots = [[*opts.overrides, *_retarget(suite, rng.root, folder / _src_name(j))] for j in range(opts.parallel)]
    token = bisect_repo.new_token()
    for j in range(opts.parallel):
        bisect_repo.clone(rng.root, folder / _src_name(j), token)
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
        from ampbench.launch.slurm import require_commands

        require_commands()
        return []
    if opts.parallel <= 1:
        if opts.devices is not None:
            raise ConfigError("--devices", opts.devices, "is the pool of --parallel K (candidates side by side)")
        return []
    pool = device_pool(opts.devices or "all") or []
    bisect_side.share(pool, opts.parallel)
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
            bisect_repo.own_clone(folder, _src_name(j), doc.clone_token)
    for sub in ("runs", f"runs/{doc.suite}", "side", "baselines", "envs"):
        if os.path.lexists(folder / sub):
            ensure_folder(folder / sub, folder, create=False)
    for name in ("bisect.log", "bisect.md", "good-baseline.json"):
        refuse_link(folder / name)


def run_bisect(opts: BisectOptions, console: Console | None = None) -> int:
    """The search; returns 1 when it named the first bad commit (a regression found, as `check`'s FAIL), 3 when
    it could not (endpoints not bracketing a change, the boundary undecided), 2 on a crashed endpoint, 130/143
    when interrupted (continue with --resume)."""
    console = console or Console()
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
        ctx = _Ctx(folder, doc, suite_file, doc.profile, overrides, console, log)
        code = _endpoints(ctx) if not doc.stopped else None
        if code is None and not doc.stopped:
            code = _bisect(ctx)
    if code is not None:
        doc.write(folder)
        console.print(f"interrupted: decided commits kept. Continue with:\n  ampbench bisect --resume "
                      f"{escape(str(folder))}", soft_wrap=True)
        return code
    if any(c.status == "ERROR" for c in doc.candidates if c.role.endswith("endpoint")):
        doc.stopped = doc.stopped or "an endpoint's trials did not finish ok (logs in runs/)"
        _finish(ctx)
        return EXIT_ERROR
    return _finish(ctx)

