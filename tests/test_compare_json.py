"""`ampbench compare --format json` (issue 61): the two-run comparison as data, valid against its committed
schema, with the same marks the table prints; the table shows one change per row; and every table a verb
prints into a pipe is ASCII (box and cells), as run and check always printed theirs."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
from jsonschema import Draft202012Validator
from rich.console import Console
from typer.testing import CliRunner

from ampbench.cli import app
from tests.factories import make_run, make_suite, make_trials

ROOT = Path(__file__).resolve().parents[1]
MODES = ("fp32", "amp-o1-fp16")
cli = CliRunner()


def invoke(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "250"})


def pair(root: Path, slow: float = 1.0, seed: int = 0) -> tuple[Path, Path]:
    suite = make_suite(MODES, seeds=(0, 1, 2))
    rng = np.random.default_rng(seed)
    base = {"fp32": 0.05, "amp-o1-fp16": 0.04}
    other = make_run(root, suite, make_trials(suite, base_time=base, rng=rng), run_id="other")
    cur = make_run(root, suite, make_trials(suite, base_time={m: t * slow for m, t in base.items()}, rng=rng),
                   run_id="cur")
    return cur, other


def validate(doc: object) -> None:
    schema = json.loads((ROOT / "schemas" / "compare.schema.json").read_text(encoding="utf-8"))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in Draft202012Validator(schema).iter_errors(doc)]
    assert errors == []


def test_json_validates_against_its_schema_and_marks_what_the_table_marks(tmp_path):
    cur, other = pair(tmp_path, slow=1.25)   # every step 25% longer: throughput -20%
    r = invoke("compare", str(cur), str(other), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    validate(doc)
    assert doc["schema"] == "ampbench.compare/1" and doc["current"]["run_id"] == "cur"
    current = [row for row in doc["rows"] if row["role"] == "current"]
    assert {row["mode"] for row in current} == set(MODES) and len(doc["rows"]) == 2 * len(MODES)
    for row in current:
        sig = row["significance"]
        assert sig["mark"] == "slower" and -0.21 < sig["change"] < -0.19 and sig["ci_low"] < sig["change"] < sig["ci_high"]
    assert all(row["significance"] is None and row["change"] is None for row in doc["rows"] if row["role"] == "other")
    table = invoke("compare", str(cur), str(other))
    assert table.output.count("yes, slower") == len(MODES)


def test_json_to_a_file_with_fail_above_and_identical_code(tmp_path):
    cur, other = pair(tmp_path, slow=1.25)
    out = tmp_path / "cmp.json"
    r = invoke("compare", str(cur), str(other), "--format", "json", "-o", str(out), "--fail-above", "10")
    assert r.exit_code == 1 and "significantly slower" in r.output, r.output
    validate(json.loads(out.read_text()))
    same_cur, same_other = pair(tmp_path / "same")
    same = invoke("compare", str(same_cur), str(same_other), "--format", "json", "--fail-above", "10")
    assert same.exit_code == 0, same.output
    marks = {row["significance"]["mark"] for row in json.loads(same.stdout)["rows"] if row["significance"]}
    assert marks == {"not significant"}
    # a record is never the output, and the table still takes no -o
    assert invoke("compare", str(cur), str(other), "--format", "json", "-o", str(cur / "run.json")).exit_code == 2
    assert invoke("compare", str(cur), str(other), "-o", str(tmp_path / "t.txt")).exit_code == 2


def test_one_change_per_row(tmp_path):
    """A row shows one change (with its interval); the Significant cell holds the mark alone, never a second
    figure (it showed `-5.4%` in Change beside `no (disturbed): -24.2% [...]`)."""
    cur, other = pair(tmp_path, slow=1.25)
    r = invoke("compare", str(cur), str(other))
    rows = [ln for ln in r.output.splitlines() if ln.startswith("| ") and "(cur)" in ln]
    assert len(rows) == len(MODES)
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert cells[-1] == "yes, slower" and not re.search(r"\d", cells[-1])
        assert len(re.findall(r"[+-]\d+\.\d%", ln)) == 3, ln   # the change and its two bounds, nothing else


def _ascii_tables(text: str) -> list[str]:
    """The lines of the tables in a verb's output (a border or a row)."""
    return [ln for ln in text.splitlines() if ln[:1] in "+|" or ln[:1] in "┏┃┡│└━"]


def test_every_table_in_a_pipe_is_ascii(tmp_path):
    """compare, check (the outcome table), run -v's trial table, the probe and diagnose tables: in a pipe
    (CliRunner's, or a console on a StringIO) the borders and the cells are ASCII."""
    from ampbench.commands.probe import print_probe
    from ampbench.report.console import print_trials
    from ampbench.results.probe_file import ProbeAttempt, ProbeFile, ProbeMode
    from ampbench.results.run_dir import open_run

    cur, other = pair(tmp_path, slow=1.25)
    outputs = [invoke("compare", str(cur), str(other)).output]
    check = invoke("check", str(cur))
    outputs.append(check.output)
    pipe = Console(file=io.StringIO(), width=200)
    assert not pipe.is_terminal
    opened = open_run(cur)
    print_trials(opened.trials, pipe, "accuracy")
    print_probe(ProbeFile(suite="toy", suite_file="toy.toml", profile="cpu", run_id="p", device="cpu",
                          ceiling="memory_limit", memory_limit_bytes=2**30, steps=2, max_batch_limit=8, seed=0,
                          modes={"fp32": ProbeMode(configured_batch=2, max_batch=4, attempts=[
                              ProbeAttempt(batch_size=4, fits=True, status="ok", peak_bytes=100),
                              ProbeAttempt(batch_size=8, fits=False, status="oom")])}), pipe)
    outputs.append(pipe.file.getvalue())   # type: ignore[attr-defined]
    for text in outputs:
        lines = _ascii_tables(text)
        assert lines, text
        bad = [ln for ln in lines if not ln.isascii()]   # the metric-delta header too: "d accuracy / vs fp32"
        assert not bad, bad
    assert "4:ok 8:oom" in outputs[-1]
