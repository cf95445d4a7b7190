"""The verbs other than run and import: each parses its options and calls its use case in commands/."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from ampbench.cli.base import (
    COMPARE_FORMATS,
    COMPARE_SORTS,
    EXIT_CODES,
    _choices,
    _only_with,
    _suite_names,
    app,
    baseline_app,
    err,
    history_app,
    out,
)
from ampbench.cli.run import _slurm_options
from ampbench.core.store import BASELINES_DIR, HISTORY_DIR, RUNS_DIR
from ampbench.core.text import printable


@app.command(epilog=EXIT_CODES)
def check(
    run_dir: Path = typer.Argument(..., help="A run folder (results/runs/<suite>/<id>)"),
    baseline: Path | None = typer.Option(None, "--baseline", help="Run folder or baseline JSON (or a folder of "
                                            "them), or `last`: the previous run of this suite, device and config"),
    strict: bool = typer.Option(False, "--strict", help="INCONCLUSIVE exits 1 instead of 3"),
    allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="Compare across suite/config/device anyway"),
    history: Path | None = typer.Option(None, "--history", help="History folder or jsonl: the history rules "
                                           "compare against its runs of this suite, device and config since the "
                                           "last change point (>= 3 runs; else --baseline, with the drift from it)"),
    explain: bool = typer.Option(False, "--explain", "-v", help="Every rule's full text (observed, threshold, "
                                 "message) before the outcome table"),
    recorded: bool = typer.Option(False, "--recorded", help="Judge nothing: show the verdict of record (the newest "
                                  "check.json / check-vs-*.json) and exit with its code"),
    claims: bool = typer.Option(False, "--claims", help="Exit 1 when one of the suite's published [[claims]] is "
                                "refuted (a claim never changes a mode's verdict otherwise)"),
) -> None:
    """Judge a run: parity, speedup, memory, stability, history. Writes check.json (against a baseline:
    check-vs-BASELINE.json; with --history: check-vs-history.json; the run's own check.json is kept)."""
    from ampbench.commands.check import check_exit, check_run, print_outcome_of, recorded_check
    from ampbench.config import ConfigError

    _only_with("--allow-mismatch", True if allow_mismatch else None, "--baseline", baseline)
    if recorded and (baseline or strict or allow_mismatch or history):
        raise ConfigError("--recorded", str(run_dir), "shows the check already made: no --baseline, --strict, "
                          "--allow-mismatch or --history with it")
    report = recorded_check(run_dir) if recorded else check_run(
        run_dir, baseline=baseline, strict=strict, allow_mismatch=allow_mismatch, history=history)
    print_outcome_of(run_dir, report, out, explain=explain)
    raise typer.Exit(check_exit(report, claims))


@app.command()
def plan(
    run_dir: Path = typer.Argument(..., help="A run folder whose spreads the plan starts from"),
) -> None:
    """How many seeds each rule needs for <= 1% false alarms and >= 95% detection (from this run's spread)."""
    from ampbench.commands.reporting import plan as plan_seeds

    plan_seeds(run_dir, out)


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="One run folder, or several for a comparison/trend"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Output file (default: RUN_DIR/report.md)"),
    history: Path | None = typer.Option(None, "--history", help="History folder or jsonl for the trend section"),
    fmt: str = typer.Option("md", "--format", metavar=_choices("md", "html"), help="md or html"),
    html: bool = typer.Option(False, "--html", help="Also write the markdown report as one HTML page beside it "
                              "(OUTPUT with .html; the plots drawn once, as `ampbench run` does)"),
) -> None:
    """Write the markdown report (with PNG plots) for one or more runs."""
    from ampbench.commands.reporting import report as write_report

    write_report(run_dirs, output, history, fmt, out, also_html=html)


@app.command()
def publish(
    history: Path = typer.Argument(..., help="History folder of <suite>.jsonl (nightly's results/history)"),
    output: Path = typer.Option(Path("site"), "-o", "--output", help="Folder for the static site"),
    repo_url: str | None = typer.Option(None, "--repo-url", help="https://github.com/OWNER/REPO: commit ranges link to compare"),
    view: str = typer.Option("auto", "--view", metavar=_choices("auto", "interactive", "static"), help="auto (interactive plotly view when the dashboard extra is "
                             "installed, else static PNGs with a note), interactive (exit 2 without plotly) or static"),
    serve: bool = typer.Option(False, "--serve", help="Then serve the site on this machine (127.0.0.1) until Ctrl-C"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="With --serve: the port (0: any free one)"),
) -> None:
    """Write an HTML dashboard of the history: one page per suite, regressions with their commit range."""
    from ampbench.commands.reporting import publish as publish_site

    _only_with("--port", port if port != 8000 else None, "--serve", serve or None)
    publish_site(history, output, repo_url, out, view)
    if serve:
        from ampbench.commands.serve import serve as serve_site

        serve_site(output, port, out)


