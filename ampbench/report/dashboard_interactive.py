"""The dashboard's interactive view: plotly figures inside the suite page, plotly.js beside the pages.

Why plotly: zoom, pan and hover come with the library, and it ships plotly.js itself: the site holds one copy
(`plotly.min.js`, 4.6 MB, written once a publish) that every suite page loads from its own folder, so the site
works offline (no CDN, no MathJax, no font fetched, no button that uploads the figure) and a page is its
figures' data alone (it was 4.8 MB for 3 runs with its own inline copy).  plotly is
an optional extra (`bash scripts/setup.sh --dashboard`): `ampbench publish` without it writes the
static PNG dashboard with a one-line note (`--view auto`), or exits 2 naming the extra when the
interactive view was asked for (`--view interactive`).

Two figures per suite:
- the history: throughput, peak memory, metric, speedup over FP32 (with its interval) and verdict per
  mode over the latest INTERACTIVE_RUNS runs; each series is cut where the config or device changed
  (dashboard_series: a gap point, plotly's connectgaps off) and a dotted line marks the change;
  hover names the run id, commit, mode and verdict;
- the step times: per mode, the histogram of the measured step times of the latest run that recorded
  one (results.history.StepTimeHist), as pytest-benchmark's --benchmark-histogram draws its rounds.

Every user string (run ids, commits, mode, suite and metric names) is HTML-escaped before it reaches
plotly: plotly renders hover, legend, tick and title text as a subset of HTML.
"""

from __future__ import annotations

import importlib.util
import math
from html import escape
from pathlib import Path
from typing import Any

from ampbench.core.errors import UserError
from ampbench.core.files import atomic_write_text
from ampbench.core.install import install_hint
from ampbench.report import fmt
from ampbench.report import plots as P
from ampbench.report.dashboard_series import Break, gapped

PLOTLY_JS = "plotly.min.js"   # beside the pages: one copy a site, not one inline per page
INTERACTIVE_RUNS = 2000  # drawn interactively; a longer history also gets the static image of every run
VIEWS = ("auto", "interactive", "static")
INSTALL = install_hint("dashboard")
VERDICT_Y = {"PASS": 3, "INCONCLUSIVE": 2, "FAIL": 1, "ERROR": 0}
PANELS = ("samples/s (median)", "peak memory", "metric", "speedup vs fp32", "verdict")
CHANGE_COLOR = "#6e7781"
MAX_LABELS = 50  # break annotations drawn (the lines are all drawn)
# No plotly logo link, no "Share chart..." button (it uploads the figure to Plotly Cloud): nothing leaves the page.
PAGE_CONFIG = {"displaylogo": False, "responsive": True, "showSendToCloud": False}


def resolve_view(view: str) -> tuple[bool, str | None]:
    """(interactive?, the note to print): `auto` falls back to the static PNGs when plotly is missing."""
    if view not in VIEWS:
        raise UserError(f"--view {view!r}: use one of {', '.join(VIEWS)}")
    if view == "static":
        return False, None
    if importlib.util.find_spec("plotly") is not None:
        return True, None
    if view == "interactive":
        raise UserError(f"--view interactive: plotly is not installed; {INSTALL}")
    return False, f"note: plotly not installed, so the dashboard is static PNGs; the interactive view: {INSTALL}"


def _hover_rows(entries: list[dict[str, Any]], mode: str) -> list[list[str]]:
    """[run id, commit, verdict, mode] per run, escaped for plotly's HTML-subset text; an emulated mode's
    verdict marked (its numerics judged, its time and memory the emulation's)."""
    out = []
    for e in entries:
        m = (e.get("modes") or {}).get(mode) or {}
        out.append([escape(str(e.get("run_id", ""))), escape(fmt.short_sha(e.get("git_sha"), 10) or "not recorded"),
                    escape(str(m.get("verdict") or "not checked") + (" (emulated)" if m.get("amp_emulated") else "")),
                    escape(mode)])
    return out


HOVER = ("<b>%{customdata[0]}</b><br>commit %{customdata[1]}<br>mode %{customdata[3]}<br>"
         "verdict %{customdata[2]}<br>%{y:.4g}<extra></extra>")


