"""The suites shipped inside the package (ampbench/config/suites/*.toml), found by name.

`ampbench run resnet` works from any folder and from a built wheel; a path to a TOML file still
wins when one exists, so users' own suites and edited copies behave as before.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

from ampbench.core.errors import ConfigError


def bundled_dir() -> Path:
    return Path(str(resources.files("ampbench.config") / "suites"))


def bundled_suites() -> dict[str, Path]:
    """Suite name (file stem) -> its bundled TOML file."""
    return {p.stem: p for p in sorted(bundled_dir().glob("*.toml"))}


def resolve_suite(text: str | Path) -> Path:
    """A suite argument -> a file: an existing path as given, else a bundled suite of that name."""
    p = Path(text)
    if p.exists():
        return p
    table = bundled_suites()
    name = p.stem if p.suffix == ".toml" else str(text)
    if p.parent in (Path("."), Path("suites")) and name in table:
        return table[name]
    known = ", ".join(sorted(table))
    close = difflib.get_close_matches(name, list(table), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    raise ConfigError(p, "", f"suite file not found, and no bundled suite of that name ({hint}bundled: {known}; "
                             "`ampbench suites` lists them)")
