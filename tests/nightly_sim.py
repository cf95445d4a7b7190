"""Simulated nightly histories judged night after night by the history rule's own code (issues 40, 55).

Each history is FIRST unchanged nights, then the scenario (tests/nightly_noise.py: the fleet, drift, machine
episodes, shared nights, and the change).  Every night is decided as `check --history` decides it, with the
functions the rule calls: the series' one segmentation (judge.series.segment: the device kind's series, held
and pending nights, cuts, the recent window, the reference level, the spread groups), the gate
(judge.gate.judge_night: the figures, the predictions, the step-time evidence, the decision), and what the
night's line records (its status and hold) is what the next night's segmentation reads.  Every night is
judged, the first ones too (with fewer than judge.series.MIN_RUNS nights of its kind a night is
INCONCLUSIVE and kept); a night records its status, hold and change, as a history line does.  `scripts/sim_nightly.py` prints the tables of docs/checks.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ampbench.judge import gate, series
from tests import nightly_noise as nn

MIN_CHANGE, ALPHA, CONF = 0.05, 0.01, 0.95
FIRST = 10
MODES = ("fp32", "amp")
STATUS = {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2}


@dataclass
class Histories:
    """Outcomes of the judged nights (from FIRST on): worst status over the modes (0 PASS, 1 INCONCLUSIVE,
    2 FAIL), whether any mode was held out, and the change's level on each night."""

    status: np.ndarray   # (rows, judged)
    held: np.ndarray     # (rows, judged) bool
    level: np.ndarray    # (judged,) the throughput the change leaves (1: none)
    by_mode: np.ndarray  # (rows, judged, modes) status per mode


def simulate(rows: int, model: nn.GpuNight | nn.CpuNight, change: nn.Change, seed: int, judged: int = 6,
             first: int = FIRST) -> Histories:
    total = first + judged
    lv = gate.Levels(MIN_CHANGE, CONF, 1 - ALPHA)
    hist = np.full((3, rows, total, nn.MODES, nn.TRIALS), np.nan)
    kinds = len(getattr(model, "kinds", (0.0,)))
    nights: list[list[list[series.Night]]] = [[[] for _ in range(kinds)] for _ in range(rows)]
    glob: list[list[list[int]]] = [[[] for _ in range(kinds)] for _ in range(rows)]
    interleaved = np.ones((rows, nn.MODES), bool)  # seed-major or side by side: the modes' trials interleave
    out = np.zeros((rows, judged), int)
    by_mode = np.zeros((rows, judged, nn.MODES), int)
    held = np.zeros((rows, judged), bool)
    for n, figs, kind in nn.nights(rows, model, change, seed, total, first):
        pools: list[list[series.Pools | None]] = [[] for _ in MODES]
        ratio: list[series.Pools | None] = []
        maps = []
        for b in range(rows):
            ns = nights[b][kind[b]]
            maps.append(glob[b][kind[b]])
            if len(ns) < series.MIN_RUNS:
                for m in range(nn.MODES):
                    pools[m].append(None)
                ratio.append(None)
                continue
            seg = series.segment(ns, (), MIN_CHANGE)
            for m, name in enumerate(MODES):
                pools[m].append(seg.pools(name))
            ratio.append(seg.pools("amp", also="fp32"))
        levels = [gate.Index.of(p, maps) for p in pools]
        ratios = [None, gate.Index.of(ratio, maps)]
        gates, _ = gate.judge_night(figs, hist, levels, ratios, 0, interleaved, lv)
        hist[:, :, n] = figs
        floor = np.nanmedian(figs[0], -1)
        moved = [g.change for g in gates]
        for b in range(rows):
            modes = {name: series.ModePoint(float(floor[b, m]), True, gates[m].hold[b] or None, str(gates[m].status[b]),
                                            float(moved[m][b]) if np.isfinite(moved[m][b]) else None)
                     for m, name in enumerate(MODES)}
            nights[b][kind[b]].append(series.Night(str(n), modes))
            glob[b][kind[b]].append(n)
        if n >= first:
            st = np.stack([np.vectorize(STATUS.get)(g.status) for g in gates], -1)
            by_mode[:, n - first] = st
            out[:, n - first] = st.max(-1)
            held[:, n - first] = np.stack([g.hold != "" for g in gates], -1).any(-1)
    level = np.array([change.level(j) for j in range(judged)])
    return Histories(out, held, level, by_mode)


def rates(h: Histories, change: nn.Change | None = None) -> dict[str, float]:
    """night_fail: share of judged nights FAILed; within3: of histories FAILed within 3 nights; every_later: of
    those FAILed, the share FAILed on every night after their first FAIL; held: share of nights held out;
    inconclusive: share of nights INCONCLUSIVE; before12 (creep): FAILed before the loss passed 12%;
    after_fail (one degraded night): share of the normal nights after it FAILed."""
    fail = h.status == 2
    judged = h.status.shape[1]
    first = np.where(fail.any(1), fail.argmax(1), judged)
    every = np.array([fail[i, first[i]:].all() for i in range(len(first)) if first[i] < judged])
    out = {"night_fail": float(fail.mean()), "within3": float((first < 3).mean()), "any_fail": float(fail.any(1).mean()),
           "every_later": float(every.mean()) if every.size else math.nan, "held": float(h.held.mean()),
           "inconclusive": float((h.status == 1).mean())}
    if change is not None and change.kind == "creep":
        ok = int((h.level >= 1 - 0.12 - 1e-9).sum())
        out["before12"] = float((first < ok).mean())
    if change is not None and change.kind == "once":
        out["after_fail"] = float(fail[:, 1:].mean())
        out["after_held"] = float(h.held[:, 1:].mean())
    return out
