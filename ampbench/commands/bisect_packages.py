"""`ampbench bisect SUITE --package NAME=A..B` (`--paddle A..B`): the range is the versions of a package.

The versions come from the user's own package index, asked through pip itself (`pip index versions`, with
the user's --index-url / --find-links / --no-index, and their pip configuration), sorted with
packaging.version; A and B must both be offered, A before B.  Each candidate version gets its own
environment inside the bisect folder (`envs/<version>/`): a virtual environment of the suite's own
interpreter (`workload.command[0]`, made with the standard `venv` module, `--system-site-packages` and a
`.pth` naming the interpreter's own site folders, so the rest of the stack -- Paddle's dependencies, the
program's -- is shared and only the package differs), then `pip install --no-deps --ignore-installed
NAME==V` into it from the same index.  The user's interpreter is only ever read (pip runs under the new
environment's Python, `--ignore-installed`: nothing is uninstalled anywhere), and an environment finished
once (`.ampbench-ready` written after the install was verified) is reused on `--resume`; one a kill left
half made is made again.  The suite's program runs with the environment's Python in place of
`workload.command[0]`.

Why pip and not an index client of our own: the user's index may be a mirror, a folder of wheels or an
authenticated proxy that only their pip configuration reaches; pip is what installs from it anyway.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ampbench.config import ConfigError, Suite
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, refuse_link

PADDLE = "paddlepaddle"
READY = ".ampbench-ready"
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_PIP_QUIET = ["--disable-pip-version-check", "--no-input"]
_PIP_ENV = {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
_UNREACHABLE = ("Could not fetch URL", "Retrying", "NewConnectionError", "ConnectionError", "Max retries",
                "Name or service not known", "Failed to establish", "timed out")
_PROBE = ("import json, site, sys, sysconfig; p = sysconfig.get_paths(); "
          "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], "
          "'site': [*site.getsitepackages(), p['purelib'], p['platlib']]}))")


@dataclass(frozen=True)
class PackageRange:
    """What `--package NAME=A..B` and the index options ask for."""

    name: str
    low: str
    high: str
    index: list[str]           # pip's index options, as given: --index-url URL / --find-links DIR / --no-index


@dataclass(frozen=True)
class Versions:
    """The versions the index offers from A to B (both included, sorted) and the interpreter they run on."""

    name: str
    versions: list[str]
    index: list[str]
    python: str


def parse_range(package: str | None, paddle: str | None) -> tuple[str, str, str] | None:
    """`NAME=A..B` or (`--paddle`) `A..B` -> (name, A, B); None when neither was given."""
    if package is not None and paddle is not None:
        raise ConfigError("--paddle", paddle, "is --package paddlepaddle=A..B: give one of --paddle, --package")
    if package is None and paddle is None:
        return None
    key, text = ("--paddle", f"{PADDLE}={paddle}") if paddle is not None else ("--package", str(package))
    name, eq, span = text.partition("=")
    low, dots, high = span.partition("..")
    if not eq or not dots or not _NAME.match(name.strip()) or not low.strip() or not high.strip():
        raise ConfigError(key, (paddle if paddle is not None else text)[:80],
                          "expected NAME=A..B (e.g. --package paddlepaddle=3.2.0..3.3.1, or --paddle 3.2.0..3.3.1)")
    for v in (low, high):
        try:
            Version(v)
        except InvalidVersion:
            raise ConfigError(key, v.strip()[:40], "is not a version (PEP 440, e.g. 3.2.0)") from None
    if Version(low) >= Version(high):
        raise ConfigError(key, f"{low}..{high}", "the range must go from an older version to a newer one (A < B)")
    return name.strip(), low.strip(), high.strip()


def index_options(index_url: str | None, find_links: str | None, no_index: bool) -> list[str]:
    """pip's options for the user's index (none: pip's own configuration decides)."""
    out: list[str] = []
    if index_url is not None:
        if not re.match(r"^(https?|file)://\S+$", index_url):
            raise ConfigError("--index-url", index_url[:80], "expected an http(s):// or file:// URL")
        out += ["--index-url", index_url]
    if find_links is not None:
        if not re.match(r"^https?://", find_links):
            where = Path(find_links)
            if not where.is_dir():
                raise ConfigError("--find-links", find_links[:80], "is not a folder of wheels (nor an http(s) URL)")
            find_links = str(where.resolve())
        out += ["--find-links", find_links]
    if no_index:
        if find_links is None:
            raise ConfigError("--no-index", "", "needs --find-links DIR: where else would the versions come from?")
        out.append("--no-index")
    return out


def interpreter(suite: Suite) -> str:
    """The suite's Python (`workload.command[0]`, found as the run would find it), checked to run as Python."""
    command = [str(c) for c in suite.workload.get("command", [])]
    if not command:
        raise ConfigError("workload.command", "", "is empty")
    first = command[0]
    cwd = Path(str(suite.workload.get("cwd") or "."))
    found = str((cwd / first).resolve()) if "/" in first and not os.path.isabs(first) else shutil.which(first)
    why = "not found" if not found else ""
    info = _probe(found) if found else {}
    if found and not info:
        why = "does not run as a Python interpreter"
    if why or not found:
        raise ConfigError("workload.command", first[:80], f"{why}: --package makes each candidate's environment "
                          "from the suite's interpreter, command[0] (the Python that runs your program)")
    return found


def _pip(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **_PIP_ENV}, stdin=subprocess.DEVNULL)