@app.command()
def compare(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="Run folders; table: RUN [OTHER] (OTHER defaults to the "
                                          "previous run of the same suite, device and config beside RUN)"),
    fmt: str = typer.Option("table", "--format", metavar=_choices(*COMPARE_FORMATS), help="table (two runs, pytest-benchmark's columns), json (the same "
                            "as data), md, csv, parquet (every run per mode, change vs the first) or "
                            "pytest-benchmark (one run's JSON)"),
    output: str | None = typer.Option(None, "-o", "--output", help="File to write (json/md/csv: default stdout; "
                                         "parquet, pytest-benchmark: required; a folder/ for pytest-benchmark)"),
    sort: str = typer.Option("name", "--sort", metavar=_choices(*COMPARE_SORTS), help="table: name, min, max, mean, stddev, median, iqr, trials, "
                             "samples_per_s or change (numeric: best first)"),
    fail_above: float | None = typer.Option(None, "--fail-above", min=0, help="PCT: exit 1 when a mode is "
                                            "significantly slower by more than PCT percent (3: slower but disturbed; "
                                            "table or json)"),
) -> None:
    """Compare runs per mode: two side by side (pytest-benchmark's columns, each change marked significant or
    not by check --baseline's test), several as one table, or export one."""
    from ampbench.commands.compare import compare as compare_runs

    raise typer.Exit(compare_runs(run_dirs, fmt, output, sort, out, fail_above))


@app.command("pr-check")
def pr_check(  # noqa: PLR0913  typer: one parameter per command-line option
    suite_file: Path = typer.Argument(..., help="A workload = \"command\" suite whose program lives in --repo"),
    base: str = typer.Option(..., "--base", help="The pull request's base commit (a commit, tag or branch)"),
    head: str = typer.Option("HEAD", "--head", help="Its head commit"),
    repo: Path = typer.Option(Path("."), "--repo", help="The git repository of the program (only read)"),
    modes: list[str] | None = typer.Option(None, "--mode", "-m", metavar="NAME", help="Run only these modes (fp32 is kept)"),
    seeds: str | None = typer.Option(None, "--seeds", metavar="N,N,...", help="Comma-separated seeds (default: the suite's, at least 3)"),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile name; default: cpu when no GPU"),
    set_: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a key: --set train.steps=5"),
    out_dir: Path = typer.Option(RUNS_DIR, "--out", help="Where the pr-check folder is created"),
    fail_above: float = typer.Option(0.0, "--fail-above", min=0, help="PCT: fail only on a significant slowdown "
                                     "beyond PCT percent (default: any significant one)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Also write the comment to this file"),
) -> None:
    """Run a command suite on a pull request's base and head commits, compare them, print the markdown comment.
    Exit 1: a mode significantly slower; 3: slower but disturbed; 2: bad input or a run that did not finish."""
    from ampbench.commands.pr_check import PrCheckOptions, run_pr_check

    opts = PrCheckOptions(suite_file=suite_file, base=base, head=head, repo=repo, modes=list(modes or []),
                          seeds=seeds, profile=profile, overrides=list(set_ or []), out_dir=out_dir,
                          fail_above=fail_above, output=output)
    raise typer.Exit(run_pr_check(opts, out, err))


@app.command()
def probe(
    suite_file: Path = typer.Argument(...),
    profile: str | None = typer.Option(None, "--profile", "-p"),
    modes: list[str] | None = typer.Option(None, "--mode", "-m", metavar="NAME"),
    max_batch: int = typer.Option(256, "--max-batch"),
    memory_limit: str | None = typer.Option(None, "--memory-limit", metavar="SIZE", help="Ceiling per attempt on CPU, e.g. 6GiB"),
    steps: int = typer.Option(3, "--steps", help="Training steps per attempt"),
    set_: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE"),
    out_dir: Path = typer.Option(RUNS_DIR, "--out"),
) -> None:
    """Find the largest batch size each mode trains without running out of memory."""
    from ampbench.commands.probe import ProbeOptions, run_probe

    code = run_probe(
        ProbeOptions(suite_file=suite_file, profile=profile, modes=list(modes or []), max_batch=max_batch,
                     memory_limit=memory_limit, steps=steps, overrides=list(set_ or []), out_dir=out_dir),
        console=out,
    )
    raise typer.Exit(code)


