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

Left out (docs/bisect.md): k-section over Slurm, package versions as the range (`--paddle A..B`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from rich.console import Console
from rich.markup import escape

from ampbench.commands import bisect_repo, bisect_side
from ampbench.commands.check import check_run
from ampbench.commands.run import execute, load_for_run
from ampbench.commands.run_plan import RunOptions, device_pool
from ampbench.config import REFERENCE_MODE, ConfigError, Suite
from ampbench.core.errors import ResultsError
from ampbench.core.files import refuse_link
from ampbench.core.names import new_run_id
from ampbench.core.store import RUNS_DIR, RunPaths
from ampbench.judge.bisection import Search, Verdict, wrong_step_bound
from ampbench.launch.process import Interrupted
from ampbench.report.bisect_md import write_bisect_md
from ampbench.results.baselines import save_baseline
from ampbench.results.bisect_file import BisectFile, Candidate, load_bisect
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import EXIT_ERROR, EXIT_FAIL, EXIT_INCONCLUSIVE

HISTORY_RULES = ("history-throughput", "history-metric", "history-memory")
IN_RUN_RULES = ("speedup", "accuracy-parity", "memory")


@dataclass
class BisectOptions:
    suite_file: Path | None
    good: str | None = None
    bad: str | None = None
    repo: Path | None = None
    rule: str = "history-throughput"
    modes: list[str] = field(default_factory=list)
    max_seeds: int = 6
    profile: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = RUNS_DIR
    resume: Path | None = None
    parallel: int = 1             # candidates side by side (k-section), each on its share of `devices`
    devices: str | None = None    # --devices all|0,1,...: the pool they share


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
    if rule not in HISTORY_RULES + IN_RUN_RULES:
        raise ConfigError("--rule", rule, f"bisect searches one of {', '.join(HISTORY_RULES + IN_RUN_RULES)}")
    names = [m.name for m in suite.modes]
    for m in modes:
        if m not in names:
            raise ConfigError("--mode", m, f"no such mode in suite {suite.suite.name!r} ({', '.join(names)})")
    if modes:
        return modes
    if rule in HISTORY_RULES:
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
    return path if ctx.doc.rule in HISTORY_RULES and path.is_file() else None


Role = Literal["good-endpoint", "bad-endpoint", "candidate", "recheck"]
Look = tuple[int, Role, str]   # (commit index, role, run-id tag)


def _src_name(slot: int) -> str:
    """The clone a candidate of a round is checked out in: `src` for the first, `src-<slot>` for the others."""
    return "src" if slot == 0 else f"src-{slot}"


def _run_id(ctx: _Ctx, index: int, tag: str) -> tuple[str, Path]:
    run_id = f"{index:03d}-{ctx.doc.commits[index][:10]}{tag}"
    return run_id, ctx.folder / "runs" / ctx.doc.suite / run_id


def _options(ctx: _Ctx, index: int, tag: str, overrides: list[str], devices: str | None = None) -> RunOptions:
    """The usual runner's options for one commit: a new run, or the rest of one a kill interrupted."""
    run_id, run_dir = _run_id(ctx, index, tag)
    base = _baseline(ctx)
    rules, modes = [ctx.doc.rule], list(ctx.doc.modes)   # seeds only while the searched rule is undecided
    if RunPaths(run_dir).run_json.is_file():
        return RunOptions(suite_file=None, resume=run_dir, until_decided=True, max_seeds=ctx.doc.max_seeds,
                          baseline=base, report=False, devices=devices, until_rules=rules,
                          until_modes=modes)
    seeds = _reference_seeds(ctx, overrides) if index == 0 and ctx.doc.rule in HISTORY_RULES else None
    return RunOptions(suite_file=ctx.suite_file, profile=ctx.profile, overrides=overrides, seeds=seeds,
                      out_dir=ctx.folder / "runs", run_id=run_id, report=False,
                      until_decided=base is not None or ctx.doc.rule in IN_RUN_RULES,
                      max_seeds=ctx.doc.max_seeds, baseline=base, devices=devices, until_rules=rules,
                      until_modes=modes)


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


def _run_candidate(ctx: _Ctx, index: int, role: Role, tag: str) -> tuple[Candidate, int]:
    """Check out one commit and run the suite on it; returns its record and the run's exit code."""
    sha = ctx.doc.commits[index]
    bisect_repo.checkout(ctx.folder / "src", sha)
    log = Console(file=ctx.log, width=160, no_color=True)
    started = time.monotonic()
    code = execute(_options(ctx, index, tag, ctx.overrides), console=log)
    cand = Candidate(index=index, sha=sha, role=role, run_dir=str(_run_id(ctx, index, tag)[1]),
                     cost_s=time.monotonic() - started)
    return cand, code


def _run_round(ctx: _Ctx, looks: list[Look]) -> list[Candidate] | int:
    """k-section: every look of the round in its own clone and child process, side by side on the pool;
    their records in commit order, or the exit code of an interrupt (nothing of the round recorded: the
    run folders keep their finished trials, and the same round is resumed)."""
    doc = ctx.doc
    per = bisect_side.share(doc.devices, doc.parallel)
    runs = []
    for slot, (index, _role, tag) in enumerate(looks):
        bisect_repo.checkout(ctx.folder / _src_name(slot), doc.commits[index])
        opts = _options(ctx, index, tag, doc.slot_overrides[slot], devices="all" if per > 1 else None)
        name = _run_id(ctx, index, tag)[0]
        runs.append(bisect_side.SideRun(index, dataclasses.asdict(opts), ctx.folder / "side" / f"{name}.json",
                                        ctx.folder / "side" / f"{name}.log"))
    (ctx.folder / "side").mkdir(exist_ok=True)
    started = time.monotonic()
    try:
        codes = bisect_side.run_side_by_side(runs, doc.devices, per)
    except (KeyboardInterrupt, Interrupted) as e:
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


def _judge(ctx: _Ctx, cand: Candidate) -> Candidate:
    """The rule's outcome over the judged modes: any FAIL -> bad, every mode PASS -> good, else skip."""
    base = _baseline(ctx)
    report = check_run(Path(cand.run_dir), baseline=base) if base is not None or ctx.doc.rule in IN_RUN_RULES \
        else None
    trials = open_run(Path(cand.run_dir)).trials
    cand.seeds = sum(1 for t in trials if t.status == "ok" and t.mode in ctx.doc.modes)
    if report is None:   # the good endpoint of a history rule: the reference itself
        ok = cand.seeds > 0
        cand.status, cand.verdict = ("PASS", "good") if ok else ("ERROR", "skip")
        cand.message = "the reference every later commit is judged against" if ok else "no trial finished ok"
        return cand
    results = [r for v in report.verdicts if v.mode in ctx.doc.modes for r in v.rules if r.rule == ctx.doc.rule]
    statuses = ["INCONCLUSIVE" if r.informational else r.status for r in results]
    if not results:
        cand.status, cand.verdict, cand.message = "ERROR", "skip", f"{ctx.doc.rule} was not judged (no ok trial?)"
    elif "FAIL" in statuses:
        worst = results[statuses.index("FAIL")]
        cand.status, cand.verdict, cand.observed, cand.message = "FAIL", "bad", worst.observed, worst.message
    elif all(s == "PASS" for s in statuses):
        cand.status, cand.verdict, cand.observed, cand.message = "PASS", "good", results[0].observed, results[0].message
    else:
        r = results[statuses.index(next(s for s in statuses if s != "PASS"))]
        cand.status, cand.verdict, cand.observed, cand.message = "INCONCLUSIVE", "skip", r.observed, r.message
    return cand


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
    ctx.doc.candidates.append(cand)
    ctx.doc.write(ctx.folder)
    figure = "" if cand.observed is None else f" ({_figure(cand.observed)})"
    ctx.console.print(f"  [{cand.index:>3}] {cand.sha[:10]} {escape(ctx.doc.subjects[cand.index][:50])}: "
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
        if index == 0 and doc.rule in HISTORY_RULES and got.verdict == "good":
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
    alpha = th.history_alpha if doc.rule in HISTORY_RULES else th.fail_alpha
    verdicts: dict[int, Verdict] = {c.index: c.verdict for c in doc.candidates if c.verdict in ("good", "bad")}
    doc.wrong_step_bound = wrong_step_bound(verdicts, alpha, 1 - th.confidence) if not doc.stopped else None
    doc.write(ctx.folder)
    path = write_bisect_md(ctx.folder, doc)
    out = ctx.console
    if doc.stopped:
        out.print(f"bisect stopped: {doc.stopped}", soft_wrap=True, markup=False)
        code = EXIT_INCONCLUSIVE
    elif doc.first_bad is not None and doc.last_good is not None and doc.first_bad == doc.last_good + 1:
        fb = doc.commits[doc.first_bad]
        ev = doc.judged(doc.first_bad)
        out.print(f"first bad commit: {fb} {doc.subjects[doc.first_bad]}\n  {doc.rule}: "
                  f"{ev.status if ev else ''} {_figure(ev.observed) if ev and ev.observed is not None else ''}; "
                  f"P(a wrong step) <= {doc.wrong_step_bound:.3f} over {len(verdicts)} decisions",
                  soft_wrap=True, markup=False)
        code = EXIT_FAIL
    else:
        lo, hi = doc.last_good or 0, doc.first_bad or len(doc.commits) - 1
        out.print(f"the first bad commit is one of {hi - lo} commits {doc.commits[lo + 1][:10]}..{doc.commits[hi][:10]}"
                  f": every commit between was undecided at --max-seeds {doc.max_seeds}", soft_wrap=True, markup=False)
        code = EXIT_INCONCLUSIVE
    out.print(f"bisect: {escape(str(path))}", soft_wrap=True)
    return code


def _new(opts: BisectOptions, console: Console) -> tuple[Path, BisectFile, list[str]]:
    loaded = load_for_run(RunOptions(suite_file=opts.suite_file, profile=opts.profile, overrides=opts.overrides,
                                     out_dir=opts.out_dir))
    suite = loaded.suite
    if suite.suite.workload != "command":
        raise ConfigError(str(opts.suite_file), "suite.workload", "bisect searches the commits of your program: "
                          "it needs a workload = \"command\" suite (docs/command.md)")
    modes = _check_rule(suite, opts.rule, opts.modes)
    rng = bisect_repo.read_range(opts.repo, opts.good, opts.bad)
    pool = _side_pool(opts)
    folder = Path(opts.out_dir) / suite.suite.name / f"bisect-{new_run_id()}"
    folder.mkdir(parents=True, exist_ok=False)
    retarget = _retarget(suite, rng.root, folder / "src")
    slots = [[*opts.overrides, *_retarget(suite, rng.root, folder / _src_name(j))] for j in range(opts.parallel)]
    for j in range(opts.parallel):
        bisect_repo.clone(rng.root, folder / _src_name(j))
    doc = BisectFile(suite=suite.suite.name, suite_file=str(opts.suite_file), repo=str(rng.root), good=str(opts.good),
                     bad=str(opts.bad), rule=opts.rule, modes=modes, max_seeds=opts.max_seeds, commits=rng.commits,
                     subjects=rng.subjects, overrides=[*opts.overrides, *retarget], profile=loaded.profile,
                     parallel=opts.parallel, devices=pool, slot_overrides=slots if opts.parallel > 1 else [])
    doc.write(folder)
    console.print(f"bisecting {len(rng.commits)} commits of {escape(str(rng.root))} on {escape(opts.rule)} "
                  f"({', '.join(escape(m) for m in modes)}): {escape(str(folder))}", soft_wrap=True)
    if opts.parallel > 1:
        console.print(f"k-section: {opts.parallel} candidates a round, side by side on "
                      f"{escape(', '.join(pool))}", soft_wrap=True)
    if rng.dirty:
        console.print("note: --repo has uncommitted changes; they are not part of any candidate (only commits are "
                      "checked out, in bisect's own clone)", soft_wrap=True)
    return folder, doc, [*opts.overrides, *retarget]


def _side_pool(opts: BisectOptions) -> list[str]:
    """The device pool k candidates share (refused before anything is written when it is too small)."""
    if opts.parallel <= 1:
        if opts.devices is not None:
            raise ConfigError("--devices", opts.devices, "is the pool of --parallel K (candidates side by side)")
        return []
    pool = device_pool(opts.devices or "all") or []
    bisect_side.share(pool, opts.parallel)
    return pool


def _resumed(opts: BisectOptions, console: Console) -> tuple[Path, BisectFile, list[str]]:
    assert opts.resume is not None
    if opts.suite_file is not None or opts.good or opts.bad or opts.repo or opts.overrides or opts.parallel > 1 \
            or opts.devices is not None:
        raise ConfigError("--resume", str(opts.resume), "continues the search as bisect.json records it: give no "
                          "SUITE, --good, --bad, --repo, --set, --parallel or --devices")
    folder = Path(opts.resume)
    refuse_link(folder)
    doc = load_bisect(folder)
    console.print(f"resuming the search in {escape(str(folder))}: {len(doc.candidates)} commit(s) judged")
    return folder, doc, list(doc.overrides)


def run_bisect(opts: BisectOptions, console: Console | None = None) -> int:
    """The search; returns 1 when it named the first bad commit (a regression found, as `check`'s FAIL), 3 when
    it could not (endpoints not bracketing a change, the boundary undecided), 2 on a crashed endpoint, 130/143
    when interrupted (continue with --resume)."""
    console = console or Console()
    folder, doc, overrides = _resumed(opts, console) if opts.resume else _new(opts, console)
    suite_file = Path(doc.suite_file)
    with (folder / "bisect.log").open("a", encoding="utf-8") as log:
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

