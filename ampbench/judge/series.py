"""The nightly history as one typed series and its one segmentation (issue 55).

`check --history` (judge.pooled, judge.rules.history_pooled), the trend report (report.trend), the dashboard
(report.publish) and `history bisect` (commands.history_bisect) all read the history through this module, so
they cut it at the same nights and mean the same thing by a regression:

- **The series**: the history lines of one suite, config hash and device kind (the device slug each line
  recorded), oldest first (`group`, `series_key`).  Another config is another experiment; another kind of GPU
  is another level (two SKUs 6% apart), never a baseline for this one: a kind with too few nights says so.
- **A regression** is a night that `check --history` FAILed on history-throughput (the line records it:
  `ModeSummary.history_status`, `history_hold`), and a run of such nights of one mode is one regression, named
  by the last night before it that was not held out and its first night (`Regression`).  A step of the level
  that no night FAILed is no regression: the dashboard shows it as the drift against the reference level.
- **Held out of the pool**: a FAILed night, and a *pending* night (a slowdown shown at the PASS level but not
  at the FAIL level, or slow steps in every mode that the next night must confirm).  Nothing else is
  censored: an unchanged night below -history_min_change by chance stays in (a one-sided hold-out biases the
  baseline up).  A pending night comes back when the next night of its mode is not held (it was noise); a
  held night that FAILed stays out, and while the newest nights are held the regression is open and asks
  for an accept (`ampbench history accept`).
- **The segment** the current night is judged against starts at the start of the series, at the newest
  accepted level (results.accepts), or at an improvement: RISE_RUNS nights in a row, in any mode, above the
  segment's recent mean by history_min_change (`Cut`).  Never at a downward step without an accept: that is
  how a creep was absorbed.
- **The nights a night is judged against** (`Pools`, per mode): the recent window (the newest POOL_CAP kept
  nights of the segment), the reference level (its first REFERENCE_RUNS kept nights, which a creep cannot
  move), and the spread groups (the kept nights of this and earlier segments, each around its own mean: the
  spread is the machine's, so it survives an accept).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ampbench.core.names import device_slug
from ampbench.core.records import Env
from ampbench.results.history import ModeSummary, RunSummary

HOLD_FAIL, HOLD_PENDING = "fail", "pending"  # ModeSummary.history_hold
POOL_CAP = 20          # the recent window: newest kept nights of the segment
REFERENCE_RUNS = 10    # the reference level: the segment's first kept nights
SPREAD_CAP = 40        # nights of the series whose spread around their segment's mean is pooled
MIN_RUNS = 3           # nights of the series before a night is judged (the spread needs two pairs)
RISE_RUNS = 3          # nights in a row above the recent mean by min_change: an improvement, a new segment


@dataclass(frozen=True)
class ModePoint:
    """One mode of one night, as the segmentation and the gate read it."""

    level: float | None             # log run figure: the median of the trials' fast floors (else log samples/s)
    pooled: bool                    # the line keeps per-trial figures (it can join a pool)
    hold: str | None = None         # HOLD_FAIL, HOLD_PENDING or None, as check recorded it
    status: str | None = None       # history-throughput's status that night
    change: float | None = None     # and its estimate


@dataclass(frozen=True)
class Night:
    run_id: str
    modes: Mapping[str, ModePoint]
    started: str = ""
    git_sha: str = ""
    kind: str = ""
    config_hash: str = ""


def kind_of(line: RunSummary) -> str:
    """The device kind of a history line: its device slug (a line that recorded no device: "")."""
    return device_slug(Env(device=line.device, device_name=line.device_name)) if line.device else ""


def series_key(line: RunSummary) -> tuple[str, str, str]:
    return line.suite, line.config_hash, kind_of(line)


def _hold_of(m: ModeSummary) -> str | None:
    """The recorded hold; a line written before it was recorded holds a night that FAILed."""
    hold = getattr(m, "history_hold", None)
    if hold in (HOLD_FAIL, HOLD_PENDING):
        return str(hold)
    return HOLD_FAIL if m.history_status == "FAIL" and hold is None else None


def mode_point(m: ModeSummary) -> ModePoint:
    floors = sorted(math.log(p.floor_samples_per_s) for p in m.per_trial if p.floor_samples_per_s)
    if floors:
        k = len(floors)
        level: float | None = (floors[k // 2] + floors[(k - 1) // 2]) / 2
    elif m.floor_samples_per_s or m.samples_per_s:
        level = math.log(m.floor_samples_per_s or m.samples_per_s or 1.0)
    else:
        level = None
    return ModePoint(level, any(p.samples_per_s for p in m.per_trial), _hold_of(m), m.history_status,
                     m.history_change)


def night_of(line: RunSummary) -> Night:
    return Night(line.run_id, {k: mode_point(m) for k, m in line.modes.items()}, line.started, line.git_sha,
                 kind_of(line), line.config_hash)


def group(lines: Iterable[RunSummary]) -> dict[tuple[str, str, str], list[RunSummary]]:
    """The lines by series (suite, config hash, device kind), each oldest first."""
    out: dict[tuple[str, str, str], list[RunSummary]] = {}
    for h in sorted(lines, key=lambda h: (h.started or "", h.run_id)):
        out.setdefault(series_key(h), []).append(h)
    return out


@dataclass(frozen=True)
class Cut:
    """Where a segment starts: index of its first night, why ("start", "accept", "faster") and the text."""

    index: int
    why: str
    text: str


@dataclass(frozen=True)
class Regression:
    """Consecutive held nights of one mode of which at least one FAILed: the one meaning of a regression."""

    mode: str
    first: int            # index of its first night
    last: int             # and of its last
    good: int             # the last night of the mode before it that was not held out (-1: none)
    open: bool            # it runs to the newest night: nobody accepted it, no night recovered from it
    nights: int
    worst: float | None   # the lowest change a night of it recorded


@dataclass(frozen=True)
class Accepted:
    """An accepted level as the segmentation needs it (results.accepts.AcceptRecord)."""

    run_id: str
    cleared: frozenset[str]
    text: str


@dataclass(frozen=True)
class Pools:
    """The nights (indexes into the series) one mode is judged against."""

    window: tuple[int, ...]
    reference: tuple[int, ...]
    spread: tuple[tuple[int, ...], ...]      # groups of the window's spread: this segment's, then earlier ones
    reference_spread: tuple[tuple[int, ...], ...]  # the reference's: its own nights, then earlier segments
    previous: int                            # the newest night of the series with this mode (-1: none)


@dataclass(frozen=True)
class Segmentation:
    nights: tuple[Night, ...]
    cuts: tuple[Cut, ...]
    held: Mapping[str, Mapping[int, str]]    # mode -> index -> hold, for the nights now out of the pool
    regressions: tuple[Regression, ...]
    segment_of: tuple[int, ...] = field(default=())  # the segment (index into cuts) of every night

    @property
    def start(self) -> int:
        return self.cuts[-1].index if self.cuts else 0

    @property
    def since(self) -> str:
        return self.cuts[-1].text if self.cuts else "the start of the history"

    def modes(self) -> list[str]:
        return list(dict.fromkeys(k for n in self.nights for k in n.modes))

    def kept(self, mode: str, lo: int = 0, hi: int | None = None) -> list[int]:
        """Nights lo..hi-1 whose `mode` can join a pool: a line with per-trial figures, not held out."""
        held = self.held.get(mode, {})
        return [i for i in range(lo, len(self.nights) if hi is None else hi)
                if (p := self.nights[i].modes.get(mode)) is not None and p.pooled and i not in held]

    def pools(self, mode: str, also: str | None = None) -> Pools:
        """The recent window, the reference level and the spread groups of `mode` (with `also`: nights where
        both modes are kept, the AMP/FP32 ratio's)."""
        def kept(lo: int, hi: int | None = None) -> list[int]:
            mine = self.kept(mode, lo, hi)
            return mine if also is None else sorted(set(mine) & set(self.kept(also, lo, hi)))

        seg = kept(self.start)
        window, reference = tuple(seg[-POOL_CAP:]), tuple(seg[:REFERENCE_RUNS])
        earlier: list[tuple[int, ...]] = []
        room = SPREAD_CAP - len(seg)
        for a, b in zip(reversed(self.cuts[:-1]), reversed(self.cuts[1:])):
            if room <= 0:
                break
            nights = tuple(kept(a.index, b.index)[-room:])
            if nights:
                earlier.append(nights)
                room -= len(nights)
        spread = (tuple(seg[-SPREAD_CAP:]), *earlier) if seg else tuple(earlier)
        prev = max((i for i, n in enumerate(self.nights) if mode in n.modes), default=-1)
        return Pools(window, reference, tuple(g for g in spread if g), tuple(g for g in (reference, *earlier) if g),
                     prev)

    def open_regression(self) -> list[Regression]:
        return [r for r in self.regressions if r.open]

    def pending(self, mode: str) -> list[int]:
        """The newest nights of `mode` held out pending the next night (an open streak without a FAIL)."""
        held = self.held.get(mode, {})
        if any(r.open and r.mode == mode for r in self.regressions):
            return []
        return sorted(i for i, h in held.items() if h == HOLD_PENDING)


def _accept_cuts(nights: Sequence[Night], accepts: Sequence[Accepted]) -> tuple[dict[int, str], set[str]]:
    index = {n.run_id: i for i, n in enumerate(nights)}
    cuts: dict[int, str] = {}
    cleared: set[str] = set()
    for a in accepts:
        i = index.get(a.run_id)
        if i is None:  # a level of another device kind or config of the suite
            continue
        cleared |= a.cleared
        cuts[i] = a.text
    return cuts, cleared


def _holds(nights: Sequence[Night], mode: str, cleared: set[str]) -> tuple[dict[int, str], list[Regression]]:
    """The nights of `mode` out of the pool and the regressions: streaks of held nights; a streak without a FAIL
    that a later night left (not held) was noise and comes back; one with a FAIL stays out."""
    idx = [i for i, n in enumerate(nights) if mode in n.modes]
    held: dict[int, str] = {}
    regs: list[Regression] = []
    streak: list[int] = []
    good = -1

    def close(is_open: bool) -> None:
        marks = {i: nights[i].modes[mode].hold or "" for i in streak}
        if HOLD_FAIL in marks.values() or is_open:
            held.update(marks)
        if HOLD_FAIL in marks.values():
            worst = [c for i in streak if (c := nights[i].modes[mode].change) is not None]
            regs.append(Regression(mode, streak[0], streak[-1], good, is_open, len(streak), min(worst, default=None)))

    for i in idx:
        hold = None if nights[i].run_id in cleared else nights[i].modes[mode].hold
        if hold:
            streak.append(i)
            continue
        if streak:
            close(False)
            streak = []
        good = i
    if streak:
        close(True)
    return held, regs


def _rises(nights: Sequence[Night], held: Mapping[str, Mapping[int, str]], start: int, stop: int,
           min_change: float) -> int | None:
    """The first night i in start..stop-1 from which RISE_RUNS kept nights in a row of one mode stand above the
    mean of the segment's recent kept nights before i by `min_change`: an improvement (None: none)."""
    rise = math.log(1 + min_change)
    found: list[int] = []
    for mode in dict.fromkeys(k for n in nights[start:stop] for k in n.modes):
        out = held.get(mode, {})
        kept = [(i, p.level) for i in range(start, stop) if (p := nights[i].modes.get(mode)) is not None
                and p.level is not None and i not in out]
        sums = [0.0]
        for _, v in kept:
            sums.append(sums[-1] + v)
        for j in range(MIN_RUNS, len(kept) - RISE_RUNS + 1):
            a = max(0, j - POOL_CAP)
            bar = (sums[j] - sums[a]) / (j - a) + rise
            if all(v >= bar for _, v in kept[j:j + RISE_RUNS]):
                found.append(kept[j][0])
                break
    return min(found, default=None)


def segment(nights: Sequence[Night], accepts: Sequence[Accepted] = (), min_change: float = 0.05) -> Segmentation:
    """The one segmentation of a series (oldest first): the cuts, the held nights and the regressions."""
    cut_at, cleared = _accept_cuts(nights, accepts)
    held: dict[str, dict[int, str]] = {}
    regs: list[Regression] = []
    for mode in dict.fromkeys(k for n in nights for k in n.modes):
        held[mode], r = _holds(nights, mode, cleared)
        regs += r
    cuts = [Cut(0, "start", "the start of the history")]
    for i in sorted(cut_at):
        if i > 0:
            cuts.append(Cut(i, "accept", cut_at[i]))
        else:
            cuts[0] = Cut(0, "accept", cut_at[i])
    out: list[Cut] = []
    for k, c in enumerate(cuts):
        out.append(c)
        stop = cuts[k + 1].index if k + 1 < len(cuts) else len(nights)
        lo = c.index
        while (i := _rises(nights, held, lo, stop, min_change)) is not None:
            out.append(Cut(i, "faster", f"the improvement at run {nights[i].run_id} (a level above the segment's "
                                        f"by {min_change:.0%} for {RISE_RUNS} nights)"))
            lo = i
    seg_of, k = [], 0
    for i in range(len(nights)):
        while k + 1 < len(out) and out[k + 1].index <= i:
            k += 1
        seg_of.append(k)
    return Segmentation(tuple(nights), tuple(out), held, tuple(sorted(regs, key=lambda r: (r.first, r.mode))),
                        tuple(seg_of))
