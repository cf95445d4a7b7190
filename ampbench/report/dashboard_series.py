"""Where the dashboard's history lines break: a line never joins two nights of different experiments.

A history mixes experiments: the suite's config changed (another batch size, step count, mode list:
its config hash), or the nightly moved to another device.  Joining such nights draws a "regression"
that is a new experiment (issue 45: accuracy 36 -> 90 -> 36% across two config changes).  The segment
key is the one the pooled history baseline groups by (judge.series): config hash and device kind (slug).  The
dashboard draws one figure per device kind (`kinds`), so only a config change breaks a figure's lines, and
lists each series' cuts as check --history made them (`views`: judge.series' one segmentation).  Each place the key changes is a `Break`, drawn as a marker on both the static PNG and
the interactive view, and the series are cut there (a gap, never a line across it).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ampbench.core.names import device_slug
from ampbench.judge.series import of_rows, row_key
from ampbench.record.models import Env


@dataclass(frozen=True)
class Break:
    index: int   # the first entry of the new segment
    what: str    # "config" or "device"
    before: str
    after: str

    @property
    def label(self) -> str:
        return f"{self.what} changed"


def segment_key(entry: dict[str, Any]) -> tuple[str, str]:
    """(config hash, device slug) of one history row; an empty hash is its own key (not recorded)."""
    env = Env(device=str(entry.get("device") or ""), device_name=str(entry.get("device_name") or ""))
    return str(entry.get("config_hash") or ""), device_slug(env)


def breaks(entries: Sequence[dict[str, Any]]) -> list[Break]:
    """Each index whose segment key differs from the entry before it (a config change wins the label)."""
    out: list[Break] = []
    prev: tuple[str, str] | None = None
    for i, e in enumerate(entries):
        key = segment_key(e)
        if prev is not None and key != prev:
            what = 0 if key[0] != prev[0] else 1
            out.append(Break(i, ("config", "device")[what], prev[what] or "not recorded", key[what] or "not recorded"))
        prev = key
    return out


def segments(n: int, cuts: Sequence[Break]) -> list[range]:
    """The runs 0..n-1 as contiguous ranges of one segment key each."""
    starts = [0, *(b.index for b in cuts if 0 < b.index < n), n]
    return [range(a, b) for a, b in itertools.pairwise(starts) if b > a]


def gapped(xs: Sequence[float], ys: Sequence[Any], cuts: Sequence[Break]) -> tuple[list[float], list[Any]]:
    """(x, y) with one gap point (y None) between any two neighbours on either side of a break: a plotting
    library draws no line across it (plotly's connectgaps false, matplotlib's NaN)."""
    at = sorted(b.index for b in cuts)
    out_x: list[float] = []
    out_y: list[Any] = []
    k = 0
    for x, y in zip(xs, ys):
        crossed = False
        while k < len(at) and at[k] <= x:
            crossed = True
            k += 1
        if crossed and out_x:
            out_x.append(at[k - 1] - 0.5)
            out_y.append(None)
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


# ---------------------------------------------------------------- the one segmentation, as the reports show it


@dataclass(frozen=True)
class Mark:
    """A dashed line on the dashboard's throughput panel: where a regression began (bad) or a new segment starts."""

    at: int
    label: str
    bad: bool
    mode: str = ""


@dataclass(frozen=True)
class Shown:
    """A regression as the trend and the dashboard list it: the modes whose FAILed nights start together, the
    last night before it that was not held out (-1: none), its first and last night (indexes into the rows)."""

    modes: tuple[str, ...]
    good: int
    first: int
    last: int
    open: bool
    nights: int
    worst: float | None


@dataclass(frozen=True)
class SeriesView:
    """One series of a suite's rows (judge.series.of_rows): where it is cut and what it holds."""

    key: tuple[str, str, str]          # suite, config hash, device kind
    rows: tuple[int, ...]              # its rows, indexes into the suite's rows
    since: str                         # where the current segment starts
    cuts: tuple[tuple[int, str, str], ...]    # (row, "accept" | "faster", text) after the first night
    regressions: tuple[Shown, ...]
    pending: tuple[tuple[str, tuple[int, ...]], ...]  # (mode, rows) held out pending the next night
    drift: tuple[tuple[str, float, int, int], ...]    # (mode, change vs the reference, nights, reference nights)


def views(entries: Sequence[dict[str, Any]], accepts: Sequence[Any] = ()) -> list[SeriesView]:
    """Every series of a suite's rows (oldest first) with the cuts check --history made (judge.series)."""
    out = []
    for cut in of_rows(entries, accepts):
        seg, at = cut.seg, cut.rows
        regs: dict[int, list[Any]] = {}
        for r in seg.regressions:
            regs.setdefault(r.first, []).append(r)
        shown = tuple(Shown(tuple(r.mode for r in rs), at[max(r.good for r in rs)] if max(r.good for r in rs) >= 0
                            else -1, at[first], at[max(r.last for r in rs)], any(r.open for r in rs),
                            max(r.nights for r in rs), min((r.worst for r in rs if r.worst is not None), default=None))
                      for first, rs in sorted(regs.items()))
        modes = seg.modes()
        out.append(SeriesView(cut.key, at, seg.since, tuple((at[c.index], c.why, c.text) for c in seg.cuts if c.index),
                              shown, tuple((m, tuple(at[i] for i in p)) for m in modes if (p := seg.pending(m))),
                              tuple((m, *d) for m in modes if (d := seg.drift(m)) is not None)))
    return out


def kinds(entries: Sequence[dict[str, Any]]) -> list[tuple[str, list[int]]]:
    """The device kinds of a suite's rows in order of their first night, with their rows' indexes: the dashboard
    draws one figure per kind (another kind is another level, never joined to this one)."""
    out: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        out.setdefault(row_key(e)[2], []).append(i)
    return list(out.items())