@app.command()
def diagnose(
    run_dir: Path = typer.Argument(...),
    mode: str = typer.Option(..., "--mode", "-m", metavar="NAME"),
    steps: int = typer.Option(3, "--steps"),
    seed: int | None = typer.Option(None, "--seed", min=0, max=2**32 - 1),
) -> None:
    """Re-run a short FP32/AMP pair with Paddle's numerics tools and name the ops that diverge."""
    from ampbench.commands.diagnose import run_diagnose

    code = run_diagnose(run_dir, mode=mode, steps=steps, seed=seed, console=out)
    raise typer.Exit(code)


@app.command(epilog=EXIT_CODES)
def tune(
    suite_file: Path | None = typer.Argument(None, help="Suite TOML file or bundled suite name; not with --resume",
                                             autocompletion=_suite_names),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile name; default: cpu when no GPU"),
    mode: str | None = typer.Option(None, "--mode", "-m", metavar="NAME", help="The AMP mode to tune (default: the suite's first)"),
    set_: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a key: --set train.steps=5"),
    budget: str | None = typer.Option(None, "--budget", metavar="DURATION", help="Stop before a rung that would not fit, e.g. 4h"),
    max_rungs: int = typer.Option(8, "--max-rungs", min=1, max=32, help="At most this many rungs (rung 0 included)"),
    resume: Path | None = typer.Option(None, "--resume", help="Continue the ladder of this tune folder"),
    out_dir: Path = typer.Option(RUNS_DIR, "--out", help="Where tune folders are created"),
) -> None:
    """Why AMP did not help, and the smallest change that makes it: a ladder of judged runs (docs/tune.md)."""
    from ampbench.commands.tune import TuneOptions, run_tune
    from ampbench.config import ConfigError
    from ampbench.judge.until import parse_duration

    try:
        budget_s = parse_duration(budget) if budget is not None else None
    except ValueError as e:
        raise ConfigError("--budget", (budget or "")[:40], str(e)) from None
    opts = TuneOptions(suite_file=suite_file, profile=profile, mode=mode, overrides=list(set_ or []), out_dir=out_dir,
                       budget_s=budget_s, max_rungs=max_rungs, resume=resume)
    raise typer.Exit(run_tune(opts, console=out))


@app.command()
def bisect(  # noqa: PLR0913  typer: one parameter per command-line option
    suite_file: Path | None = typer.Argument(None, help="A workload = \"command\" suite whose program lives in --repo"),
    good: str | None = typer.Option(None, "--good", help="A commit where the rule holds"),
    bad: str | None = typer.Option(None, "--bad", help="A later commit where it fails"),
    repo: Path | None = typer.Option(None, "--repo", help="The git repository of the program (only read)"),
    rule: str = typer.Option("history-throughput", "--rule", metavar="RULE",
                             help="history-throughput|history-metric|history-memory|speedup|accuracy-parity|memory"),
    mode: list[str] | None = typer.Option(None, "--mode", "-m", metavar="NAME", help="Judge only this mode (repeatable)"),
    max_seeds: int = typer.Option(6, "--max-seeds", min=2, max=64, help="Seeds a commit may take to decide"),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile name; default: cpu when no GPU"),
    set_: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a key: --set train.steps=5"),
    resume: Path | None = typer.Option(None, "--resume", help="Continue the search of this bisect folder"),
    out_dir: Path = typer.Option(RUNS_DIR, "--out", help="Where bisect folders are created"),
    parallel: int = typer.Option(1, "--parallel", min=1, max=64, help="Candidates a round, side by side "
                                 "(k-section), each on its share of --devices"),
    devices: str | None = typer.Option(None, "--devices", metavar="all|N,N,...", help="all or 0,1,...: the pool of --parallel"),
    package: str | None = typer.Option(None, "--package", help="NAME=A..B: bisect the versions of a package the "
                                       "index offers, each in its own environment, instead of commits"),
    paddle: str | None = typer.Option(None, "--paddle", help="A..B: --package paddlepaddle=A..B"),
    index_url: str | None = typer.Option(None, "--index-url", help="With --package: the package index (pip's)"),
    find_links: str | None = typer.Option(None, "--find-links", help="With --package: a folder of wheels (pip's)"),
    no_index: bool = typer.Option(False, "--no-index", help="With --package: only --find-links (pip's)"),
    launcher: str = typer.Option("local", "--launcher", metavar=_choices("local", "slurm"), help="local, or slurm: every candidate's trials Slurm jobs"),
    partition: str | None = typer.Option(None, "--partition", help="With --launcher slurm: the partition"),
    slurm_arg: list[str] | None = typer.Option(None, "--slurm-arg", metavar="KEY=VALUE", help="KEY=VALUE: passed to sbatch as --KEY=VALUE"),
    slurm_poll: float = typer.Option(15.0, "--slurm-poll", min=0.2, help="Seconds between Slurm status queries"),
) -> None:
    """The first commit that made a rule fail: a noise-aware bisection of your program's history (docs/bisect.md).
    Exit 1: the first bad commit was named; 3: it could not be (endpoints, undecided commits); 2: bad input."""
    from ampbench.commands.bisect import BisectOptions, run_bisect

    if launcher not in ("local", "slurm"):
        from ampbench.config import ConfigError

        raise ConfigError("--launcher", launcher, "expected local or slurm")
    slurm = _slurm_options(launcher, partition, None, None, None, slurm_arg, slurm_poll, (600.0, 2, None))
    opts = BisectOptions(suite_file=suite_file, good=good, bad=bad, repo=repo, rule=rule, modes=list(mode or []),
                         max_seeds=max_seeds, profile=profile, overrides=list(set_ or []), out_dir=out_dir,
                         resume=resume, parallel=parallel, devices=devices, package=package, paddle=paddle,
                         index_url=index_url, find_links=find_links, no_index=no_index, slurm=slurm)
    raise typer.Exit(run_bisect(opts, console=out))


