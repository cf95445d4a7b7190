"""`ampbench compare RUN [RUN...] --format ...`: one verb for "how do these runs differ?".

It folds three earlier verbs over the same data (each kept one release with a deprecation line):
- `table` (the default) and `json`: two runs per mode with pytest-benchmark's columns (min, max, mean, stddev,
  median, IQR, change), the first run against the second, or against its previous run (same suite,
  device and config beside it) when given alone; was `ampbench compare RUN [OTHER]`; `json` is the same
  comparison as data (results/compare_file.py, printed or written with `-o`);
- `md`, `csv`, `parquet`: every run per mode as one table (a pandas DataFrame), change against the first
  run; printed, or written with `-o` (parquet needs `-o`); was `ampbench summary`;
- `pytest-benchmark`: one run's step times as pytest-benchmark JSON for `pytest-benchmark compare`,
  written to `-o` (a file, or a folder: an existing one or a path ending in `/`); was
  `ampbench export-benchmark`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.core.errors import ConfigError
from ampbench.core.files import atomic_write_text, check_output
from ampbench.core.store import RunPaths
from ampbench.judge.run_change import changes
from ampbench.report.benchmark_export import export_run
from ampbench.report.compare import write_summary
from ampbench.report.compare_runs import compare_doc, compare_rows, print_compare
from ampbench.results.compare_file import CompareFile, Significance
from ampbench.results.previous import previous_run
from ampbench.results.run_dir import open_run

FORMATS = ("table", "json", "md", "csv", "parquet", "pytest-benchmark")
TWO_RUNS = ("table", "json")
TABLE_FORMATS = ("md", "csv", "parquet")


def compare(run_dirs: list[Path], fmt: str, output: str | None, sort: str, console: Console,
            fail_above: float | None = None) -> int:
    """The one use-case behind `compare` (and the deprecated `summary` / `export-benchmark`); returns the
    exit code: with `fail_above` (percent) see `exit_code`, else 0."""
    if fmt not in FORMATS:
        raise ConfigError("--format", fmt, f"expected one of {', '.join(FORMATS)}")
    if not run_dirs:
        raise ConfigError("compare", "RUN", "give at least one run folder")
    if fail_above is not None and fmt not in TWO_RUNS:
        raise ConfigError("--fail-above", str(fail_above), "only with --format table or json (two runs judged)")
    if fmt in TWO_RUNS:
        return _two_runs(run_dirs, fmt, output, sort, console, fail_above)
    if fmt == "pytest-benchmark":
        if len(run_dirs) != 1 or output is None:
            raise ConfigError("--format pytest-benchmark", " ".join(map(str, run_dirs)),
                              "exports one run: give one RUN and -o FILE (or -o FOLDER/)")
        path = export_run(run_dirs[0], Path(output), folder=output.endswith(("/", os.sep)))
        console.print(f"wrote {escape(str(path))}", soft_wrap=True)
    else:
        result = write_summary(run_dirs, fmt, Path(output) if output is not None else None)
        if isinstance(result, Path):
            console.print(f"summary: {escape(str(result))}", soft_wrap=True)
        else:
            sys.stdout.write(result)
    return 0


def two_run_doc(run_dirs: list[Path], sort: str = "name") -> CompareFile:
    """RUN [OTHER] (OTHER: the previous run beside RUN) compared, each change judged."""
    cur = open_run(run_dirs[0])
    oth = open_run(run_dirs[1] if len(run_dirs) == 2 else previous_run(run_dirs[0]))
    return compare_doc(compare_rows(cur, oth, sort), changes(cur, oth), cur, oth)


def _two_runs(run_dirs: list[Path], fmt: str, output: str | None, sort: str, console: Console,
              fail_above: float | None) -> int:
    if len(run_dirs) > 2 or (output is not None and fmt == "table"):
        raise ConfigError(f"--format {fmt}", " ".join(map(str, run_dirs)),
                          "compares two runs (RUN [OTHER]); several runs or -o: --format md|csv|parquet")
    if output is not None:   # checked before anything is computed
        check_output(Path(output), [RunPaths(p).run_json for p in run_dirs], kinds=(".json",))
    doc = two_run_doc(run_dirs, sort)
    if fmt == "table":
        print_compare(doc, console)
        return exit_code(doc.marks(), fail_above, console)
    text = json.dumps(doc.to_json(), indent=2, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        return exit_code(doc.marks(), fail_above, None)
    path = Path(output)
    atomic_write_text(path, text)
    console.print(f"wrote {escape(str(path))}", soft_wrap=True)
    return exit_code(doc.marks(), fail_above, console)


def exit_code(marks: dict[str, Significance], fail_above: float | None, console: Console | None) -> int:
    """--fail-above PCT: 1 when a mode is significantly slower by more than PCT percent; 3 when none is but
    a mode slower by more than PCT was disturbed (this machine cannot decide it: as check's INCONCLUSIVE);
    else 0. A change that is not significant never fails: that is noise the runs' spread explains."""
    if fail_above is None:
        return 0
    say = console.print if console is not None else (lambda *a, **k: None)
    beyond = {m: c for m, c in marks.items() if c.change is not None and c.change < -fail_above / 100}
    failed = [m for m, c in beyond.items() if c.mark == "slower"]
    unsure = [m for m, c in beyond.items() if c.mark == "disturbed"]
    if failed:
        say(f"--fail-above {fail_above:g}%: significantly slower: {escape(', '.join(failed))} -> exit 1",
            soft_wrap=True, highlight=False)
        return 1
    if unsure:
        say(f"--fail-above {fail_above:g}%: {escape(', '.join(unsure))} slower by more, but the measurement "
            "was disturbed: re-run on a quiet machine -> exit 3", soft_wrap=True, highlight=False)
        return 3
    say(f"--fail-above {fail_above:g}%: no mode significantly slower by more -> exit 0", highlight=False)
    return 0


def deprecated(old: str, new: str, console: Console) -> None:
    """The one line an old verb prints (on stderr: what it writes to stdout stays as it was)."""
    console.print(f"warning: `ampbench {old}` is deprecated and goes in the next release: use `ampbench {new}`",
                  markup=False, highlight=False, soft_wrap=True)
