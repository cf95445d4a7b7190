"""`ampbench bisect`: the search's rule code under noise (simulated), and real searches over a git repository
of a small Paddle training program that the test makes (a planted slowdown at one commit)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.judge.bisection import Search, wrong_step_bound

cli = CliRunner()


# ---------------------------------------------------------------- the rule code, simulated


def _simulate(n: int, first_bad: int, rng: np.random.Generator, wrong: float, skip: float) -> tuple[int | None, int]:
    """One search against a noisy oracle: each look is skipped with `skip`, else wrong with `wrong`."""
    s = Search(n=n)
    looks = 0
    while (step := s.next_step()) is not None:
        looks += 1
        _look(s, step, first_bad, rng, wrong, skip)
    lo, hi = s.bounds()
    return (hi if hi == lo + 1 else None), looks


def _look(s: Search, step: tuple[str, int], first_bad: int, rng: np.random.Generator, wrong: float, skip: float) -> None:
    """The noisy oracle's verdict on one candidate, recorded."""
    role, i = step
    truth = "bad" if i >= first_bad else "good"
    u = rng.random()
    verdict = "skip" if u < skip else (("good" if truth == "bad" else "bad") if u < skip + wrong else truth)
    s.record(i, verdict, recheck=role == "recheck")  # type: ignore[arg-type]


@pytest.mark.parametrize("wrong,skip,floor", [(0.0, 0.0, 1.0), (0.01, 0.05, 0.95), (0.02, 0.05, 0.90)])
def test_noisy_search_names_the_planted_commit(wrong, skip, floor):
    """30 commits, the planted one anywhere: right in >= 90% of searches at 2% wrong / 5% undecided looks,
    within log2(N) + 4 evaluations on average (rechecks included), never a commit outside the range."""
    rng = np.random.default_rng(7)
    n, runs = 30, 400
    right, looks = 0, []
    for _ in range(runs):
        planted = int(rng.integers(1, n))
        named, k = _simulate(n, planted, rng, wrong, skip)
        right += named == planted
        looks.append(k)
        assert named is None or 1 <= named <= n - 1
    assert right / runs >= floor, right / runs
    assert np.mean(looks) <= math.log2(n) + 4, np.mean(looks)


def test_a_clean_search_takes_log2_steps_plus_the_rechecks():
    for planted in range(1, 17):
        named, looks = _simulate(17, planted, np.random.default_rng(0), 0.0, 0.0)
        assert named == planted
        assert looks <= math.ceil(math.log2(16)) + 2   # halving 16 gaps, then the boundary pair


def test_skipped_commits_leave_a_range_not_a_name():
    s = Search(n=5)
    while (step := s.next_step()) is not None:
        s.record(step[1], "skip", recheck=step[0] == "recheck")
    assert s.result() == (0, 4)   # every commit between undecided: the range, not a commit


def test_a_recheck_that_disagrees_moves_the_boundary():
    s = Search(n=9)
    s.record(4, "bad")
    s.record(2, "good")
    s.record(3, "bad")
    assert s.next_step() == ("recheck", 2)
    s.record(2, "bad", recheck=True)   # the first look at 2 was wrong
    assert s.next_step() == ("candidate", 1)


def test_an_undecided_recheck_keeps_the_first_look():
    """The looks of a real search (slowdown planted at 11): 10 good, 11 bad, then the recheck of 10 came back
    INCONCLUSIVE (slow episodes of the machine).  It must not erase 10's PASS: the search rechecks 11 and
    names it.  Before, 10 became a skip, was looked at again and the search named the range 10..11."""
    s = Search(n=30)
    for i, v in ((14, "bad"), (7, "good"), (10, "good"), (12, "bad"), (11, "bad")):
        assert s.next_step() == ("candidate", i)
        s.record(i, v)  # type: ignore[arg-type]
    assert s.next_step() == ("recheck", 10)
    s.record(10, "skip", recheck=True)
    assert s.verdicts[10] == "good" and s.next_step() == ("recheck", 11)
    s.record(11, "bad", recheck=True)
    assert s.next_step() is None and s.result() == (10, 11)
    s2 = Search(n=9, verdicts={3: "skip"})
    s2.record(3, "good", recheck=True)   # a retried skip that decides replaces the skip
    assert s2.verdicts[3] == "good"


