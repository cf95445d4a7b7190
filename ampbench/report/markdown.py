"""report.md (and optionally a self-contained report.html) with PNG plots for one run, several runs, or a trend.

What people read the morning after nightly CI and paste into PRs: the verdict first, then the
numbers, then why something failed (rule, observed value, threshold, advice, the trial file), then the
evidence (plots, batch-size probe, diagnosis, op precision coverage, trials).  Everything from trials
passes through `ampbench.report.fmt` escaping; all links are relative, so the folder can be moved or
uploaded as is.  The sections live in header, tables, verdicts, evidence, coverage and trend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, check_output
from ampbench.core.store import RunPaths
from ampbench.report.claims import claims_md
from ampbench.report.coverage import coverage
from ampbench.report.emulation import emulation_section
from ampbench.report.evidence import diagnosis_section, plots_section, probe_section
from ampbench.report.fmt import md_code, md_text
from ampbench.report.header import INACTIVE_LINE, header
from ampbench.report.html import to_html
from ampbench.report.injected import injected_section
from ampbench.report.outcome import outcome_md
from ampbench.report.tables import summary_table, time_to_target, trials_table
from ampbench.report.trend import overview, trend_accepts, trend_entries, trend_section
from ampbench.report.verdicts import failed_trials, verdicts
from ampbench.report.view import Ctx, RunView, h, load_view

FORMATS = ("md", "html")


def write_report(run_dirs: list[Path], output: Path | None = None, history: Path | None = None,
                 fmt: str = "md", also_html: bool = False) -> Path:
    """Write the report; returns its path.  (`fmt` is the format name, as the CLI passes it.)

    One run: RUN/report.md with plots in RUN/plots/.  Several runs or `history`: one report with a
    section per run plus a trend per suite; default file: the last run's folder, comparison.md.
    html: the same content as one page with every plot embedded; `also_html` writes that page beside
    the markdown from the same plots (what `ampbench run` does).
    """
    if fmt not in FORMATS:
        raise ResultsError(f"--format {fmt}: unknown report format; use one of {', '.join(FORMATS)}")
    if not run_dirs:
        raise ResultsError("report: give at least one run folder")
    views = [load_view(Path(p)) for p in run_dirs]
    multi = len(views) > 1
    ext = ".html" if fmt == "html" else ".md"
    root: Path | None = None
    if output is None:
        output = views[-1].run.report_path(ext, several=multi)
        root = views[-1].run.path  # inside the run folder: no link followed
    else:
        check_output(Path(output), [p for v in views for p in (v.run.run_json, *v.run.trial_files())],
                     kinds=(".md", ".html", ".htm", ".markdown"))
        if also_html:
            check_output(Path(output).with_suffix(".html"), kinds=(".html",))
    output = Path(output)
    plots_dir = RunPaths(output.parent).plots_dir if output.parent.resolve() in {v.run.path.resolve() for v in views} \
        else output.parent / f"{output.stem}-plots"
    ctx = Ctx(out_dir=output.parent, plots_dir=plots_dir, multi=multi, history=history is not None)
    md = render(views, ctx, trend_entries(views, history), trend_accepts(views, history))
    if fmt == "html":
        atomic_write_text(output, to_html(md, title=title(views), base=output.parent), root=root)
    else:
        atomic_write_text(output, md, root=root)
        if also_html:
            atomic_write_text(output.with_suffix(".html"), to_html(md, title=title(views), base=output.parent),
                              root=root)
    return output


def title(views: list[RunView]) -> str:
    suites = list(dict.fromkeys(v.summary.suite for v in views))
    if len(views) == 1:
        return f"ampbench report: {suites[0]}"
    return f"ampbench report: {len(views)} runs ({', '.join(suites)})"


def render(views: list[RunView], ctx: Ctx, trends: dict[str, list[dict[str, Any]]],
           accepts: dict[str, list[Any]] | None = None) -> str:
    parts = [f"# {md_text(title(views))}"]
    if ctx.multi:
        parts.append(overview(views, ctx))
    for v in views:  # the verdict first (docs/report.md), the trend after the runs
        parts.append(run_section(v, ctx, level=3 if ctx.multi else 2))
    for suite, entries in trends.items():
        if len(entries) >= 2:
            parts.append(trend_section(suite, entries, ctx, (accepts or {}).get(suite, [])))
        elif ctx.history:
            parts.append(f"No trend for {md_code(suite)}: the history holds no earlier run of this suite.")
    parts.append("---\n\nWritten by `ampbench report`. Numbers: a mode's samples/s is the geometric mean "
                 "of its trials' median per-step rates (warm-up excluded), with a t interval over the "
                 "seeds (thresholds.confidence); memory is the allocator's peak; metric mean ± standard "
                 "deviation over seeds.")
    return "\n\n".join(p.strip("\n") for p in parts if p) + "\n"


def run_section(v: RunView, ctx: Ctx, level: int) -> str:
    s = v.summary
    out = []
    if ctx.multi:
        out.append(h(level - 1, f"{md_text(s.suite)}: run {md_code(s.run_id)}"))
    out += [outcome_md(v, level), claims_md(v, level), header(v), h(level, "Summary"), summary_table(v), verdicts(v, ctx, level),
            failed_trials(v, ctx, level), emulation_section(v, level), injected_section(v, level),
            plots_section(v, ctx, level), probe_section(v, ctx, level),            diagnosis_section(v, ctx, level), coverage(v, level), time_to_target(v, level),
            trials_table(v, ctx, level)]
    return "\n\n".join(x for x in out if x)


__all__ = ["INACTIVE_LINE", "render", "to_html", "write_report"]
