"""Issue 59: records a verdict rests on. A check.json edited to PASS is not read back as the verdict of record
(`check --recorded`, the report, `history append`, `nightly.sh --combine`); the manifest covers run.json and
the check files; concurrent `history append` / `history accept` keep every record; numbers no ampbench file
holds (a 5,000-digit integer, 10**400) and blank or control-character user text are refused or escaped in
one line, never a traceback.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.commands.history import (  # imported before the forks: children only work
    accept_level,
    append_history,
)
from ampbench.config import Suite
from ampbench.results.accepts import load_accepts
from ampbench.results.history import RunSummary, load_history
from ampbench.results.manifest import Manifest, load_manifest, note_record
from ampbench.results.run_dir import RunDir
from tests.factories import CPU_ENV, make_run, make_suite, make_trials

cli = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def invoke(*args: str):
    r = cli.invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def one_line_exit_2(r, *words: str) -> None:
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    for w in words:
        assert w in r.output, r.output


def _cpu_run(root: Path, run_id: str = "r1") -> Path:
    """A run whose AMP was inactive (CPU trials): its own check is INCONCLUSIVE, exit 3."""
    s = make_suite(seeds=(0, 1))
    return make_run(root, s, make_trials(s, n_steps=20, env=CPU_ENV, amp_active=False, config_hash=s.config_hash()),
                    run_id=run_id, env=CPU_ENV)


def _forge_all_pass(run: Path, name: str = "check.json") -> None:
    """What the adversary did: every rule and mode PASS, informational marks off, exit 0, the notes kept."""
    path = run / name
    doc = json.loads(path.read_text())
    for v in doc["verdicts"]:
        v["verdict"] = "PASS"
        for r in v["rules"]:
            r["status"], r["informational"] = "PASS", False
    doc["exit_code"] = 0
    path.write_text(json.dumps(doc))


def _with_manifest(run: Path) -> None:
    """The run's manifest as the runner leaves it (trial digests, then run.json noted at the run's end)."""
    m = Manifest(run)
    for p in RunDir(run).trial_files():
        m.record(p)
    RunDir(run).write_run(RunDir(run).load_run())


# ---------------------------------------------------------------- 5. no recorded PASS a file edit can forge


def test_check_recorded_refuses_a_check_json_edited_to_pass(work):
    """On main: "amp-o1-fp16 PASS -> exit 0" under the run's own "AMP inactive" note. Now exit 2, one line naming
    the file, the mode, what the trials give, and how to judge again; the report refuses it too."""
    run = _cpu_run(work / "runs")
    assert invoke("check", str(run)).exit_code == 3
    assert invoke("check", str(run), "--recorded").exit_code == 3
    _forge_all_pass(run)
    r = invoke("check", str(run), "--recorded")
    one_line_exit_2(r, "check.json", "amp-o1-fp16", "INCONCLUSIVE", "ampbench check")
    one_line_exit_2(invoke("report", str(run)), "check.json")
    one_line_exit_2(invoke("plan", str(run)), "check.json")
    one_line_exit_2(invoke("history", "append", str(run), str(work / "hist")), "check.json")
    assert not (work / "hist" / "toy.jsonl").exists()
    assert invoke("check", str(run)).exit_code == 3          # judging again is the remedy
    assert invoke("check", str(run), "--recorded").exit_code == 3


def test_a_forged_verdict_inconsistent_with_its_own_rules_is_refused(work):
    """A mode PASS over a FAIL rule, or exit 0 over an INCONCLUSIVE mode: refused without judging anything."""
    run = _cpu_run(work / "runs")
    invoke("check", str(run))
    doc = json.loads((run / "check.json").read_text())
    doc["exit_code"] = 0
    (run / "check.json").write_text(json.dumps(doc))
    one_line_exit_2(invoke("check", str(run), "--recorded"), "exit code 0")
    doc["exit_code"] = 3
    doc["verdicts"][1]["verdict"] = "PASS"
    (run / "check.json").write_text(json.dumps(doc))
    one_line_exit_2(invoke("check", str(run), "--recorded"), "amp-o1-fp16 is recorded PASS")


def _claims_run(root: Path) -> Path:
    """A run whose suite publishes two speedup claims (issue 60): 1.8x +-15% (confirmed by its trials) and 3x +-10%
    (refuted)."""
    data = make_suite(seeds=(0, 1, 2)).model_dump(mode="json")
    data["claims"] = [{"source": "guide", "mode": "amp-o1-fp16", "figure": "speedup", "value": v, "tolerance": t}
                      for v, t in ((1.8, 0.15), (3.0, 0.1))]
    s = Suite.model_validate(data)
    return make_run(root, s, make_trials(s, base_time={"fp32": 0.09, "amp-o1-fp16": 0.05},
                                         config_hash=s.config_hash()))


@pytest.mark.parametrize("edit", ["confirmed", "dropped", "interval"])
def test_check_recorded_claims_refuses_a_claim_edited_after_the_check(work, edit):
    """`check --recorded --claims` gates on the claims check.json holds: on main the refuted claim edited to
    confirmed (or dropped) gave exit 0. Now exit 2, one line naming the claim; a figure edited is refused too."""
    run = _claims_run(work / "runs")
    assert invoke("check", str(run), "--claims").exit_code == 1
    assert invoke("check", str(run), "--recorded", "--claims").exit_code == 1
    doc = json.loads((run / "check.json").read_text())
    assert [c["outcome"] for c in doc["claims"]] == ["confirmed", "refuted"]
    if edit == "confirmed":
        doc["claims"][1]["outcome"] = "confirmed"
    elif edit == "dropped":
        del doc["claims"][1]
    else:
        doc["claims"][0]["low"] = doc["claims"][0]["high"] = 1.8
    (run / "check.json").write_text(json.dumps(doc))
    r = invoke("check", str(run), "--recorded", "--claims")
    one_line_exit_2(r, "check.json", "claim", "ampbench check")
    one_line_exit_2(invoke("report", str(run)), "check.json")
    assert invoke("check", str(run), "--claims").exit_code == 1      # judging again is the remedy
    assert invoke("check", str(run), "--recorded", "--claims").exit_code == 1


def test_the_manifest_covers_the_check_files_and_run_json(work):
    """A run with a manifest: the check file's digest is recorded as it is written, so an edit that leaves the
    verdicts as the trials allow (a note, a figure) is still refused where it is read back; a run.json edited
    (a looser threshold) is refused by every verb that opens the run."""
    run = _cpu_run(work / "runs")
    _with_manifest(run)
    invoke("check", str(run))
    files = json.loads((run / "manifest.json").read_text())["files"]
    assert {"run.json", "check.json"} <= set(files) and any(k.startswith("trials/") for k in files)
    doc = json.loads((run / "check.json").read_text())
    doc["notes"] = ["AMP ran in float16 on this device."]
    (run / "check.json").write_text(json.dumps(doc))
    one_line_exit_2(invoke("check", str(run), "--recorded"), "check.json", "SHA-256")
    assert invoke("check", str(run)).exit_code == 3          # a new check is recorded anew
    assert invoke("check", str(run), "--recorded").exit_code == 3
    info = json.loads((run / "run.json").read_text())
    info["config"]["thresholds"]["min_speedup"] = 0.01
    (run / "run.json").write_text(json.dumps(info))
    one_line_exit_2(invoke("check", str(run)), "run.json", "SHA-256")


@pytest.mark.slow
def test_nightly_combine_does_not_trust_a_forged_check(tmp_path):
    """`nightly.sh --combine` reads a collected run's own check with `check --recorded`: a forged all-PASS
    check.json makes the night exit 2 (on main: 0, the forged PASS combined)."""
    import subprocess

    run = _cpu_run(tmp_path / "collected" / "machine-a" / "runs")
    invoke("check", str(run))
    _forge_all_pass(run)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "nightly.sh"), "--runs-only", "--out", str(tmp_path / "night"),
                        "--combine", str(tmp_path / "collected")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "200"}, cwd=ROOT, check=False)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "check.json" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- 8. concurrent writers keep every record


def _append_all(runs: list[str], hist: str, barrier) -> None:
    barrier.wait()
    for r in runs:
        append_history(Path(r), Path(hist))


def _accept(hist: str, run_id: str, barrier) -> None:
    barrier.wait()
    accept_level(Path(hist), by=f"person-{run_id}", why="intended", suite="toy", run=run_id)


def _processes(target, args_of: list[tuple]) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=target, args=args) for args in args_of]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


def test_concurrent_history_appends_keep_every_line(work):
    """8 processes, 3 runs each, released at once: 24 lines (on main 4-6 of 8 survived)."""
    s = make_suite(seeds=(0,))
    runs = [str(make_run(work / "runs", s, make_trials(s, n_steps=8, config_hash=s.config_hash()), run_id=f"n{i:02d}"))
            for i in range(24)]
    hist = work / "hist"
    barrier = multiprocessing.get_context("fork").Barrier(8)
    _processes(_append_all, [(runs[k::8], str(hist), barrier) for k in range(8)])
    assert sorted(h.run_id for h in load_history(hist / "toy.jsonl")) == [f"n{i:02d}" for i in range(24)]


def test_concurrent_accepts_keep_every_record(work):
    """10 `history accept` at once: 10 records (on main 3-7)."""
    hist = work / "hist"
    hist.mkdir()
    lines = [RunSummary.model_validate({"suite": "toy", "run_id": f"n{i:02d}", "started": f"2026-01-{i + 1:02d}T00:00:00Z",
                                        "modes": {"fp32": {"mode": "fp32", "samples_per_s": 100.0}}}).to_line()
             for i in range(10)]
    (hist / "toy.jsonl").write_text("\n".join(lines) + "\n")
    barrier = multiprocessing.get_context("fork").Barrier(10)
    _processes(_accept, [(str(hist), f"n{i:02d}", barrier) for i in range(10)])
    assert sorted(a.run_id for a in load_accepts(hist / "toy.jsonl")) == [f"n{i:02d}" for i in range(10)]


def test_concurrent_checks_keep_every_manifest_entry(work):
    """Checks that record their files in the run's manifest at once lose none of the entries."""
    run = _cpu_run(work / "runs")
    _with_manifest(run)
    names = [f"check-vs-b{i}.json" for i in range(8)]
    for n in names:
        (run / n).write_text(json.dumps({"n": n}))
    barrier = multiprocessing.get_context("fork").Barrier(8)

    def note(name: str) -> None:
        barrier.wait()
        for _ in range(5):
            note_record(run, run / name)

    _processes(note, [(n,) for n in names])
    assert set(names) <= set(load_manifest(run) or {})


