"""`ampbench compare` is the one verb comparing runs; `summary` and `export-benchmark` are retired: one line
naming compare's form of them, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ampbench.cli import app
from tests.factories import make_run, make_suite, make_trials

cli = CliRunner()


def two_runs(root: Path) -> tuple[Path, Path]:
    suite = make_suite(seeds=(0, 1))
    a = make_run(root, suite, make_trials(suite, base_time={"fp32": 0.05, "amp-o1-fp16": 0.04}), run_id="a")
    b = make_run(root, suite, make_trials(suite, base_time={"fp32": 0.05, "amp-o1-fp16": 0.03}), run_id="b")
    return a, b


def invoke(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


def test_compare_formats(tmp_path: Path) -> None:
    a, b = two_runs(tmp_path)
    table = invoke("compare", str(b), str(a))
    assert table.exit_code == 0, table.output
    assert "amp-o1-fp16 (b)" in table.output and "Change" in table.output
    csv = invoke("compare", str(a), str(b), "--format", "csv")
    assert csv.exit_code == 0 and csv.stdout.splitlines()[0].startswith("run_dir,run_id,suite,mode")
    assert len(csv.stdout.splitlines()) == 1 + 4  # 2 runs x 2 modes
    md = invoke("compare", str(a), str(b), "--format", "md")
    assert md.stdout.startswith("| Run |") and "`amp-o1-fp16`" in md.stdout
    exported = invoke("compare", str(a), "--format", "pytest-benchmark", "-o", str(tmp_path / "a.json"))
    assert exported.exit_code == 0, exported.output
    assert {bm["group"] for bm in json.loads((tmp_path / "a.json").read_text())["benchmarks"]}
    three = invoke("compare", str(a), str(b), str(a), "--format", "table")
    assert three.exit_code == 2 and "--format md|csv|parquet" in three.output and "Traceback" not in three.output
    assert invoke("compare", str(a), "--format", "xml").exit_code == 2


def test_retired_verbs_answer_with_one_line_naming_compare(tmp_path: Path) -> None:
    """`summary` and `export-benchmark` are gone at 0.1.0: whatever their arguments (--help included), one line
    naming compare's form of them, exit 2, nothing written, and neither is listed."""
    a, b = two_runs(tmp_path)
    for argv, form in ((["summary", str(a), str(b), "--format", "csv", "-o", str(tmp_path / "s.csv")],
                        "--format md|csv|parquet"),
                       (["export-benchmark", str(a), "-o", str(tmp_path / "old.json")], "--format pytest-benchmark"),
                       (["summary", "--help"], "--format md|csv|parquet")):
        old = invoke(*argv)
        assert old.exit_code == 2, old.output
        lines = old.output.strip().splitlines()
        assert len(lines) == 1 and "was removed" in lines[0] and "ampbench compare RUN" in lines[0] and form in lines[0]
    assert not (tmp_path / "s.csv").exists() and not (tmp_path / "old.json").exists()
    listed = invoke("--help").output.split("Commands", 1)[-1].split()
    assert "summary" not in listed and "export-benchmark" not in listed


def test_nightly_verbs(tmp_path: Path) -> None:
    """What nightly.sh asks instead of `python -c`: the verdict of record, the baseline's place, the history."""
    a, _ = two_runs(tmp_path)
    assert invoke("check", str(a), "--recorded").exit_code == 2  # never checked: says so
    checked = invoke("check", str(a))
    rec = invoke("check", str(a), "--recorded")
    assert rec.exit_code == checked.exit_code and rec.output == checked.output
    where = invoke("baseline", "path", str(a), "--dir", str(tmp_path / "bl"))
    assert where.stdout.strip() == str(tmp_path / "bl" / "nvidia-test-gpu-24gb" / "toy.json")
    hist = invoke("history", "append", str(a), str(tmp_path / "history"))
    assert hist.exit_code == 0 and (tmp_path / "history" / "toy.jsonl").is_file()
    assert json.loads((tmp_path / "history" / "toy.jsonl").read_text().splitlines()[0])["run_id"] == "a"


def test_every_verb_goes_through_one_use_case() -> None:
    """cli/ only parses: each verb imports its use-case from commands/ (the import verbs too:
    commands/imports.py), and none reaches into the stacks below (judge.until: option parsing)."""
    import ast

    import ampbench.cli as cli_package

    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(Path(cli_package.__file__).parent.glob("*.py"))]
    verbs = [f for tree in trees for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
             and any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
                     for d in f.decorator_list)]
    assert len(verbs) >= 19
    bad = []
    for f in verbs:
        mods = {n.module or "" for n in ast.walk(f) if isinstance(n, ast.ImportFrom)}
        top = {m.split(".")[1] for m in mods if m.startswith("ampbench.")}
        if not top & {"commands"} or top - {"commands", "config", "core"} - (
                {"judge"} if mods & {"ampbench.judge.until"} == {"ampbench.judge.until"} else set()):
            bad.append(f"{f.name}: {sorted(mods)}")
    assert not bad, bad
