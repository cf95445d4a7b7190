"""The dashboard's figure per suite: throughput, peak memory, metric and verdict per mode over runs.

Drawn with matplotlib (math text off) and returned as PNG bytes for a data: URI, so a published
site is plain files with no script or font to fetch.  Regressions (last good -> first bad run) are
shaded red across all panels, as check --history cut the series (judge.series: the one segmentation), and
a dashed line marks where each began and where a new segment starts (an accepted level, an improvement);
one figure per device kind; where the config hash changed (dashboard_series.breaks) every series is cut
(no line joins two experiments, and a
bin of a long history never spans a change) and a dotted grey line says what changed; a panel shows
each AMP mode's speedup over FP32 with its interval.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from ampbench.report import fmt
from ampbench.report import plots as P
from ampbench.report.dashboard_series import Break, gapped, segments

VERDICT_Y = {"PASS": 3, "INCONCLUSIVE": 2, "FAIL": 1, "ERROR": 0}
VERDICT_COLOR = {"PASS": "#2da44e", "INCONCLUSIVE": "#bf8700", "FAIL": P.FLAG_COLOR, "ERROR": "#000000"}


MAX_POINTS = 400   # per mode and panel: longer histories are drawn as per-bin medians with a min-max band


def _series(entries: list[dict[str, Any]], mode: str, key: str, scale: float = 1.0) -> np.ndarray:
    vals = []
    for e in entries:
        v = ((e.get("modes") or {}).get(mode) or {}).get(key)
        vals.append(P.plottable(v, scale))
    return np.array(vals, dtype=float)


def _bins(n: int, cuts: list[Break] | None = None) -> list[np.ndarray]:
    """Run indexes per plotted point: one run each up to MAX_POINTS, else about MAX_POINTS contiguous
    bins, each inside one segment (a bin never mixes two configs or devices)."""
    idx = np.arange(n)
    if n <= MAX_POINTS:
        return [idx[i:i + 1] for i in range(n)]
    out: list[np.ndarray] = []
    for seg in segments(n, cuts or []):
        out.extend(np.array_split(idx[seg.start:seg.stop], max(1, round(len(seg) * MAX_POINTS / n))))
    return out


def _gap(xs: np.ndarray, cuts: list[Break], *ys: np.ndarray) -> tuple[np.ndarray, ...]:
    """`xs` and each of `ys` with a NaN point at every break between two plotted points (the line stops)."""
    if not cuts:
        return (xs, *ys)
    out = [gapped(list(xs), list(y), cuts) for y in ys]
    x = np.array(out[0][0], dtype=float) if out else xs
    return (x, *(np.array([math.nan if v is None else v for v in y], dtype=float) for _, y in out))


def _binned(ys: np.ndarray, bins: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, median, min, max) per bin, bins with no value dropped."""
    if len(bins) == len(ys):
        keep = ~np.isnan(ys)
        x = np.arange(len(ys))[keep]
        return x, ys[keep], ys[keep], ys[keep]
    starts = np.array([b[0] for b in bins])
    x, med, lo, hi = [], [], [], []
    for k in range(len(bins)):
        v = ys[starts[k]:starts[k] + len(bins[k])]
        v = v[~np.isnan(v)]
        if len(v):
            x.append(float(np.mean(bins[k])))
            med.append(float(np.median(v)))
            lo.append(float(v.min()))
            hi.append(float(v.max()))
    return np.array(x), np.array(med), np.array(lo), np.array(hi)


def suite_figure(entries: list[dict[str, Any]], metric: str, fraction: bool,
                 regressions: list[tuple[int, int]], inactive: str | None,
                 steps: list[Any] | None = None, cuts: list[Break] | None = None) -> bytes:
    """PNG of five stacked panels over the runs; `regressions`: (last good, first bad) run indexes;
    `steps`: dashboard_series.Mark (where a regression began, where a new segment starts: judge.series);
    `cuts`: where the config hash changed (another experiment: every series stops there)."""
    cuts = cuts or []
    modes = list(dict.fromkeys(m for e in entries for m in (e.get("modes") or {})))
    colors = P.mode_colors(modes)
    fig, axes = P._figure(9.6, nrows=5, sharex=True)
    bins = _bins(len(entries), cuts)
    _value_panels(axes, entries, modes, colors, bins, cuts, metric, fraction)
    _speedup_panel(axes[3, 0], entries, modes, colors, bins, cuts)
    _verdict_panel(axes[4, 0], entries, modes, colors, bins)
    _mark_regressions(axes, regressions)
    if cuts:  # one line collection per panel, however many changes
        for ax in axes[:, 0]:
            ax.vlines([b.index - 0.5 for b in cuts], 0, 1, transform=ax.get_xaxis_transform(), color="#6e7781",
                      linestyle=":", linewidth=1.2)
    _marks(axes[0, 0], entries, steps or [], cuts)
    _x_axis(axes[-1, 0], entries)
    _legend(axes[0, 0], bool(regressions), bool(steps), bool(cuts))
    axes[0, 0].set_title(_title(len(entries), len(bins)), fontsize=10)
    return _png(fig, inactive)


