"""Issue 59, bisect's cases: a resumed search touches nothing but its own clone and folder, reads a bisect.json
only once it is valid, and shows a repository's text escaped.

The searches run through a stand-in for the trial layer only (`execute` copies a run folder that
tests/factories.py wrote for the code level of the commit in bisect's clone; bisect's real runs are tested in
tests/test_bisect.py): the clone, the checkouts, the folders and the checks are bisect's own. Each hostile
folder is planted after a real search finished, then `bisect --resume` runs: exit 2 and one line, nothing of
the user's repository (HEAD, an uncommitted edit, an untracked file) or of any folder outside changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from tests.test_bisect import PROGRAM, _git, _level_of, _repo, _suite, _templates

cli = CliRunner()
ESCAPES = ("\x1b", "\x07", "\u202e", "\x9b")


def invoke(*args: str):
    r = cli.invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def one_line_exit_2(r) -> None:
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """`execute` as the trial layer's stand-in; the run ids it was asked for."""
    from ampbench.commands import bisect as bisect_cmd

    templates = _templates(tmp_path)
    ran: list[str] = []

    def fake_execute(opts, console=None):
        ran.append(str(opts.run_id or opts.resume))
        if opts.resume is not None:
            return 0
        dest = Path(opts.out_dir) / "prog" / str(opts.run_id)
        shutil.copytree(templates / _level_of(opts.overrides), dest)
        info = json.loads((dest / "run.json").read_text())
        (dest / "run.json").write_text(json.dumps({**info, "run_id": opts.run_id}))
        return 0

    monkeypatch.setattr(bisect_cmd, "execute", fake_execute)
    return ran


class UserTree:
    """The user's repository with an uncommitted edit and an untracked file: HEAD, both files, the index."""

    def __init__(self, repo: Path):
        self.repo = repo
        (repo / "notes.txt").write_text("uncommitted edit\n")
        (repo / "untracked.txt").write_text("mine\n")
        self.head = _git(repo, "rev-parse", "HEAD")
        self.index = (repo / ".git" / "index").read_bytes()

    def untouched(self) -> None:
        assert _git(self.repo, "rev-parse", "HEAD") == self.head
        assert (self.repo / "notes.txt").read_text() == "uncommitted edit\n"
        assert (self.repo / "untracked.txt").read_text() == "mine\n"
        assert (self.repo / ".git" / "index").read_bytes() == self.index


def _finished_search(tmp: Path, sleeps=(0.010, 0.016, 0.016)) -> tuple[Path, Path, list[str]]:
    """A search run to its end by the stand-in: (its folder, the repository, its commits)."""
    repo, shas = _repo(tmp, list(sleeps))
    r = invoke("bisect", str(_suite(tmp, repo)), "--good", shas[0], "--bad", shas[-1], "--repo", str(repo),
               "--max-seeds", "3", "--out", str(tmp / "out"))
    assert r.exit_code == 1, r.output
    return next((tmp / "out").glob("prog/bisect-*")), repo, shas


def _forget_candidates(folder: Path, keep: int = 0) -> None:
    """bisect.json as a kill left it: the first `keep` candidates judged, the rest to run again."""
    doc = json.loads((folder / "bisect.json").read_text())
    doc.update(candidates=doc["candidates"][:keep], first_bad=None, last_good=None, wrong_step_bound=None)
    (folder / "bisect.json").write_text(json.dumps(doc))


# ---------------------------------------------------------------- 1. git only in bisect's own clone


def test_resume_never_checks_out_in_a_linked_src(tmp_path, stand_in):
    """src/ replaced by a link to the user's working tree: --resume refuses before any git command (on main
    `git checkout --force` and `git clean -ffdqx` ran there: the edit and the untracked file lost, HEAD moved)."""
    folder, repo, _ = _finished_search(tmp_path)
    user = UserTree(repo)
    _forget_candidates(folder)
    shutil.rmtree(folder / "src")
    (folder / "src").symlink_to(repo, target_is_directory=True)
    stand_in.clear()
    r = invoke("bisect", "--resume", str(folder))
    one_line_exit_2(r)
    assert "src" in r.output and stand_in == []
    user.untouched()


