"""`ampbench tune SUITE`: a ladder of matched runs, each judged by the same rules, up to the first
configuration that passes every rule (or the budget, or the rung cap).

The ladder's decisions are judge/ladder.py's (pure, tested against simulated outcomes); this module
runs them.  A short AMP trial comes first: where AMP cannot run (a CPU), the ladder stops there with
Paddle's reason and exit 3, before any long trial.  Rung 0 runs the FP32 arm and the starting mode
(`rung-0/`); every later rung runs only its AMP mode (`rung-K/`) and is judged against rung 0's FP32
trials, so the FP32 arm is trained once.  tune.json records every judged rung and the next one, and
`--resume DIR` continues from it, keeping every finished trial.  The result is tune.md: the ladder,
and the winning mode as suite TOML lines (tomli-w) and, for command suites, the program's own flags.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.config import ModeConfig, Suite
from ampbench.config.suite import REFERENCE_MODE
from ampbench.core.errors import ConfigError
from ampbench.core.files import refuse_link
from ampbench.core.names import new_run_id, utc_now
from ampbench.core.store import RUNS_DIR
from ampbench.core.terminal import TerminalConsole
from ampbench.engine.execute import Policies, execute, load_for_run
from ampbench.engine.request import Output, RunRequest
from ampbench.engine.seeds.until_decided import Sequential
from ampbench.judge import ladder, until
from ampbench.judge.check import check_trials
from ampbench.judge.planner import plan_for
from ampbench.judge.rules import registry
from ampbench.judge.sequential import Design
from ampbench.record.models import PlanEntry, RunInfo, Trial
from ampbench.report.injected import keep_lines
from ampbench.report.tune_md import write_tune_md
from ampbench.results.probe_file import NoProbe, find_probe
from ampbench.results.run_dir import RunDir, open_run
from ampbench.results.tune_file import RungRecord, TuneFile, load_tune
from ampbench.results.verdicts import EXIT_ERROR, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS, ModeVerdict

SHORT_STEPS = 4  # the first, short AMP trial: enough to see whether AMP ran
MAX_SEEDS = Sequential.max_seeds   # seeds per mode an undecided rung may grow to (until-decided's default cap)


@dataclass
class TuneOptions:
    suite_file: Path | None
    profile: str | None = None
    mode: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = RUNS_DIR
    budget_s: float | None = None
    max_rungs: int = 8
    resume: Path | None = None


# ---------------------------------------------------------------- start / resume


def _start_mode(suite: Suite, wanted: str | None) -> ModeConfig:
    amp = [m for m in suite.modes if m.amp]
    if wanted is not None:
        if wanted not in [m.name for m in amp]:
            raise ConfigError("--mode", wanted, f"not an AMP mode of the suite ({', '.join(m.name for m in amp)})")
        return suite.mode(wanted)
    if not amp:
        raise ConfigError("tune", suite.suite.name, "the suite has no AMP mode to tune (add one with level O1 or O2)")
    return amp[0]


def _suite_with(suite: Suite, mode: ModeConfig) -> Suite:
    """The suite of one rung: FP32 and this mode only (so its config hash names exactly what ran)."""
    data = suite.model_dump()
    data["modes"] = [suite.mode(REFERENCE_MODE).model_dump(), mode.model_dump()]
    return Suite.model_validate(data)


def _new_tune(opts: TuneOptions, console: Console) -> tuple[Path, TuneFile]:
    loaded = load_for_run(RunRequest(suite_file=opts.suite_file, profile=opts.profile,
                                     overrides=tuple(opts.overrides), out_dir=opts.out_dir))
    start = _start_mode(loaded.suite, opts.mode)
    suite = _suite_with(loaded.suite, start)
    folder = Path(opts.out_dir) / suite.suite.name / f"tune-{new_run_id()}"
    folder.mkdir(parents=True, exist_ok=False)
    doc = TuneFile(suite=suite.suite.name, suite_file=str(opts.suite_file), profile=loaded.profile,
                   config=suite.model_dump(mode="json"), budget_s=opts.budget_s, max_rungs=opts.max_rungs,
                   pending={"rung": "start", "why": "the suite's mode as written", "mode": start.model_dump(mode="json"),
                            "skipped": []})
    doc.write(folder)
    console.print(f"tuning [bold]{escape(start.name)}[/] of suite [bold]{escape(suite.suite.name)}[/] "
                  f"(profile {escape(loaded.profile)}): {escape(str(folder))}", soft_wrap=True)
    return folder, doc


def _resumed(opts: TuneOptions, console: Console) -> tuple[Path, TuneFile]:
    assert opts.resume is not None
    if opts.suite_file is not None or opts.overrides or opts.mode or opts.profile:
        raise ConfigError("--resume", str(opts.resume), "continues the ladder as tune.json records it: "
                          "give no SUITE, --mode, --profile or --set")
    folder = Path(opts.resume)
    doc = load_tune(folder)
    if opts.budget_s is not None:
        doc.budget_s = opts.budget_s
    doc.max_rungs = opts.max_rungs
    if doc.pending is not None and doc.stopped.startswith(("budget", "max-rungs")):
        doc.stopped = ""  # the user asked to go on: the new --budget / --max-rungs decide
    console.print(f"resuming the ladder in {escape(str(folder))}: {len(doc.rungs)} rung(s) judged")
    return folder, doc


# ---------------------------------------------------------------- one rung


def _rung_run(folder: Path, doc: TuneFile, index: int, mode: ModeConfig, plan: list[tuple[str, int]],
              name: str | None = None) -> tuple[RunDir, RunInfo, Suite]:
    """The rung's run folder and run.json (kept when it exists: --resume keeps its finished trials)."""
    suite = _suite_with(Suite.model_validate(doc.config), mode)
    run = RunDir(folder / (name or f"rung-{index}"))
    refuse_link(run.path)  # a rung folder is ours to write: never through a link planted in its place
    if run.run_json.exists():
        info = run.load_run()
        if info.config_hash == suite.config_hash():
            return run, info, suite
    run.path.mkdir(parents=True, exist_ok=True)
    info = RunInfo(suite=suite.suite.name, suite_file=doc.suite_file, profile=doc.profile, run_id=run.path.name,
                   config_hash=suite.config_hash(), plan=[PlanEntry(mode=m, seed=s) for m, s in plan],
                   config=suite.model_dump(mode="json"), started=utc_now(), launcher={"kind": "local"})
    run.write_run(info)
    return run, info, suite