# ---------------------------------------------------------------- 9. numbers no ampbench file holds


BIG = "9" * 5000
HUGE = "1" + "0" * 400


@pytest.mark.parametrize("digits", [BIG, HUGE], ids=["5000-digits", "10**400"])
def test_a_trial_file_with_an_endless_integer_is_refused(run_dir, digits):
    trial = min((run_dir / "trials").glob("*.json"))
    trial.write_text(trial.read_text().replace('"seed": 0', f'"seed": {digits}', 1))
    for verb in (["check", str(run_dir)], ["report", str(run_dir)], ["check", str(run_dir), "--recorded"]):
        one_line_exit_2(invoke(*verb), trial.name, "number")


@pytest.mark.parametrize("digits", [BIG, HUGE], ids=["5000-digits", "10**400"])
def test_history_and_accepts_with_an_endless_integer_are_refused(run_dir, work, digits):
    hist = work / "hist"
    assert invoke("history", "append", str(run_dir), str(hist)).exit_code == 0
    good = (hist / "toy.jsonl").read_text()
    (hist / "toy.jsonl").write_text(good + good.replace('"run_id":"r1"', '"run_id":"r2"').replace(
        '"trials":', f'"trials":{digits},"x":', 1))
    for verb in (["check", str(run_dir), "--history", str(hist)], ["publish", str(hist), "-o", str(work / "site")],
                 ["history", "accept", str(hist / "toy.jsonl"), "--by", "a", "--why", "b", "--run", "r1"]):
        one_line_exit_2(invoke(*verb), "toy.jsonl:2")
    (hist / "toy.jsonl").write_text(good)
    (hist / "toy.accepted.json").write_text('{"schema": "ampbench.history-accepts/1", "accepts": [], "n": ' + digits + "}")
    one_line_exit_2(invoke("check", str(run_dir), "--history", str(hist)), "toy.accepted.json", "number")


