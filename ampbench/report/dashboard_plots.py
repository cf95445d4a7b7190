"""The dashboard's figure per suite: throughput, peak memory, metric and verdict per mode over runs.

Drawn with matplotlib (math text off) and returned as PNG bytes for a data: URI, so a published
site is plain files with no script or font to fetch.  Regressions (last good -> first bad run) are
shaded red across all panels.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ampbench.report import fmt
from ampbench.report import plots as P

VERDICT_Y = {"PASS": 3, "INCONCLUSIVE": 2, "FAIL": 1, "ERROR": 0}
VERDICT_COLOR = {"PASS": "#2da44e", "INCONCLUSIVE": "#bf8700", "FAIL": P.FLAG_COLOR, "ERROR": "#000000"}


def _series(entries: list[dict[str, Any]], mode: str, key: str, scale: float = 1.0) -> np.ndarray:
    vals = []
    for e in entries:
        v = ((e.get("modes") or {}).get(mode) or {}).get(key)
        vals.append(np.nan if v is None else float(v) * scale)
    return np.array(vals)


def suite_figure(entries: list[dict[str, Any]], metric: str, fraction: bool,
                 regressions: list[tuple[int, int]], inactive: str | None) -> bytes:
    """PNG of four stacked panels over the runs; `regressions`: (last good, first bad) run indexes."""
    modes = list(dict.fromkeys(m for e in entries for m in (e.get("modes") or {})))
    colors = P.mode_colors(modes)
    fig, axes = P._figure(8.0, nrows=4, sharex=True)
    x = np.arange(len(entries))
    unit_m, div = fmt.bytes_unit([float(m.get("peak_bytes") or 0) for e in entries
                                  for m in (e.get("modes") or {}).values()])
    panels = [("samples_per_s", "samples/s (median)", 1.0), ("peak_bytes", f"peak memory ({unit_m})", 1 / div),
              ("metric_mean", metric + (" (%)" if fraction else ""), 100.0 if fraction else 1.0)]
    for row, (key, label, scale) in enumerate(panels):
        ax = axes[row, 0]
        for mode in modes:
            ys = _series(entries, mode, key, scale)
            if not np.all(np.isnan(ys)):
                ax.plot(x, ys, marker="o", markersize=3.5, linewidth=1.3, color=colors[mode],
                        label=mode if row == 0 else None)
        ax.set_ylabel(label, fontsize=8.5)
    _verdict_panel(axes[3, 0], entries, modes, colors)
    for ax in axes[:, 0]:
        for good, bad in regressions:
            ax.axvspan(good + 0.1, bad + 0.1, color=P.FLAG_COLOR, alpha=0.12, linewidth=0)
    axes[-1, 0].set_xticks(x, [P.run_label(e) + _sha(e) for e in entries])
    for lbl in axes[-1, 0].get_xticklabels():
        lbl.set_rotation(30 if len(entries) > 3 else 0)
        lbl.set_ha("right" if len(entries) > 3 else "center")
        lbl.set_fontsize(7.5)
    if regressions:
        axes[0, 0].axvspan(np.nan, np.nan, color=P.FLAG_COLOR, alpha=0.12, label="regression\n(last good to first bad)")
    P._legend_right(axes[0, 0])
    axes[0, 0].set_title("Per mode over runs (x: start date, commit)", fontsize=10)
    buf = io.BytesIO()
    with P._plain_text():
        for t in fig.findobj(lambda o: hasattr(o, "set_parse_math")):
            t.set_parse_math(False)
        if inactive:
            fig.suptitle(inactive, fontsize=9.5, color=P.FLAG_COLOR, fontweight="bold")
        fig.savefig(buf, format="png", dpi=P.DPI)
    return buf.getvalue()


def _sha(e: dict[str, Any]) -> str:
    return f"\n{fmt.short_sha(e.get('git_sha'), 7)}" if e.get("git_sha") else ""


def _verdict_panel(ax: Any, entries: list[dict[str, Any]], modes: list[str], colors: dict[str, str]) -> None:
    amp_modes = [m for m in modes if any(((e.get("modes") or {}).get(m) or {}).get("amp_requested") for e in entries)]
    offsets = np.linspace(-0.15, 0.15, len(amp_modes)) if len(amp_modes) > 1 else np.zeros(1)
    for off, mode in zip(offsets, amp_modes):
        for i, e in enumerate(entries):
            v = ((e.get("modes") or {}).get(mode) or {}).get("verdict")
            if v in VERDICT_Y:
                ax.scatter(i + off, VERDICT_Y[v], color=VERDICT_COLOR[v], edgecolors=colors[mode], linewidths=1.5,
                           s=40, zorder=3)
    ax.set_yticks(list(VERDICT_Y.values()), list(VERDICT_Y))
    ax.set_ylim(-0.6, 3.6)
    ax.set_ylabel("verdict (AMP modes)", fontsize=8.5)