@baseline_app.command("save")
def baseline_save(
    run_dir: Path = typer.Argument(...),
    output: Path | None = typer.Option(None, "-o", "--output", help="Default: results/baselines/<device>/<suite>.json"),
) -> None:
    """Write the compact baseline file that nightly CI commits."""
    from ampbench.commands.baseline import save

    path = save(run_dir, output, warn=lambda msg: err.print(f"warning: {msg}", markup=False,
                                                           highlight=False, soft_wrap=True))
    out.print(f"baseline: {escape(str(path))}")


@baseline_app.command("path")
def baseline_path(
    target: Path = typer.Argument(..., help="A run folder (the device its trials recorded) or a suite file "
                                  "(this machine's device)"),
    folder: Path = typer.Option(BASELINES_DIR, "--dir", help="The baselines folder"),
) -> None:
    """Print where the baseline of a run (or of a suite on this machine) lives: DIR/<device>/<suite>.json."""
    from ampbench.commands.baseline import baseline_path as where

    out.print(str(where(target, folder)), markup=False, highlight=False, soft_wrap=True)


@history_app.command("append")
def history_append(
    run_dir: Path = typer.Argument(..., help="A finished (checked) run folder"),
    history_dir: Path = typer.Argument(..., help="The history folder (<suite>.jsonl per suite)"),
    archive_report: bool = typer.Option(False, "--archive-report", help="Also keep the run's report.html beside "
                                        "the history, for the dashboard's links"),
) -> None:
    """Add (or replace) the run's summary line in HISTORY_DIR/<suite>.jsonl (what nightly.sh keeps)."""
    from ampbench.commands.history import append_run, open_after_append

    for what, path in append_run(run_dir, history_dir, archive=archive_report):
        out.print(f"{what}: {escape(str(path))}", soft_wrap=True)
    for text in open_after_append(run_dir, history_dir):
        out.print(f"[bold red]{escape(text[0].upper() + text[1:])}[/]", soft_wrap=True)


@history_app.command("accept")
def history_accept(
    history: Path = typer.Argument(..., help="The history: a <suite>.jsonl or the folder of them"),
    by: str = typer.Option(..., "--by", help="Who accepts the new level (recorded)"),
    why: str = typer.Option(..., "--why", help="Why the new level is intended (recorded)"),
    suite: str | None = typer.Option(None, "--suite", help="The suite (needed with a folder)"),
    run: str | None = typer.Option(None, "--run", help="The first run of the accepted level (default: the "
                                "first night of the open regression)"),
    min_change: float = typer.Option(0.05, "--min-change", min=0.0, max=0.99, help="The suite's "
                                     "history_min_change, to find the open regression"),
) -> None:
    """Accept a new throughput level: nights below -history_min_change stay out of the pooled history
    baseline (so every later night FAILs against the good level) until a person records here that the
    level from a run on is intended; the record (who, why, when) is kept beside the history."""
    from ampbench.commands.history import accept_level

    rec, path = accept_level(history, by, why, suite=suite, run=run, min_change=min_change)
    out.print(f"accepted: the level of suite {printable(rec.suite)} from run {rec.run_id} on "
              f"({len(rec.cleared)} night(s)) by {printable(rec.by)}: {printable(rec.why)}", soft_wrap=True,
              markup=False)
    out.print(f"recorded: {escape(str(path))}", soft_wrap=True)