def _value_panels(axes: Any, entries: list[dict[str, Any]], modes: list[str], colors: dict[str, str],
                  bins: list[np.ndarray], cuts: list[Break], metric: str, fraction: bool) -> None:
    """The top three panels: throughput, peak memory (in the one unit that suits every run) and the metric
    (in percent for a fraction), a line per mode cut at each break; a long history, binned, is drawn as
    the per-bin median with its min-max band and no markers."""
    binned = len(bins) < len(entries)
    unit_m, div = fmt.bytes_unit([v for e in entries for m in (e.get("modes") or {}).values()
                                  if math.isfinite(v := P.plottable(m.get("peak_bytes")))])
    panels = [("samples_per_s", "samples/s (median)", 1.0), ("peak_bytes", f"peak memory ({unit_m})", 1 / div),
              ("metric_mean", metric + (" (%)" if fraction else ""), 100.0 if fraction else 1.0)]
    for row, (key, label, scale) in enumerate(panels):
        ax = axes[row, 0]
        for mode in modes:
            xb, med_b, lo_b, hi_b = _binned(_series(entries, mode, key, scale), bins)
            xs, med, lo, hi = _gap(xb, cuts, med_b, lo_b, hi_b)
            if not len(xs):
                continue
            ax.plot(xs, med, marker=None if binned else "o", markersize=3.5, linewidth=1.3, color=colors[mode],
                    label=mode if row == 0 else None)
            if binned:
                ax.fill_between(xs, lo, hi, color=colors[mode], alpha=0.15, linewidth=0)
        ax.set_ylabel(label, fontsize=8.5)


def _title(runs: int, points: int) -> str:
    """The figure's title; a binned history says how many runs each plotted point stands for."""
    if points < runs:
        return (f"Per mode over {runs:,} runs: median per bin of about {runs // points} runs, "
                "band min to max (x: start date, commit)")
    return "Per mode over runs (x: start date, commit)"


def _png(fig: Any, inactive: str | None) -> bytes:
    """The figure as PNG bytes with math text off on every text (a mode or metric name is drawn as typed),
    stamped with `inactive` when AMP never ran, so the image cannot be read as AMP numbers."""
    buf = io.BytesIO()
    with P._plain_text():
        for t in fig.findobj(lambda o: hasattr(o, "set_parse_math")):
            t.set_parse_math(False)
        if inactive:
            fig.suptitle(inactive, fontsize=9.5, color=P.FLAG_COLOR, fontweight="bold")
        fig.savefig(buf, format="png", dpi=P.DPI)
    return buf.getvalue()


def _mark_regressions(axes: Any, regressions: list[tuple[int, int]]) -> None:
    """Last good -> first bad shaded on every panel; many of them as one line collection per panel."""
    for ax in axes[:, 0]:
        if len(regressions) <= 50:
            for good, bad in regressions:
                ax.axvspan(good + 0.1, bad + 0.1, color=P.FLAG_COLOR, alpha=0.12, linewidth=0)
        else:  # one collection, not one patch per regression
            ax.vlines([bad for _, bad in regressions], 0, 1, transform=ax.get_xaxis_transform(),
                      color=P.FLAG_COLOR, alpha=0.25, linewidth=0.6)


def _x_axis(ax: Any, entries: list[dict[str, Any]]) -> None:
    """At most a dozen run labels (start date, commit), whatever the number of runs."""
    ticks = P.thin_ticks(len(entries))
    ax.set_xticks(ticks, [P.run_label(entries[i]) + _sha(entries[i]) for i in ticks])
    for lbl in ax.get_xticklabels():
        lbl.set_rotation(30 if len(ticks) > 3 else 0)
        lbl.set_ha("right" if len(ticks) > 3 else "center")
        lbl.set_fontsize(7.5)


def _sha(e: dict[str, Any]) -> str:
    return f"\n{fmt.short_sha(e.get('git_sha'), 7)}" if e.get("git_sha") else ""


