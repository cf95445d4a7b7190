"""The `ampbench` command: run, check, compare, pr-check, tune, bisect, report, plan, publish, probe, diagnose, baseline, history, import, suites, schema, docs, env, selftest.

The deprecated `summary` and `export-benchmark` still work for one release, hidden from --help.

Thin: each verb parses its options and calls one function of the module that owns the work.
Errors the user can fix (bad suite file, corrupt or unreadable results, a full or read-only disk)
print one line naming the file and the reason, and exit 2: every verb runs inside `_guard`, the one
place that maps them (GuardedTyper registers each verb wrapped in it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperOption

from ampbench.core.errors import UserError
from ampbench.core.files import os_reason
from ampbench.core.store import BASELINES_DIR, HISTORY_DIR, RUNS_DIR
from ampbench.core.terminal import TerminalConsole
from ampbench.core.text import printable
from ampbench.launch.process import Interrupted, install_signal_handlers

EXIT_CODES = """\b
Exit codes:
  0    PASS: every AMP mode passed its checks
  1    FAIL: a mode failed a check (also INCONCLUSIVE with --strict)
  2    ERROR or bad input: a suite/result file problem, a crashed trial, a disk error
  3    INCONCLUSIVE: not enough evidence either way (e.g. AMP inactive on CPU)
  130  interrupted by Ctrl-C (SIGINT); 143: stopped by SIGTERM. Finished trials are kept:
       continue with `ampbench run --resume RUN_DIR`"""


def _console(stderr: bool = False) -> Console:
    """A terminal gets rich output at its width; a pipe or CI log gets plain, uncut lines (no
    80-column default that truncates mode names), and COLUMNS still wins when set."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return TerminalConsole(stderr=stderr, width=_width(True))
    return TerminalConsole(stderr=stderr, width=_width(False), no_color=True, highlight=False)


def _width(terminal: bool) -> int | None:
    """COLUMNS when it is a usable width (0 or junk is ignored), else the terminal's, else 200 in a pipe."""
    cols = os.environ.get("COLUMNS", "")
    width = int(cols) if cols.isdigit() and 40 <= int(cols) <= 10_000 else None
    return width if terminal else (width or 200)


_Verb = TypeVar("_Verb", bound=Callable[..., Any])


# The values of the options that take one of a list, spelled here so --help needs no import of the code that
# reads them (tests/test_cli_conventions.py checks each against it).
COMPARE_FORMATS = ("table", "json", "md", "csv", "parquet", "pytest-benchmark")
COMPARE_SORTS = ("name", "min", "max", "mean", "stddev", "median", "iqr", "trials", "samples_per_s", "change")


def _choices(*names: str) -> str:
    """An option's metavar listing its values, as click shows a Choice: `[md|html]`."""
    return "[" + "|".join(names) + "]"


class _PlainArgument(TyperArgument):
    """An argument as `--help` shows it to a user: its name in capitals, `...` when it repeats, no Python type."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _rich_display_name(self) -> str:
        return self.display_name_raw + ("..." if self.nargs != 1 else "")

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


class _PlainCommand(TyperCommand):
    """A verb whose --help names types as users know them (TEXT, INTEGER, PATH, a metavar the option gives, the
    choices), not typer's Python annotations (`<list[str]>`, `<str>` for an integer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for p in self.params:
            if isinstance(p, TyperArgument):
                p.__class__ = _PlainArgument
                p.metavar = p.metavar or (p.name or "").upper()
            elif isinstance(p, TyperOption) and not (p.is_flag or p.count) and p.metavar is None:
                p.metavar = _type_name(p.type_descriptor.annotation)


_TYPE_NAMES = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH"}


def _type_name(annotation: Any) -> str:
    """click's names of the types (an option given several times: its item's); TEXT for anything else."""
    args = getattr(annotation, "__args__", None)
    if args and getattr(annotation, "__origin__", None) is list:
        return _type_name(args[0])
    return _TYPE_NAMES.get(annotation, "TEXT")


