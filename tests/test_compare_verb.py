"""`ampbench compare` is the one verb comparing runs; `summary` and `export-benchmark` still work for one
release, print one deprecation line on stderr, and write exactly what `compare` writes."""

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


def test_old_verbs_warn_once_and_write_what_compare_writes(tmp_path: Path) -> None:
    a, b = two_runs(tmp_path)
    new = invoke("compare", str(a), str(b), "--format", "csv")
    old = invoke("summary", str(a), str(b), "--format", "csv")
    assert old.exit_code == 0 and old.stdout == new.stdout
    assert old.stderr.count("deprecated") == 1 and "ampbench compare" in old.stderr
    exp = invoke("export-benchmark", str(a), "-o", str(tmp_path / "old.json"))
    assert exp.exit_code == 0 and "deprecated" in exp.stderr and "--format pytest-benchmark" in exp.stderr
    invoke("compare", str(a), "--format", "pytest-benchmark", "-o", str(tmp_path / "new.json"))
    old_doc, new_doc = (json.loads((tmp_path / n).read_text()) for n in ("old.json", "new.json"))
    assert [bm["stats"] for bm in old_doc["benchmarks"]] == [bm["stats"] for bm in new_doc["benchmarks"]]
    assert "summary" not in invoke("--help").output.split("Commands", 1)[-1].split()  # hidden from the list


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
    """cli.py only parses: each verb imports its use-case from commands/ (the import verbs too:
    commands/imports.py), and none reaches into the stacks below (judge.until: option parsing)."""
    import ast

    import ampbench.cli as cli_module

    tree = ast.parse(Path(cli_module.__file__).read_text(encoding="utf-8"))
    verbs = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
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
