"""The field catalog (record/fields.py): one column declaration reaches every trial table.

A column marked on a model field shows, with one formatted value, in report.md's trials table, the
console's trial table, summary.csv, the pytest-benchmark export and the history line; and no renderer
keeps a header or CSV name of its own (the parallel lists the catalog replaced).  Pure Python: run
folders from tests/factories.py, no Paddle process.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from pathlib import Path
from typing import get_args

import pytest
from rich.console import Console

from ampbench.commands.history import summarize_run_dir
from ampbench.commands.sweep import sweep_report
from ampbench.core.columns import Col, Output
from ampbench.record import fields
from ampbench.record.assemble import TrialAssembler
from ampbench.record.models import Memory
from ampbench.report.benchmark_export import export_document
from ampbench.report.compare import write_summary
from ampbench.report.console import print_outcome, print_trials
from ampbench.report.outcome import outcome_md
from ampbench.report.publish import _runs_table
from ampbench.report.tables import summary_table, trials_table
from ampbench.report.trend import overview
from ampbench.report.view import Ctx, load_view
from ampbench.results.history import MODE_COMPUTED, ModeSummary, RunSummary
from ampbench.results.run_dir import RunDir
from ampbench.results.summary import write_summary_csv
from tests.factories import make_run, make_suite, make_trial

ROOT = Path(__file__).resolve().parents[1]
J_PER_SAMPLE = 1234.5678   # kind "loss": 4 significant digits, thousands separated
SHOWN = "1,235"
EVERYWHERE = get_args(Output)


def _run(tmp_path: Path) -> Path:
    trials = []
    for mode in ("fp32", "amp-o1-fp16"):
        t = make_trial(mode, 0, times=[0.1] * 8, warmup=2, samples=8)
        t.memory.energy_j = J_PER_SAMPLE * 6 * 8   # 6 measured steps of 8 samples
        trials.append(TrialAssembler(t).finish())   # sets energy_j_per_sample: the recipe's second file
    return make_run(tmp_path, make_suite(seeds=(0,)), trials)


@pytest.fixture
def energy_column(monkeypatch: pytest.MonkeyPatch) -> Col:
    """`Memory.energy_j_per_sample` marked as a column shown everywhere, for this test only: what a new
    field's author writes on the model (`Annotated[float | None, Col(...)]`)."""
    col = Col("Energy/sample (J)", "loss", rank=45, shows=EVERYWHERE)
    info = Memory.model_fields["energy_j_per_sample"]
    monkeypatch.setattr(info, "metadata", [*info.metadata, col])
    return col


def _report_md(run: Path) -> str:
    """report.md's trials section as `ampbench report` renders it (write_report's other sections and
    plots cost seconds and show no trial column)."""
    return trials_table(load_view(run), Ctx(out_dir=run, plots_dir=run / "plots", multi=False), 2)


def _placed(header: list[str], name: str, after: str, before: str) -> bool:
    """`name` sits where its rank puts it: after the column ranked below it, before the one ranked above
    (other columns, a real field added since, may sit between)."""
    return header.index(after) < header.index(name) < header.index(before)


def _md_row(md: str, key: str) -> tuple[list[str], list[str]]:
    """The trials table's header and the row of trial `key`, as cells."""
    lines = md.split("## Trials", 1)[1].splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in table]
    return cells[0], next(r for r in cells[2:] if key in r[0])


def test_a_marked_field_shows_in_every_trial_table(tmp_path: Path, energy_column: Col) -> None:
    run = _run(tmp_path)
    trials = RunDir(run).load_trials()

    header, row = _md_row(_report_md(run), "fp32__seed0")
    at = header.index("Energy/sample (J)")
    assert _placed(header, "Energy/sample (J)", "Samples/s", "Step (median)")   # rank 45: between 40 and 50
    assert row[at] == SHOWN

    out = io.StringIO()
    print_trials(trials, Console(file=out, width=250, force_terminal=False), "accuracy")
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("|") and "-+-" not in ln]
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    body = [c.strip() for c in next(ln for ln in lines if "| fp32 " in ln).strip("|").split("|")]
    assert _placed(cols, "Energy/sample (J)", "Samples/s", "Peak memory")
    assert body[cols.index("Energy/sample (J)")] == SHOWN

    rows = list(csv.DictReader(io.StringIO(write_summary_csv(RunDir(run), trials).read_text(encoding="utf-8"))))
    assert [float(r["energy_j_per_sample"]) for r in rows] == pytest.approx([J_PER_SAMPLE] * 2)   # raw, for pandas

    doc = export_document(run)
    assert all(b["extra_info"]["energy_j_per_sample"] == pytest.approx([J_PER_SAMPLE]) for b in doc["benchmarks"])

    line = json.loads(summarize_run_dir(run).to_line())
    assert [p["energy_j_per_sample"] for m in line["modes"].values() for p in m["per_trial"]] == \
        pytest.approx([J_PER_SAMPLE] * 2)