class GuardedTyper(typer.Typer):
    """Every verb runs inside `_guard`: one place maps a user-fixable problem to one line and exit 2."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[_Verb], _Verb]:
        kwargs.setdefault("cls", _PlainCommand)
        register = super().command(*args, **kwargs)

        def decorate(fn: _Verb) -> _Verb:
            @functools.wraps(fn)
            def guarded(*a: Any, **kw: Any) -> Any:
                for c in (out, err):  # COLUMNS as it is now, not as it was at import
                    c.width = _width(c.is_terminal)  # type: ignore[assignment]  # reason: None = detect (rich accepts it)
                with _guard():
                    return fn(*a, **kw)
            return cast(_Verb, register(guarded))  # functools.wraps gave `guarded` fn's signature
        return decorate


app = GuardedTyper(add_completion=True, no_args_is_help=True, help=__doc__.splitlines()[0], epilog=EXIT_CODES,
                   rich_markup_mode=None)
baseline_app = GuardedTyper(no_args_is_help=True, help="Save and inspect baselines for `check --baseline`.",
                            rich_markup_mode=None)
app.add_typer(baseline_app, name="baseline")
history_app = GuardedTyper(no_args_is_help=True, help="Keep the nightly history the trend and the dashboard read.",
                           rich_markup_mode=None)
app.add_typer(history_app, name="history")
import_app = GuardedTyper(no_args_is_help=True, help="Turn a PaddleOCR, PaddleClas, PaddleSeg or PaddleRec config or "
                                                      "PaddleNLP Trainer args into a suite.")
app.add_typer(import_app, name="import")
err = _console(stderr=True)
out = _console()


def _print_version(value: bool) -> None:
    """--version: ampbench's and the Paddle it would train with (from the installed metadata: no paddle import)."""
    if not value:
        return
    from importlib import metadata

    from ampbench import __version__

    try:
        paddle = metadata.version("paddlepaddle-gpu")
    except metadata.PackageNotFoundError:
        try:
            paddle = metadata.version("paddlepaddle")
        except metadata.PackageNotFoundError:
            paddle = "not installed"
    typer.echo(f"ampbench {__version__} (paddle {paddle}, python {sys.version.split()[0]})")
    raise typer.Exit(0)


def _suite_names(incomplete: str) -> list[str]:
    """Shell completion of a suite argument: the bundled suites' names (a path completes as files do)."""
    from ampbench.config.bundled import bundled_suites

    return [n for n in bundled_suites() if n.startswith(incomplete)]


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print ampbench's version (and Paddle's) and exit"),
) -> None:
    """The options before the verb (--version; --install-completion / --show-completion: typer's)."""


def _fail(msg: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(printable(msg))}", highlight=False, soft_wrap=True)  # one line, no escape acts
    raise typer.Exit(code)


@contextlib.contextmanager
def _guard() -> Iterator[None]:
    """The one place that turns a user-fixable problem into one line and exit 2: suite errors,
    result-file errors, and OS or encoding errors on ampbench's files (path and reason named)."""
    try:
        yield
    except UserError as e:
        _fail(str(e))
    except UnicodeDecodeError as e:
        _fail(f"a file is not UTF-8 text: {os_reason(e)}")
    except OSError as e:
        where = " -> ".join(str(p) for p in (e.filename, e.filename2) if p) or "(file)"
        _fail(f"{where}: {os_reason(e)}")


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
                                 "folder on a shared filesystem; see docs/cluster.md)"),
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
    from ampbench.commands.run import RunOptions, execute
    from ampbench.commands.run_plan import parse_cpus, parse_max_seeds
    from ampbench.config import ConfigError
    from ampbench.judge.until import parse_duration

    try:
        budget_s = parse_duration(budget) if budget is not None else None
    except ValueError as e:
        raise ConfigError("--budget", (budget or "")[:40], str(e)) from None
    cap = parse_max_seeds(max_seeds)
    if (budget is not None or cap != 12) and not until_decided:
        raise ConfigError("--max-seeds/--budget", budget or str(cap), "only with --until-decided")
    opts = RunOptions(
        suite_file=suite_file, profile=profile, modes=list(modes or []), seeds=seeds,
        overrides=list(set_ or []), out_dir=out_dir, resume=resume, strict=strict, report=not no_report,
        until_decided=until_decided, max_seeds=cap, budget_s=budget_s, baseline=baseline,
        affinity=parse_cpus(affinity) if affinity is not None else None, at_max_batch=at_max_batch, probe=probe,
        devices=devices, master=master, node_rank=node_rank, verbose=verbose, status_every=status_every,
        slurm=_slurm_options(launcher, partition, gpus_per_trial, time_limit, constraint, slurm_arg, slurm_poll,
                             (slurm_outage, slurm_requeue, slurm_parallel)),
    )
    if probe is not None and not at_max_batch:
        raise ConfigError("--probe", str(probe), "only with --at-max-batch")
    if sweep:
        from ampbench.commands.sweep import run_sweep

        raise typer.Exit(run_sweep(opts, list(sweep), out))
    code = execute(opts, console=out)
    raise typer.Exit(code)


