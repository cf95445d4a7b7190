"""`ampbench compare RUN [RUN...] --format ...`: one verb for "how do these runs differ?".

It folds three earlier verbs over the same data (`summary` and `export-benchmark` are gone: the CLI answers
them with one line naming the format here):
- `table` (the default): two runs per mode with pytest-benchmark's columns (min, max, mean, stddev,
  median, IQR, change), the first run against the second, or against its previous run (same suite,
  device and config beside it) when given alone; was `ampbench compare RUN [OTHER]`;
- `md`, `csv`, `parquet`: every run per mode as one table (a pandas DataFrame), change against the first
  run; printed, or written with `-o` (parquet needs `-o`); was `ampbench summary`;
- `pytest-benchmark`: one run's step times as pytest-benchmark JSON for `pytest-benchmark compare`,
  written to `-o` (a file, or a folder: an existing one or a path ending in `/`); was
  `ampbench export-benchmark`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.core.errors import ConfigError
from ampbench.judge.run_change import Change, changes
from ampbench.report.benchmark_export import export_run
from ampbench.report.compare import write_summary
from ampbench.report.compare_runs import compare_rows, print_compare
from ampbench.results.previous import previous_run
from ampbench.results.run_dir import open_run

FORMATS = ("table", "md", "csv", "parquet", "pytest-benchmark")


def compare(run_dirs: list[Path], fmt: str, output: str | None, sort: str, console: Console,
            fail_above: float | None = None) -> int:
    """The one use-case behind `compare`; returns the exit code: with `fail_above` (percent) see `exit_code`,
    else 0."""
    if fmt not in FORMATS:
        raise ConfigError("--format", fmt, f"unknown; expected one of {', '.join(FORMATS)}")
    if not run_dirs:
        raise ConfigError("compare", "RUN", "give at least one run folder")
    if fail_above is not None and fmt != "table":
        raise ConfigError("--fail-above", str(fail_above), "only with --format table (two runs judged)")
    if fmt == "table":
        if len(run_dirs) > 2 or output is not None:
            raise ConfigError("--format table", " ".join(map(str, run_dirs)),
                              "compares two runs on the terminal (RUN [OTHER]); several runs or -o: --format md|csv|parquet")
        other = run_dirs[1] if len(run_dirs) == 2 else previous_run(run_dirs[0])
        marks = changes(open_run(run_dirs[0]), open_run(other))
        print_compare(compare_rows(run_dirs[0], other, sort), console, marks)
        return exit_code(marks, fail_above, console)
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


def exit_code(marks: dict[str, Change], fail_above: float | None, console: Console) -> int:
    """--fail-above PCT: 1 when a mode is significantly slower by more than PCT percent; 3 when none is but
    a mode slower by more than PCT was disturbed (this machine cannot decide it: as check's INCONCLUSIVE);
    else 0. A change that is not significant never fails: that is noise the runs' spread explains."""
    if fail_above is None:
        return 0
    beyond = {m: c for m, c in marks.items() if c.change is not None and c.change < -fail_above / 100}
    failed = [m for m, c in beyond.items() if c.mark == "slower"]
    unsure = [m for m, c in beyond.items() if c.mark == "disturbed"]
    if failed:
        console.print(f"--fail-above {fail_above:g}%: significantly slower: {escape(', '.join(failed))} -> exit 1",
                      soft_wrap=True, highlight=False)
        return 1
    if unsure:
        console.print(f"--fail-above {fail_above:g}%: {escape(', '.join(unsure))} slower by more, but the measurement "
                      "was disturbed: re-run on a quiet machine -> exit 3", soft_wrap=True, highlight=False)
        return 3
    console.print(f"--fail-above {fail_above:g}%: no mode significantly slower by more -> exit 0", highlight=False)
    return 0