class Stopped(Exception):
    """A rung's trials were interrupted (Ctrl-C / SIGTERM): the ladder stops with the run's exit code."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def _run(run: RunDir, console: Console) -> float:
    """The rung's trials not finished yet (its run.json's plan, through the engine as the rest of a run
    folder; each rung's records digested), not judged here; returns their wall time."""
    t0 = time.monotonic()
    code = execute(RunRequest(resume=run.path, resume_hint=f"ampbench tune --resume {run.path.parent}"),
                   Policies(output=Output(judge=False)), console=console)
    if code in (130, 143):
        raise Stopped(code)
    return time.monotonic() - t0


def _short_trial(folder: Path, doc: TuneFile, mode: ModeConfig, console: Console) -> Trial:
    """One short AMP trial (first seed, SHORT_STEPS steps): does AMP run here at all?"""
    data = doc.config
    steps = min(int(data["train"]["steps"]), SHORT_STEPS + 1)
    short = TuneFile.model_validate({**doc.to_json(), "config": {
        **data, "train": {**data["train"], "steps": steps, "warmup_steps": 1, "eval_every": 0}}})
    seed = int(data["suite"]["seeds"][0])
    run, _, _ = _rung_run(folder, short, 0, mode, [(mode.name, seed)], name="short")
    console.print(f"a short {escape(mode.name)} trial ({steps} steps) to see whether AMP runs here")
    _run(run, console)
    return run.load_trial(run.trial_path(mode.name, seed))


def _judge(doc: TuneFile, folder: Path, index: int, mode: ModeConfig,
           design: Design | None = None) -> tuple[ModeVerdict, list[Trial], Suite]:
    """The rung's mode judged by the check's rules against rung 0's FP32 trials (at the alpha-spending
    levels of `design`'s looks once the rung spends seeds: judge.sequential)."""
    ref = open_run(folder / "rung-0")
    mine = open_run(folder / f"rung-{index}") if index else ref
    suite = _suite_with(Suite.model_validate(doc.config), mode)
    trials = [t for t in ref.trials if t.mode == REFERENCE_MODE] + [t for t in mine.trials if t.mode == mode.name]
    seeds = suite.suite.seeds
    plan = [(m, s) for s in seeds for m in (REFERENCE_MODE, mode.name)]
    verdicts = check_trials(suite, trials, plan, design=design)
    return next(v for v in verdicts if v.mode == mode.name), trials, suite


