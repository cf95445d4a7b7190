"""The user's repository as `ampbench bisect` reads it: revisions, the commits between them, a clone to check out.

Nothing here writes into the user's repository or its working tree: the commits are checked out in a
clone of ampbench's own (`git clone --shared`, which only reads the user's objects), every git call runs
with hooks switched off (`core.hooksPath` pointed at an empty folder), without a prompt, without optional
locks (`git status` never refreshes the user's index) and without the caller's GIT_* variables (a GIT_DIR
set by a hook would point every command at another repository); the repository itself must be a real
folder (a link is refused, as every path ampbench writes through is).

A command that changes a working tree (checkout, clean) runs only in a clone ampbench made, and only after
`own_clone` found it to be one: a real folder (no link) directly inside the bisect folder, its `.git` a
real folder holding the ownership token bisect.json records (written when the clone was made), and git
told exactly that `--git-dir` and `--work-tree`, so it never looks further up for a repository (a bisect
folder inside the user's repository, its clone removed, would otherwise check out in the user's tree).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ampbench.config import ConfigError
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, read_text
from ampbench.core.text import printable

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0"}
OWNER_FILE = "ampbench-owner"      # in a clone's .git/: the token of the search that made it
SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")   # a full commit id (SHA-1, or SHA-256 repositories)


def _env() -> dict[str, str]:
    """The caller's environment without its GIT_* variables (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE ... would
    redirect a command to another repository), plus ours."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **_GIT_ENV}


def git(where: Path, *args: str, check: bool = True, timeout: float = 120,
        tree: Path | None = None) -> subprocess.CompletedProcess[str]:
    """One git command in `where`, hooks off, no prompt; a failure raises CalledProcessError when `check`.
    `tree`: the command runs in that clone only (its own --git-dir and --work-tree, nothing discovered)."""
    hooks = Path(os.devnull)  # a file, not a folder: git finds no hook in it
    cmd = ["git", "-c", f"core.hooksPath={hooks}", "-c", "core.fsmonitor=false", "-C", str(where)]
    if tree is not None:
        cmd += [f"--git-dir={tree / '.git'}", f"--work-tree={tree}"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, check=check, env=_env())


@dataclass(frozen=True)
class Range:
    """good .. bad in history order (first parent), with one-line subjects."""

    root: Path
    commits: list[str]
    subjects: list[str]
    dirty: bool


def _rev(root: Path, key: str, rev: str | None) -> str:
    if not rev:
        raise ConfigError(key, "", "give a revision (a commit, tag or branch of --repo)")
    if rev.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in rev):
        raise ConfigError(key, printable(rev), "is not a revision (it starts with '-' or holds a control character)")
    out = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
    if out.returncode != 0:
        raise ConfigError(key, rev, f"no such commit in {root}")
    return out.stdout.strip()


def repo_root(repo: Path | None) -> Path:
    """--repo validated: a real folder inside a git working tree; its top folder (exit 2 on any problem)."""
    if repo is None:
        raise ConfigError("--repo", "", "give the git repository whose commits to search")
    if os.path.islink(repo):
        raise ConfigError("--repo", str(repo), "is a symbolic link: give the repository's real folder")
    if not Path(repo).is_dir():
        raise ConfigError("--repo", str(repo), "is not a folder")
    try:
        top = git(Path(repo), "rev-parse", "--show-toplevel", check=False)
    except (OSError, subprocess.SubprocessError) as e:
        raise ConfigError("--repo", str(repo), f"git cannot be run: {e}") from None
    if top.returncode != 0 or not top.stdout.strip():
        raise ConfigError("--repo", str(repo), "is not a git repository (with a working tree)")
    return Path(top.stdout.strip())


def commit_of(root: Path, key: str, rev: str | None) -> tuple[str, str]:
    """An option's revision as (full commit id, one-line subject), or exit 2 naming the option."""
    sha = _rev(root, key, rev)
    return sha, git(root, "log", "-1", "--format=%s", sha).stdout.strip()[:120]