def test_every_recheck_of_a_commit_is_a_new_run(tmp_path):
    """A commit looked at twice after its first look (a retried skip, then a boundary recheck) gets a new run
    each time: the same run id resumed the finished recheck and repeated its verdict on the same trials."""
    from ampbench.commands import bisect_search as b
    from ampbench.results.bisect_file import BisectFile, Candidate

    doc = BisectFile(suite="s", suite_file="s.toml", repo=str(tmp_path), good="a", bad="b", rule="history-throughput",
                     modes=["fp32"], max_seeds=6, commits=[f"{k:040d}" for k in range(5)])
    assert b.recheck_tag(doc, 2) == "-recheck"
    doc.candidates = [Candidate(index=2, sha=doc.commits[2], role="candidate", verdict="skip"),
                      Candidate(index=2, sha=doc.commits[2], role="recheck", verdict="good")]
    assert b.recheck_tag(doc, 2) == "-recheck2" and b.recheck_tag(doc, 3) == "-recheck"


def _simulate_k(n: int, first_bad: int, rng: np.random.Generator, wrong: float, skip: float, k: int
                ) -> tuple[int | None, int, int]:
    """One k-section search against the noisy oracle: (named, evaluations, rounds of wall time)."""
    s = Search(n=n)
    looks = rounds = 0
    while batch := s.next_batch(k):
        rounds += 1
        for step in batch:   # side by side: every verdict of the round comes back before the next round
            looks += 1
            _look(s, step, first_bad, rng, wrong, skip)
    lo, hi = s.bounds()
    return (hi if hi == lo + 1 else None), looks, rounds


@pytest.mark.parametrize("wrong,skip,floor", [(0.0, 0.0, 1.0), (0.02, 0.05, 0.90)])
def test_k_section_cuts_the_rounds_and_keeps_the_answer(wrong, skip, floor):
    """30 commits, the same planted commits for k = 1 and k = 3: three candidates a round name the planted
    commit as often, in at most 65% of the rounds (measured 3.9 vs 6.8 clean, 4.4 vs 7.6 at 2% wrong / 5%
    undecided), at the price of more evaluations (8.8 vs 6.8; 9.9 vs 7.6), within 3 log4(N) + 4."""
    n, runs = 30, 400
    got = {}
    for k in (1, 3):
        rng = np.random.default_rng(11)
        res = []
        for _ in range(runs):
            planted = int(rng.integers(1, n))
            named, looks, rounds = _simulate_k(n, planted, rng, wrong, skip, k)
            assert named is None or 1 <= named <= n - 1
            res.append((named == planted, looks, rounds))
        got[k] = np.mean(res, axis=0)
    for k in (1, 3):
        assert got[k][0] >= floor, (k, got[k])
    assert got[3][2] <= 0.65 * got[1][2], got
    assert got[1][1] < got[3][1] <= 3 * math.log(n, 4) + 4, got
    assert got[1][1] <= math.log2(n) + 4, got