def _facts(trials: list[Trial], suite: Suite, mode: ModeConfig, folder: Path, profile: str,
           kind: str, run_dir: Path, console: Console) -> ladder.Facts:
    """What the next rung may need: the speed evidence always; diagnose's ops and bf16 support only for
    the ladders that use them (diagnose re-runs a short pair, so only when numerics failed)."""
    amp = [t for t in trials if t.mode == mode.name and t.status == "ok"]
    data = [x for t in amp if (x := t.data_wait_share()) is not None]
    host = [x for t in amp if (x := t.cpu_share()) is not None]
    overflow: tuple[str, ...] = ()
    diverging: tuple[str, ...] = ()
    bf16 = False
    if kind in ("stability", "parity"):
        overflow, diverging = _diagnosed_ops(run_dir, mode.name, console)
    if kind == "stability":
        from ampbench.trackers import device

        bf16 = device.amp_supported_in_child("bfloat16")   # in a child: no CUDA context held over the rungs
    return ladder.Facts(
        overflow_ops=overflow, diverging_ops=diverging, bf16_supported=bf16,
        max_batch=_probe_batch(folder, suite, mode, profile),
        data_wait_share=max(data) if data else None, host_share=max(host) if host else None,
        gpu=any(t.amp.active for t in amp))


def _diagnosed_ops(run_dir: Path, mode: str, console: Console) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`ampbench diagnose`'s black-list candidates (overflow) and its first drifting ops; none when it fails."""
    from ampbench.commands.diagnose import diagnose_mode

    try:
        diag = diagnose_mode(run_dir, mode, console=console)
    except Exception as e:  # noqa: BLE001  a failed diagnosis leaves the black-list rung without ops (skipped, said why)
        console.print(f"[yellow]warning:[/] diagnose failed: {escape(f'{type(e).__name__}: {e}')}")
        return (), ()
    drift = tuple(dict.fromkeys(f.op for f in diag.findings if f.kind == "diverged"))[:3]
    return tuple(diag.black_list_candidates), drift


def _probe_batch(folder: Path, suite: Suite, mode: ModeConfig, profile: str) -> int | None:
    """The newest finished `ampbench probe` of the suite and profile (beside the tune folder; the one rule,
    results.probe_file.find_probe): its largest batch for the mode."""
    try:
        probe, _ = find_probe(folder.parent.parent / suite.suite.name, suite.suite.name, profile)
    except NoProbe:
        return None
    entry = probe.modes.get(mode.name)
    return entry.max_batch if entry is not None and entry.max_batch else None


def _numbers(v: ModeVerdict) -> dict[str, float | None]:
    """The rung record's figures, from the results whose rule objects declare them (memory, accuracy-parity)."""
    sp = registry.speedup_details(v)
    got = registry.figures(v)
    return {"speedup": sp.estimate if sp else None, "memory_reduction": got.get("memory_reduction"),
            "metric_delta": got.get("metric_delta")}


# ---------------------------------------------------------------- seeds, as run --until-decided spends them


def _another_seed(doc: TuneFile, verdict: ModeVerdict, trials: list[Trial], suite: Suite, design: Design,
                  cost: float) -> int | str:
    """The next seed when judge.until says one more can decide an INCONCLUSIVE speed or parity rule of the
    rung and it fits the budget (estimated from this rung's seeds so far); else why not."""
    needs = until.needs([verdict], plan_for(suite, trials), design.looks[-1], design.max_seeds, suite.thresholds)
    if not until.want_more(needs):
        return until.summary(needs) if needs else "more seeds cannot decide it"
    spent = sum(r.cost_s for r in doc.rungs) + cost
    per_seed = cost / max(1, design.looks[-1])
    if doc.budget_s is not None and spent + per_seed > doc.budget_s:
        return f"one more seed (~{per_seed:.0f} s) would not fit in --budget"
    return max(int(x) for x in suite.suite.seeds) + 1


def _seed(folder: Path, doc: TuneFile, index: int, mode: ModeConfig, seed: int, console: Console) -> float:
    """One more matched seed for the rung: the ladder's seeds grow (later rungs run them too), rung 0 trains
    its FP32 arm on it, the rung its mode; returns the wall time. tune.json records the seed first, so a
    resumed ladder runs what is missing (`_fp32_seeds`)."""
    doc.config["suite"]["seeds"] = [*doc.config["suite"]["seeds"], seed]
    doc.write(folder)
    console.print(f"  undecided: adding seed {seed} ({len(doc.config['suite']['seeds'])} per mode), as "
                  "run --until-decided does")
    cost = _fp32_seeds(folder, doc, index, console)
    if index:
        cost += _in_rung(folder, doc, index, mode, [(mode.name, seed)], console)
    return cost