@pytest.mark.parametrize("key", ["train.steps", "suite.seeds", "workload.train_rows", "thresholds.min_speedup"])
@pytest.mark.parametrize("digits", [BIG, HUGE], ids=["5000-digits", "10**400"])
def test_a_suite_or_set_with_an_endless_integer_is_refused(work, key, digits):
    """--set (on main a ValueError traceback for 5,000 digits, an OverflowError for 10**400) and a suite file."""
    value = f"[{digits}]" if key == "suite.seeds" else digits
    r = invoke("run", "toy", "--set", f"{key}={value}", "--out", str(work / "runs"))
    one_line_exit_2(r, "--set", key.split(".")[-1])
    assert not (work / "runs").exists()
    suite = work / "s.toml"
    suite.write_text(f'[suite]\nname = "t"\nworkload = "toy"\nseeds = [{digits}]\n')
    one_line_exit_2(invoke("run", str(suite), "--out", str(work / "runs")), "s.toml")


# ---------------------------------------------------------------- 7 and 9. a person's text


@pytest.mark.parametrize("by,why,key", [("   ", "x", "--by"), ("alice", "\t\n ", "--why")])
def test_blank_by_or_why_is_refused(work, by, why, key):
    hist = work / "hist"
    hist.mkdir()
    (hist / "toy.jsonl").write_text(RunSummary.model_validate({"suite": "toy", "run_id": "n1"}).to_line() + "\n")
    one_line_exit_2(invoke("history", "accept", str(hist / "toy.jsonl"), "--by", by, "--why", why, "--run", "n1"), key)
    assert not (hist / "toy.accepted.json").exists()


