"""`ampbench run SUITE --sweep KEY=V1,V2 [--sweep KEY2=...]`: one comparison per point of the grid.

Each point is an ordinary run (its own folder, check.json and report) with the point's values as
`--set` overrides after the user's own, so the sweep inherits everything a run does (profiles,
--until-decided, --affinity, --baseline).  Several keys make a cartesian grid, as optimum-benchmark's
sweeps; the seed's own scenario (FP32 at batch 8 against AMP at batch 32) is such a grid over
`modes[i].batch_size`.  After the last point, SUITE_OUT/sweep-<stamp>.md lays the grid out: per point
and mode the samples/s, the speedup over FP32 and the verdict.  The exit code is the worst point's.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.commands.run_plan import RunOptions
from ampbench.config import ConfigError
from ampbench.core.files import atomic_write_text
from ampbench.core.names import new_run_id
from ampbench.judge.recorded import recorded_verdict
from ampbench.judge.summary import summarize_run
from ampbench.record import fields
from ampbench.report.fmt import DASH, md_code, md_table, md_text
from ampbench.results.history import MODE_COMPUTED, ModeSummary, RunSummary
from ampbench.results.run_dir import open_run

MAX_POINTS = 64
_SEVERITY = {0: 0, 3: 1, 1: 2, 2: 3}  # PASS < INCONCLUSIVE < FAIL < ERROR (exit codes)


def parse_sweep(items: list[str]) -> list[tuple[str, list[str]]]:
    """`key=v1,v2` -> (key, [v1, v2]); keys unique, values non-empty, the grid at most MAX_POINTS."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, vals = item.partition("=")
        values = [v.strip() for v in vals.split(",") if v.strip()]
        if not sep or not key.strip() or not values:
            raise ConfigError("--sweep", item, "expected KEY=V1,V2,..., e.g. --sweep train.batch_size=8,16,32")
        if any(k == key.strip() for k, _ in out):
            raise ConfigError("--sweep", item, f"{key.strip()} is swept twice")
        out.append((key.strip(), values))
    n = 1
    for _, v in out:
        n *= len(v)
    if n > MAX_POINTS:
        raise ConfigError("--sweep", " ".join(items), f"{n} points; at most {MAX_POINTS}")
    return out


def points(grid: list[tuple[str, list[str]]]) -> list[list[str]]:
    """Every point of the grid as its `key=value` overrides."""
    keys = [k for k, _ in grid]
    return [[f"{k}={v}" for k, v in zip(keys, combo)] for combo in itertools.product(*(v for _, v in grid))]


def _slug(point: list[str]) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(p.split(".")[-1] for p in point)).strip("-.")[:60] or "point"


def run_sweep(opts: RunOptions, sweep: list[str], console: Console) -> int:
    """Run every point (opts: commands.run_plan.RunOptions), then write the grid report; worst exit code."""
    from ampbench.commands.run import execute, load_for_run

    if opts.resume:
        raise ConfigError("--sweep", " ".join(sweep), "not with --resume (resume each point's run folder)")
    grid = parse_sweep(sweep)
    for point in points(grid):  # every value checked before the first point trains: exit 2, nothing run
        load_for_run(dataclasses.replace(opts, overrides=[*opts.overrides, *point]))
    stamp = new_run_id()  # time, pid and random bits: two sweeps started in the same second never collide
    done: list[tuple[list[str], Path | None, int]] = []
    for i, point in enumerate(points(grid)):
        run_id = f"sweep-{stamp}-{i:02d}-{_slug(point)}"
        console.print(f"[bold]sweep point {i + 1}[/]: {escape(', '.join(point))}")
        sub = dataclasses.replace(opts, overrides=[*opts.overrides, *point], run_id=run_id)
        code = execute(sub, console=console)
        found = sorted(Path(opts.out_dir).glob(f"*/{run_id}"))
        done.append((point, found[0] if found else None, code))
    if done and done[0][1] is not None:
        path = done[0][1].parent / f"sweep-{stamp}.md"
        atomic_write_text(path, sweep_report(grid, done), replace=False)
        console.print(f"sweep report: {escape(str(path))}")
    return max((c for _, _, c in done), key=lambda c: _SEVERITY.get(c, 4), default=0)


def sweep_report(grid: list[tuple[str, list[str]]], done: list[tuple[list[str], Path | None, int]]) -> str:
    """The grid laid out: one row per point and mode, the mode's figures the field catalog's columns
    (record/fields.py: ModeSummary's that show in "sweep"), headed and formatted as report.md's summary."""
    summaries: list[tuple[list[str], RunSummary | None, int]] = []
    for point, path, code in done:
        if path is None:
            summaries.append((point, None, code))
            continue
        run = open_run(path)
        check = recorded_verdict(run)
        summaries.append((point, summarize_run(run.info, run.suite, run.trials, check), code))
    first = next((s for _, s, _ in summaries if s is not None), None)
    view = fields.View(first.metric, confidence=first.confidence) if first is not None else fields.PLAIN
    cols = fields.columns("sweep", ModeSummary, MODE_COMPUTED)
    rows = []
    for point, summary, code in summaries:
        cells = [md_code(", ".join(point))]
        if summary is None:
            rows.append([*cells, *(DASH for _ in cols), "no run folder", str(code)])
            continue
        for m in summary.modes.values():
            figures = [md_code(m.mode) if c.col.kind == "code" else c.text(m, view, md_text) for c in cols]
            rows.append([*cells, *figures, md_text(m.verdict), str(code)])
            cells = [""]
    keys = ", ".join(md_code(k) for k, _ in grid)
    return (f"# ampbench sweep over {keys}\n\n"
            + md_table(["Point", *(c.header(view, md_text) for c in cols), "Verdict", "Exit"], rows,
                       ["l", *(c.align for c in cols), "l", "r"]) + "\n")