@history_app.command("bisect")
def history_bisect(
    suite_file: Path = typer.Argument(..., help="The workload = \"command\" suite the nightly ran"),
    history: Path = typer.Option(HISTORY_DIR, "--history", help="The history: a <suite>.jsonl or the folder of them"),
    repo: Path | None = typer.Option(None, "--repo", help="The git repository of the program (only read)"),
    max_seeds: int = typer.Option(6, "--max-seeds", min=2, max=64, help="Seeds a commit may take to decide"),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile name; default: cpu when no GPU"),
    set_: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a key: --set train.steps=5"),
    out_dir: Path = typer.Option(RUNS_DIR, "--out", help="Where bisect folders are created"),
    parallel: int = typer.Option(1, "--parallel", min=1, max=64, help="Candidates a round, side by side "
                                 "(k-section), each on its share of --devices"),
    devices: str | None = typer.Option(None, "--devices", metavar="all|N,N,...", help="all or 0,1,...: the pool of --parallel"),
) -> None:
    """Bisect the commit range of the history's newest regression, the nights check --history FAILed
    (docs/bisect.md). Exit codes as bisect's; 2 when the series holds no regression or records no commits."""
    from ampbench.commands.history_bisect import HistoryBisectOptions, run_history_bisect

    opts = HistoryBisectOptions(suite_file=suite_file, history=history, repo=repo, max_seeds=max_seeds,
                                profile=profile, overrides=list(set_ or []), out_dir=out_dir, parallel=parallel,
                                devices=devices)
    raise typer.Exit(run_history_bisect(opts, console=out))


@app.command()
def suites(
    copy: str | None = typer.Option(None, "--copy", help="Write an editable copy of bundled suite NAME"),
    dest: Path = typer.Option(Path("."), "--to", help="Folder for --copy"),
) -> None:
    """List the bundled suites (run one by name: `ampbench run resnet`), or copy one to edit."""
    from ampbench.commands.suites import copy_suite, list_suites

    if copy is not None:
        copy_suite(copy, dest, out)
    else:
        list_suites(out)


@app.command()
def schema(
    name: str | None = typer.Argument(None, help="suite, run, trial, check, baseline, history, probe, diagnosis, tune, "
                                      "bisect or compare"),
    write: Path | None = typer.Option(None, "--write", help="Write every schema as NAME.schema.json into this folder"),
) -> None:
    """Print the JSON Schema of a file ampbench writes or reads (no NAME: list them)."""
    from ampbench.commands.schema import schema_command

    text = schema_command(name, write)
    typer.echo(text)


@app.command()
def docs(
    write: Path | None = typer.Option(None, "--write", help="Write the reference pages (reference/*.md) and every "
                                      "generated table of this docs folder (docs/)"),
    check: Path | None = typer.Option(None, "--check", help="Exit 1 naming each reference page or generated table "
                                      "of this docs folder that is stale or missing"),
) -> None:
    """The docs rendered from the code (the reference pages, the tables in other pages): list, write or check them."""
    from ampbench.commands.docs import docs_command

    # the reference's CLI page walks this app's command tree: handed down, since no layer below imports cli/
    text, code = docs_command(write, check, typer.main.get_command(app))
    typer.echo(text)
    raise typer.Exit(code)


@app.command()
def env(
    require_gpu: bool = typer.Option(False, "--require-gpu", help="Print nothing; exit 0 when Paddle sees a GPU "
                                     "here, 1 when not (nightly.sh's first check)"),
) -> None:
    """Print the environment fingerprint and whether AMP can be active on this device."""
    from ampbench.commands.env import has_gpu, print_env

    if require_gpu:
        raise typer.Exit(0 if has_gpu() else 1)
    print_env(out)


@app.command()
def selftest(
    out_dir: Path = typer.Option(Path("results/selftest"), "--out", help="Where run folders and selftest.json go"),
) -> None:
    """GPU self-test (<= 10 min on one GPU): gpu-smoke profile of every bundled suite, GPU evidence
    asserted. Exit 0 all checks hold, 1 one failed, 3 no GPU (prints what it would check)."""
    from ampbench.commands.selftest import run_selftest

    raise typer.Exit(run_selftest(out_dir, console=out))
