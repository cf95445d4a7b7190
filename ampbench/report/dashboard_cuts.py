"""The dashboard's view of the one segmentation (judge.series, report.dashboard_series.views): each device kind's
figure with its regressions shaded, the regressions as check --history cut the series, the series' cuts and each
mode's level against the reference level.  HTML only; report.publish assembles the page."""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from ampbench.report import fmt
from ampbench.report.dashboard_series import Mark, SeriesView, breaks, views

MAX_REGRESSIONS = 200          # listed per suite page (the count is always given)


@dataclass
class Regression:
    mode: str
    good: int           # index of the last good run (-1: no good run before)
    bad: int            # index of the first bad run
    rules: list[str] = field(default_factory=list)


def commit_range(entries: list[dict[str, Any]], r: Regression, repo_url: str | None) -> str:
    """`abc1234..def5678` (a compare link when the repository URL is known)."""
    bad = entries[r.bad].get("git_sha") or ""
    good = entries[r.good].get("git_sha") if r.good >= 0 else ""
    if not bad:
        return "commit not recorded"
    if not good:
        return f"up to {escape(fmt.short_sha(bad, 10))} (no earlier good run)"
    text = f"{escape(fmt.short_sha(good, 10))}..{escape(fmt.short_sha(bad, 10))}"
    if repo_url and re.match(r"^https?://", repo_url):
        href = f"{repo_url.rstrip('/')}/compare/{good}...{bad}"
        return f'<a href="{escape(href, quote=True)}">{text}</a>'
    return text


def series_regressions(entries: list[dict[str, Any]], accepts: Sequence[Any] = ()) -> list[Regression]:
    """The regressions of every series of the page (judge.series: the nights check --history FAILed in a row),
    oldest first, as Regression(modes joined, last night before it, first night)."""
    regs = [Regression(", ".join(r.modes), r.good, r.first)
            for v in views(entries, accepts) for r in v.regressions]
    return sorted(regs, key=lambda r: r.bad)


def kind_plots(suite: str, sub: list[dict[str, Any]], idx: list[int], shown: list[SeriesView], interactive: bool,
                k: int) -> str:
    """The figure of one device kind's runs: its config changes cut the lines; its series' regressions shaded
    and marked, with the new segments (judge.series)."""
    from ampbench.report.dashboard_interactive import figures_html
    from ampbench.report.dashboard_plots import suite_figure
    from ampbench.report.trend import inactive_note

    metric = next((e.get("metric") for e in reversed(sub) if e.get("metric")), "") or "metric"
    frac, cuts = fraction(sub), breaks(sub)
    local = {g: i for i, g in enumerate(idx)}
    spans, marks = [], []
    for v in shown:
        for r in v.regressions:
            if r.first in local:
                spans.append((local.get(r.good, -1), local[r.first]))
                marks.append(Mark(local[r.first], f"{', '.join(r.modes)} regression", True, r.modes[0]))
        marks += [Mark(local[i], "accepted level" if why == "accept" else "improvement", False)
                  for i, why, _ in v.cuts if i in local]
    if interactive:
        return figures_html(sub, metric, frac, cuts, inactive_note(sub), tag=f"-{k}" if k else "", with_js=k == 0)
    png = suite_figure(sub, metric, frac, [(g, b) for g, b in spans if g >= 0], inactive_note(sub), marks, cuts)
    return (f'<img class="plot" alt="{escape(suite, quote=True)}: throughput, memory, metric and verdict over '
            f'runs" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def series_html(entries: list[dict[str, Any]], shown: list[SeriesView]) -> str:
    """Each series (config and device kind) as check --history cut it: since when it is judged, its new segments,
    the nights held out pending the next one, each mode's level against the reference level (the drift a creep
    makes); then the config changes (the plotted lines stop there)."""
    items = []
    for v in shown:
        what = f"config <code>{escape(v.key[1] or 'not recorded')}</code> on <code>{escape(v.key[2] or 'no recorded device')}</code>"
        sub = [f"judged since {escape(v.since)}"]
        sub += [f"{'accepted level' if why == 'accept' else 'improvement'} at run "
                f"{escape(str(entries[i].get('run_id', '')))}: a new segment" for i, why, _ in v.cuts]
        sub += [f"<code>{escape(m)}</code>: held out pending the next night since run "
                f"{escape(str(entries[rows[0]].get('run_id', '')))}" for m, rows in v.pending]
        if v.drift:
            sub.append("level against the reference (the segment's first nights): " + ", ".join(
                f"<code>{escape(m)}</code> {escape(f'{ch:+.1%}')} (newest {n} vs first {r} nights)"
                for m, ch, n, r in v.drift))
        items.append(f"<li>{what} ({len(v.rows)} runs)<ul>" + "".join(f"<li>{x}</li>" for x in sub) + "</ul></li>")
    for c in [b for b in breaks(entries) if b.what == "config"][-MAX_REGRESSIONS:]:
        items.append(f"<li>{escape(c.label)} at run {escape(str(entries[c.index].get('run_id', '')))} "
                     f"(<code>{escape(c.before)}</code> to <code>{escape(c.after)}</code>): another experiment, "
                     "not a regression; the plotted series stop there</li>")
    return "<ul>" + "".join(items) + "</ul>"


def regressions_html(entries: list[dict[str, Any]], shown: list[SeriesView], repo_url: str | None) -> str:
    """The regressions of every series, newest first: the nights check --history FAILed in a row (judge.series),
    named by the last night before them and their first night; an open one asks for a fix or an accept."""
    regs = sorted((r for v in shown for r in v.regressions), key=lambda r: r.first, reverse=True)
    if not regs:
        return "<p>No regression: check --history FAILed no night of this history (judge.series).</p>"
    items = []
    if len(regs) > MAX_REGRESSIONS:
        items.append(f"<li>{len(regs)} regressions; the latest {MAX_REGRESSIONS} are listed</li>")
    for r in regs[:MAX_REGRESSIONS]:
        good = escape(entries[r.good]["run_id"]) if r.good >= 0 else "none"
        state = '<span class="bad">open regression</span>' if r.open else "regression, closed"
        worst = f", worst {escape(f'{r.worst:+.1%}')}" if r.worst is not None else ""
        items.append(f"<li><code>{escape(', '.join(r.modes))}</code>: {state}, {r.nights} night(s) from run "
                     f"{escape(entries[r.first]['run_id'])}{worst}; last night before it {good}; commits "
                     f"{commit_range(entries, Regression('', r.good, r.first), repo_url)}</li>")
    tail = ("<p>Open: those nights stay out of the pooled history baseline until the regression is fixed or its "
            "level accepted (<code>ampbench history accept</code>).</p>" if any(r.open for r in regs) else "")
    return "<ul>" + "".join(items) + "</ul>" + tail




def fraction(entries: list[dict[str, Any]]) -> bool:
    vals = [m.get("metric_mean") for e in entries for m in (e.get("modes") or {}).values()]
    return fmt.is_fraction_metric([x for x in vals if isinstance(x, (int, float)) and math.isfinite(x)])
