"""One look of `ampbench bisect`: a commit (or a package version) put in place, the suite run on it through the
engine, and its run judged by the searched rule into a `Candidate` record.

A look's run is an ordinary run folder under the bisect folder's runs/, started with bisect's seed policy
(engine/seeds/search.py: seeds added only while the searched rule is undecided; the good endpoint of a
history rule trains every seed up to the cap at once), resumed as it is when a kill interrupted it.  With
--parallel K the looks of a round run side by side, each in its own clone and child process
(engine/side_by_side.py).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from rich.console import Console

from ampbench.commands import bisect_packages, bisect_repo
from ampbench.core.docs import write_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import ensure_folder, refuse_link
from ampbench.core.store import RunPaths
from ampbench.core.terminal import TerminalConsole
from ampbench.engine import side_by_side
from ampbench.engine.execute import Policies, execute, load_for_run
from ampbench.engine.launcher import Launcher
from ampbench.engine.launchers.local import LocalLauncher
from ampbench.engine.launchers.slurm import SlurmLauncher, SlurmOptions
from ampbench.engine.op_lists import complete_lists
from ampbench.engine.request import Output, RunRequest
from ampbench.engine.seeds.search import SearchSeeds
from ampbench.judge.bisection import look_verdict
from ampbench.judge.check_run import check_run
from ampbench.judge.rules import registry
from ampbench.results.baselines import load_baseline
from ampbench.results.bisect_file import BisectFile, Candidate
from ampbench.results.run_dir import open_run


def history(rule: str) -> bool:
    """Judged against the good endpoint's baseline in every mode (its rule object declares bisect="history")."""
    return registry.result(rule).bisect == "history"


def in_run(rule: str) -> bool:
    """Judged inside each candidate's own run, in the AMP modes (bisect="in-run")."""
    return registry.result(rule).bisect == "in-run"


@dataclass
class Ctx:
    """A search under way: its folder and record, the suite and overrides its looks run, where they report."""

    folder: Path
    doc: BisectFile
    suite_file: Path
    profile: str | None
    overrides: list[str]
    console: Console
    log: IO[str]


def _baseline(ctx: Ctx) -> Path | None:
    path = ctx.folder / "good-baseline.json"
    refuse_link(path)
    return path if history(ctx.doc.rule) and path.is_file() else None


Role = Literal["good-endpoint", "bad-endpoint", "candidate", "recheck"]
Look = tuple[int, Role, str]   # (commit index, role, run-id tag)


def src_name(slot: int) -> str:
    """The clone a candidate of a round is checked out in: `src` for the first, `src-<slot>` for the others."""
    return "src" if slot == 0 else f"src-{slot}"


def run_id_of(ctx: Ctx, index: int, tag: str) -> tuple[str, Path]:
    point = re.sub(r"[^A-Za-z0-9._-]", "_", ctx.doc.commits[index][:10])   # a version may hold + or !
    run_id = f"{index:03d}-{point}{tag}"
    return run_id, ctx.folder / "runs" / ctx.doc.suite / run_id


def _runs_folder(ctx: Ctx, run_dir: Path) -> None:
    """runs/<suite>/ (and a candidate's run folder, when a kill left one) are real folders of this search:
    a link there is refused before the engine writes a candidate's files through it."""
    ensure_folder(run_dir.parent, ctx.folder)
    if os.path.lexists(run_dir):
        ensure_folder(run_dir, ctx.folder, create=False)