def _fp32_seeds(folder: Path, doc: TuneFile, index: int, console: Console) -> float:
    """Rung 0's plan grown to the ladder's seeds (FP32 and rung 0's mode) where a rung added seeds."""
    rung0 = ModeConfig.model_validate(doc.rungs[0].mode if doc.rungs else (doc.pending or {})["mode"])
    seeds = [int(x) for x in doc.config["suite"]["seeds"]]
    want = [(m, s) for s in seeds for m in ((REFERENCE_MODE, rung0.name) if index == 0 else (REFERENCE_MODE,))]
    run = RunDir(folder / "rung-0")
    if not run.run_json.exists() or set(want) <= set(run.load_run().planned()):
        return 0.0
    return _in_rung(folder, doc, 0, rung0, want, console)


def _in_rung(folder: Path, doc: TuneFile, index: int, mode: ModeConfig, entries: list[tuple[str, int]],
             console: Console) -> float:
    """Add `entries` to a rung's plan (its run.json, as until-decided grows a run's) and run what is missing."""
    run, info, suite = _rung_run(folder, doc, index, mode, entries)
    have = set(info.planned())
    info.plan += [PlanEntry(mode=m, seed=s) for m, s in entries if (m, s) not in have]
    info.config = suite.model_dump(mode="json")
    run.write_run(info)
    return _run(run, console)


# ---------------------------------------------------------------- the ladder


def _over_budget(doc: TuneFile, spent: float) -> bool:
    """One more rung would not fit: `spent` is the judged rungs' trial time (so a resumed ladder counts what it
    spent before); the next rung is estimated from the AMP rungs so far (rung 0 also trained FP32)."""
    if doc.budget_s is None or not doc.rungs:
        return False
    costs = [r.cost_s for r in doc.rungs[1:]] or [doc.rungs[0].cost_s / 2]
    return spent + sum(costs) / len(costs) > doc.budget_s


def _step(folder: Path, doc: TuneFile, console: Console) -> None:
    """Run, judge and record the pending rung, and decide the next one (or why the ladder stops)."""
    pend = doc.pending or {}
    index = len(doc.rungs)
    mode = ModeConfig.model_validate(pend["mode"])
    seeds = Suite.model_validate(doc.config).suite.seeds
    plan = [(m, s) for s in seeds for m in ((REFERENCE_MODE, mode.name) if index == 0 else (mode.name,))]
    before = _fp32_seeds(folder, doc, index, console)   # seeds a cut-short rung added: rung 0 first
    run, _, _ = _rung_run(folder, doc, index, mode, plan)
    console.print(f"rung {index} ({escape(str(pend['rung']))}): {escape(str(pend['why']))}")
    cost = before + _run(run, console)
    design = Design(looks=[len(seeds)], max_seeds=max(MAX_SEEDS, len(seeds)))
    verdict, trials, suite = _judge(doc, folder, index, mode, design)
    facts = _facts(trials, suite, mode, folder, doc.profile, "speed", run.path, console)
    kind, reason = ladder.classify(verdict, facts)
    while kind == "undecided":   # spend seeds as `run --until-decided` does, within the budget
        more = _another_seed(doc, verdict, trials, suite, design, cost)
        if isinstance(more, str):
            reason = f"{reason} ({more})"
            break
        cost += _seed(folder, doc, index, mode, more, console)
        design = Design(looks=[*design.looks, design.looks[-1] + 1], max_seeds=design.max_seeds)
        verdict, trials, suite = _judge(doc, folder, index, mode, design)
        facts = _facts(trials, suite, mode, folder, doc.profile, "speed", run.path, console)
        kind, reason = ladder.classify(verdict, facts)
    if kind in ("stability", "parity"):
        facts = _facts(trials, suite, mode, folder, doc.profile, kind, run.path, console)
    rec = RungRecord(index=index, rung=str(pend["rung"]), why=str(pend["why"]), mode=pend["mode"],
                     run_dir=run.path.name, verdict=verdict.verdict, failure=kind, reason=reason, cost_s=cost,
                     skipped=list(pend.get("skipped", [])), **_numbers(verdict))
    doc.rungs.append(rec)
    doc.pending = None
    console.print(f"  {escape(verdict.verdict)}: {escape(kind)}: {escape(reason)}", soft_wrap=True)
    if kind == "pass":
        doc.winner, doc.stopped = index, "passed every rule"
    elif kind in ladder.STOPS:
        doc.stopped = f"{kind}: {reason}"
    else:
        tried = {r.rung for r in doc.rungs}
        nxt, skipped = ladder.next_rung(kind, mode, facts, tried)
        if nxt is None:
            doc.stopped = f"{kind}: every rung of its ladder tried or not applicable"
        else:
            new = ladder.apply(mode, nxt, f"tune-{index + 1}")
            doc.pending = {"rung": nxt.rung, "why": nxt.why, "mode": new.model_dump(mode="json"),
                           "skipped": [f"{s.rung}: {s.skip}" for s in skipped]}
            if suite.suite.workload == "command" and mode.amp_by != "inject":   # an injected mode: ampbench applies it
                doc.stopped = (f"command suite: the next rung ({nxt.rung}) changes the program's own flags, which "
                               "ampbench cannot write for an arbitrary program: give the mode those flags in its "
                               "`args` (tune.md shows them) and run tune again")
    doc.write(folder)