def _index_key(index: list[str]) -> tuple[str, str]:
    for key in ("--index-url", "--find-links"):
        if key in index:
            return key, index[index.index(key) + 1]
    return "--package", "pip's configured index"


def list_versions(python: str, name: str, index: list[str], pre: bool) -> list[str]:
    """Every version of `name` the index offers this interpreter, oldest first (pip index versions)."""
    key, where = _index_key(index)
    cmd = [python, "-m", "pip", "index", "versions", name, *_PIP_QUIET, "--retries", "0", "--timeout", "15",
           *index, *(["--pre"] if pre else [])]
    try:
        out = _pip(cmd, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        raise ConfigError(key, where[:80], f"pip could not be asked for the versions of {name}: {e}") from None
    listed = next((ln.split(":", 1)[1] for ln in out.stdout.splitlines() if ln.startswith("Available versions:")), "")
    versions = [v.strip() for v in listed.split(",") if v.strip()]
    if out.returncode != 0 or not versions:
        said = [ln.strip() for ln in out.stderr.splitlines() if ln.strip() and "experimental" not in ln]
        if "No module named pip" in out.stderr:
            raise ConfigError("workload.command", python, "has no pip: --package installs each version with it")
        unreachable = next((ln for ln in said if any(u in ln for u in _UNREACHABLE)), "") or _unreachable(where)
        what = "cannot be reached" if unreachable else f"offers no version of {name}"
        last = unreachable or (said[-1] if said else f"exit {out.returncode}")
        raise ConfigError(key, where[:80], f"{what} (pip: {last.removeprefix('ERROR: ')[:200]})")
    return sorted(versions, key=Version)


def _unreachable(where: str) -> str:
    """Why an index URL cannot be reached ("" when it answers, or is not a URL): pip itself says nothing of a
    refused connection when asked for versions, only that it found none."""
    import urllib.error
    import urllib.request

    if where.startswith("file://"):
        return "" if Path(urllib.request.url2pathname(where[7:])).exists() else "no such folder"
    if not where.startswith(("http://", "https://")):
        return ""
    try:
        with urllib.request.urlopen(urllib.request.Request(where, method="HEAD"), timeout=15):
            return ""
    except urllib.error.HTTPError:
        return ""   # it answered (an error page is pip's to judge)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return str(getattr(e, "reason", e))[:120] or type(e).__name__


def read_versions(rng: PackageRange, suite: Suite) -> Versions:
    """Validate the range against the index: A and B offered, at least one version between or after A."""
    python = interpreter(suite)
    pre = Version(rng.low).is_prerelease or Version(rng.high).is_prerelease
    offered = list_versions(python, rng.name, rng.index, pre)
    key = "--paddle" if rng.name == PADDLE else "--package"
    for end in (rng.low, rng.high):
        if not any(Version(v) == Version(end) for v in offered):
            raise ConfigError(key, f"{rng.name}=={end}", f"is not offered by {_index_key(rng.index)[1]} (it offers "
                              f"{', '.join(offered[-12:])})")
    inside = [v for v in offered if Version(rng.low) <= Version(v) <= Version(rng.high)]
    return Versions(name=rng.name, versions=inside, index=rng.index, python=python)


def env_dir(folder: Path, version: str) -> Path:
    """Where a version's environment lives (a version is letters, digits and . + ! _ - only: PEP 440)."""
    return Path(folder) / "envs" / re.sub(r"[^A-Za-z0-9._-]", "_", version)


def env_python(env: Path) -> Path:
    return env / "bin" / "python"


def ensure_env(folder: Path, python: str, name: str, version: str, index: list[str]) -> Path:
    """The environment of one version, made (or reused when finished before); returns its Python."""
    env = env_dir(folder, version)
    refuse_link(env.parent)
    refuse_link(env)
    ready = env / READY
    if ready.is_file() and not ready.is_symlink() and env_python(env).exists():
        return env_python(env)
    if env.exists():   # a kill left it half made: ours, inside the bisect folder
        shutil.rmtree(env)
    env.parent.mkdir(parents=True, exist_ok=True)
    _step([python, "-m", "venv", "--system-site-packages", "--without-pip", str(env)], name, version, env)
    py = str(env_python(env))
    own = str(json.loads(_step([py, "-c", _PROBE], name, version, env).stdout)["site"][0])
    theirs = _probe(python).get("site")
    shared = [str(p) for p in dict.fromkeys(theirs if isinstance(theirs, list) else []) if str(p) != own]
    atomic_write_text(Path(own) / "_ampbench_shared_site.pth", "".join(f"{p}\n" for p in shared), root=env)
    _step([py, "-m", "pip", "install", *_PIP_QUIET, "--no-deps", "--ignore-installed", "--quiet", *index,
           f"{name}=={version}"], name, version, env, timeout=1800)
    got = _step([py, "-c", f"import importlib.metadata as m; print(m.version({name!r}))"], name, version, env)
    if Version(got.stdout.strip()) != Version(version):
        raise ResultsError(f"{env}: {name} {got.stdout.strip()} is installed, not {version}")
    atomic_write_text(ready, json.dumps({"package": name, "version": version, "index": index}) + "\n", root=env)
    return env_python(env)


def _probe(python: str) -> dict[str, object]:
    """What an interpreter says of itself (its version, its site folders); {} when it does not run as Python."""
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False)
        info = json.loads(out.stdout) if out.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _step(cmd: list[str], name: str, version: str, env: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    out = _pip(cmd, timeout=timeout)
    if out.returncode != 0:
        said = [ln for ln in out.stderr.splitlines() if ln.strip()]
        raise ResultsError(f"{env}: the environment of {name}=={version} could not be made ({Path(cmd[0]).name} "
                           f"{' '.join(cmd[1:3])}: {(said[-1] if said else f'exit {out.returncode}')[:200]})")
    return out


def command_override(command: list[str], python: Path) -> str:
    """--set workload.command=[the environment's Python, the rest of the suite's command] (TOML written by the
    TOML library)."""
    import tomli_w

    return "workload.command=" + tomli_w.dumps({"v": [str(python), *command[1:]]}).split("=", 1)[1].strip()