def look_request(ctx: Ctx, index: int, tag: str, overrides: list[str], devices: str | None = None
                 ) -> tuple[RunRequest, Policies]:
    """The engine's request and policies for one look: a new run, or the rest of one a kill interrupted.
    Seeds are added only while the searched rule is undecided in the searched modes (SearchSeeds)."""
    run_id, run_dir = run_id_of(ctx, index, tag)
    _runs_folder(ctx, run_dir)
    doc = ctx.doc
    reference = index == 0 and history(doc.rule)
    seeds = SearchSeeds(max_seeds=doc.max_seeds, rules=(doc.rule,), modes=tuple(doc.modes), reference=reference)
    if RunPaths(run_dir).run_json.is_file():
        base = look_baseline(ctx, open_run(run_dir).info.config_hash) if _baseline(ctx) else None
        return RunRequest(resume=run_dir), Policies(launcher=LocalLauncher(devices=devices), seeds=seeds,
                                                    output=Output(report=False, baseline=base))
    request = RunRequest(suite_file=ctx.suite_file, profile=ctx.profile, overrides=tuple(overrides),
                         out_dir=ctx.folder / "runs", run_id=run_id)
    base = look_baseline(ctx, load_for_run(request).suite.config_hash()) if _baseline(ctx) else None
    launcher: Launcher = SlurmLauncher(options=SlurmOptions.model_validate(doc.slurm)) if doc.slurm else \
        LocalLauncher(devices=devices)
    adds = base is not None or in_run(doc.rule)   # a history rule is undecidable without its reference
    return request, Policies(launcher=launcher, seeds=seeds.model_copy(update={"adds": adds}),
                             output=Output(report=False, baseline=base))


def look_baseline(ctx: Ctx, config_hash: str) -> Path | None:
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


def _prepare(ctx: Ctx, slot: int, index: int) -> list[str]:
    """Put one look's code in place and return the --set overrides that run it: its commit checked out in the
    slot's clone, or its version's environment made (or reused) and its Python as the suite's interpreter."""
    doc = ctx.doc
    if doc.kind == "package":
        py = bisect_packages.ensure_env(ctx.folder, doc.python, doc.package, doc.commits[index], doc.index)
        return [*doc.overrides, bisect_packages.command_override(doc.command, py)]
    bisect_repo.checkout(ctx.folder, src_name(slot), doc.clone_token, doc.commits[index])
    return doc.slot_overrides[slot] if doc.parallel > 1 else ctx.overrides


def run_candidate(ctx: Ctx, index: int, role: Role, tag: str) -> tuple[Candidate, int]:
    """Check out one commit and run the suite on it; returns its record and the run's exit code."""
    sha = ctx.doc.commits[index]
    overrides = _prepare(ctx, 0, index)
    log = TerminalConsole(file=ctx.log, width=160, no_color=True)
    started = time.monotonic()
    code = execute(*look_request(ctx, index, tag, overrides), console=log)
    cand = Candidate(index=index, sha=sha, role=role, run_dir=str(run_id_of(ctx, index, tag)[1]),
                     cost_s=time.monotonic() - started)
    return cand, code


def run_round(ctx: Ctx, looks: list[Look]) -> list[Candidate] | int:
    """k-section: every look of the round in its own clone and child process, side by side on the pool;
    their records in commit order, or the exit code of an interrupt (nothing of the round recorded: the
    run folders keep their finished trials, and the same round is resumed)."""
    doc = ctx.doc
    pool, per = _round_pool(doc)
    runs = []
    for slot, (index, _role, tag) in enumerate(looks):
        request, policies = look_request(ctx, index, tag, _prepare(ctx, slot, index),
                                         devices="all" if per > 1 else None)
        name = run_id_of(ctx, index, tag)[0]
        runs.append(side_by_side.SideRun(index, side_by_side.options_json(request, policies),
                                         ctx.folder / "side" / f"{name}.json", ctx.folder / "side" / f"{name}.log"))
    ensure_folder(ctx.folder / "side", ctx.folder)
    started = time.monotonic()
    try:
        codes, placed = side_by_side.run_side_by_side(runs, pool, per, visible=not doc.slurm,
                                                      ballast=None if doc.slurm else _ballast(ctx, len(looks), per))
    except side_by_side.INTERRUPTS as e:
        if doc.slurm:
            side_by_side.cancel_left([run_id_of(ctx, i, tag)[1] for i, _r, tag in looks], ctx.console)
        return side_by_side.exit_code_of(e)
    finally:
        shutil.rmtree(ctx.folder / BALLAST, ignore_errors=True)   # filler runs: nothing of them is judged
    wall = time.monotonic() - started
    out = []
    for index, role, tag in looks:
        run_dir = run_id_of(ctx, index, tag)[1]
        if codes.get(index) in (130, 143):
            return int(codes[index] or 130)
        if not RunPaths(run_dir).run_json.is_file():
            raise ResultsError(f"{run_dir}: the candidate's run did not start (exit {codes.get(index)}); its "
                               f"output is in {ctx.folder / 'side'}")
        where = placed.get(index, side_by_side.Placed())
        out.append(Candidate(index=index, sha=doc.commits[index], role=role, run_dir=str(run_dir), cost_s=wall,
                             devices=where.devices, crowding=where.crowding))
    return out