def _line(go: Any, entries: list[dict[str, Any]], mode: str, key: str, scale: float, cuts: list[Break],
          color: str, legend: bool) -> Any | None:
    """One mode's series of one panel, cut at every break (a None point: no line across it)."""
    xs, ys, rows = [], [], []
    hover = _hover_rows(entries, mode)
    for i, e in enumerate(entries):
        y = P.plottable(((e.get("modes") or {}).get(mode) or {}).get(key), scale)
        if math.isfinite(y):
            xs.append(i)
            ys.append(y)
            rows.append(hover[i])
    if not xs:
        return None
    gx, gy = gapped(xs, ys, cuts)
    it = iter(rows)
    custom = [next(it) if y is not None else ["", "", "", ""] for y in gy]
    return go.Scatter(x=gx, y=gy, customdata=custom, mode="lines+markers", name=escape(mode), legendgroup=mode,
                      showlegend=legend, connectgaps=False, line={"color": color, "width": 1.5},
                      marker={"size": 5}, hovertemplate=HOVER, meta={"kind": "series", "key": key})


def _verdicts(go: Any, entries: list[dict[str, Any]], mode: str, color: str) -> Any | None:
    hover = _hover_rows(entries, mode)
    xs, ys, rows = [], [], []
    for i, e in enumerate(entries):
        v = ((e.get("modes") or {}).get(mode) or {}).get("verdict")
        if v in VERDICT_Y:
            xs.append(i)
            ys.append(VERDICT_Y[v])
            rows.append(hover[i])
    if not xs:
        return None
    return go.Scatter(x=xs, y=ys, customdata=rows, mode="markers", name=escape(mode), legendgroup=mode,
                      showlegend=False, marker={"size": 8, "color": color, "symbol": "circle-open", "line": {"width": 2}},
                      hovertemplate=HOVER.replace("<br>%{y:.4g}", ""), meta={"kind": "verdict"})


def _speedup(go: Any, entries: list[dict[str, Any]], mode: str, cuts: list[Break], color: str) -> Any | None:
    trace = _line(go, entries, mode, "speedup", 1.0, cuts, color, False)
    if trace is None:
        return None
    ci = {i: ((e.get("modes") or {}).get(mode) or {}).get("speedup_ci") for i, e in enumerate(entries)}
    up: list[float | None] = []
    down: list[float | None] = []
    for x, y in zip(trace.x, trace.y):
        c = ci.get(x) if y is not None and float(x).is_integer() else None
        lo, hi = (P.plottable(c[0]), P.plottable(c[1])) if isinstance(c, (list, tuple)) and len(c) == 2 else \
            (math.nan, math.nan)
        ok = math.isfinite(lo) and math.isfinite(hi)
        up.append(hi - y if ok else None)
        down.append(y - lo if ok else None)
    return trace.update(error_y={"type": "data", "array": up, "arrayminus": down, "thickness": 1, "width": 2})


def _mark_breaks(fig: Any, cuts: list[Break]) -> None:
    """A dotted line over every panel at each config or device change, labelled on the top panel."""
    for b in cuts:
        fig.add_shape(type="line", x0=b.index - 0.5, x1=b.index - 0.5, y0=0, y1=1, xref="x", yref="paper",
                      line={"color": CHANGE_COLOR, "dash": "dot", "width": 1.2}, name=f"{b.label} at {b.index}")
    for b in cuts[:MAX_LABELS]:
        fig.add_annotation(x=b.index - 0.5, y=1, xref="x", yref="paper", text=escape(b.label), showarrow=False,
                           textangle=-90, xanchor="right", yanchor="top", font={"size": 10, "color": CHANGE_COLOR})