def test_a_batch_of_one_is_the_sequential_search():
    """k = 1 takes exactly the steps next_step takes, through every state a noisy search passes."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        s, planted = Search(n=20), int(rng.integers(1, 20))
        while (step := s.next_step()) is not None:
            assert s.next_batch(1) == [step]
            u = rng.random()
            verdict = "skip" if u < 0.2 else ("bad" if (step[1] >= planted) != (u < 0.25) else "good")
            s.record(step[1], verdict, recheck=step[0] == "recheck")  # type: ignore[arg-type]
        assert s.next_batch(1) == []


def test_a_clean_k_section_cuts_the_range_into_k_plus_one_parts():
    for planted in range(1, 17):
        s = Search(n=17)
        first = s.next_batch(3)
        assert first == [("candidate", 4), ("candidate", 8), ("candidate", 12)]
        named, _, rounds = _simulate_k(17, planted, np.random.default_rng(0), 0.0, 0.0, 3)
        assert named == planted
        assert rounds <= 3   # 16 gaps -> 4 -> 1, then the boundary pair rechecked side by side


def test_the_wrong_step_bound_sums_every_decision():
    assert wrong_step_bound({0: "good", 1: "bad", 2: "skip", 3: "bad"}, 0.01, 0.05) == pytest.approx(0.07)
    assert wrong_step_bound({i: "bad" for i in range(200)}, 0.01, 0.05) == 1.0


# ---------------------------------------------------------------- a real repository, real runs

PROGRAM = '''
import argparse, json, os, time
import paddle
SLEEP = {sleep}
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int); ap.add_argument("--seed", type=int); ap.add_argument("--out")
a = ap.parse_args()
paddle.seed(a.seed)
model = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=model.parameters(), learning_rate=0.1)
for i in range(a.steps):
    x = paddle.randn([16, 8])
    loss = model(x).mean()
    loss.backward()
    time.sleep(SLEEP)
    opt.step()
    opt.clear_grad()
with open(os.path.join(a.out, "metrics.json"), "w") as f:
    json.dump({{"accuracy": 0.5}}, f)
'''


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def _repo(tmp: Path, sleeps: list[float]) -> tuple[Path, list[str]]:
    """A repository whose commit k sets the program's per-step sleep to sleeps[k]; its commits, oldest first."""
    repo = tmp / "proj"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for k, s in enumerate(sleeps):
        (repo / "train.py").write_text(PROGRAM.format(sleep=s))
        (repo / "notes.txt").write_text(f"commit {k}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"change {k}" + (" (slower)" if k and s > sleeps[k - 1] else ""))
        shas.append(_git(repo, "rev-parse", "HEAD"))
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {tmp}/HOOK-RAN\n")
    hook.chmod(0o755)
    return repo, shas


def _suite(tmp: Path, repo: Path, steps: int = 40) -> Path:
    p = tmp / "suite.toml"
    p.write_text(f"""
[suite]
name = "prog"
workload = "command"
metric = "accuracy"
seeds = [0, 1, 2]

[workload]
command = ["{sys.executable}", "train.py", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"]
cwd = "{repo}"
metric = {{ preset = "json", json_file = "{{out}}/metrics.json" }}

[train]
batch_size = 16
steps = {steps}
warmup_steps = 4
timeout_s = 300

[[modes]]
name = "fp32"

# the program sleeps its steps (CPU share ~0.07): the other test workers' load beside it cannot slow it, but
# the load evidence cannot tell it from a starved CPU-bound program and would withhold every look on a busy CI
[thresholds]
history_withhold_disturbed = false
""")
    return p


@pytest.mark.slow
def test_bisect_names_the_planted_slowdown_on_real_runs(tmp_path):
    """3 commits, commit 1 makes every step ~45% slower: bisect names commit 1 (after both endpoints, the one
    candidate and its recheck), its record and bisect.md say so, nothing of the user's repository changed (no
    hook ran, HEAD and the dirty tree as they were); resumed, it runs nothing again; with --good already slow
    it names no commit."""
    repo, shas = _repo(tmp_path, [0.010, 0.016, 0.016])
    (repo / "notes.txt").write_text("uncommitted edit\n")   # a dirty tree: read, never touched
    head = _git(repo, "rev-parse", "HEAD")
    out = tmp_path / "out"
    suite = _suite(tmp_path, repo)
    r = cli.invoke(app, ["bisect", str(suite), "--good", shas[0], "--bad", "main", "--repo", str(repo),
                         "--max-seeds", "3", "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert f"first bad commit: {shas[1]}" in r.output, r.output
    folder = next(out.glob("prog/bisect-*"))
    doc = json.loads((folder / "bisect.json").read_text())
    assert doc["schema"] == "ampbench.bisect/1" and doc["commits"][doc["first_bad"]] == shas[1]
    assert [c["role"] for c in doc["candidates"]] == ["good-endpoint", "bad-endpoint", "candidate", "recheck"]
    assert 0 < doc["wrong_step_bound"] < 0.5
    md = (folder / "bisect.md").read_text()
    assert shas[1] in md and "GbB\n ^" in md, md
    assert "uncommitted changes" in r.output
    assert not (tmp_path / "HOOK-RAN").exists()
    assert _git(repo, "rev-parse", "HEAD") == head and (repo / "notes.txt").read_text() == "uncommitted edit\n"

    again = cli.invoke(app, ["bisect", "--resume", str(folder)], env={"COLUMNS": "200"})
    assert again.exit_code == 1 and f"first bad commit: {shas[1]}" in again.output, again.output
    assert len(json.loads((folder / "bisect.json").read_text())["candidates"]) == len(doc["candidates"])

    # the slowdown is older than --good: the endpoints bracket no change, so no commit is named
    r = cli.invoke(app, ["bisect", str(suite), "--good", shas[1], "--bad", shas[2], "--repo", str(repo),
                         "--max-seeds", "3", "--out", str(tmp_path / "out2")], env={"COLUMNS": "200"})
    assert r.exit_code == 3, r.output
    assert "is not bad against" in r.output and "first bad commit" not in r.output


@pytest.mark.parametrize("args,key", [
    (["--good", "nope", "--bad", "main"], "--good"),
    (["--good", "--upload-pack=x", "--bad", "main"], "--good"),
    (["--good", "main", "--bad", "main"], "--bad"),
    (["--good", "HEAD", "--bad", "HEAD~1"], "--good"),
])
def test_bad_revisions_are_one_line_exit_2(tmp_path, args, key):
    repo, _ = _repo(tmp_path, [0.01, 0.01, 0.01])
    r = cli.invoke(app, ["bisect", str(_suite(tmp_path, repo)), *args, "--repo", str(repo),
                         "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and key in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("bisect.json"))


def test_a_linked_repo_or_a_program_outside_it_is_refused(tmp_path):
    repo, shas = _repo(tmp_path, [0.01, 0.01])
    link = tmp_path / "link"
    link.symlink_to(repo)
    r = cli.invoke(app, ["bisect", str(_suite(tmp_path, repo)), "--good", shas[0], "--bad", shas[1],
                         "--repo", str(link), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "symbolic link" in r.output, r.output
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = cli.invoke(app, ["bisect", str(_suite(tmp_path, other)), "--good", shas[0], "--bad", shas[1],
                         "--repo", str(repo), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "workload.cwd" in r.output and "not inside --repo" in r.output, r.output


# ---------------------------------------------------------------- `history bisect`: the nightly's newest regression


def _nights(tmp: Path, shas: list[str], levels: list[float], per_commit: int = 6, failed: tuple[int, ...] = (),
            accepted: int | None = None) -> Path:
    """A history of suite "prog": `per_commit` nights on each commit, fp32 throughput at exp(level) x 1000
    (1.5% noise); commits given as "" are not recorded.  The nights of the commits in `failed` are recorded as
    check --history FAILed them (held out); `accepted`: a person accepted the level of that commit's first night
    when its nights were in (results.accepts)."""
    from ampbench.results.accepts import AcceptRecord, add_accept
    from ampbench.results.history import RunSummary

    rng = np.random.default_rng(3)
    lines = []
    for i in range(per_commit * len(shas)):
        k = i // per_commit
        v = 1000.0 * math.exp(levels[k] + rng.normal(0, 0.015))
        verdict = {"history_status": "FAIL", "history_hold": "fail", "history_change": levels[k]} if k in failed else \
            {"history_status": "PASS"}
        lines.append(RunSummary.model_validate({
            "suite": "prog", "run_id": f"night-{i:02d}", "started": f"2026-10-{i + 1:02d}T02:00:00Z",
            "config_hash": "sha256:aaaa", "git_sha": shas[k], "modes": {"fp32": {
                "mode": "fp32", "trials": 3, "ok": 3, "samples_per_s": v,
                "samples_per_s_ci": [v * 0.99, v * 1.01], **verdict}}}).to_line())
    hist = tmp / "history"
    hist.mkdir(exist_ok=True)
    (hist / "prog.jsonl").write_text("\n".join(lines) + "\n")
    if accepted is not None:
        first = accepted * per_commit
        add_accept(hist / "prog.jsonl", AcceptRecord(
            suite="prog", run_id=f"night-{first:02d}", by="ops", why="the new driver", at="2026-10-20T00:00:00Z",
            cleared=[f"night-{i:02d}" for i in range(first, first + per_commit)]))
    return hist


def test_history_bisect_refuses_a_history_without_a_regression_or_commits(tmp_path):
    """No regression (a slower level no night FAILed is none: judge.series), a regression whose nights record no
    commit, or one between nights of the same commit: one line naming the history file, exit 2, nothing created."""
    repo, shas = _repo(tmp_path, [0.01, 0.01])
    suite = _suite(tmp_path, repo)
    for levels, commits, failed, what in (([0.0, 0.0], shas, (), "no regression"),
                                          ([0.0, -0.15], shas, (), "no regression"),
                                          ([0.0, -0.15], ["", ""], (1,), "git_sha"),
                                          ([0.0, -0.15], [shas[0], shas[0]], (1,), "two nights of one commit")):
        hist = _nights(tmp_path, commits, levels, failed=failed)
        r = cli.invoke(app, ["history", "bisect", str(suite), "--history", str(hist), "--repo", str(repo),
                             "--out", str(tmp_path / "out")])
        assert r.exit_code == 2 and what in r.output and str(hist / "prog.jsonl") in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
        assert not (tmp_path / "out").exists()


def _templates(tmp: Path) -> Path:
    """A run folder of each code level of `_repo` (0.010 and 0.016 s a step), as the runner writes them
    (tests/factories.py, fake GPU trials, little noise): what a stand-in for the trial layer hands back."""
    from tests.factories import StepNoise, make_run, make_suite, make_trials

    suite = make_suite(modes=("fp32",), name="prog")
    for sleep in (0.010, 0.016):
        trials = make_trials(suite, base_time={"fp32": 5 * sleep}, rng=np.random.default_rng(1),
                             noise=StepNoise(step_sd=0.01, trial_sd=0.002, stall_rate=0.0))
        make_run(tmp / "templates", suite, trials, run_id=str(sleep))
    return tmp / "templates" / "prog"


def _level_of(overrides: list[str]) -> str:
    """The per-step sleep of the commit checked out where the run's workload.cwd points (bisect's clone)."""
    import re

    cwd = json.loads(next(o.split("=", 1)[1] for o in overrides if o.startswith("workload.cwd=")))
    return re.search(r"SLEEP = (\S+)", (Path(cwd) / "train.py").read_text()).group(1)


def test_history_bisect_searches_the_newest_regression_of_the_nightly(tmp_path, monkeypatch):
    """Nights on 3 commits with two slowdown steps (10% each), both FAILed by check --history; the code only slows
    at commit 2 (the first step's range holds no change: the environment moved, and a person accepted that level).
    `history bisect` takes the newest regression's range, the night before it (commit 1, accepted) to its first
    night, commits 1..2, and names commit 2.  A stand-in for the trial layer only (bisect's real runs are
    tested above; a real history bisect took 42 s wall, 25 CPU s): `execute` hands back a factory-made run
    folder of the level of the commit in bisect's clone; the check against the good endpoint is real."""
    import shutil

    from ampbench.commands import bisect_look

    templates = _templates(tmp_path)
    ran = []

    def fake_execute(request, policies=None, console=None):
        ran.append(request.run_id)
        dest = Path(request.out_dir) / "prog" / str(request.run_id)
        shutil.copytree(templates / _level_of(list(request.overrides)), dest)
        info = json.loads((dest / "run.json").read_text())
        (dest / "run.json").write_text(json.dumps({**info, "run_id": request.run_id}))
        return 0

    monkeypatch.setattr(bisect_look, "execute", fake_execute)
    repo, shas = _repo(tmp_path, [0.010, 0.010, 0.016])
    hist = _nights(tmp_path, shas, [0.0, -0.1, -0.2], failed=(1, 2), accepted=1)
    r = cli.invoke(app, ["history", "bisect", str(_suite(tmp_path, repo)), "--history", str(hist), "--repo",
                         str(repo), "--max-seeds", "4", "--out", str(tmp_path / "out")], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert f"commits {shas[1][:10]}..{shas[2][:10]}" in r.output and f"first bad commit: {shas[2]}" in r.output
    doc = json.loads(next((tmp_path / "out").glob("prog/bisect-*/bisect.json")).read_text())
    assert doc["commits"] == shas[1:] and doc["modes"] == ["fp32"] and doc["rule"] == "history-throughput"
    assert [x[:3] for x in ran] == ["000", "001"]   # the two endpoints of the last step's range


# ---------------------------------------------------------------- --parallel K: candidates side by side

STUB_CHILD = '''
import json, os, re, shutil, subprocess, sys, time
from pathlib import Path
opts = json.loads(Path(sys.argv[1]).read_text())["request"]
run_id = opts["run_id"]
cwd = json.loads(next(o.split("=", 1)[1] for o in opts["overrides"] if o.startswith("workload.cwd=")))
sleep = re.search(r"SLEEP = (\\S+)", (Path(cwd) / "train.py").read_text()).group(1)
t0 = time.time()
time.sleep(0.6)
dest = Path(opts["out_dir"]) / "prog" / run_id
shutil.copytree(Path({templates!r}) / sleep, dest)
info = json.loads((dest / "run.json").read_text())
info["run_id"] = run_id
(dest / "run.json").write_text(json.dumps(info))
with open({timeline!r}, "a") as f:
    head = subprocess.run(["git", "-C", cwd, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    f.write(json.dumps([run_id, os.environ.get("CUDA_VISIBLE_DEVICES"), t0, time.time(), cwd, head]) + "\\n")
'''


def test_parallel_needs_a_device_per_candidate(tmp_path):
    """No GPU here: --parallel 2 is refused in one line before anything is written; --devices alone too."""
    repo, shas = _repo(tmp_path, [0.01, 0.01])
    for extra, key in ((["--parallel", "2"], "--parallel"), (["--devices", "all"], "--devices")):
        r = cli.invoke(app, ["bisect", str(_suite(tmp_path, repo)), "--good", shas[0], "--bad", shas[1],
                             "--repo", str(repo), "--out", str(tmp_path / "out"), *extra])
        assert r.exit_code == 2 and key in r.output and "Traceback" not in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1, r.output
        assert not any((tmp_path / "out").rglob("bisect.json"))


def test_k_section_runs_a_round_side_by_side_each_in_its_clone(tmp_path, monkeypatch):
    """A stand-in for the trial layer only (the real-run test is above): 3 devices, --parallel 3, a 5-commit
    repository slowed at commit 2.  Each child is the stub (after 0.6 s, a copy of a run folder written by
    tests/factories.py for its commit's code level); the pool scheduling, the clones, the devices, the real check against the good endpoint's baseline
    and the search are bisect's own.  The first round's 3 candidates overlap in time, each on its own device
    and in its own clone holding its commit, and the planted commit is named in 2 rounds after the endpoints
    (sequentially: 3 candidates, then the rechecks)."""
    from ampbench.commands import bisect as bisect_cmd
    from ampbench.engine import side_by_side

    repo, shas = _repo(tmp_path, [0.010, 0.010, 0.016, 0.016, 0.016])
    timeline = tmp_path / "timeline.jsonl"
    stub = tmp_path / "stub_child.py"
    stub.write_text(STUB_CHILD.format(templates=str(_templates(tmp_path)), timeline=str(timeline)))
    monkeypatch.setattr(bisect_cmd, "device_pool", lambda text, recorded=None: ["g0", "g1", "g2"])
    monkeypatch.setattr(side_by_side, "child_command", lambda path: [sys.executable, str(stub), str(path)])
    r = cli.invoke(app, ["bisect", str(_suite(tmp_path, repo)), "--good", shas[0], "--bad", shas[4], "--repo",
                         str(repo), "--parallel", "3", "--devices", "all", "--out", str(tmp_path / "out")],
                   env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert f"first bad commit: {shas[2]}" in r.output and "3 candidates a round" in r.output, r.output
    every = [json.loads(x) for x in timeline.read_text().splitlines()]
    rows = [x for x in every if not x[0].startswith("ballast")]   # the filler runs beside the looks (issue 58.3)
    first = rows[2:5]   # after the two endpoints: commits 1, 2, 3 (4 gaps cut into 4 parts)
    assert sorted(x[0][:3] for x in first) == ["001", "002", "003"], rows
    assert max(x[2] for x in first) < min(x[3] for x in first), first   # all three ran at the same time
    assert sorted(x[1] for x in first) == ["g0", "g1", "g2"], first
    clones = {x[0][:3]: Path(x[4]) for x in first}
    assert len(set(clones.values())) == 3
    for x in first:   # each ran its commit, in its clone (checked out as it started)
        assert x[5] == shas[int(x[0][:3])]
    doc = json.loads(next((tmp_path / "out").glob("prog/bisect-*/bisect.json")).read_text())
    assert doc["parallel"] == 3 and doc["devices"] == ["g0", "g1", "g2"]
    roles = [c["role"] for c in doc["candidates"]]
    assert roles == ["good-endpoint", "bad-endpoint", "candidate", "candidate", "candidate", "recheck", "recheck"]
    # like with like (issue 58.3): the reference ran as crowded as every candidate, each look on its own device
    crowding = {(c["role"], c["index"]): c["crowding"] for c in doc["candidates"]}
    assert all(c is not None and 2.6 <= c <= 3.0 for c in crowding.values()), crowding
    ref = crowding[("good-endpoint", 0)]
    assert all(abs(c - ref) <= 0.3 for c in crowding.values()), crowding
    assert all(len(c["devices"]) == 1 and c["devices"][0] in ("g0", "g1", "g2") for c in doc["candidates"])
    good = rows[0]
    beside = [x for x in every if x[0].startswith("ballast") and x[2] < good[3] and x[3] > good[2]]
    assert len({x[1] for x in beside}) == 2 and good[1] not in {x[1] for x in beside}, (good, beside)
    folder = next((tmp_path / "out").glob("prog/bisect-*"))
    assert not list(folder.glob("ballast/*"))   # filler runs are removed
    assert "runs side by side)" in (folder / "bisect.md").read_text()


def test_a_candidate_child_reads_back_the_runner_options_bisect_wrote(tmp_path):
    """What side_by_side writes (the request and its policies as JSON) is what the child hands the engine."""
    from ampbench.engine import child, side_by_side
    from ampbench.engine.execute import Policies
    from ampbench.engine.launchers.local import LocalLauncher
    from ampbench.engine.request import Output, RunRequest
    from ampbench.engine.seeds.search import SearchSeeds

    request = RunRequest(suite_file=tmp_path / "s.toml", overrides=('workload.cwd="/x"',), out_dir=tmp_path / "runs",
                         run_id="001-abc")
    policies = Policies(launcher=LocalLauncher(devices="all"),
                        seeds=SearchSeeds(max_seeds=5, rules=("history-throughput",), modes=("fp32",)),
                        output=Output(report=False, baseline=tmp_path / "b.json"))
    side = side_by_side.SideRun(1, side_by_side.options_json(request, policies), tmp_path / "o.json", tmp_path / "o.log")
    side_by_side.atomic_write_text(side.options_path, json.dumps(side.options))
    assert child.options_from(side.options_path) == (request, policies)


def test_a_candidates_seeds_are_added_for_the_searched_rule_only(tmp_path):
    """Every run bisect starts (new or resumed) asks until-decided about its rule in its modes only."""
    import io

    from rich.console import Console

    from ampbench.commands import bisect_look as b
    from ampbench.results.bisect_file import BisectFile

    doc = BisectFile(suite="s", suite_file=str(tmp_path / "s.toml"), repo=str(tmp_path), good="a", bad="b",
                     rule="history-metric", modes=["fp32"], max_seeds=6, commits=["a" * 40, "b" * 40, "c" * 40])
    ctx = b.Ctx(tmp_path, doc, tmp_path / "s.toml", None, [], Console(file=io.StringIO()), io.StringIO())
    new = b.look_request(ctx, 1, "", [])
    (tmp_path / "runs" / "s" / b.run_id_of(ctx, 1, "")[0]).mkdir(parents=True)
    (tmp_path / "runs" / "s" / b.run_id_of(ctx, 1, "")[0] / "run.json").write_text("{}")
    resumed = b.look_request(ctx, 1, "", [])
    assert resumed[0].resume is not None and new[0].resume is None
    for _request, policies in (new, resumed):
        assert (policies.seeds.rules, policies.seeds.modes) == (("history-metric",), ("fp32",))


def test_the_reference_of_a_history_rule_runs_max_seeds_seeds(tmp_path):
    """The good endpoint's trials are every comparison's baseline: it runs the suite's seeds extended to
    --max-seeds; a candidate starts at the suite's (until-decided adds its own)."""
    import io

    from rich.console import Console

    from ampbench.commands import bisect_look as b
    from ampbench.engine.execute import load_for_run
    from ampbench.results.bisect_file import BisectFile

    (tmp_path / "proj").mkdir()
    suite = _suite(tmp_path, tmp_path / "proj")
    for rule, want in (("history-throughput", [0, 1, 2, 3, 4, 5]), ("speedup", None)):
        doc = BisectFile(suite="s", suite_file=str(suite), repo=str(tmp_path), good="a", bad="b", rule=rule,
                         modes=["fp32"], max_seeds=6, commits=["a" * 40, "b" * 40, "c" * 40])
        ctx = b.Ctx(tmp_path, doc, suite, None, [], Console(file=io.StringIO()), io.StringIO())
        for index, expect in ((0, want), (1, None)):
            request, policies = b.look_request(ctx, index, "", [])
            assert policies.seeds.initial(load_for_run(request).suite) == expect


def test_an_interrupt_stops_every_candidate_child(tmp_path, monkeypatch):
    """Ctrl-C while two candidates run side by side: both children's trees are killed before the interrupt
    reaches bisect (which keeps the round for --resume)."""
    import signal
    import threading
    import time

    from ampbench.engine import side_by_side

    pids = tmp_path / "pids"
    stub = tmp_path / "sleeper.py"
    stub.write_text(f"import os, time\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\ntime.sleep(60)\n")
    monkeypatch.setattr(side_by_side, "child_command", lambda path: [sys.executable, str(stub)])
    runs = [side_by_side.SideRun(i, {}, tmp_path / f"{i}.json", tmp_path / f"{i}.log") for i in (1, 2)]

    def interrupt() -> None:
        while not pids.exists() or len(pids.read_text().split()) < 2:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        side_by_side.run_side_by_side(runs, ["g0", "g1"], 1)
    assert time.monotonic() - started < 30
    for pid in map(int, pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
