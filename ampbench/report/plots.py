"""The report's figures (matplotlib, Agg, no pyplot state): sized for GitHub's ~880 px column.

Each function draws one figure from trials or summaries, writes one PNG and returns its path,
or returns None when there is nothing to draw (e.g. no loss scale recorded: FP32, bf16, CPU):
missing data is left out, never drawn as zero.  Colours are fixed per mode for the whole
report (fp32 is always dark grey) so a reader can match lines across figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ampbench.config import REFERENCE_MODE
from ampbench.judge.stats import Margin
from ampbench.record.models import Trial
from ampbench.report import fmt
from ampbench.report.dashboard_series import breaks, gapped
from ampbench.results.history import ModeSummary

WIDTH_IN, DPI = 8.0, 110  # 880 px
# Red is kept for flags (skipped steps, flagged runs), so no mode line is red.
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22"]
REF_COLOR = "#404040"
FLAG_COLOR = "#d62728"
_SEED_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def mode_colors(modes: Sequence[str]) -> dict[str, str]:
    others = [m for m in modes if m != REFERENCE_MODE]
    colors = {m: _PALETTE[i % len(_PALETTE)] for i, m in enumerate(others)}
    colors[REFERENCE_MODE] = REF_COLOR
    return colors


INACTIVE_NOTE = "AMP inactive on this device: every mode ran in FP32"


def _figure(height: float, ncols: int = 1, nrows: int = 1, **kw: Any):
    from matplotlib.figure import Figure

    with _plain_text():
        fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    for ax in axes.flat:
        ax.grid(True, alpha=0.3, linewidth=0.6)
        ax.tick_params(labelsize=8.5)
    return fig, axes


def _plain_text() -> Any:
    """Math text off: a metric or mode name such as `x$\\frac{$y` is drawn as typed, never parsed."""
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False, "text.usetex": False})


def _save(fig: Any, path: Path, inactive: str | None = None) -> Path:
    """Write the PNG; `inactive` (text) is stamped on the figure so the image cannot be read as AMP numbers.
    Rendered into memory, then written by the atomic writer inside the report's folder (plots live in
    <folder>/<plots>/name.png): a link planted at plots/ or at the PNG is refused, never written through."""
    import io

    from ampbench.core.files import atomic_write_bytes

    with _plain_text():
        for t in fig.findobj(lambda o: hasattr(o, "set_parse_math")):
            t.set_parse_math(False)
        if inactive:
            fig.suptitle(inactive, fontsize=9.5, color=FLAG_COLOR, fontweight="bold")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
    path = Path(path)
    atomic_write_bytes(path, buf.getvalue(), root=path.parent.parent)
    return path


def _log_y(ax: Any, base: float = 10) -> None:
    """A log y axis whose tick labels are plain numbers: the default labels are math text
    (`$\\mathdefault{10^{0}}$`), which `_save` turns off for every text on the figure."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_yscale("log", base=base)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _legend_right(ax: Any) -> None:
    """Legend outside the axes on the right: it can never cover data."""
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)


def _by_mode(trials: list[Trial]) -> dict[str, list[Trial]]:
    out: dict[str, list[Trial]] = {}
    for t in trials:
        out.setdefault(t.mode, []).append(t)
    return out