def history_figure(entries: list[dict[str, Any]], metric: str, fraction: bool, cuts: list[Break],
                   inactive: str | None) -> Any:
    """The five panels over `entries` (the caller passes the latest INTERACTIVE_RUNS, `cuts` indexed into them)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    modes = list(dict.fromkeys(m for e in entries for m in (e.get("modes") or {})))
    colors = P.mode_colors(modes)
    peaks = [v for e in entries for m in (e.get("modes") or {}).values()
             if math.isfinite(v := P.plottable(m.get("peak_bytes")))]
    unit, div = fmt.bytes_unit(peaks)
    fig = make_subplots(rows=5, cols=1, shared_xaxes=True, vertical_spacing=0.025)
    panels = [("samples_per_s", 1.0), ("peak_bytes", 1 / div), ("metric_mean", 100.0 if fraction else 1.0)]
    for mode in modes:
        for row, (key, scale) in enumerate(panels, 1):
            t = _line(go, entries, mode, key, scale, cuts, colors[mode], row == 1)
            if t is not None:
                fig.add_trace(t, row=row, col=1)
        t = _speedup(go, entries, mode, cuts, colors[mode]) if mode != "fp32" else None
        if t is not None:
            fig.add_trace(t, row=4, col=1)
        t = _verdicts(go, entries, mode, colors[mode])
        if t is not None:
            fig.add_trace(t, row=5, col=1)
    titles = [PANELS[0], f"peak memory ({unit})", escape(metric) + (" (%)" if fraction else ""), PANELS[3], PANELS[4]]
    for row, title in enumerate(titles, 1):
        fig.update_yaxes(title_text=title, title_font={"size": 11}, row=row, col=1)
    fig.update_yaxes(tickvals=list(VERDICT_Y.values()), ticktext=list(VERDICT_Y), range=[-0.6, 3.6], row=5, col=1)
    ticks = P.thin_ticks(len(entries))
    labels = [escape(P.run_label(entries[i]) + (f" {fmt.short_sha(entries[i].get('git_sha'), 7)}"
                                                   if entries[i].get("git_sha") else "")) for i in ticks]
    fig.update_xaxes(tickvals=ticks, ticktext=labels, row=5, col=1)
    _mark_breaks(fig, cuts)
    title = "Per mode over runs: drag to zoom, double-click to reset; lines stop where the config or device changed"
    if inactive:
        title = f"{escape(inactive)}<br>{title}"
    fig.update_layout(height=1100, title={"text": title, "font": {"size": 13}}, hovermode="closest",
                      margin={"l": 70, "r": 20, "t": 80, "b": 90}, legend={"orientation": "h", "y": 1.02,
                                                                          "x": 1, "xanchor": "right", "yanchor": "bottom"})
    return fig


def latest_hist(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """The newest run that recorded a step-time histogram and its histogram per mode."""
    for e in reversed(entries):
        hists = {m: s["step_time_hist"] for m, s in (e.get("modes") or {}).items()
                 if isinstance(s, dict) and s.get("step_time_hist")}
        if hists:
            return e, hists
    return None


def histogram_figure(entries: list[dict[str, Any]]) -> Any | None:
    """Per mode the step-time histogram (ms) of the newest run that has one, overlaid; None when no run has."""
    import plotly.graph_objects as go

    found = latest_hist(entries)
    if found is None:
        return None
    entry, hists = found
    colors = P.mode_colors(list(hists))
    fig = go.Figure()
    for mode, h in hists.items():
        lo, w = float(h["lo_s"]) * 1e3, float(h["width_s"]) * 1e3
        counts = list(h["counts"])
        fig.add_trace(go.Bar(x=[lo + w * (k + 0.5) for k in range(len(counts))], y=counts, width=w,
                             name=escape(mode), marker={"color": colors[mode]}, opacity=0.55,
                             hovertemplate=escape(mode) + "<br>%{x:.4g} ms: %{y} steps<extra></extra>"))
    rid = escape(str(entry.get("run_id", "")))
    fig.update_layout(barmode="overlay", height=380, hovermode="closest",
                      title={"text": f"Step time per mode, run {rid} (measured steps of its ok trials)",
                             "font": {"size": 13}},
                      xaxis={"title": {"text": "step time (ms)"}}, yaxis={"title": {"text": "steps"}},
                      margin={"l": 70, "r": 20, "t": 60, "b": 50})
    return fig


def figures_html(entries: list[dict[str, Any]], metric: str, fraction: bool, cuts: list[Break],
                 inactive: str | None, tag: str = "", with_js: bool = True) -> str:
    """The suite page's interactive block: plotly.js referenced once (`PLOTLY_JS`, the one copy beside the pages
    `write_plotly_js` writes: a page was 4.8 MB with its own inline copy), then each figure's div and script;
    `tag` tells apart the blocks of one page (one per device kind), `with_js` false: an earlier block referenced
    plotly.js."""
    import plotly.io as pio

    off = max(0, len(entries) - INTERACTIVE_RUNS)
    shown = entries[off:]
    mine = [Break(b.index - off, b.what, b.before, b.after) for b in cuts if b.index > off]
    figs = [("history", history_figure(shown, metric, fraction, mine, inactive)), ("steps", histogram_figure(shown))]
    parts = []
    first = with_js
    for name, fig in figs:
        if fig is None:
            continue
        parts.append(pio.to_html(fig, include_plotlyjs=PLOTLY_JS if first else False, full_html=False,
                                 div_id=f"plot-{name}{tag}", config=PAGE_CONFIG))
        first = False
    return "\n".join(parts)


def write_plotly_js(site: Path) -> Path:
    """The one copy of plotly.js every interactive page of the site loads (offline: from the site's folder)."""
    from plotly.offline import get_plotlyjs

    path = site / PLOTLY_JS
    atomic_write_text(path, get_plotlyjs(), root=site)
    return path