@pytest.mark.parametrize("plant", ["no-git", "foreign-clone", "gitfile"])
def test_resume_never_checks_out_in_a_folder_that_is_not_its_clone(tmp_path, stand_in, plant):
    """A src/ that is a real folder but not the clone this search made: its .git removed (git would find the
    repository the bisect folder sits in: here the user's own), another repository's clone (no ownership
    token), or a .git file pointing at the user's repository: refused, nothing checked out."""
    repo, shas = _repo(tmp_path, [0.010, 0.016, 0.016])
    out = repo / "results"   # the bisect folder inside the user's repository, as `ampbench bisect` run there makes it
    r = invoke("bisect", str(_suite(tmp_path, repo)), "--good", shas[0], "--bad", shas[-1], "--repo", str(repo),
               "--max-seeds", "3", "--out", str(out))
    assert r.exit_code == 1, r.output
    folder = next(out.glob("prog/bisect-*"))
    user = UserTree(repo)
    _forget_candidates(folder)
    src = folder / "src"
    if plant == "no-git":
        shutil.rmtree(src / ".git")
    elif plant == "foreign-clone":
        shutil.rmtree(src)
        subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(src)], check=True, capture_output=True)
    else:
        shutil.rmtree(src / ".git")
        (src / ".git").write_text(f"gitdir: {repo / '.git'}\n")
    stand_in.clear()
    r = invoke("bisect", "--resume", str(folder))
    one_line_exit_2(r)
    assert stand_in == []
    user.untouched()


def test_git_ignores_the_callers_git_variables(tmp_path, stand_in, monkeypatch):
    """GIT_DIR / GIT_WORK_TREE in the environment (ampbench started from a git hook) never send a checkout to the
    user's repository: each command is told its clone's --git-dir and --work-tree."""
    folder, repo, _ = _finished_search(tmp_path)
    user = UserTree(repo)
    _forget_candidates(folder)
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    r = invoke("bisect", "--resume", str(folder))
    assert r.exit_code == 1, r.output
    user.untouched()


# ---------------------------------------------------------------- 3. no write through a link in the bisect folder


