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
  nights of the segment), the reference level (its first REFERENCE_RUNS kept nights, after its first MIN_RUNS
  only those whose recorded change was not below -min_change / 3: a creep cannot move it), and the spread
  groups (the kept nights of this and earlier segments, each around its own mean: the spread is the
  machine's, so it survives an accept).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ampbench.core.names import device_slug
from ampbench.core.text import printable
from ampbench.record.models import Env
from ampbench.results.history import ModeSummary, RunSummary

HOLD_FAIL, HOLD_PENDING = "fail", "pending"  # ModeSummary.history_hold
POOL_CAP = 20          # the recent window: newest kept nights of the segment
REFERENCE_RUNS = 10    # the reference level: the segment's first kept nights
SPREAD_CAP = 40        # nights of the series whose spread around their segment's mean is pooled
MIN_RUNS = 3           # nights of the series before a night is judged (the spread needs two pairs)
RISE_RUNS = 3          # nights in a row above the recent mean by min_change: an improvement, a new segment
CONFIRM_NIGHTS = 2     # slow steps of every mode are confirmed by one of the newest nights showing them too
DEFAULT_MIN_CHANGE = 0.05  # config.Thresholds' history_min_change, for lines that recorded none


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


def _kind(device: str, device_name: str) -> str:
    return device_slug(Env(device=device, device_name=device_name)) if device else ""


def kind_of(line: RunSummary) -> str:
    """The device kind of a history line: its device slug (a line that recorded no device: "")."""
    return _kind(line.device, line.device_name)


def series_key(line: RunSummary) -> tuple[str, str, str]:
    return line.suite, line.config_hash, kind_of(line)


def row_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """series_key of a history row read as a plain dict (results.history.iter_history_rows)."""
    return (str(row.get("suite") or ""), str(row.get("config_hash") or ""),
            _kind(str(row.get("device") or ""), str(row.get("device_name") or "")))


def _hold_of(hold: Any, status: Any) -> str | None:
    """The recorded hold; a line written before it was recorded holds a night that FAILed."""
    if hold in (HOLD_FAIL, HOLD_PENDING):
        return str(hold)
    return HOLD_FAIL if status == "FAIL" and hold is None else None


def _level(floors: list[float], floor: Any, rate: Any) -> float | None:
    """The night's log run figure: the median of its trials' fast floors (measure.run_floor), else the mode's
    recorded run floor, else its samples/s."""
    if floors:
        floors = sorted(floors)
        k = len(floors)
        return (floors[k // 2] + floors[(k - 1) // 2]) / 2
    v = floor or rate
    return math.log(v) if isinstance(v, (int, float)) and v > 0 else None


def mode_point(m: ModeSummary) -> ModePoint:
    floors = [math.log(p.floor_samples_per_s) for p in m.per_trial if p.floor_samples_per_s]
    return ModePoint(_level(floors, m.floor_samples_per_s, m.samples_per_s), any(p.samples_per_s for p in m.per_trial),
                     _hold_of(m.history_hold, m.history_status), m.history_status, m.history_change)


def _row_point(m: Mapping[str, Any]) -> ModePoint:
    """mode_point of a mode read as a plain dict (the dashboard's rows, per-trial figures left out)."""
    trials = m.get("per_trial") or []
    floors = [math.log(p["floor_samples_per_s"]) for p in trials if p.get("floor_samples_per_s")]
    return ModePoint(_level(floors, m.get("floor_samples_per_s"), m.get("samples_per_s")),
                     any(p.get("samples_per_s") for p in trials), _hold_of(m.get("history_hold"), m.get("history_status")),
                     m.get("history_status"), m.get("history_change"))


def night_of(line: RunSummary) -> Night:
    return Night(line.run_id, {k: mode_point(m) for k, m in line.modes.items()}, line.started, line.git_sha,
                 kind_of(line), line.config_hash)


def night_of_row(row: Mapping[str, Any]) -> Night:
    """night_of of a history row read as a plain dict: the same night."""
    return Night(str(row.get("run_id") or ""), {k: _row_point(m) for k, m in (row.get("modes") or {}).items()},
                 str(row.get("started") or ""), str(row.get("git_sha") or ""), row_key(row)[2],
                 str(row.get("config_hash") or ""))


def group(lines: Iterable[RunSummary]) -> dict[tuple[str, str, str], list[RunSummary]]:
    """The lines by series (suite, config hash, device kind), each oldest first."""
    out: dict[tuple[str, str, str], list[RunSummary]] = {}
    for h in sorted(lines, key=lambda h: (h.started or "", h.run_id)):
        out.setdefault(series_key(h), []).append(h)
    return out


def accepted(records: Iterable[Any]) -> list[Accepted]:
    """results.accepts.AcceptRecord as the segmentation reads them."""
    return [Accepted(a.run_id, frozenset(a.cleared), printable(f"the level accepted from run {a.run_id} by {a.by} on "
                                                               f"{a.at}: {a.why}")) for a in records]


def min_change_of(rows: Sequence[Mapping[str, Any]] | Sequence[RunSummary]) -> float:
    """The history_min_change the series' newest line recorded (the suite's threshold), else the default."""
    for r in reversed(rows):
        v = r.get("history_min_change") if isinstance(r, Mapping) else r.history_min_change
        if isinstance(v, (int, float)) and 0 <= v < 1:
            return float(v)
    return DEFAULT_MIN_CHANGE


@dataclass(frozen=True)
class SeriesCut:
    """One series of a history's rows, segmented: its key, the rows' indexes (oldest first) and the cuts."""

    key: tuple[str, str, str]
    rows: tuple[int, ...]
    seg: Segmentation


def of_rows(rows: Sequence[Mapping[str, Any]], accepts: Iterable[Any] = ()) -> list[SeriesCut]:
    """Every series of a suite's history rows (plain dicts, oldest first) with its one segmentation: what the
    trend report, the dashboard and `history bisect` show, as `check --history` cut it."""
    idx: dict[tuple[str, str, str], list[int]] = {}
    for i, r in enumerate(rows):
        idx.setdefault(row_key(r), []).append(i)
    acc = accepted(accepts)
    out = []
    for key, ii in idx.items():
        mine = [rows[i] for i in ii]
        out.append(SeriesCut(key, tuple(ii), segment([night_of_row(r) for r in mine], acc, min_change_of(mine))))
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
    previous: tuple[int, ...]                # the newest CONFIRM_NIGHTS nights of the series with this mode


@dataclass(frozen=True)
class Segmentation:
    nights: tuple[Night, ...]
    cuts: tuple[Cut, ...]
    held: Mapping[str, Mapping[int, str]]    # mode -> index -> hold, for the nights now out of the pool
    regressions: tuple[Regression, ...]
    min_change: float = DEFAULT_MIN_CHANGE

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
        window, reference = tuple(seg[-POOL_CAP:]), tuple(self._reference(seg, (mode,) if also is None else
                                                                           (mode, also)))
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
        prev = tuple(i for i in range(len(self.nights) - 1, -1, -1) if mode in self.nights[i].modes)[:CONFIRM_NIGHTS]
        return Pools(window, reference, tuple(g for g in spread if g), tuple(g for g in (reference, *earlier) if g),
                     prev)

    def drift(self, mode: str, recent: int = 5) -> tuple[float, int, int] | None:
        """The level of the newest `recent` nights of `mode` the segment keeps against its reference level (its
        first REFERENCE_RUNS such nights): (change, nights, reference nights); None with fewer than 2 nights.
        What a creep moves, shown on the dashboard and in the trend."""
        held = self.held.get(mode, {})
        levels = [p.level for i in range(self.start, len(self.nights)) if i not in held
                  and (p := self.nights[i].modes.get(mode)) is not None and p.level is not None]
        if len(levels) < 2:
            return None
        ref, now = levels[:REFERENCE_RUNS], levels[-recent:]
        return math.exp(sum(now) / len(now) - sum(ref) / len(ref)) - 1, len(now), len(ref)

    def _reference(self, seg: list[int], modes: tuple[str, ...]) -> list[int]:
        """The reference level's nights: the segment's first MIN_RUNS kept nights, then kept nights whose recorded
        change was not below -min_change / 3 (or that no check judged), up to REFERENCE_RUNS: a creep that begins
        while the reference fills (a young segment, a kind with few nights) cannot pull it down."""
        out: list[int] = []
        for k, i in enumerate(seg):
            if len(out) >= REFERENCE_RUNS:
                break
            changes = [c for m in modes if (c := self.nights[i].modes[m].change) is not None]
            if k < MIN_RUNS or all(c >= -self.min_change / 3 for c in changes):
                out.append(i)
        return out

    def open_regression(self) -> list[Regression]:
        return [r for r in self.regressions if r.open]

    def pending(self, mode: str) -> list[int]:
        """The newest nights of `mode` held out pending the next night (an open streak without a FAIL)."""
        held = self.held.get(mode, {})
        kept = [i for i, n in enumerate(self.nights) if mode in n.modes and i not in held]
        last = max(kept, default=-1)
        tail = sorted(i for i in held if i > last)
        return [] if any(held[i] == HOLD_FAIL for i in tail) else tail


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
        while (found := _rises(nights, held, lo, stop, min_change)) is not None:
            i = found
            out.append(Cut(i, "faster", f"the improvement at run {nights[i].run_id} (a level above the segment's "
                                        f"by {min_change:.0%} for {RISE_RUNS} nights)"))
            lo = i
    return Segmentation(tuple(nights), tuple(out), held, tuple(sorted(regs, key=lambda r: (r.first, r.mode))),
                        min_change)