BALLAST = "ballast"


def _ballast(ctx: Ctx, looks: int, per: int) -> side_by_side.Ballast:
    """The filler runs of a round (engine/side_by_side.py): on a share a look used, that look's code again; on a
    share no look of the round has, the reference (the good endpoint's code), checked out in the share's clone
    before the round starts. Each a plain run of the suite into `ballast/`, removed after the round."""
    slots = {j: _prepare(ctx, j, 0) for j in range(looks, ctx.doc.parallel)}

    def make(slot: int, n: int) -> side_by_side.SideRun:
        overrides = slots.get(slot) or (ctx.doc.slot_overrides[slot] if ctx.doc.slot_overrides else ctx.overrides)
        name = f"{BALLAST}-{slot}-{n}"
        request = RunRequest(suite_file=ctx.suite_file, profile=ctx.profile, overrides=tuple(overrides),
                             out_dir=ctx.folder / BALLAST, run_id=name)
        policies = Policies(launcher=LocalLauncher(devices="all" if per > 1 else None), output=Output(report=False))
        return side_by_side.SideRun(-1 - slot, side_by_side.options_json(request, policies),
                                    ctx.folder / "side" / f"{name}.json", ctx.folder / "side" / f"{name}.log")
    return make


def _round_pool(doc: BisectFile) -> tuple[list[str], int]:
    """The slots a round's candidates share and the devices each gets: the device pool, or with Slurm K slots
    and no local device (each candidate's jobs go where Slurm puts them)."""
    if doc.slurm:
        return [f"slurm-{j}" for j in range(doc.parallel)], 1
    return doc.devices, side_by_side.share(doc.devices, doc.parallel)


def judge_look(ctx: Ctx, cand: Candidate) -> Candidate:
    """The rule's outcome over the judged modes: any FAIL -> bad, every mode PASS -> good, else skip."""
    base = look_baseline(ctx, open_run(Path(cand.run_dir)).info.config_hash)
    judged = base is not None or in_run(ctx.doc.rule)
    report = check_run(Path(cand.run_dir), baseline=base, complete=complete_lists) if judged else None
    trials = open_run(Path(cand.run_dir)).trials
    cand.seeds = sum(1 for t in trials if t.status == "ok" and t.mode in ctx.doc.modes)
    if report is None:   # the good endpoint of a history rule: the reference itself
        _judge_reference(cand)
        return cand
    results = [r for v in report.verdicts if v.mode in ctx.doc.modes for r in v.rules if r.rule == ctx.doc.rule]
    cand.status, cand.verdict, cand.observed, cand.message = look_verdict(ctx.doc.rule, results)
    return cand


def _judge_reference(cand: Candidate) -> None:
    """The reference of a history rule has nothing to be judged against: good when any of its trials finished
    ok (later commits are compared with those), skip when none did (there is no reference)."""
    ok = cand.seeds > 0
    cand.status, cand.verdict = ("PASS", "good") if ok else ("ERROR", "skip")
    cand.message = "the reference every later commit is judged against" if ok else "no trial finished ok"
