"""`ampbench suites [--copy NAME --to DIR]`: the bundled suites, or an editable copy of one."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ampbench.config import ConfigError, read_toml
from ampbench.config.bundled import bundled_suites
from ampbench.core.files import atomic_write_text


def list_suites(console: Console) -> None:
    for name, p in bundled_suites().items():
        raw = read_toml(p)
        meta = raw.get("suite", {})
        profs = ", ".join(["default", *sorted(raw.get("profiles", {}))])
        console.print(f"{name:8} workload={meta.get('workload')}  profiles: {profs}  ({p})", markup=False)


def copy_suite(name: str, dest: Path, console: Console) -> None:
    table = bundled_suites()
    if name not in table:
        raise ConfigError("--copy", "", f"no bundled suite {name!r}; bundled: {', '.join(sorted(table))}")
    target = Path(dest) / f"{name}.toml"
    if target.exists():
        raise ConfigError(str(target), "", "already exists; remove it or choose another --to folder")
    atomic_write_text(target, table[name].read_text(encoding="utf-8"))
    console.print(f"wrote {target}: edit it, then `ampbench run {target}`", markup=False)
