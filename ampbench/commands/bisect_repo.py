"""The user's repository as `ampbench bisect` reads it: revisions, the commits between them, a clone to check out.

Nothing here writes into the user's repository or its working tree: the commits are checked out in a
clone of ampbench's own (`git clone --shared`, which only reads the user's objects), every git call runs
with hooks switched off (`core.hooksPath` pointed at an empty folder) and without a prompt, and the repository
itself must be a real folder (a link is refused, as every path ampbench writes through is).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ampbench.config import ConfigError

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


def git(where: Path, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One git command in `where`, hooks off, no prompt; a failure raises CalledProcessError when `check`."""
    hooks = Path(os.devnull)  # a file, not a folder: git finds no hook in it
    cmd = ["git", "-c", f"core.hooksPath={hooks}", "-c", "core.fsmonitor=false", "-C", str(where), *args]
    env = {**os.environ, **_GIT_ENV}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check, env=env)


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
    if rev.startswith("-") or any(ord(c) < 32 for c in rev):
        raise ConfigError(key, rev, "is not a revision (it starts with '-' or holds a control character)")
    out = git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
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
    subjects = [git(root, "log", "-1", "--format=%s", c).stdout.strip()[:120] for c in commits]
    dirty = bool(git(root, "status", "--porcelain", "--untracked-files=no", check=False).stdout.strip())
    return Range(root=root, commits=commits, subjects=subjects, dirty=dirty)


def clone(root: Path, dest: Path) -> None:
    """ampbench's own clone of the repository (objects shared read-only, no checkout yet)."""
    if not dest.exists():
        git(dest.parent, "clone", "--quiet", "--shared", "--no-checkout", str(root), dest.name, timeout=600)


def checkout(dest: Path, sha: str) -> None:
    """Put `sha` in the clone's working tree, and nothing else (files a previous candidate made are removed)."""
    git(dest, "checkout", "--quiet", "--force", "--detach", sha)
    git(dest, "clean", "-ffdqx")
