"""Several runs and the history: the overview table and a trend per suite (table + plot).

A run given on the command line replaces its own history line, so re-reporting a night never
counts it twice.  A step in the trend where the config, device or Paddle changed is marked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ampbench.config import REFERENCE_MODE
from ampbench.core.columns import Col
from ampbench.judge import changepoint
from ampbench.judge.series import row_key
from ampbench.record import fields
from ampbench.report import fmt
from ampbench.report import plots as P
from ampbench.report.dashboard_series import Shown
from ampbench.report.dashboard_series import views as series_views
from ampbench.report.fmt import DASH, md_code, md_link, md_table, md_text
from ampbench.report.view import Ctx, RunView
from ampbench.results.accepts import AcceptRecord, load_accepts
from ampbench.results.history import (
    MODE_COMPUTED,
    NOT_CHECKED,
    ModeSummary,
    RunSummary,
    history_sources,
    load_history,
)

# The overview's columns that are no field of the run (its report's link, its verdict with AMP's state, its
# exit code); the run's fields are the catalog's (record/fields.py, RunSummary's `Col` markers).
_OVERVIEW_OWN = (
    fields.Column("run", Col("Run", "markdown", rank=20, shows=("overview",)), lambda s, v: None),
    fields.Column("verdict", Col("Verdict", "markdown", rank=50, shows=("overview",)), lambda s, v: None),
    fields.Column("exit_code", Col("Exit code", "markdown", rank=60, shows=("overview",)), lambda s, v: None),
)


def overview(views: list[RunView], ctx: Ctx) -> str:
    """One row per run: the catalog's run columns with the overview's own (report link, verdict, exit code)."""
    cols = fields.columns("overview", RunSummary, _OVERVIEW_OWN)
    rows = []
    for v in views:
        s = v.summary
        link_target = v.run.report_path()
        off = any(m.amp_requested and not m.amp_active and not m.amp_emulated and m.ok for m in s.modes.values())
        emulated = any(m.amp_emulated for m in s.modes.values())
        verdict = s.verdict if s.verdict in ("PASS", NOT_CHECKED) else f"**{s.verdict}**"
        own = {"run": md_link(s.run_id, ctx.rel(link_target)) if link_target.exists() else md_code(s.run_id),
               "verdict": verdict + (" (AMP inactive)" if off else "") + (" (emulated)" if emulated else ""),
               "exit_code": str(s.exit_code) if s.exit_code is not None else DASH}
        rows.append([own[c.key] if c.key in own else md_code(c.value(s)) if c.col.kind == "code"
                     else c.text(s, fields.PLAIN, md_text) for c in cols])
    overall = worst([v.summary.verdict for v in views])
    return (f"**Overall: {overall}** over {len(views)} runs.\n\n"
            + md_table([c.header(fields.PLAIN, md_text) for c in cols], rows, [c.align for c in cols]))


def worst(verdicts: list[str]) -> str:
    order = {NOT_CHECKED: -1, "PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}
    return max(verdicts, key=lambda x: order.get(x, -1), default=NOT_CHECKED)


def trend_entries(views: list[RunView], history: Path | None) -> dict[str, list[dict[str, Any]]]:
    """Per suite: history lines plus the given runs (a given run replaces its own history line)."""
    suites = list(dict.fromkeys(v.summary.suite for v in views))
    entries: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in suites}
    if history is not None:
        for path in history_sources(Path(history), suites):
            for e in (h.to_json() for h in load_history(path)):
                entries.setdefault(e["suite"], {})[e["run_id"]] = e
    for v in views:
        entries[v.summary.suite][v.summary.run_id] = v.summary.model_dump(mode="json", by_alias=True)
    def order(e: dict[str, Any]) -> tuple[str, str]:
        return (e.get("started") or "", e["run_id"])

    return {s: sorted(d.values(), key=order) for s, d in entries.items()}


def trend_accepts(views: list[RunView], history: Path | None) -> dict[str, list[AcceptRecord]]:
    """Per suite: the accepted levels recorded beside its history file (results.accepts)."""
    if history is None:
        return {}
    suites = list(dict.fromkeys(v.summary.suite for v in views))
    return {s: [a for path in history_sources(Path(history), [s]) for a in load_accepts(path, s)] for s in suites}


def _trend_verdict(mode: str, m: dict[str, Any]) -> str:
    verdict = m.get("verdict") or NOT_CHECKED
    flagged = m.get("flagged_rules") or []
    if mode == REFERENCE_MODE and verdict == NOT_CHECKED:
        cell = "reference"
    elif verdict in ("FAIL", "ERROR", "INCONCLUSIVE"):
        cell = f"**{md_text(verdict)}**" + (f" ({', '.join(md_text(r) for r in flagged)})" if flagged else "")
    else:
        cell = md_text(verdict)
    if m.get("amp_requested") and not m.get("amp_active"):
        cell += " (AMP inactive)"
    return cell


# The trend table's columns that are no figure of the mode (which run, its change from the previous run,
# its verdict); the mode's figures are the catalog's (record/fields.py, ModeSummary's `Col` markers).
_TREND_OWN = (
    fields.Column("run", Col("Run", "markdown", rank=1, shows=("trend",)), lambda m, v: None),
    fields.Column("run_id", Col("Run id", "markdown", rank=2, shows=("trend",)), lambda m, v: None),
    fields.Column("git", Col("git", "markdown", rank=3, shows=("trend",)), lambda m, v: None),
    fields.Column("vs_previous", Col("vs previous", "markdown", rank=35, shows=("trend",), align="r"), lambda m, v: None),
    fields.Column("verdict", Col("Verdict", "markdown", rank=90, shows=("trend",)), lambda m, v: None),
    fields.Column("note", Col("Note", "markdown", rank=95, shows=("trend",)), lambda m, v: None),
)


def trend_section(suite: str, entries: list[dict[str, Any]], ctx: Ctx, accepts: Sequence[Any] = ()) -> str:
    modes = list(dict.fromkeys(m for e in entries for m in e.get("modes", {})))
    metric = next((e.get("metric") for e in reversed(entries) if e.get("metric")), "") or "metric"
    vals = [m.get("metric_mean") for e in entries for m in e.get("modes", {}).values()]
    frac = fmt.is_fraction_metric([x for x in vals if x is not None])
    out = [f"## Trend: {md_code(suite)} over {len(entries)} runs"]
    latest = entries[-1]
    changed = _changed_runs(entries)
    if changed:
        out.append(f"{len(changed)} earlier run(s) differ from the latest in config hash, device or Paddle "
                   "version (marked *changed*): a step in the trend there may come from that change, "
                   "not from a regression.")
    out.append(series_text(entries, accepts))
    view = fields.View(metric, frac, float(latest.get("confidence") or 0.95))
    cols = fields.columns("trend", ModeSummary, (*MODE_COMPUTED, *_TREND_OWN))
    for mode in modes:
        rows = _trend_rows(mode, entries, changed, cols, view)
        out.append(f"**{md_code(mode)}**")
        out.append(md_table([c.header(view, md_text) for c in cols], rows, [c.align for c in cols]))
    out.extend(_trend_plot(suite, entries, modes, metric, frac, ctx))
    return "\n\n".join(out)


def _changed_runs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs whose config hash, device or Paddle version differs from the latest run's: a step of the
    trend at one of them may be that change, not a regression, so their rows are marked."""
    latest = entries[-1]
    keys = ("config_hash", "device_name", "paddle")
    return [e for e in entries if any(e.get(k) != latest.get(k) for k in keys)]


