"""Where the dashboard's history lines break: a line never joins two nights of different experiments.

A history mixes experiments: the suite's config changed (another batch size, step count, mode list:
its config hash), or the nightly moved to another device.  Joining such nights draws a "regression"
that is a new experiment (issue 45: accuracy 36 -> 90 -> 36% across two config changes).  The segment
key is the one the pooled history baseline groups by (commands.history.open_regressions): config hash
and device slug.  Each place the key changes is a `Break`, drawn as a marker on both the static PNG and
the interactive view, and the series are cut there (a gap, never a line across it).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ampbench.core.names import device_slug
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