def run_tune(opts: TuneOptions, console: Console | None = None) -> int:
    """The ladder; returns 0 when a rung passed every rule, 3 when AMP is inactive or a rule could not be
    decided, 1 when the ladder was spent, data/launch-bound or out of budget, 2 when a trial crashed."""
    console = console or TerminalConsole()
    folder, doc = _resumed(opts, console) if opts.resume else _new_tune(opts, console)
    try:
        _ladder(folder, doc, console)
    except Stopped as e:   # the engine said how to continue (tune --resume): the judged rungs are kept
        return e.code
    path = write_tune_md(folder, doc, program_flags)
    console.print(f"{escape(doc.stopped)}\ntune: {escape(str(path))}", soft_wrap=True)
    return _exit(doc)


def _ladder(folder: Path, doc: TuneFile, console: Console) -> None:
    """The short trial first, then rung after rung until one passes or the ladder stops."""
    if not doc.rungs and not doc.stopped:
        mode = ModeConfig.model_validate((doc.pending or {})["mode"])
        t = _short_trial(folder, doc, mode, console)
        if t.status != "ok":
            first = (t.error or "").strip().splitlines()
            doc.stopped = f"error: the short trial ended {t.status}: {first[0] if first else ''} (log in short/logs/)"
        elif t.amp.emulated:   # tune's ladder is about speed and memory, which emulation never measures
            doc.stopped = "inactive: the mode's AMP is emulated (emulate = true): tune measures speed, drop emulate"
        elif not t.amp.active:
            doc.stopped = f"inactive: AMP did not run ({t.amp.inactive_reason or 'every op ran in float32'})"
        if doc.stopped:
            doc.pending = None
            doc.write(folder)
    while doc.pending is not None and not doc.stopped:
        if len(doc.rungs) >= doc.max_rungs:
            doc.stopped = f"max-rungs: {doc.max_rungs} rung(s) run"
        elif _over_budget(doc, sum(r.cost_s for r in doc.rungs)):
            doc.stopped = "budget: one more rung would not fit in --budget"
        else:
            _step(folder, doc, console)
            continue
        doc.write(folder)


def _exit(doc: TuneFile) -> int:
    if doc.winner is not None:
        return EXIT_PASS
    if doc.stopped.startswith(("inactive", "undecided")):
        return EXIT_INCONCLUSIVE
    if doc.stopped.startswith("error"):
        return EXIT_ERROR
    return EXIT_FAIL


def program_flags(mode: ModeConfig) -> list[str]:
    """The mode as PaddleOCR `-o` overrides and as PaddleNLP Trainer arguments; an injected mode (`amp =
    "inject"`) as the lines to add to your own loop (report/injected.py)."""
    if mode.amp_by == "inject":
        return ["ampbench applied it (amp = \"inject\"); to keep it in your own loop: "
                + "; ".join(keep_lines(mode, {})[1:])]
    from ampbench.importers.paddlenlp_command import _flag
    from ampbench.importers.paddleocr_command import _mode_args

    ocr = "-o " + " ".join(_mode_args(mode.model_dump(mode="json")))
    nlp = [*_flag("bf16" if mode.dtype == "bfloat16" else "fp16", True, bare=True),
           *_flag("fp16_opt_level", mode.amp_level), *_flag("scale_loss", mode.scaler.init_loss_scaling)]
    if mode.custom_black_list:
        nlp += _flag("amp_custom_black_list", mode.custom_black_list)
    if mode.master_grad:
        nlp += _flag("amp_master_grad", True)
    return [f"PaddleOCR tools/train.py: {ocr}", f"PaddleNLP Trainer: {' '.join(nlp)}"]
