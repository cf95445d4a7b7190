"""tune.md: the ladder of `ampbench tune` (config, verdict, numbers and cost per rung), why it stopped, and the
winning mode as suite TOML lines (tomli-w) and, for a command suite, the program's own flags (given by the
caller: they are the importers' spelling, above the report)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import tomli_w

from ampbench.config import ModeConfig, Suite
from ampbench.core.files import atomic_write_text
from ampbench.report.fmt import md_block, md_code, md_prose, md_table, md_text
from ampbench.results.tune_file import TuneFile

Flags = Callable[[ModeConfig], list[str]]   # a mode as its program's own flags (commands.tune.program_flags)


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def winner_lines(doc: TuneFile, flags_of: Flags) -> tuple[str, list[str]]:
    """The winning mode as a `[[modes]]` TOML table (tomli-w) and, for a command suite, as program flags."""
    if doc.winner is None:
        return "", []
    mode = ModeConfig.model_validate(doc.rungs[doc.winner].mode)
    toml = mode_toml(mode)
    flags: list[str] = []
    if Suite.model_validate(doc.config).suite.workload == "command":
        flags = flags_of(mode)
    return toml, flags


def mode_toml(mode: ModeConfig) -> str:
    """A mode as a `[[modes]]` table, its non-default keys only, through tomli-w (user text stays TOML-safe)."""
    data = {k: v for k, v in mode.model_dump(mode="json", exclude_defaults=True, by_alias=True).items()
            if v is not None}
    return tomli_w.dumps({"modes": [data]})


def write_tune_md(folder: Path, doc: TuneFile, flags_of: Flags) -> Path:
    """tune.md: the ladder (config, verdict, numbers, cost per rung), why it stopped, the winner's lines."""
    rows = [[f"{r.index} {md_code(r.rung)}", md_prose(r.why), r.verdict, md_text(r.failure), _f(r.speedup, ".3f"),
             _f(r.memory_reduction, ".1%"), _f(r.metric_delta, ".4g"), f"{r.cost_s:.0f}"] for r in doc.rungs]
    lines = [f"# ampbench tune: {md_text(doc.suite)}", "",
             f"Stopped: {md_prose(doc.stopped or 'not finished (continue with tune --resume)')}", "",
             md_table(["rung", "change", "verdict", "failure", "speedup", "memory reduction", "metric delta",
                       "cost (s)"], rows, ["l", "l", "l", "l", "r", "r", "r", "r"])]
    for r in doc.rungs:
        lines += ["", f"- rung {r.index} ({md_code(r.run_dir)}): {md_prose(r.reason)}"]
        lines += [f"  - skipped {md_prose(s)}" for s in r.skipped]
    toml, flags = winner_lines(doc, flags_of)
    if toml:
        lines += ["", "## The winning configuration", "", "In the suite file:", "", md_block(toml, "toml")]
        lines += [f"- {md_prose(f)}" for f in flags]
    elif doc.pending is not None and doc.stopped.startswith("command"):
        mode = ModeConfig.model_validate(doc.pending["mode"])
        lines += ["", f"## The next rung to try: {md_code(doc.pending['rung'])}", "", md_prose(doc.pending["why"]), "",
                  md_block(mode_toml(mode), "toml")]
        lines += [f"- {md_prose(f)}" for f in flags_of(mode)]
    path = folder / "tune.md"
    atomic_write_text(path, "\n".join(lines) + "\n", root=folder)
    return path