def _trend_rows(mode: str, entries: list[dict[str, Any]], changed: list[dict[str, Any]],
                cols: list[fields.Column], view: fields.View) -> list[list[str]]:
    """One mode's trend table rows, one per run that has the mode: the catalog's figures beside the
    trend's own cells (which run, change from the previous run of its device kind with a throughput, verdict,
    note): a fleet of two GPU kinds compares each night with its own kind's, never across kinds."""
    rows = []
    prev: dict[str, float | None] = {}
    for e in entries:
        raw = e.get("modes", {}).get(mode)
        if not raw:
            continue
        m = ModeSummary.model_validate(raw)
        kind = row_key(e)[2]
        own = _trend_own(mode, e, raw, m.samples_per_s, prev.get(kind), e in changed)
        prev[kind] = m.samples_per_s or prev.get(kind)
        rows.append([own[c.key] if c.key in own else c.text(m, view, md_text) for c in cols])
    return rows


def _trend_own(mode: str, e: dict[str, Any], raw: dict[str, Any], tput: float | None, prev: float | None,
               changed: bool) -> dict[str, str]:
    """The trend table's own cells of one run (the _TREND_OWN columns); "vs previous" compares with the
    last earlier run that had a throughput, so a run without one does not blank the next run's change."""
    return {"run": md_text(P.run_label(e)), "run_id": md_code(e.get("run_id", "")),
            "git": md_code(fmt.short_sha(e.get("git_sha"))) if e.get("git_sha") else DASH,
            "vs_previous": fmt.pct(tput / prev - 1) if tput and prev else DASH,
            "verdict": _trend_verdict(mode, raw), "note": "changed" if changed else " "}