def read_range(repo: Path | None, good: str | None, bad: str | None) -> Range:
    """Validate --repo, --good and --bad, and list the commits from good to bad (exit 2 on any problem)."""
    root = repo_root(repo)
    g, b = _rev(root, "--good", good), _rev(root, "--bad", bad)
    if g == b:
        raise ConfigError("--bad", str(bad), "is the same commit as --good")
    if git(root, "merge-base", "--is-ancestor", g, b, check=False).returncode != 0:
        raise ConfigError("--good", str(good), f"is not an ancestor of --bad {bad}: give an older good commit")
    listed = git(root, "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{g}..{b}").stdout.split()
    commits = [g, *listed]
    if commits[-1] != b:
        raise ConfigError("--bad", str(bad), f"is not on the first-parent line from {good}")
    refuse_submodules(root, commits)
    subjects = [git(root, "log", "-1", "--format=%s", c).stdout.strip()[:120] for c in commits]
    dirty = bool(git(root, "status", "--porcelain", "--untracked-files=no", check=False).stdout.strip())
    return Range(root=root, commits=commits, subjects=subjects, dirty=dirty)


def refuse_submodules(root: Path, commits: list[str], verb: str = "bisect") -> None:
    """A range whose endpoints hold submodules is refused before anything is made: bisect's (and pr-check's)
    clone checks out the superproject's commits only (a submodule's folder stays empty, its program files missing), and
    fetching submodules would reach the network and write their clones; one line that says what works."""
    for c in (commits[0], commits[-1]):
        tree = git(root, "ls-tree", "-r", "-z", "--full-tree", c, check=False).stdout
        mods = [e.split("\t", 1)[1] for e in tree.split("\0") if e.startswith("160000 ")]
        if mods:
            raise ConfigError("--repo", str(root), f"commit {c[:10]} holds git submodule(s) "
                              f"({', '.join(printable(m) for m in mods[:3])}{' ...' if len(mods) > 3 else ''}): "
                              f"{verb} checks out the repository's own files only; {verb} the submodule's "
                              "repository itself (its --repo, its commits), or a repository without them")


def new_token() -> str:
    return secrets.token_hex(16)


def clone(root: Path, dest: Path, token: str) -> None:
    """ampbench's own clone of the repository (objects shared read-only, no checkout yet), marked as this
    search's by `token` (its .git/ampbench-owner): what own_clone checks before anything changes it."""
    if os.path.lexists(dest):
        raise ResultsError(f"{dest}: already exists; bisect makes its clone in a new folder only")
    git(dest.parent, "clone", "--quiet", "--shared", "--no-checkout", "--", str(root), dest.name, timeout=600)
    atomic_write_text(dest / ".git" / OWNER_FILE, token + "\n", root=dest)


def own_clone(folder: Path, name: str, token: str) -> Path:
    """`folder/name` if it is a clone this search made (see the module's docstring), else ResultsError:
    nothing is checked out or cleaned anywhere else."""
    dest = Path(folder) / name
    for p, what in ((dest, "folder"), (dest / ".git", "git folder")):
        try:
            st = os.lstat(p)
        except OSError:
            raise ResultsError(f"{dest}: bisect's clone is missing; start a new search (ampbench bisect SUITE ...)") from None
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise ResultsError(f"{p}: not a real {what} (a link or a file): bisect checks out only in the clone it "
                               "made itself; nothing was changed there. Start a new search")
    try:
        mine = read_text(dest / ".git" / OWNER_FILE, "clone owner file", root=dest, limit=4096).strip()
    except ResultsError:
        mine = ""
    if not token or not secrets.compare_digest(mine, token):
        raise ResultsError(f"{dest}: not the clone this search made (its .git/{OWNER_FILE} does not hold the token "
                           "bisect.json records); nothing is checked out there. Start a new search")
    return dest


def checkout(folder: Path, name: str, token: str, sha: str) -> None:
    """Put `sha` in the clone's working tree, and nothing else (files a previous candidate made are removed);
    only in this search's own clone, `sha` a full commit id (never an option)."""
    if not SHA.match(sha):
        raise ResultsError(f"{folder}/bisect.json: commits: {printable(sha)[:80]!r} is not a full commit id")
    dest = own_clone(folder, name, token)
    git(dest, "checkout", "--quiet", "--force", "--detach", sha, "--", tree=dest)
    git(dest, "clean", "-ffdqx", tree=dest)