def _slurm_options(launcher: str, partition: str | None, gpus: int | None, time_limit: str | None,
                   constraint: str | None, args: list[str] | None, poll: float,
                   patience: tuple[float, int, int | None]) -> Any:
    """--launcher and the Slurm options -> SlurmOptions (None: the local launcher, refusing Slurm options)."""
    from ampbench.config import ConfigError
    from ampbench.launch.slurm import SlurmOptions, parse_slurm_args

    if launcher not in ("local", "slurm"):
        raise ConfigError("--launcher", launcher, "expected local or slurm")
    given = [n for n, v in (("--partition", partition), ("--gpus-per-trial", gpus), ("--time", time_limit),
                            ("--constraint", constraint), ("--slurm-arg", args or None),
                            ("--slurm-parallel", patience[2])) if v is not None]
    if launcher == "local":
        if given:
            raise ConfigError(given[0], "", "only with --launcher slurm")
        return None
    parse_slurm_args(list(args or []))
    return SlurmOptions(partition=partition, gpus_per_trial=gpus, time=time_limit, constraint=constraint,
                        args=list(args or []), poll_s=poll, outage_s=patience[0], requeue=patience[1],
                        parallel=patience[2])


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


@app.command(hidden=True)
def summary(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="Run folders to compare (the first is the reference)"),
    fmt: str = typer.Option("md", "--format", metavar=_choices("md", "csv", "parquet"), help="md, csv or parquet"),
    output: Path | None = typer.Option(None, "-o", "--output", help="File to write (default: print md/csv)"),
) -> None:
    """Deprecated: `ampbench compare RUN... --format md|csv|parquet`."""
    from ampbench.commands.compare import TABLE_FORMATS, compare, deprecated

    deprecated("summary", "compare RUN... --format md|csv|parquet", err)
    if fmt not in TABLE_FORMATS:  # the old verb's own message, before anything is read
        from ampbench.core.errors import ResultsError

        raise ResultsError(f"--format {fmt}: unknown; use one of {', '.join(TABLE_FORMATS)}")
    compare(run_dirs, fmt, str(output) if output is not None else None, "name", out)


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

    slurm = _slurm_options(launcher, partition, None, None, None, slurm_arg, slurm_poll, (600.0, 2, None))
    opts = BisectOptions(suite_file=suite_file, good=good, bad=bad, repo=repo, rule=rule, modes=list(mode or []),
                         max_seeds=max_seeds, profile=profile, overrides=list(set_ or []), out_dir=out_dir,
                         resume=resume, parallel=parallel, devices=devices, package=package, paddle=paddle,
                         index_url=index_url, find_links=find_links, no_index=no_index, slurm=slurm)
    raise typer.Exit(run_bisect(opts, console=out))


