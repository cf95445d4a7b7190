"""Issue 24's seven security cases: nothing outside the folder ampbench owns is read into, or written
through, a symbolic link (or smuggled into a suite, a spreadsheet, or an endless parse).

Each test plants the hostile object, runs the verb, and asserts on the file outside: its bytes and
mtime unchanged, its content in no output. On the code before issue 24 every one of them fails.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import tomllib
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.launch.process import Limits, run_worker
from ampbench.results import ResultsError, RunDir
from ampbench.results.summary import write_summary_csv

cli = CliRunner()
SECRET = b"SECRET-TOKEN-ghp_0123456789abcdef\n"
MV3 = Path(__file__).parent / "fixtures" / "paddleocr" / "det_mv3_db_amp.yml"
NLP = Path(__file__).parent / "fixtures" / "paddlenlp"


def invoke(*args: str):
    r = cli.invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


class Outside:
    """A secret file and an empty folder outside every output folder, to prove nothing reached them."""

    def __init__(self, root: Path):
        self.dir = root / "outside"
        self.dir.mkdir()
        self.secret = self.dir / "secret.txt"
        self.secret.write_bytes(SECRET)
        os.utime(self.secret, (1_000_000_000, 1_000_000_000))
        self.empty = self.dir / "empty"
        self.empty.mkdir()

    def untouched(self) -> None:
        assert self.secret.read_bytes() == SECRET
        assert self.secret.stat().st_mtime == 1_000_000_000
        assert list(self.empty.iterdir()) == []


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    return Outside(tmp_path)


def no_secret_in(folder: Path) -> None:
    for p in folder.rglob("*"):
        assert not p.is_symlink(), f"{p} is a link"
        if p.is_file():
            data = p.read_bytes()
            assert b"SECRET-TOKEN" not in data, p
            assert b"PATH=" not in data or p.suffix == ".png", p   # /proc/self/environ's content


# ---------------------------------------------------------------- 1. publish copies linked reports


def _history_line(run_id: str, day: int, run_dir: str = "") -> str:
    return json.dumps({"schema": "ampbench.history/1", "suite": "ocr", "run_id": run_id, "run_dir": run_dir,
                       "started": f"2025-03-{day:02d}T02:00:00+00:00",
                       "modes": {"fp32": {"mode": "fp32", "samples_per_s": 10.0},
                                 "amp-o2-fp16": {"mode": "amp-o2-fp16", "amp_requested": True,
                                                 "samples_per_s": 18.0, "verdict": "PASS"}}})


def test_publish_never_copies_a_linked_report_into_the_site(work, outside):
    hist = work / "history"
    reports = hist / "reports" / "ocr"
    reports.mkdir(parents=True)
    run_folder = work / "runfolder"
    run_folder.mkdir()
    (run_folder / "report.html").symlink_to(outside.secret)           # the run folder's report.html
    (hist / "ocr.jsonl").write_text("\n".join([_history_line("n1", 1), _history_line("n2", 2),
                                               _history_line("n3", 3, str(run_folder)),
                                               _history_line("n4", 4)]) + "\n")
    (reports / "n1.html").symlink_to(outside.secret)                   # an archived report: a secret
    (reports / "n2.html").symlink_to("/proc/self/environ")             # ... or the whole environment
    (reports / "n4.html").write_text("<!DOCTYPE html><html><body>real report</body></html>")
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    site = work / "site"
    no_secret_in(site)
    assert sorted(p.name for p in (site / "reports" / "ocr").iterdir()) == ["n4.html"]
    page = (site / "ocr.html").read_text()
    assert 'href="reports/ocr/n4.html"' in page and "reports/ocr/n1.html" not in page
    outside.untouched()


def test_publish_into_a_linked_reports_folder_is_not_written_through(work, outside):
    hist = work / "history"
    hist.mkdir()
    (hist / "ocr.jsonl").write_text(_history_line("n1", 1) + "\n")
    (hist / "reports").symlink_to(outside.dir)                         # the whole archive is a link
    (outside.dir / "ocr").mkdir()
    (outside.dir / "ocr" / "n1.html").write_text("<html>SECRET-TOKEN</html>")
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    no_secret_in(work / "site")


# ---------------------------------------------------------------- 2. run --resume through a linked .lock


def test_resume_never_truncates_what_the_lock_links_to(run_dir, outside):
    (run_dir / ".lock").symlink_to(outside.secret)
    r = invoke("run", "--resume", str(run_dir))
    assert r.exit_code == 2 and ".lock" in r.output and "symbolic link" in r.output
    outside.untouched()


# ---------------------------------------------------------------- 3. worker logs through links in logs/


def test_worker_log_is_never_written_through_a_link(run_dir, outside):
    rd = RunDir(run_dir)
    rd.logs_dir.mkdir()
    log = rd.log_path("fp32", 0)
    log.symlink_to(outside.secret)
    with pytest.raises(ResultsError, match="symbolic link"):
        run_worker([sys.executable, "-c", "print('hello')"], {}, log, Limits(30, None), lambda ev: None,
                   log_root=run_dir)
    outside.untouched()


def test_worker_log_folder_link_is_refused(run_dir, outside):
    (run_dir / "logs").symlink_to(outside.empty, target_is_directory=True)
    with pytest.raises(ResultsError, match="symbolic link"):
        run_worker([sys.executable, "-c", "print('x')"], {}, RunDir(run_dir).log_path("fp32", 0),
                   Limits(30, None), lambda ev: None, log_root=run_dir)
    outside.untouched()


def test_resume_with_a_linked_log_exits_2_and_writes_nothing_outside(run_dir, outside):
    rd = RunDir(run_dir)
    rd.trial_path("fp32", 1).unlink()                                   # one trial left to run
    rd.logs_dir.mkdir()
    rd.log_path("fp32", 1).symlink_to(outside.secret)
    r = invoke("run", "--resume", str(run_dir), "--no-report")
    assert r.exit_code == 2 and "symbolic link" in r.output, r.output
    outside.untouched()


def test_trial_file_written_by_the_worker_not_through_a_linked_trials_folder(work, outside):
    from ampbench.core.files import atomic_write_json

    run = work / "r"
    run.mkdir()
    (run / "trials").symlink_to(outside.empty, target_is_directory=True)
    with pytest.raises(ResultsError, match="symbolic link"):
        atomic_write_json(run / "trials" / "fp32__seed0.json", {"a": 1}, root=run)
    outside.untouched()


# ---------------------------------------------------------------- 4. plots through linked plots/ or PNGs


def test_report_never_writes_plots_through_a_linked_plots_folder(run_dir, outside):
    (run_dir / "plots").symlink_to(outside.empty, target_is_directory=True)
    r = invoke("report", str(run_dir))
    assert r.exit_code == 2 and "plots" in r.output and "symbolic link" in r.output, r.output
    outside.untouched()


def test_report_never_writes_a_plot_through_a_linked_png(run_dir, outside):
    r = invoke("report", str(run_dir))
    assert r.exit_code == 0, r.output
    pngs = sorted((run_dir / "plots").glob("*.png"))
    assert pngs
    for p in pngs:
        p.unlink()
        p.symlink_to(outside.secret)
    r = invoke("report", str(run_dir))
    assert r.exit_code == 2 and "symbolic link" in r.output
    outside.untouched()


def test_report_html_does_not_inline_a_linked_image(run_dir, outside, work):
    from ampbench.report.html import to_html

    (work / "pics").mkdir()
    (work / "pics" / "a.png").symlink_to(outside.secret)
    html = to_html("![x](pics/a.png)\n", "t", base=work)
    assert "data:" not in html and "U0VDUkVU" not in html   # base64 of SECRET


# ---------------------------------------------------------------- 5. settings smuggled through importers

SMUGGLE = "x\nthresholds = { metric_abs_tol = 1.0 }\n#"


def test_paddleocr_key_with_a_newline_never_becomes_a_live_toml_line(work):
    text = MV3.read_text().replace("Global:\n", "Global:\n  " + json.dumps(SMUGGLE) + ": 1\n")
    cfg = work / "c.yml"
    cfg.write_text(text)
    r = invoke("import", "paddleocr", str(cfg), "--synthetic-data", "-o", str(work / "s.toml"))
    assert r.exit_code == 0, r.output
    written = (work / "s.toml").read_text()
    suite = tomllib.loads(written)
    assert suite.get("thresholds", {}).get("metric_abs_tol") != 1.0  # the smuggled table never took effect
    assert not [ln for ln in written.splitlines() if ln.startswith("thresholds = {")]
    assert "\\nthresholds" in written          # still named (escaped) among the keys not honoured


def test_paddlenlp_key_with_a_newline_never_becomes_a_live_toml_line(work):
    args = work / "a.json"
    args.write_text(json.dumps({"fp16": True, SMUGGLE: 1}))
    r = invoke("import", "paddlenlp", str(args), "-o", str(work / "s.toml"))
    assert r.exit_code == 0, r.output
    suite = tomllib.loads((work / "s.toml").read_text())
    assert suite.get("thresholds", {}).get("metric_abs_tol") != 1.0


def test_label_file_path_with_a_newline_is_refused(work):
    text = MV3.read_text()
    bad = json.dumps("a.txt" + SMUGGLE)
    text = text.replace("label_file_list:", f"label_file_list: [{bad}]\n    old_list:", 1)
    cfg = work / "c.yml"
    cfg.write_text(text)
    r = invoke("import", "paddleocr", str(cfg), "-o", str(work / "s.toml"))
    assert r.exit_code == 2 and "label_file_list" in r.output and "control character" in r.output
    assert not (work / "s.toml").exists()


# ---------------------------------------------------------------- 6. CSV formula injection


def test_run_id_starting_a_formula_is_refused_where_it_enters(run_dir):
    rj = run_dir / "run.json"
    rj.write_text(json.dumps({**json.loads(rj.read_text()), "run_id": "=HYPERLINK(\"http://x\",\"y\")"}))
    r = invoke("compare", str(run_dir), "--format", "csv")
    assert r.exit_code == 2 and "run_id" in r.output
    assert "=HYPERLINK" not in r.output.replace('run_id', '').split("error:", 1)[0]


def test_csv_cells_that_start_a_formula_are_neutralised(run_dir, work):
    from ampbench.results.summary import csv_safe

    rd = RunDir(run_dir)
    trials = rd.load_trials()
    trials[0].error = "=cmd|' /C calc'!A0"
    trials[0].status = "crashed"
    text = write_summary_csv(rd, trials).read_text()
    assert "'=cmd" in text and ",=cmd" not in text
    for bad in ("=1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_safe(bad) == "'" + bad
    assert csv_safe("ok") == "ok" and csv_safe(-1.5) == -1.5


# ---------------------------------------------------------------- 7. billion laughs


@pytest.mark.timeout(60)
def test_billion_laughs_yaml_is_refused_quickly(work):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    cfg = work / "bomb.yml"
    cfg.write_text("\n".join(lines) + "\nGlobal: {use_amp: true, extra: *a9}\n")
    r = invoke("import", "paddleocr", str(cfg))
    assert r.exit_code == 2 and "bomb.yml" in r.output and "alias" in r.output


def test_python_tags_in_yaml_still_execute_nothing(work):
    cfg = work / "tag.yml"
    marker = work / "pwned"
    cfg.write_text(f'Global: !!python/object/apply:os.system ["touch {marker}"]\n')
    r = invoke("import", "paddleocr", str(cfg))
    assert r.exit_code == 2 and not marker.exists()


def test_the_trial_writer_removes_a_trials_link_records_the_trial_as_tampered_and_refuses_another_run_folder(
        work, outside):
    """Issue 41.2, the writer alone (the real-process case is tests/test_hostile_program.py)."""
    from ampbench.core.files import folder_id
    from ampbench.record.models import Trial
    from ampbench.record.trial_file import write_trial_file

    run = work / "r"
    run.mkdir()
    ident = folder_id(run)
    (run / "trials").symlink_to(outside.empty, target_is_directory=True)
    t = Trial(suite="s", workload="toy", mode="fp32", seed=0, status="ok")
    write_trial_file(run / "trials" / "fp32__seed0.json", t, ident)
    outside.untouched()
    kept = json.loads((run / "trials" / "fp32__seed0.json").read_text())
    assert not (run / "trials").is_symlink() and kept["status"] == "crashed" and "tampered:" in kept["error"]
    run.rename(work / "r.moved")                       # the run folder moved away, a new one in its place
    run.mkdir()
    with pytest.raises(ResultsError, match="no longer the folder ampbench made"):
        write_trial_file(run / "trials" / "fp32__seed1.json", t, ident)
    assert not (run / "trials").exists()


def test_a_history_file_that_is_a_link_is_refused_by_publish_report_and_append(tmp_path, work, outside):
    """A <suite>.jsonl inside the history folder linking elsewhere (issue 59 leftover): publish, the trend of
    `report --history` and `history append` read history files as regular files only, so the link is named
    (exit 2) and what it points at reaches no page and is never rewritten."""
    from ampbench.commands.history import append_history
    from tests.test_report import copy_run

    run = copy_run(tmp_path, "a", run_id="night-1", started="2025-03-01T02:00:00+00:00")
    real = tmp_path / "real-history"
    append_history(run, real)
    elsewhere = outside.dir / "ocr.jsonl"
    elsewhere.write_bytes((real / "ocr.jsonl").read_bytes())
    before = elsewhere.read_bytes()
    hist = tmp_path / "history"
    hist.mkdir()
    (hist / "ocr.jsonl").symlink_to(elsewhere)
    site = tmp_path / "site"
    r = invoke("publish", str(hist), "-o", str(site))
    assert r.exit_code == 2 and "ocr.jsonl" in r.output and "link" in r.output, r.output
    assert not any(p.is_file() and "night-1" in p.read_text(errors="replace") for p in site.rglob("*"))
    r = invoke("report", str(run), "--history", str(hist))
    assert r.exit_code == 2 and "ocr.jsonl" in r.output and "link" in r.output, r.output
    r = invoke("history", "append", str(run), str(hist))
    assert r.exit_code == 2 and "link" in r.output, r.output
    assert elsewhere.read_bytes() == before and (hist / "ocr.jsonl").is_symlink()
    outside.untouched()
