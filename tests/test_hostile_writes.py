"""Issue 59: verbs that wrote where they did not own. `diagnose` emptied and wrote through a linked
diagnose/ folder; `publish` wrote report.html and plots/ into every run folder a history line named, and made
one report copy per line when 100,000 lines named one folder.  Each test plants the hostile object, runs the
verb, and asserts on what is outside (bytes, listing) and on the one line of a refusal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app

cli = CliRunner()


def invoke(*args: str):
    r = cli.invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def listing(folder: Path) -> dict[str, bytes | None]:
    """Every entry below a folder (links not followed): path -> bytes (None for a folder or a link)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return out


# ---------------------------------------------------------------- 2. diagnose through a linked diagnose/


@pytest.mark.parametrize("where", ["diagnose", "diagnose/amp-o1-fp16"])
def test_diagnose_never_empties_or_writes_through_a_link(run_dir, tmp_path, where):
    """RUN/diagnose (or its mode folder) a link to another folder: refused in one line before the pair runs (on
    main `shutil.rmtree` emptied the target's mode folder and the pair's 10 files were written there, exit 0)."""
    target = tmp_path / "elsewhere"
    (target / "amp-o1-fp16").mkdir(parents=True)
    (target / "amp-o1-fp16" / "keep.txt").write_text("mine\n")
    before = listing(target)
    link = run_dir / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target if where == "diagnose" else target / "amp-o1-fp16", target_is_directory=True)
    r = invoke("diagnose", str(run_dir), "--mode", "amp-o1-fp16")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "symbolic link" in r.output and where in r.output
    assert listing(target) == before
    assert not (run_dir / "diagnosis.json").exists()


# ---------------------------------------------------------------- 4. publish writes nothing into a run folder


def _line(run_id: str, day: int, run_dir: str) -> str:
    return json.dumps({"schema": "ampbench.history/1", "suite": "toy", "run_id": run_id, "run_dir": run_dir,
                       "started": f"2025-03-{1 + day % 28:02d}T{day // 28 % 24:02d}:00:00+00:00",
                       "modes": {"fp32": {"mode": "fp32", "samples_per_s": 10.0 + day % 7}}})


def test_publish_makes_a_run_folders_report_inside_the_site_only(run_dir, work):
    """A history line naming a run folder without report.html: its report is made and linked, and the run folder
    is as it was (on main report.html and plots/ were written into it: any folder a history line names)."""
    hist = work / "history"
    hist.mkdir()
    (hist / "toy.jsonl").write_text(_line("r1", 1, str(run_dir)) + "\n")
    before = listing(run_dir)
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    assert listing(run_dir) == before
    site = work / "site"
    assert [p.name for p in (site / "reports" / "toy").iterdir()] == ["r1.html"]
    assert b"ampbench report" in (site / "reports" / "toy" / "r1.html").read_bytes()
    assert not any(p.name.startswith(".made") for p in site.iterdir())   # the scratch folder is gone


def test_publish_reads_a_run_folder_once_however_many_lines_name_it(run_dir, work, monkeypatch):
    """400 lines (one of them the run's own id) naming one run folder: one report is made, for the run whose id
    its run.json holds; the other lines link none (on main one report per line: 100,000 lines took 7.5 min and
    15 GB; scripts/bench_publish.py --same-run-dir measures it)."""
    from ampbench.report import markdown

    made = []
    real = markdown.write_report

    def counting(*a, **k):
        made.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(markdown, "write_report", counting)
    hist = work / "history"
    hist.mkdir()
    lines = [_line(f"n{i}", i, str(run_dir)) for i in range(399)] + [_line("r1", 400, str(run_dir))]
    (hist / "toy.jsonl").write_text("\n".join(lines) + "\n")
    before = listing(run_dir)
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    assert len(made) == 1
    assert sorted(p.name for p in (work / "site" / "reports" / "toy").iterdir()) == ["r1.html"]
    assert listing(run_dir) == before


def test_publish_never_makes_a_report_of_a_linked_run_folder(run_dir, work):
    hist = work / "history"
    hist.mkdir()
    link = work / "link"
    link.symlink_to(run_dir, target_is_directory=True)
    (hist / "toy.jsonl").write_text(_line("r1", 1, str(link)) + "\n")
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    assert not os.path.exists(work / "site" / "reports")