@app.command("export-benchmark", hidden=True)
def export_benchmark(
    run_dir: Path = typer.Argument(...),
    output: str = typer.Option(..., "-o", "--output", help="A file, or a folder (existing, or ending in /)"),
) -> None:
    """Deprecated: `ampbench compare RUN --format pytest-benchmark -o FILE`."""
    from ampbench.commands.compare import compare, deprecated

    deprecated("export-benchmark", "compare RUN --format pytest-benchmark -o FILE", err)
    compare([run_dir], "pytest-benchmark", output, "name", out)


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
    """Bisect the commit range of the history's last detected slowdown (docs/bisect.md). Exit codes as bisect's;
    2 when the history shows no slowdown or records no commits."""
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
    write: Path | None = typer.Option(None, "--write", help="Render every generated table into the pages of this "
                                      "docs folder (docs/)"),
    check: Path | None = typer.Option(None, "--check", help="Exit 1 naming each generated table of this docs "
                                      "folder that is stale"),
) -> None:
    """The docs tables rendered from the code: list them, write them into the pages, or check the pages."""
    from ampbench.commands.docs import docs_command

    text, code = docs_command(write, check)
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


def _only_with(option: str, value: object, needs: str, given: object) -> None:
    """An option that only another one uses is refused without it, never silently ignored."""
    if value is not None and given is None:
        _fail(f"{option}: only with {needs} (without it nothing would use it)")