def _curve(trials: list[Trial]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """steps, mean, min, max of the loss over seeds, on the union of recorded steps: each trial's
    losses joined linearly across steps whose loss was not read (a command trial reads it every
    loss_every_steps-th step; an older record, read by time, at steps that differ between seeds), NaN gaps at non-finite ones."""
    steps = sorted({s.step for t in trials for s in t.steps})
    grid = np.full((len(trials), len(steps)), np.nan)
    for r, t in enumerate(trials):
        seen = sorted((s for s in t.steps if s.loss_seen), key=lambda s: s.step)
        if seen:
            y = [s.loss if s.loss is not None and math.isfinite(s.loss) else np.nan for s in seen]
            grid[r] = np.interp(steps, [s.step for s in seen], y, left=np.nan, right=np.nan)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns are gaps
            return np.array(steps), np.nanmean(grid, 0), np.nanmin(grid, 0), np.nanmax(grid, 0)


def loss_curves(trials: list[Trial], path: Path, colors: dict[str, str],
                warmup_steps: int = 0, inactive: str | None = None) -> Path | None:
    """Training loss per mode: mean over seeds, band = min..max over seeds."""
    groups = {m: ts for m, ts in _by_mode(trials).items()
              if any(s.loss is not None and math.isfinite(s.loss) for t in ts for s in t.steps)}
    if not groups:
        return None
    fig, axes = _figure(3.6)
    ax = axes[0, 0]
    positive = True
    dashes = [(5, 2), (2, 1.5), (6, 2, 1.5, 2), (1, 1)]
    for i, (mode, ts) in enumerate(groups.items()):
        x, mean, lo, hi = _curve(ts)
        positive &= bool(np.nanmin(lo) > 0)
        n = len(ts)
        # fp32 solid and wide underneath, AMP modes dashed on top: identical curves (AMP inactive)
        # stay visible instead of hiding each other.
        style: dict[str, Any] = {"linewidth": 2.6}
        if mode != REFERENCE_MODE:
            style = {"linewidth": 1.4, "dashes": dashes[i % len(dashes)]}
        ax.plot(x, mean, color=colors[mode], label=f"{mode} ({n} seed{'s' if n > 1 else ''})", **style)
        if n > 1:
            ax.fill_between(x, lo, hi, color=colors[mode], alpha=0.15, linewidth=0)
    if warmup_steps:
        first = min(s.step for ts in groups.values() for t in ts for s in t.steps)
        ax.axvspan(first - 0.5, warmup_steps + 0.5, color="#999999", alpha=0.12, linewidth=0,
                   label="warm-up (not timed)")
    lo_all = np.nanmin([np.nanmin(_curve(ts)[2]) for ts in groups.values()])
    hi_all = np.nanmax([np.nanmax(_curve(ts)[3]) for ts in groups.values()])
    if positive and hi_all / max(lo_all, 1e-30) > 30:
        _log_y(ax)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.set_title("Training loss (line: mean over seeds, band: min to max)", fontsize=10)
    _legend_right(ax)
    return _save(fig, path, inactive)


def loss_scale(trials: list[Trial], path: Path, colors: dict[str, str], inactive: str | None = None) -> Path | None:
    """Loss scale per AMP trial on a log2 axis; skipped (found_inf) steps marked with an x."""
    groups = {m: [t for t in ts if any(s.loss_scale is not None for s in t.steps)]
              for m, ts in _by_mode(trials).items()}
    groups = {m: ts for m, ts in groups.items() if ts}
    if not groups:
        return None
    fig, axes = _figure(3.4)
    ax = axes[0, 0]
    styles = ["-", "--", ":", "-."]
    any_skip = False
    for mode, ts in groups.items():
        for i, t in enumerate(ts):
            pts = [(s.step, s.loss_scale) for s in t.steps if s.loss_scale is not None and s.loss_scale > 0]
            if not pts:
                continue
            x, y = zip(*pts)
            ax.step(x, y, where="post", color=colors[mode], linestyle=styles[i % len(styles)], linewidth=1.2,
                    label=f"{mode} seed {t.seed}")
            skip = [(s.step, s.loss_scale) for s in t.steps if s.found_inf and s.loss_scale]
            if skip:
                any_skip = True
                sx, sy = zip(*skip)
                ax.scatter(sx, sy, marker="x", s=22, color=FLAG_COLOR, linewidths=1.1, zorder=3)
    _log_y(ax, base=2)
    if any_skip:
        ax.scatter([], [], marker="x", color=FLAG_COLOR, label="skipped step (found inf/nan)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss scale (log2 axis)")
    ax.set_title("Dynamic loss scale; x = step skipped because gradients overflowed", fontsize=10)
    _legend_right(ax)
    return _save(fig, path, inactive)


def throughput_memory(summaries: dict[str, ModeSummary], path: Path, colors: dict[str, str],
                      confidence: float = 0.95, inactive: str | None = None) -> Path | None:
    """Two horizontal bar charts: median samples/s (with CI) and peak memory per mode."""
    modes = [m for m, s in summaries.items() if s.samples_per_s or s.peak_bytes]
    if not modes:
        return None
    fig, axes = _figure(0.9 + 0.45 * len(modes), ncols=2)
    ax_t, ax_m = axes[0, 0], axes[0, 1]
    ypos = np.arange(len(modes))[::-1]
    ref = summaries.get(REFERENCE_MODE)
    unit = next((s.unit for s in summaries.values() if s.unit), "samples")
    _throughput_bars(ax_t, summaries, modes, ypos, colors)
    unit_m = _memory_bars(ax_m, summaries, modes, ypos, colors)
    sources = sorted({summaries[m].memory_source for m in modes if summaries[m].peak_bytes})
    for ax in (ax_t, ax_m):
        ax.set_yticks(ypos, modes)
        ax.margins(x=0.32)
        ax.set_xlim(left=0)
    ax_m.tick_params(labelleft=False)
    ax_t.set_xlabel(f"{unit}/s (median per step, {confidence:.0%} CI)")
    ax_m.set_xlabel(f"peak memory ({unit_m}; {', '.join(sources) or 'n/a'})")
    ax_t.set_title("Throughput" + (" (label: speedup vs fp32)" if ref else ""), fontsize=10)
    ax_m.set_title("Peak memory" + (" (label: change vs fp32)" if ref else ""), fontsize=10)
    return _save(fig, path, inactive)


def _throughput_bars(ax: Any, summaries: dict[str, ModeSummary], modes: list[str], ypos: np.ndarray,
                     colors: dict[str, str]) -> None:
    """Each mode's median samples/s as a bar with its interval, labelled past the interval's end with the
    number and the speedup vs fp32; a mode without throughput (memory only) gets no bar."""
    for y, m in zip(ypos, modes):
        s = summaries[m]
        if not s.samples_per_s:
            continue
        ax.barh(y, s.samples_per_s, color=colors[m], xerr=_interval_err(s), capsize=3, height=0.6)
        label = fmt.num(s.samples_per_s) + (f"  ({fmt.ratio(s.speedup)})" if s.speedup else "")
        end = s.samples_per_s_ci[1] if s.samples_per_s_ci else s.samples_per_s
        ax.annotate(label, (end, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)


def _interval_err(s: ModeSummary) -> list[list[float]] | None:
    """The throughput interval as matplotlib's asymmetric xerr: the distances below and above the median,
    clipped at zero (an interval that misses its median must not draw a negative bar); None without one."""
    if not s.samples_per_s_ci or not s.samples_per_s:
        return None
    lo, hi = s.samples_per_s_ci
    return [[max(0.0, s.samples_per_s - lo)], [max(0.0, hi - s.samples_per_s)]]


def _memory_bars(ax: Any, summaries: dict[str, ModeSummary], modes: list[str], ypos: np.ndarray,
                 colors: dict[str, str]) -> str:
    """Each mode's peak memory as a bar, all in the one unit that suits the largest (returned for the axis
    label), labelled with the number and the change vs fp32; a mode without a peak gets no bar."""
    mem = [summaries[m].peak_bytes or 0 for m in modes]
    unit_m, div = fmt.bytes_unit([float(v) for v in mem])
    for y, m, v in zip(ypos, modes, mem):
        s = summaries[m]
        if not v:
            continue
        ax.barh(y, v / div, color=colors[m], height=0.6)
        label = fmt.num(v / div) + (f"  ({fmt.pct(-s.memory_reduction, decimals=0)})"
                                    if s.memory_reduction is not None else "")
        ax.annotate(label, (v / div, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    return unit_m


def metric_per_seed(trials: list[Trial], metric: str, path: Path, colors: dict[str, str],
                    fraction: bool, margin: Margin | None = None, goal: str = "max",
                    inactive: str | None = None) -> Path | None:
    """The primary metric of every ok trial as a point, one column per mode, mean as a bar."""
    groups = {m: [t for t in ts if _has_metric(t, metric)] for m, ts in _by_mode(trials).items()}
    modes = [m for m, ts in groups.items() if ts]
    if not modes:
        return None
    fig, axes = _figure(3.0)
    ax = axes[0, 0]
    k = 100.0 if fraction else 1.0
    seeds = sorted({t.seed for ts in groups.values() for t in ts})
    marker = {sd: _SEED_MARKERS[i % len(_SEED_MARKERS)] for i, sd in enumerate(seeds)}
    for i, m in enumerate(modes):
        _seed_column(ax, i, groups[m], metric, k, colors[m], marker)
    if margin is not None and REFERENCE_MODE in modes:
        _draw_margin(ax, groups[REFERENCE_MODE], metric, k, margin, goal)
    for sd in seeds:
        ax.scatter([], [], color="#777777", marker=marker[sd], s=30, label=f"seed {sd}")
    ax.plot([], [], color="#777777", linewidth=2.2, alpha=0.45, label="mean")
    _legend_right(ax)
    ax.set_xticks(range(len(modes)), modes)
    ax.set_xlim(-0.6, len(modes) - 0.4)
    ax.set_ylabel(f"{metric} (%)" if fraction else metric)
    ax.set_title(f"Final {metric} per seed (markers) and mean over seeds (bar)", fontsize=10)
    if len(modes) > 4:
        for lbl in ax.get_xticklabels():
            lbl.set_rotation(15)
            lbl.set_ha("right")
    return _save(fig, path, inactive)


def _has_metric(t: Trial, metric: str) -> bool:
    """Whether the trial counts for the metric plot: finished ok with a finite value (a crashed or
    diverged trial's number, or a NaN, is left out rather than drawn)."""
    return t.status == "ok" and metric in t.metrics and math.isfinite(t.metrics[metric])


def _seed_column(ax: Any, i: int, ts: list[Trial], metric: str, k: float, color: str,
                 marker: dict[int, str]) -> None:
    """Column `i` of the metric plot: the mean over the mode's trials as a short bar, each trial as a point
    in its seed's marker, spread sideways so that equal values of two seeds stay visible."""
    vals = np.array([t.metrics[metric] for t in ts]) * k
    ax.hlines(vals.mean(), i - 0.3, i + 0.3, color=color, linewidth=2.2, alpha=0.45, zorder=2)
    offs = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(1)
    for o, v, t in zip(offs, vals, ts):
        ax.scatter(i + o, v, color=color, marker=marker[t.seed], s=30, zorder=3,
                   edgecolors="white", linewidths=0.5)


def _draw_margin(ax: Any, ref: list[Trial], metric: str, k: float, margin: Margin, goal: str) -> None:
    """The accuracy-parity band: from the FP32 mean to the worst mean AMP may reach and still pass."""
    ref_mean = float(np.mean([t.metrics[metric] for t in ref]))
    limit = ref_mean - margin.value if goal == "max" else ref_mean + margin.value
    lo, hi = sorted((ref_mean * k, limit * k))
    ax.axhspan(lo, hi, color=REF_COLOR, alpha=0.08, linewidth=0, zorder=1)
    ax.axhline(limit * k, color=REF_COLOR, linestyle="--", linewidth=1.0, zorder=1,
               label=f"parity limit (fp32 mean {'-' if goal == 'max' else '+'} margin "
               f"{fmt.num_g(margin.value * k)}{' pt' if k == 100.0 else ''})")


def trend(entries: list[dict[str, Any]], path: Path, colors: dict[str, str], metric: str,
          fraction: bool, inactive: str | None = None) -> Path | None:
    """Throughput, peak memory and metric per mode over runs; runs the checker flagged are circled; lines
    stop where the config or the device changed (dashboard_series.breaks), a dotted line marks it."""
    if len(entries) < 2:
        return None
    panels = [("samples_per_s", "samples/s (median)"), ("peak_bytes", "peak memory"),
              ("metric_mean", f"{metric} mean" + (" (%)" if fraction else ""))]
    fig, axes = _figure(6.4, nrows=3, sharex=True)
    mem_vals = [v for e in entries for m in e.get("modes", {}).values()
                if math.isfinite(v := plottable(m.get("peak_bytes")))]
    unit_m, div = fmt.bytes_unit(mem_vals)
    modes = list(dict.fromkeys(m for e in entries for m in e.get("modes", {})))
    flagged_any = False
    cuts = breaks(entries)
    for row, (key, label) in enumerate(panels):
        ax = axes[row, 0]
        scale = _trend_scale(key, div, fraction)
        for mode in modes:
            circled = _trend_line(ax, entries, mode, key, scale, cuts, colors.get(mode, REF_COLOR),
                                  mode if row == 0 else None)
            flagged_any = flagged_any or circled
        ax.set_ylabel(label if key != "peak_bytes" else f"{label} ({unit_m})", fontsize=9)
        if cuts:
            ax.vlines([c.index - 0.5 for c in cuts], 0, 1, transform=ax.get_xaxis_transform(), color="#6e7781",
                      linestyle=":", linewidth=1.2, label="config or device\nchanged (lines cut)" if row == 0 else None)
    if flagged_any:
        axes[0, 0].scatter([], [], s=90, facecolors="none", edgecolors=FLAG_COLOR,
                           label="flagged by\nthe checker\n(FAIL/ERROR)")
    _trend_x_axis(axes[-1, 0], entries)
    _legend_right(axes[0, 0])
    axes[0, 0].set_title("Trend over runs", fontsize=10)
    return _save(fig, path, inactive)


def _trend_scale(key: str, div: float, fraction: bool) -> float:
    """The factor a trend panel's values are drawn at: memory in the unit every run shares (bytes_unit's
    divisor), a fraction metric in percent, so the axis reads as the tables do."""
    if key == "peak_bytes":
        return 1 / div
    return 100.0 if key == "metric_mean" and fraction else 1.0


def _trend_line(ax: Any, entries: list[dict[str, Any]], mode: str, key: str, scale: float, cuts: list[Any],
                color: str, label: str | None) -> bool:
    """One mode's series on one trend panel, cut at each config or device change, the runs the checker
    flagged (FAIL/ERROR) circled in red.  A mode with no plottable value on this panel draws nothing.
    Returns whether a circle was drawn, so the legend explains the circles only when there are some."""
    ys, fl = [], []
    for e in entries:
        ms = e.get("modes", {}).get(mode) or {}
        ys.append(plottable(ms.get(key), scale))
        fl.append(ms.get("verdict") in ("FAIL", "ERROR"))
    ys_a = np.array(ys)
    if np.all(np.isnan(ys_a)):
        return False
    x = np.arange(len(entries))
    gx, gy = gapped(list(x), list(ys_a), cuts)  # no line across a config or device change
    ax.plot(gx, [math.nan if v is None else v for v in gy], marker="o", markersize=3.5,
            color=color, linewidth=1.3, label=label)
    fx = [xi for xi, f, y in zip(x, fl, ys_a) if f and not np.isnan(y)]
    if not fx:
        return False
    ax.scatter(fx, [ys_a[i] for i in fx], s=90, facecolors="none", edgecolors=FLAG_COLOR,
               linewidths=1.4, zorder=4)
    return True


def _trend_x_axis(ax: Any, entries: list[dict[str, Any]]) -> None:
    """The bottom panel's run labels (start date): at most a dozen, tilted once there are more than four
    so neighbouring dates do not overlap."""
    ticks = thin_ticks(len(entries))
    ax.set_xticks(ticks, [run_label(entries[i]) for i in ticks])
    tilted = len(ticks) > 4
    for lbl in ax.get_xticklabels():
        lbl.set_rotation(30 if tilted else 0)
        lbl.set_ha("right" if tilted else "center")
        lbl.set_fontsize(8)
    ax.set_xlabel("run (start date)")


PLOT_LIMIT = 1e150  # larger magnitudes (a corrupt or hostile 1e308) break axis limits; drawn as gaps


def plottable(v: Any, scale: float = 1.0) -> float:
    """A value for an axis: a finite number of sane magnitude, else NaN (a gap)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    x = float(v) * scale
    return x if math.isfinite(x) and abs(x) < PLOT_LIMIT else math.nan


def thin_ticks(n: int, most: int = 12) -> list[int]:
    """At most `most` evenly spread run indexes to label (one label per run does not scale)."""
    if n <= most:
        return list(range(n))
    return sorted({round(float(i)) for i in np.linspace(0, n - 1, most)})


def run_label(entry: dict[str, Any]) -> str:
    started = str(entry.get("started") or "")
    if not started:
        return str(entry.get("run_id", ""))[:16]
    return started[:10] + (" " + started[11:16] if len(started) >= 16 else "")