def test_accept_text_reaches_the_terminal_escaped(work):
    """--by/--why with a hyperlink, a screen clear and a right-to-left override: recorded as given, echoed
    escaped on one line (on main: raw), and quoted escaped where `check --history` names the accepted level."""
    import numpy as np

    from tests.test_history_accept import _night

    suite = make_suite(seeds=[0, 1, 2])
    hist, rng = work / "hist", np.random.default_rng(3)
    for i in range(4):
        append_history(_night(work / "series", suite, f"a{i:02d}", 1.0, rng), hist)
    by, why = "\x1b]8;;https://evil.example\x07alice\x1b]8;;\x07", "new\nkernel \x1b[2J\u202eevil"
    r = invoke("history", "accept", str(hist), "--suite", "toy", "--run", "a01", "--by", by, "--why", why)
    assert r.exit_code == 0, r.output
    assert not any(c in r.output for c in ("\x1b", "\x07", "\u202e")), repr(r.output)
    assert len(r.output.strip().splitlines()) == 2 and "\\x1b]8;;https://evil.example" in r.output
    assert [(a.by, a.why) for a in load_accepts(hist / "toy.jsonl")] == [(by, why)]
    run = _night(work / "runs", suite, "c00", 1.0, rng)
    r = invoke("check", str(run), "--history", str(hist), "--explain")
    assert not any(c in r.output for c in ("\x1b", "\x07", "\u202e")), repr(r.output)
    assert "accepted from run a01 by \\x1b]8;;https://evil.example" in r.output.replace("\n", ""), r.output
