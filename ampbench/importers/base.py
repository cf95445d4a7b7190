"""What the importers share: the result type, the TOML writing (tomli-w), key bookkeeping.

An importer turns another tool's training config into an ampbench suite and lists, by name,
every key it could not honour (with why), so nothing a user set is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tomli_w

from ampbench.core.errors import ConfigError


@dataclass
class Imported:
    """A suite (as TOML-ready data) plus the keys not honoured, each with its reason."""

    suite: dict[str, Any]
    not_honoured: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)  # printed, and kept in suite.notes for report.md

    def decide(self, text: str) -> None:
        self.decisions.append(text)

    def finish(self) -> None:
        """Close the decisions (the count of keys not honoured) and store them in `[suite] notes`."""
        if self.not_honoured:
            self.decide(f"not honoured: {len(self.not_honoured)} key(s): {', '.join(self.not_honoured)}")
        self.suite.setdefault("suite", {})["notes"] = list(self.decisions)


class UnsupportedConfig(ConfigError):
    """The config asks for something ampbench cannot benchmark (exit 2 with the reason)."""


def to_toml(suite: dict[str, Any], header: list[str] | None = None) -> str:
    """Suite data -> TOML text through tomli-w: no name or value from a user's file can become a
    live TOML line. Header lines become comments, each kept on one line (newlines and control
    characters shown escaped, so a key holding a newline cannot end the comment)."""
    out = [f"# {_one_line(line)}" if line else "#" for line in (header or [])]
    out += [""] if header else []
    return "\n".join(out) + tomli_w.dumps(suite, multiline_strings=False)


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def header_lines(source: str, imported: Imported) -> list[str]:
    """The comment block at the top of an imported suite: source, notes, keys not honoured."""
    lines = [f"Imported from {source} by `ampbench import`."]
    lines += [f"Decided: {d}" for d in imported.decisions]
    lines += imported.notes
    if imported.not_honoured:
        lines.append("Keys not honoured:")
        lines += [f"  {k}: {why}" for k, why in imported.not_honoured.items()]
    return lines


def render_checked(imported: Imported, source: str, file: str) -> str:
    """The suite as TOML, after validating it (every profile) exactly as `ampbench run` would."""
    import os
    import tempfile

    import tomllib

    from ampbench.workloads.suites import load_suite

    text = to_toml(imported.suite, header_lines(source, imported))
    fd, tmp = tempfile.mkstemp(suffix=".toml", prefix="ampbench-import-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        for profile in ["default", *tomllib.loads(text).get("profiles", {})]:
            try:
                load_suite(tmp, profile=profile)
            except ConfigError as e:
                raise ConfigError(e.file.replace(tmp, file), e.key, e.reason) from None
    finally:
        os.unlink(tmp)
    return text
