"""`ampbench compare RUN [RUN...] --format ...`: one verb for "how do these runs differ?".

It folds three earlier verbs over the same data (`summary` and `export-benchmark` are gone: the CLI answers
them with one line naming the format here):
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
from ampbench.judge.run_change import fail_above as fail_above_of
from ampbench.report.benchmark_export import export_run
from ampbench.report.compare import write_summary
from ampbench.report.compare_runs import print_compare, two_run_doc
from ampbench.results.compare_file import Significance

FORMATS = ("table", "json", "md", "csv", "parquet", "pytest-benchmark")
TWO_RUNS = ("table", "json")


def compare(run_dirs: list[Path], fmt: str, output: str | None, sort: str, console: Console,
            fail_above: float | None = None) -> int:
    """The one use-case behind `compare`; returns the exit code: with `fail_above` (percent) see `exit_code`,
    else 0."""
    if fmt not in FORMATS:
        raise ConfigError("--format", fmt, f"unknown; expected one of {', '.join(FORMATS)}")
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
    """--fail-above PCT (judge.run_change.fail_above): 1 when a mode is significantly slower by more than PCT
    percent, 3 when none is but one slower by more was disturbed, else 0; said in one line."""
    if fail_above is None:
        return 0
    got = fail_above_of(marks, fail_above)
    if console is None:
        return got.code
    if got.failed:
        line = f"significantly slower: {', '.join(got.failed)} -> exit 1"
    elif got.unsure:
        line = (f"{', '.join(got.unsure)} slower by more, but the measurement was disturbed: re-run on a quiet "
                "machine -> exit 3")
    else:
        line = "no mode significantly slower by more -> exit 0"
    console.print(f"--fail-above {fail_above:g}%: {line}", soft_wrap=True, highlight=False, markup=False)
    return got.code
