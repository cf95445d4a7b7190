"""The search of `ampbench bisect` as it runs: both endpoints first, then the looks judge.bisection asks for
(one at a time, or a round of K side by side), each recorded in bisect.json as it is judged, and the result
named with its evidence and a bound on the probability that some step went the wrong way.

A run that is interrupted returns its exit code (130/143) with every judged look kept: `--resume` goes on.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from ampbench.commands import bisect_packages
from ampbench.commands.bisect_look import Ctx, Look, Role, history, judge_look, run_candidate, run_round
from ampbench.config import Suite
from ampbench.core.text import printable
from ampbench.judge.bisection import Search, Verdict, wrong_step_bound
from ampbench.report.bisect_md import write_bisect_md
from ampbench.results.baselines import save_baseline
from ampbench.results.bisect_file import BisectFile, Candidate
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import EXIT_FAIL, EXIT_INCONCLUSIVE


def _evaluate(ctx: Ctx, index: int, role: Role, tag: str = "") -> Candidate | int:
    """Run and judge one commit; an interrupted run returns its exit code (the record is kept as it is)."""
    if ctx.doc.parallel > 1:
        got = _evaluate_round(ctx, [(index, role, tag)])
        return got if isinstance(got, int) else got[0]
    cand, code = run_candidate(ctx, index, role, tag)
    if code in (130, 143):
        return code
    return _record(ctx, cand)


def _evaluate_round(ctx: Ctx, looks: list[Look]) -> list[Candidate] | int:
    """The looks of one round: side by side with --parallel, else one after another."""
    if ctx.doc.parallel <= 1:
        done = []
        for index, role, tag in looks:
            got = _evaluate(ctx, index, role, tag)
            if isinstance(got, int):
                return got
            done.append(got)
        return done
    ran = run_round(ctx, looks)
    return ran if isinstance(ran, int) else [_record(ctx, c) for c in ran]


def _record(ctx: Ctx, cand: Candidate) -> Candidate:
    """Judge a finished run, keep its record (bisect.json rewritten) and say its outcome."""
    cand = judge_look(ctx, cand)
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


def endpoints(ctx: Ctx) -> int | None:
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
        if index == 0 and history(doc.rule) and got.verdict == "good":
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


def recheck_tag(doc: BisectFile, index: int) -> str:
    """A second look's run is a new run: `-recheck`, then `-recheck2` (a retried skip that became a boundary
    commit is looked at twice); the same tag resumed the first recheck's run and repeated its verdict."""
    n = sum(1 for c in doc.candidates if c.index == index and c.role == "recheck")
    return "-recheck" if n == 0 else f"-recheck{n + 1}"


def search(ctx: Ctx) -> int | None:
    """Candidates and rechecks until judge.bisection says the search is over; an exit code when interrupted."""
    doc = ctx.doc
    while steps := _search(doc).next_batch(max(doc.parallel, 1)):
        looks: list[Look] = [(i, "recheck", recheck_tag(doc, i)) if kind == "recheck" else (i, "candidate", "")
                             for kind, i in steps]
        got = _evaluate_round(ctx, looks)
        if isinstance(got, int):
            return got
    doc.last_good, doc.first_bad = _search(doc).bounds()
    return None


def finish(ctx: Ctx) -> int:
    doc = ctx.doc
    th = Suite.model_validate(open_run(Path(doc.candidates[0].run_dir)).info.config).thresholds
    alpha = th.history_alpha if history(doc.rule) else th.fail_alpha
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