def test_without_the_mark_no_table_shows_it(tmp_path: Path) -> None:
    """The counterpart: the same run without the marker has no such column anywhere (the test above
    measures the catalog, not a column some renderer already had)."""
    run = _run(tmp_path)
    header, _ = _md_row(_report_md(run), "fp32__seed0")
    assert "Energy/sample (J)" not in header
    assert "energy_j_per_sample" not in write_summary_csv(RunDir(run), RunDir(run).load_trials()).read_text()
    assert all("energy_j_per_sample" not in b["extra_info"] for b in export_document(run)["benchmarks"])


def test_a_marked_mode_field_shows_in_the_summary_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-mode side of the catalog: a `Col` on a `ModeSummary` field (set in judge/summary.py) is a
    column of report.md's summary table, formatted by its kind, with nothing else edited."""
    info = ModeSummary.model_fields["total_steps"]
    monkeypatch.setattr(info, "metadata", [*info.metadata, Col("Steps recorded", "count", rank=35, shows=("modes",))])
    view = load_view(_run(tmp_path))
    lines = summary_table(view).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    at = header.index("Steps recorded")
    assert _placed(header, "Steps recorded", "Samples/s [95% CI]", "Speedup [95% CI]")   # rank 35: between 30 and 40
    row = [c.strip() for c in next(ln for ln in lines if ln.startswith("| `fp32`")).strip("|").split(" | ")]
    assert row[at] == str(view.summary.modes["fp32"].total_steps) != "0"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_a_marked_mode_field_shows_in_every_per_mode_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables a mode a row beside report.md's summary: the outcome (report.md's and the console's),
    `ampbench compare --format md`, the dashboard's runs table and the sweep report each show a `ModeSummary` field marked for
    it, headed and formatted as the catalog says; the overview shows a marked `RunSummary` field."""
    col = Col("Steps recorded", "count", rank=57, shows=("outcome", "compare", "dashboard", "sweep"))
    info = ModeSummary.model_fields["total_steps"]
    monkeypatch.setattr(info, "metadata", [*info.metadata, col])
    run_info = RunSummary.model_fields["paddle"]
    monkeypatch.setattr(run_info, "metadata", [*run_info.metadata, Col("Paddle", "text", rank=45, shows=("overview",))])
    run = _run(tmp_path)
    view = load_view(run)
    steps = str(view.summary.modes["fp32"].total_steps)
    assert steps != "0"

    md = outcome_md(view, 2).splitlines()
    header = _cells(md[2])
    assert _placed(header, "Steps recorded", "Memory vs fp32", "Δ accuracy vs fp32")   # rank 57: between 55 and 65
    assert _cells(next(ln for ln in md if ln.startswith("| `fp32`")))[header.index("Steps recorded")] == steps

    out = io.StringIO()
    print_outcome(view, Console(file=out, width=250, force_terminal=False))
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("|") and "-+-" not in ln]
    cols = _cells(next(ln for ln in lines if "| Mode " in ln))   # the header's last line (Δ's takes two)
    assert _cells(next(ln for ln in lines if "| fp32 " in ln))[cols.index("Steps recorded")] == steps

    table = write_summary([run], "md").splitlines()
    cols = _cells(table[0])
    assert _placed(cols, "Steps recorded", "Peak memory", "Skipped steps")
    assert _cells(next(ln for ln in table if "| `fp32` |" in ln))[cols.index("Steps recorded")] == steps

    table = sweep_report([("train.steps", ["8"])], [(["train.steps=8"], run, 0)]).splitlines()
    cols = _cells(table[2])
    assert _placed(cols, "Steps recorded", "Speedup [95% CI]", "Verdict")
    assert _cells(next(ln for ln in table if "| `fp32` |" in ln))[cols.index("Steps recorded")] == steps

    entry = json.loads(summarize_run_dir(run).to_line())
    html = _runs_table([entry], {}, False)
    assert "<th>Steps recorded</th>" in html and f'<td class="num">{steps}</td>' in html

    head = next(ln for ln in overview([view], Ctx(out_dir=run, plots_dir=run / "plots", multi=True)).splitlines()
                if ln.startswith("| Suite"))
    assert _cells(head) == ["Suite", "Run", "Profile", "Device", "Paddle", "Verdict", "Exit code"]


def test_summary_csv_keeps_its_documented_columns_first() -> None:
    """summary.csv only gains columns at the end (docs/results-format.md lists them): a new field shown
    there sets `csv_rank` past the last, wherever `rank` puts it in report.md."""
    doc = (ROOT / "docs" / "results-format.md").read_text(encoding="utf-8").split("## summary.csv", 1)[1]
    listed = [n.strip() for n in doc.split("`")[3].replace("\n", " ").split(",")]
    assert len(listed) > 20
    assert [c.csv_name for c in fields.columns("csv")][:len(listed)] == listed


def test_one_formatter_per_kind_and_every_kind_has_one() -> None:
    """A kind without a formatter would fail at render time; the console and report.md read one string."""
    every = {c.col.kind for o in EVERYWHERE for c in _catalog(o)}
    assert every <= set(fields.FORMATS)
    t = make_trial("fp32", 0, times=[0.1] * 8, warmup=2)
    t.throughput.samples_per_s = 12345.0
    rate = next(c for c in fields.columns("md") if c.key == "throughput.samples_per_s")
    assert rate.text(t) == "12,345"   # 3 significant digits, not the console's old :.1f (12345.0)
    assert rate.key in {c.key for c in fields.columns("console")}


# The functions that render a trial table, and the output whose columns they show: none may spell a
# header (md, console) or CSV name (csv, export, history) of that output's columns itself.
RENDERERS = [
    ("ampbench/report/tables.py", ("trials_table", "_trial_cell"), "md"),
    ("ampbench/report/console.py", ("print_trials",), "console"),
    ("ampbench/results/summary.py", ("summary_rows", "write_summary_csv"), "csv"),
    ("ampbench/report/benchmark_export.py", ("_benchmark",), "export"),
    ("ampbench/judge/summary.py", ("trial_point",), "history"),
    ("ampbench/report/tables.py", ("summary_table", "_own_columns", "_mode_cell"), "modes"),
    ("ampbench/report/trend.py", ("trend_section", "_trend_rows", "_trend_own"), "trend"),
    ("ampbench/report/outcome.py", ("outcome_md", "_md_cell", "outcome_columns", "cell", "_row"), "outcome"),
    ("ampbench/report/console.py", ("print_outcome",), "outcome"),
    ("ampbench/report/compare.py", ("to_markdown", "_md_cell", "run_modes"), "compare"),
    ("ampbench/report/publish.py", ("_runs_table", "_figure_html"), "dashboard"),
    ("ampbench/commands/sweep.py", ("sweep_report",), "sweep"),
    ("ampbench/report/trend.py", ("overview",), "overview"),
]
MODE_OUTPUTS = ("modes", "trend", "outcome", "compare", "dashboard", "sweep")   # a mode a row: ModeSummary's columns


def _catalog(output: str) -> list[fields.Column]:
    """A trial output's columns, a per-mode one's (ModeSummary's, results/history.py) or the run overview's
    (RunSummary's)."""
    if output in MODE_OUTPUTS:
        return fields.columns(output, ModeSummary, MODE_COMPUTED)
    return fields.columns(output, RunSummary, ()) if output == "overview" else fields.columns(output)


def _literals(path: Path, names: tuple[str, ...]) -> set[str]:
    """The text of every string literal in the functions `names`, lower-case: each whole, and each cell of it
    (an HTML row's `<th>`s, a markdown row's `|` cells; an f-string's pieces, cut at an opening bracket)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name in names:
            for n in ast.walk(fn):
                if isinstance(n, ast.Constant) and isinstance(n.value, str):
                    found.add(n.value.strip().lower())
                    found |= {p.strip(" [(").lower() for p in re.split(r"<[^>]*>|\|", n.value)} - {""}
    return found


def _headers(cols: list[fields.Column]) -> set[str]:
    """Each header as a table shows it (its `{metric}`: "metric", `{ci}`: 95%) and as its words without the
    placeholders (`Samples/s {ci}`: "samples/s"), lower-case."""
    out: set[str] = set()
    for c in cols:
        if c.col.header:
            out |= {c.col.header.lower(), c.header(fields.View("metric")).lower(),
                    re.sub(r"\{\w+\}", "", c.col.header).strip().lower()}
    return out - {""}


@pytest.mark.parametrize(("module", "functions", "output"), RENDERERS)
def test_no_renderer_spells_its_own_columns(module: str, functions: tuple[str, ...], output: str) -> None:
    """A text table's headers, a data output's keys: each only in the catalog (compared lower-case, so the
    console's old `"samples/s"` counts; the kinds' names are the catalog's vocabulary and allowed)."""
    cols = _catalog(output)
    names = _headers(cols) if output not in ("csv", "export", "history") else {c.csv_name.lower() for c in cols}
    found = _literals(ROOT / module, functions)
    assert found, f"{module}: none of {functions} found (renamed? update RENDERERS)"
    assert not names & (found - set(fields.FORMATS)), f"{module} spells catalog columns itself"


# Each converted table's old hand-built header, as its renderer spelled it (the old function's lines)
OLD_HEADERS = [
    ("trials_table", 'def trials_table(v):\n    header = ["Trial", "Status", "Batch", "Samples/s"]\n', "md",
     {"trial", "status", "batch", "samples/s"}),
    ("outcome_md", 'def outcome_md(v, level):\n    header = ["Mode", "Verdict", f"Speedup [{v.summary.confidence:.0%} CI]", '
     '"Memory", f"{metric} Δ", "Decided by"]\n', "outcome", {"mode", "speedup"}),
    ("print_outcome", 'def print_outcome(v, console):\n    table.add_column("mode", overflow="fold")\n'
     '    table.add_column(f"speedup [{v.summary.confidence:.0%} CI]", justify="right")\n', "outcome", {"mode", "speedup"}),
    ("to_markdown", 'def to_markdown(df):\n    return md_table(["Run", "Suite", "Mode", "Trials ok", "Samples/s (median)", '
     '"vs first run", "Peak memory", "Metric (mean ± sd)", "Skipped steps"], rows)\n', "compare",
     {"mode", "peak memory", "metric (mean ± sd)", "skipped steps"}),
    ("_runs_table", 'def _runs_table(entries, links, frac):\n    head = ("<tr><th>Started</th><th>Run</th><th>Commit</th>'
     '<th>Mode</th><th>Samples/s</th><th>Peak memory</th>"\n            "<th>Metric</th><th>Verdict</th></tr>")\n',
     "dashboard", {"mode", "samples/s", "peak memory"}),
    ("sweep_report", 'def sweep_report(grid, done):\n    return md_table(["Point", "Mode", "Samples/s", "Speedup vs fp32", '
     '"Verdict", "Exit"], rows)\n', "sweep", {"mode", "samples/s"}),
    ("overview", 'def overview(views, ctx):\n    return md_table(["Suite", "Run", "Profile", "Device", "Verdict", '
     '"Exit code"], rows)\n', "overview", {"suite", "profile", "device"}),
]


@pytest.mark.parametrize(("function", "code", "output", "caught"), OLD_HEADERS, ids=[o[0] for o in OLD_HEADERS])
def test_the_grep_catches_a_hand_built_header(tmp_path: Path, function: str, code: str, output: str,
                                              caught: set[str]) -> None:
    """The check above bites: each table's old hand-built header list is caught (an HTML row's cells, an
    f-string's words before its interval included)."""
    old = tmp_path / "old.py"
    old.write_text(code, encoding="utf-8")
    assert caught <= _headers(_catalog(output)) & _literals(old, (function,))