def test_resume_never_writes_a_candidate_through_a_linked_runs_folder(tmp_path, stand_in):
    """runs/ (or runs/<suite>/) a link: refused before the runner writes a candidate's files through it."""
    folder, _, _ = _finished_search(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _forget_candidates(folder)
    shutil.rmtree(folder / "runs")
    (folder / "runs").symlink_to(elsewhere, target_is_directory=True)
    stand_in.clear()
    r = invoke("bisect", "--resume", str(folder))
    one_line_exit_2(r)
    assert "runs" in r.output and "symbolic link" in r.output and stand_in == []
    assert list(elsewhere.iterdir()) == []
    (folder / "runs").unlink()
    (folder / "runs").mkdir()
    (folder / "runs" / "prog").symlink_to(elsewhere, target_is_directory=True)
    one_line_exit_2(invoke("bisect", "--resume", str(folder)))
    assert list(elsewhere.iterdir()) == [] and stand_in == []


def test_resume_never_appends_to_a_linked_log(tmp_path, stand_in):
    folder, _, _ = _finished_search(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    (folder / "bisect.log").unlink()
    (folder / "bisect.log").symlink_to(secret)
    _forget_candidates(folder)
    r = invoke("bisect", "--resume", str(folder))
    one_line_exit_2(r)
    assert "bisect.log" in r.output and "symbolic link" in r.output
    assert secret.read_text() == "SECRET\n"


# ---------------------------------------------------------------- 9. a tampered bisect.json: validated before use


@pytest.mark.parametrize("edit,key", [
    ({"commits": []}, "commits"),
    ({"commits": ["--orphan=x", "--orphan=y", "--orphan=z"]}, "commits"),
    ({"commits": ["HEAD", "HEAD~1", "HEAD~2"]}, "commits"),
    ({"max_seeds": "DIGITS5000"}, "number"),
    ({"max_seeds": "DIGITS401"}, "number"),
    ({"suite": "../../../elsewhere"}, "suite"),
    ({"candidates": [{"index": 7, "sha": "0" * 40}]}, "candidates"),
    ({"candidates": [{"index": 0, "sha": "SHA0", "run_dir": "/etc"}]}, "run_dir"),
    ({"first_bad": 99}, "first_bad"),
])
def test_a_tampered_bisect_json_is_refused_in_one_line(tmp_path, stand_in, edit, key):
    """commits=[] (an IndexError on main), commits that git reads as options, a 5,000-digit integer (a ValueError
    traceback on main), a suite that names a path, candidates outside the range or run folders outside the
    search: exit 2, one line naming bisect.json, nothing run, the user's tree as it was."""
    folder, repo, shas = _finished_search(tmp_path)
    user = UserTree(repo)
    doc = json.loads((folder / "bisect.json").read_text())
    for c in edit.get("candidates", []):
        c["sha"] = shas[0] if c["sha"] == "SHA0" else c["sha"]
    doc.update(edit)
    text = json.dumps(doc).replace('"DIGITS5000"', "9" * 5000).replace('"DIGITS401"', "1" + "0" * 400)
    (folder / "bisect.json").write_text(text)
    stand_in.clear()
    r = invoke("bisect", "--resume", str(folder))
    one_line_exit_2(r)
    assert "bisect.json" in r.output and key in r.output, r.output
    assert stand_in == []
    user.untouched()


# ---------------------------------------------------------------- 7 and 9. a repository's text, a user's revision


def test_commit_subjects_reach_the_console_escaped(tmp_path, stand_in):
    """Subjects with a hyperlink, a screen clear, a C1 CSI and a right-to-left override: shown as visible escapes
    in every line bisect prints (on main they reached the terminal raw)."""
    repo, shas = _repo(tmp_path, [0.010, 0.010])
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (repo / "train.py").write_text(PROGRAM.format(sleep=0.016))   # the hostile commit is the slow one
    subject = "\u202e\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2J\x9b31m fix"
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-am", subject], check=True, env=env)
    bad = _git(repo, "rev-parse", "HEAD")
    r = invoke("bisect", str(_suite(tmp_path, repo)), "--good", shas[0], "--bad", bad, "--repo", str(repo),
               "--max-seeds", "3", "--out", str(tmp_path / "out"))
    assert r.exit_code == 1 and f"first bad commit: {bad}" in r.output, r.output
    assert not any(c in r.output for c in ESCAPES), repr(r.output)
    first_bad = next(ln for ln in r.output.splitlines() if ln.startswith("first bad commit"))
    assert "\\u202e\\x1b]8;;https://evil.example\\x07click" in first_bad, first_bad
    assert "\\u202e" in r.output.splitlines()[2], r.output   # the candidate's line


def test_a_newline_in_a_revision_is_refused_on_one_line(tmp_path):
    repo, _ = _repo(tmp_path, [0.01, 0.01])
    r = invoke("bisect", str(_suite(tmp_path, repo)), "--good", "main\nforged: line", "--bad", "main",
               "--repo", str(repo), "--out", str(tmp_path / "out"))
    one_line_exit_2(r)
    assert "--good" in r.output and "\\n" in r.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("verb", ["bisect", "pr-check"])
def test_a_repository_with_submodules_is_refused_with_advice_that_works(tmp_path, stand_in, monkeypatch, verb):
    """Bisect's clone checks out the superproject only (a submodule's folder stays empty: on main both endpoints
    crashed, with advice that could not work): refused before anything is made, in one line that names the
    submodule and what to do instead.  pr-check's clone is bisect's: the same (on main it ran both sides)."""
    from ampbench.commands import pr_check

    monkeypatch.setattr(pr_check, "execute", lambda opts, console=None: stand_in.append(str(opts.run_id)) or 0)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    sub = tmp_path / "libsub"
    sub.mkdir()
    _git(sub, "init", "-q", "-b", "main")
    (sub / "lib.py").write_text("X = 1\n")
    _git(sub, "add", "-A")
    _git(sub, "commit", "-q", "-m", "lib")
    repo, shas = _repo(tmp_path, [0.010, 0.016])
    subprocess.run(["git", "-C", str(repo), "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub),
                    "vendor/lib"], check=True, env=env, capture_output=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "vendor lib"], check=True, env=env)
    bad = _git(repo, "rev-parse", "HEAD")
    ends = ["--good", shas[0], "--bad", bad] if verb == "bisect" else ["--base", shas[0], "--head", bad]
    r = invoke(verb, str(_suite(tmp_path, repo)), *ends, "--repo", str(repo), "--out", str(tmp_path / "out"))
    one_line_exit_2(r)
    assert "submodule" in r.output and "vendor/lib" in r.output and "--repo" in r.output
    assert stand_in == [] and not any((tmp_path / "out").rglob("*"))


# ---------------------------------------------------------------- 8. one process a search


def test_a_second_resume_of_a_running_search_is_refused(tmp_path, stand_in):
    """Two `bisect --resume` of one folder at once would both run candidates and each rewrite bisect.json with
    its own (one's looks lost): the second is refused in one line while the first holds the search's lock."""
    import filelock

    from ampbench.core.store import lock_of

    folder, _, _ = _finished_search(tmp_path)
    _forget_candidates(folder)
    before = (folder / "bisect.json").read_bytes()
    with filelock.FileLock(lock_of(folder / "bisect.json"), timeout=0):
        stand_in.clear()
        r = invoke("bisect", "--resume", str(folder))
        one_line_exit_2(r)
        assert "another ampbench process" in r.output and stand_in == []
    assert (folder / "bisect.json").read_bytes() == before
    assert invoke("bisect", "--resume", str(folder)).exit_code == 1   # the lock released: it runs