def _legend(ax: Any, regressions: bool, steps: bool, config_changes: bool) -> None:
    """The legend right of the throughput panel, with an entry for each kind of mark drawn."""
    if regressions:
        ax.axvspan(np.nan, np.nan, color=P.FLAG_COLOR, alpha=0.12, label="regression\n(last good to first bad)")
    if steps:
        ax.plot([], [], color=P.FLAG_COLOR, linestyle="--", label="regression begins, or\na new segment (green)")
    if config_changes:
        ax.plot([], [], color="#6e7781", linestyle=":", label="config or device\nchanged (lines cut)")
    P._legend_right(ax)


def _marks(ax: Any, entries: list[dict[str, Any]], marks: list[Any], cuts: list[Break]) -> None:
    """Label the throughput panel: where a regression began and each new segment (dashboard_series.Mark: an
    accepted level, an improvement), each config change."""
    for mk in marks or []:
        color = P.FLAG_COLOR if mk.bad else "#2da44e"
        ax.axvline(mk.at - 0.5, color=color, linestyle="--", linewidth=1.3)
        ys = _series(entries, mk.mode, "samples_per_s") if mk.mode else np.array([np.nan])
        y = np.nanmax(ys) if not np.all(np.isnan(ys)) else ax.get_ylim()[1]
        ax.annotate(mk.label, (mk.at - 0.5, y), fontsize=7, color=color, rotation=90, ha="right", va="top")
    for b in cuts[:50]:  # more labels than that only overlap; the lines are all drawn
        ax.annotate(b.label, (b.index - 0.5, ax.get_ylim()[0]), fontsize=7, color="#6e7781",
                    rotation=90, ha="right", va="bottom")


def _speedup_panel(ax: Any, entries: list[dict[str, Any]], modes: list[str], colors: dict[str, str],
                   bins: list[np.ndarray] | None = None, cuts: list[Break] | None = None) -> None:
    """AMP / FP32 throughput per run with its interval: the question users ask of the history.
    A long history: per bin the median speedup, the band from the lowest interval end to the highest."""
    cuts = cuts or []
    bins = bins if bins is not None else _bins(len(entries), cuts)
    binned = len(bins) < len(entries)
    for mode in modes:
        sp = _series(entries, mode, "speedup")
        if mode == "fp32" or np.all(np.isnan(sp)):
            continue
        ci = [((e.get("modes") or {}).get(mode) or {}).get("speedup_ci") or [None, None] for e in entries]
        lo = np.array([P.plottable(c[0]) for c in ci], dtype=float)
        hi = np.array([P.plottable(c[1]) for c in ci], dtype=float)
        x, med, _, _ = _binned(sp, bins)
        x, med = _gap(x, cuts, med)
        xl, _, low, _ = _binned(lo, bins)
        xh, _, _, high = _binned(hi, bins)
        ax.plot(x, med, marker=None if binned else "o", markersize=3.5, linewidth=1.3, color=colors[mode])
        if len(xl) and np.array_equal(xl, xh):  # the band where both interval ends are known, cut at breaks
            xl, low, high = _gap(xl, cuts, low, high)
            ax.fill_between(xl, low, high, color=colors[mode], alpha=0.15, linewidth=0)
    ax.axhline(1.0, color="#6e7781", linewidth=0.8)
    ax.set_ylabel("speedup vs fp32", fontsize=8.5)


def _verdict_panel(ax: Any, entries: list[dict[str, Any]], modes: list[str], colors: dict[str, str],
                   bins: list[np.ndarray] | None = None) -> None:
    """One marker per run (or per bin: its worst verdict), all of a mode in one scatter call."""
    amp_modes = [m for m in modes if any(((e.get("modes") or {}).get(m) or {}).get("amp_requested") for e in entries)]
    offsets = np.linspace(-0.15, 0.15, len(amp_modes)) if len(amp_modes) > 1 else np.zeros(1)
    bins = bins if bins is not None else _bins(len(entries))
    for off, mode in zip(offsets, amp_modes):
        ys = np.array([float(VERDICT_Y.get(str(((e.get("modes") or {}).get(mode) or {}).get("verdict")), np.nan))
                       for e in entries], dtype=float)
        xs, ws = [], []
        for b in bins:
            v = ys[b[0]:b[-1] + 1]
            v = v[~np.isnan(v)]
            if len(v):
                xs.append(float(np.mean(b)) + off)
                ws.append(float(v.min()))
        if xs:
            names = {y: n for n, y in VERDICT_Y.items()}
            ax.scatter(xs, ws, c=[VERDICT_COLOR[names[int(w)]] for w in ws], edgecolors=colors[mode],
                       linewidths=1.5, s=40 if len(xs) < 100 else 12, zorder=3)
    ax.set_yticks(list(VERDICT_Y.values()), list(VERDICT_Y))
    ax.set_ylim(-0.6, 3.6)
    ax.set_ylabel("verdict (AMP modes)", fontsize=8.5)
