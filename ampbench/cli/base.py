"""The `ampbench` command: run, check, compare, pr-check, tune, bisect, report, plan, publish, probe, diagnose, baseline, history, import, suites, schema, docs, env, selftest.

The retired `summary` and `export-benchmark` answer with one line naming `compare`'s form of them (exit 2).

Thin: each verb parses its options and calls one function of the module that owns the work.  The verbs
live beside this module (run.py, verbs.py, imports.py); this one holds the app, its error guard and `main`.
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


def _only_with(option: str, value: object, needs: str, given: object) -> None:
    """An option that only another one uses is refused without it, never silently ignored."""
    if value is not None and given is None:
        _fail(f"{option}: only with {needs} (without it nothing would use it)")


# Verbs removed at 0.1.0: each answers, whatever its arguments, with one line naming what replaced it (exit 2).
RETIRED_VERBS = {"summary": "ampbench compare RUN... --format md|csv|parquet [-o FILE]",
                 "export-benchmark": "ampbench compare RUN --format pytest-benchmark -o FILE"}


def _retired(name: str, instead: str) -> Callable[..., None]:
    def retired(ctx: typer.Context) -> None:
        _fail(f"`ampbench {name}` was removed; use `{instead}`")
    retired.__doc__ = f"Removed: `{instead}`."
    return retired


for _name, _instead in RETIRED_VERBS.items():
    app.command(_name, hidden=True, add_help_option=False,
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(_retired(_name, _instead))


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
