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
from pathlib import Path
from typing import get_args

import pytest
from rich.console import Console

from ampbench.commands.history import summarize_run_dir
from ampbench.core.columns import Col, Output
from ampbench.core.records import Memory
from ampbench.record import fields
from ampbench.record.assemble import TrialAssembler
from ampbench.report.benchmark_export import export_document
from ampbench.report.console import print_trials
from ampbench.report.tables import summary_table, trials_table
from ampbench.report.view import Ctx, load_view
from ampbench.results.history import MODE_COMPUTED, ModeSummary
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
    assert header[at - 1] == "Samples/s"   # rank 45: right after samples/s (40)
    assert row[at] == SHOWN

    out = io.StringIO()
    print_trials(trials, Console(file=out, width=250, force_terminal=False), "accuracy")
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("|") and "-+-" not in ln]
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    body = [c.strip() for c in next(ln for ln in lines if "| fp32 " in ln).strip("|").split("|")]
    assert cols.index("Energy/sample (J)") == cols.index("Samples/s") + 1
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
    assert header[at - 1] == "Samples/s [95% CI]"
    row = [c.strip() for c in next(ln for ln in lines if ln.startswith("| `fp32`")).strip("|").split(" | ")]
    assert row[at] == str(view.summary.modes["fp32"].total_steps) != "0"


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
]


def _catalog(output: str) -> list[fields.Column]:
    """A trial output's columns, or a per-mode one's (ModeSummary's, results/history.py)."""
    return fields.columns(output, ModeSummary, MODE_COMPUTED) if output in ("modes", "trend") else fields.columns(output)


def _literals(path: Path, names: tuple[str, ...]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name in names:
            found |= {n.value.strip().lower() for n in ast.walk(fn) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str)}
    return found


@pytest.mark.parametrize(("module", "functions", "output"), RENDERERS)
def test_no_renderer_spells_its_own_columns(module: str, functions: tuple[str, ...], output: str) -> None:
    """A text table's headers, a data output's keys: each only in the catalog (compared lower-case, so the
    console's old `"samples/s"` counts; the kinds' names are the catalog's vocabulary and allowed)."""
    cols = _catalog(output)
    names = ({c.col.header.lower() for c in cols if c.col.header} if output in ("md", "console", "modes", "trend")
             else {c.csv_name.lower() for c in cols})
    found = _literals(ROOT / module, functions)
    assert found, f"{module}: none of {functions} found (renamed? update RENDERERS)"
    assert not names & (found - set(fields.FORMATS)), f"{module} spells catalog columns itself"


def test_the_grep_catches_a_hand_built_header(tmp_path: Path) -> None:
    """The check above bites: the report's old hand-built header list is caught."""
    old = tmp_path / "tables.py"
    old.write_text('def trials_table(v):\n    header = ["Trial", "Status", "Batch", "Samples/s"]\n')
    md = {c.col.header.lower() for c in fields.columns("md") if c.col.header}
    assert {"trial", "status", "batch", "samples/s"} <= md & _literals(old, ("trials_table",))