def _trend_plot(suite: str, entries: list[dict[str, Any]], modes: list[str], metric: str, frac: bool,
                ctx: Ctx) -> list[str]:
    """The trend figure (plots.trend) as the section's image and caption; nothing when there is too
    little to draw.  The file is named after the suite, made safe for a path."""
    colors = P.mode_colors(modes)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", suite)
    path = P.trend(entries, ctx.plots_dir / f"trend-{name}.png", colors, metric, frac, inactive_note(entries))
    if path is None:
        return []
    return [fmt.md_image(f"Trend of throughput, memory and {metric} for {suite}", ctx.rel(path)),
            "Red circles: runs in which the checker flagged that mode (FAIL or ERROR)."]


def series_text(entries: list[dict[str, Any]], accepts: Sequence[Any] = ()) -> str:
    """The series as check --history cut it (judge.series, one segmentation: report.dashboard_series.views):
    per series (config and device kind), where its current segment starts, its regressions (the nights check
    --history FAILed, named by commit range), the nights held out pending the next one and each mode's level
    against the reference level (what a creep moves); config changes; the run-to-run drift."""
    shown = series_views(entries, accepts)
    lines = []
    for v in shown:
        head = f"config {md_code(v.key[1] or 'not recorded')} on {md_code(v.key[2] or 'no recorded device')}" \
            if len(shown) > 1 else "The series"
        lines.append(f"- {head} ({len(v.rows)} nights): judged since {md_text(v.since)}")
        lines += [f"  - {'accepted level' if why == 'accept' else 'improvement'} at run "
                  f"{md_code(str(entries[i].get('run_id', '')))}: a new segment" for i, why, _ in v.cuts]
        lines += [f"  - {_regression_md(entries, r)}" for r in v.regressions]
        lines += [f"  - {md_code(mode)}: held out pending the next night since run "
                  f"{md_code(str(entries[rows[0]].get('run_id', '')))}" for mode, rows in v.pending]
        if v.drift:
            lines.append("  - level against the reference (the segment's first nights): " + ", ".join(
                f"{md_code(m)} {ch:+.1%} (newest {n} vs first {r} nights)" for m, ch, n, r in v.drift))
    cfg = changepoint.config_changes(entries)
    lines += [f"- config changed at run {md_code(str(entries[c.index].get('run_id', '')))} "
              f"({md_code(c.before)} to {md_code(c.after)}): another experiment, not a regression" for c in cfg]
    head = ("**The series** (judge.series: the one segmentation `check --history`, this report, the dashboard and "
            "`history bisect` share; a regression is a run of nights `check --history` FAILed):")
    if not any(v.regressions for v in shown):
        lines.append("- No regression: `check --history` FAILed no night of the history.")
    drift = md_text(changepoint.drift(entries).describe())
    return f"{head}\n\n" + "\n".join(lines) + f"\n\n{drift[:1].upper()}{drift[1:]}."


def _regression_md(entries: list[dict[str, Any]], r: Shown) -> str:
    first, good = entries[r.first], entries[r.good] if r.good >= 0 else None
    sha_a, sha_b = (good or {}).get("git_sha") or "", first.get("git_sha") or ""
    rng = f"commits {md_code(fmt.short_sha(sha_a, 10) + '..' + fmt.short_sha(sha_b, 10))}" if sha_a and sha_b \
        else "commits not recorded"
    worst = f", worst {r.worst:+.1%}" if r.worst is not None else ""
    before = md_code(str(good.get("run_id", ""))) if good else "none"
    return (f"**{'open ' if r.open else ''}regression** of {', '.join(md_code(m) for m in r.modes)}: {r.nights} "
            f"night(s) from run {md_code(str(first.get('run_id', '')))} (last night before it {before}; {rng}{worst})"
            + (": fix it or accept the level (`ampbench history accept`)" if r.open else "; closed"))


def inactive_note(entries: list[dict[str, Any]]) -> str | None:
    """The plot stamp when no run in the trend had AMP active (CPU history): FP32 vs FP32 throughout."""
    amp = [m for e in entries for m in (e.get("modes") or {}).values() if m.get("amp_requested")]
    if amp and not any(m.get("amp_active") for m in amp):
        emulated = any(m.get("amp_emulated") for m in amp)
        return "AMP emulated or inactive: numerics only, time and memory not AMP's" if emulated else P.INACTIVE_NOTE
    return None
