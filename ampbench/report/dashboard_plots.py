"""The dashboard's figure per suite: throughput, peak memory, metric and verdict per mode over runs.

Drawn with matplotlib (math text off) and returned as PNG bytes for a data: URI, so a published
site is plain files with no script or font to fetch.  Regressions (last good -> first bad run) are
shaded red across all panels; steps the change-point analysis found in a mode's throughput
(judge.changepoint, with or without a verdict flip) are dashed lines, config-hash changes dotted
grey lines; a panel shows each AMP mode's speedup over FP32 with its interval.
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
                 regressions: list[tuple[int, int]], inactive: str | None,
                 steps: list[Any] | None = None, config_changes: list[int] | None = None) -> bytes:
    """PNG of five stacked panels over the runs; `regressions`: (last good, first bad) run indexes;
    `steps`: judge.changepoint.Step (drawn where the series stepped, verdict flip or not);
    `config_changes`: indexes of the first run of a new config hash (another experiment)."""
    modes = list(dict.fromkeys(m for e in entries for m in (e.get("modes") or {})))
    colors = P.mode_colors(modes)
    fig, axes = P._figure(9.6, nrows=5, sharex=True)
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
    _speedup_panel(axes[3, 0], entries, modes, colors)
    _verdict_panel(axes[4, 0], entries, modes, colors)
    for ax in axes[:, 0]:
        for good, bad in regressions:
            ax.axvspan(good + 0.1, bad + 0.1, color=P.FLAG_COLOR, alpha=0.12, linewidth=0)
        for i in config_changes or []:
            ax.axvline(i - 0.5, color="#6e7781", linestyle=":", linewidth=1.2)
    _marks(axes[0, 0], entries, steps or [], config_changes or [])
    axes[-1, 0].set_xticks(x, [P.run_label(e) + _sha(e) for e in entries])
    for lbl in axes[-1, 0].get_xticklabels():
        lbl.set_rotation(30 if len(entries) > 3 else 0)
        lbl.set_ha("right" if len(entries) > 3 else "center")
        lbl.set_fontsize(7.5)
    _legend(axes[0, 0], bool(regressions), bool(steps), bool(config_changes))
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


def _legend(ax: Any, regressions: bool, steps: bool, config_changes: bool) -> None:
    """The legend right of the throughput panel, with an entry for each kind of mark drawn."""
    if regressions:
        ax.axvspan(np.nan, np.nan, color=P.FLAG_COLOR, alpha=0.12, label="regression\n(last good to first bad)")
    if steps:
        ax.plot([], [], color=P.FLAG_COLOR, linestyle="--", label="step in the series\n(change point)")
    if config_changes:
        ax.plot([], [], color="#6e7781", linestyle=":", label="config changed")
    P._legend_right(ax)


def _marks(ax: Any, entries: list[dict[str, Any]], steps: list[Any], config_changes: list[int]) -> None:
    """Label the throughput panel: each change point (mode and size) and each config change."""
    for st in steps or []:
        color = P.FLAG_COLOR if st.regression else "#2da44e"
        ax.axvline(st.after - 0.5, color=color, linestyle="--", linewidth=1.3)
        ys = _series(entries, st.mode, "samples_per_s")
        y = np.nanmax(ys) if not np.all(np.isnan(ys)) else 0.0
        ax.annotate(f"{st.mode} {st.change:+.1%}", (st.after - 0.5, y), fontsize=7, color=color, rotation=90,
                    ha="right", va="top")
    for i in config_changes or []:
        ax.annotate("config changed", (i - 0.5, ax.get_ylim()[0]), fontsize=7, color="#6e7781",
                    rotation=90, ha="right", va="bottom")


def _speedup_panel(ax: Any, entries: list[dict[str, Any]], modes: list[str], colors: dict[str, str]) -> None:
    """AMP / FP32 throughput per run with its interval: the question users ask of the history."""
    x = np.arange(len(entries))
    for mode in modes:
        sp = _series(entries, mode, "speedup")
        if mode == "fp32" or np.all(np.isnan(sp)):
            continue
        lo = np.array([(((e.get("modes") or {}).get(mode) or {}).get("speedup_ci") or [np.nan, np.nan])[0]
                       for e in entries], dtype=float)
        hi = np.array([(((e.get("modes") or {}).get(mode) or {}).get("speedup_ci") or [np.nan, np.nan])[1]
                       for e in entries], dtype=float)
        ax.plot(x, sp, marker="o", markersize=3.5, linewidth=1.3, color=colors[mode])
        ax.fill_between(x, lo, hi, color=colors[mode], alpha=0.15, linewidth=0)
    ax.axhline(1.0, color="#6e7781", linewidth=0.8)
    ax.set_ylabel("speedup vs fp32", fontsize=8.5)


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