@import_app.command("paddleocr")
def import_paddleocr_cmd(
    config: Path = typer.Argument(..., help="A PaddleOCR det config (YAML), e.g. det_mv3_db.yml"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Use ampbench's synthetic text, not the label files"),
    repo: Path | None = typer.Option(None, "--repo", help="A PaddleOCR checkout: a command suite running its "
                                        "tools/train.py -c CONFIG (any architecture) instead of a translation"),
    python: str | None = typer.Option(None, "--python", help="With --repo: the interpreter that runs "
                                         "tools/train.py (default: this one)"),
    no_pretrained: bool = typer.Option(False, "--no-pretrained", help="With --repo: train from random "
                                       "initialisation (empties Global.pretrained_model and checkpoints)"),
) -> None:
    """PaddleOCR config -> suite (fp32 + its AMP modes); keys not honoured are listed; exit 2 if unsupported."""
    _only_with("--python", python, "--repo", repo)
    _only_with("--no-pretrained", no_pretrained or None, "--repo", repo)
    if repo is not None and synthetic_data and output is None:
        _fail("--synthetic-data: with --repo the images are written beside the suite file: give -o SUITE.toml")
    from ampbench.commands.imports import import_paddleocr, write_imported

    imported = import_paddleocr(config, output, synthetic_data, repo, python, not no_pretrained)
    write_imported(imported, str(config), output, out, err)


@import_app.command("paddleclas")
def import_paddleclas_cmd(
    config: Path = typer.Argument(..., help="A PaddleClas config (YAML), e.g. ppcls/configs/ImageNet/ResNet/ResNet50.yaml"),
    repo: Path = typer.Option(..., "--repo", help="A PaddleClas checkout: the suite runs its tools/train.py -c CONFIG"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    python: str | None = typer.Option(None, "--python", help="The interpreter that runs tools/train.py"),
    no_pretrained: bool = typer.Option(False, "--no-pretrained", help="Random initialisation (Arch.pretrained=False)"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Small synthetic images in its ImageNet "
                                        "list format, written beside the suite file, instead of the config's data"),
) -> None:
    """PaddleClas config -> command suite (fp32 + AMP.use_amp=True at O1/O2, evaluation after train.steps)."""
    from ampbench.commands.imports import import_paddleclas, write_imported

    _synthetic_needs_output(synthetic_data, output)
    imported = import_paddleclas(config, output, repo, python, not no_pretrained, synthetic_data)
    write_imported(imported, str(config), output, out, err)


@import_app.command("paddleseg")
def import_paddleseg_cmd(
    config: Path = typer.Argument(..., help="A PaddleSeg config (YAML), e.g. configs/pp_liteseg/pp_liteseg_stdc1_cityscapes_1024x512_scale0.5_160k.yml"),
    repo: Path = typer.Option(..., "--repo", help="A PaddleSeg checkout: the suite runs its tools/train.py --config CONFIG"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    python: str | None = typer.Option(None, "--python", help="The interpreter that runs tools/train.py"),
    no_pretrained: bool = typer.Option(False, "--no-pretrained", help="Random initialisation (--opts model.pretrained=None ...)"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Small synthetic images in its Dataset format, "
                                        "written beside the suite file, instead of the config's data"),
) -> None:
    """PaddleSeg config -> command suite (fp32 + --precision fp16 --amp_level O1/O2, mIoU from its [EVAL] line)."""
    from ampbench.commands.imports import import_paddleseg, write_imported

    _synthetic_needs_output(synthetic_data, output)
    imported = import_paddleseg(config, output, repo, python, not no_pretrained, synthetic_data)
    write_imported(imported, str(config), output, out, err)


@import_app.command("paddlerec")
def import_paddlerec_cmd(
    config: Path = typer.Argument(..., help="A PaddleRec config (YAML), e.g. models/rank/deepfm/config.yaml"),
    repo: Path = typer.Option(..., "--repo", help="A PaddleRec checkout: the suite runs its tools/trainer.py -m CONFIG"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    python: str | None = typer.Option(None, "--python", help="The interpreter that runs tools/trainer.py"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Synthetic Criteo-format samples, written "
                                        "beside the suite file, instead of runner.train_data_dir"),
) -> None:
    """PaddleRec config -> command suite (fp32 + AMP injected by ampbench: its trainer has no AMP switch)."""
    from ampbench.commands.imports import import_paddlerec, write_imported

    _synthetic_needs_output(synthetic_data, output)
    write_imported(import_paddlerec(config, output, repo, python, synthetic_data), str(config), output, out, err)


def _synthetic_needs_output(synthetic_data: bool, output: Path | None) -> None:
    if synthetic_data and output is None:
        _fail("--synthetic-data: the data is written beside the suite file: give -o SUITE.toml")


@import_app.command("paddlenlp")
def import_paddlenlp_cmd(
    args_json: Path | None = typer.Argument(None, help="Trainer arguments as JSON (PaddleNLP's parse_json_file format)"),
    args: str | None = typer.Option(None, "--args", help='Trainer arguments as on the command line: "--fp16 ..."'),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    source: str = typer.Option("paddleformers", "--source", metavar=_choices("paddleformers", "paddlenlp"),
                               help="BERT package the suite uses: paddleformers (installed by setup.sh) or paddlenlp"),
    script: Path | None = typer.Option(None, "--script", help="Your Trainer script: a command suite running it "
                                          "with these arguments, instead of the bert suite"),
    python: str | None = typer.Option(None, "--python", help="With --script: the interpreter that runs it"),
) -> None:
    """PaddleNLP Trainer args -> the bert suite (or, with --script, your script) with fp32 + AMP modes."""
    from ampbench.commands.imports import import_paddlenlp, write_imported

    _only_with("--python", python, "--script", script)
    if script is not None and source != "paddleformers":
        _fail("--source: not with --script (your script imports its own package)")
    imported, where = import_paddlenlp(args_json, args, output, source, script, python)
    write_imported(imported, where, output, out, err)


@app.command()
def selftest(
    out_dir: Path = typer.Option(Path("results/selftest"), "--out", help="Where run folders and selftest.json go"),
) -> None:
    """GPU self-test (<= 10 min on one GPU): gpu-smoke profile of every bundled suite, GPU evidence
    asserted. Exit 0 all checks hold, 1 one failed, 3 no GPU (prints what it would check)."""
    from ampbench.commands.selftest import run_selftest

    raise typer.Exit(run_selftest(out_dir, console=out))


def main() -> None:
    """Entry point: Ctrl-C and SIGTERM end with 130 / 143 and a line saying so (typer would swallow
    a KeyboardInterrupt into a silent exit); `ampbench run` stops its worker and says how to resume."""
    install_signal_handlers()
    for stream in (sys.stdout, sys.stderr):  # PYTHONIOENCODING=ascii and a non-ASCII path: shown escaped, not exit 1
        reconfigure = getattr(stream, "reconfigure", None)  # a TextIOWrapper's; absent on a replaced stream
        with contextlib.suppress(ValueError):
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
    # Paddle's import warns about a C++-extension compiler cache ampbench never uses: noise in every run.
    warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)
    try:
        app()
    except Interrupted as e:
        err.print(f"interrupted ({e}): stopped; exit {e.exit_code}", highlight=False)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
