"""Issue 34's real-run acceptance replayed in CI: real runs of this machine through `check --history`.

tests/fixtures/history_real/ holds real run sets made by `scripts/history_accept.py runs --set
train.steps=1505` (22 unchanged toy runs and 4 with a planted 20% slowdown, interleaved) and reduced by
its `export` phase to each trial's 101 step-time percentiles and CPU evidence.  The median figure and the
fast floor are two of those percentiles, so every statistic the history rule uses replays exactly.

Each set is judged as the acceptance judges it: every run from the 11th on against the 10 unchanged
runs before it, through the real summary -> history line -> `check --history` path.  Asserted per set:
at least 3 of 4 planted runs FAIL history-throughput in every mode, no unchanged run FAILs.  The same
runs judged on the median figure alone (history lines without the floor, as written before it was
kept) miss that acceptance: the reason the floor decides.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ampbench.commands.check import check_run
from ampbench.commands.history import summarize_run_dir
from ampbench.core.records import Env
from ampbench.results.history import RunSummary, history_file
from tests.factories import make_run, make_suite, make_trial

SETS = sorted((Path(__file__).parent / "fixtures" / "history_real").glob("*.json"))
WINDOW = 10
CPU2 = Env(paddle="3.3.1", device="cpu", device_name="AMD EPYC", python="3.11", cpu_count=2)


def _lines(tmp_path: Path, data: dict) -> list[tuple[dict, Path, RunSummary]]:
    """Every run of a set as a run folder and its history line."""
    suite = make_suite(seeds=[0, 1, 2], name="aa-toy", history_min_change=0.05)
    out = []
    for r in data["runs"]:
        trials = [make_trial(t["mode"], t["seed"], suite="aa-toy", times=[x / 1e6 for x in t["step_time_us"]],
                             warmup=0, samples=32, env=CPU2, amp_active=False,
                             interference={"cpu_share": t["cpu_share"], "others_cpu": t["others_cpu"]})
                  for t in r["trials"] if t["status"] == "ok"]
        run = make_run(tmp_path / "runs", suite, trials, run_id=r["label"], env=CPU2)
        out.append((r, run, summarize_run_dir(run)))
    return out


def _judge(tmp_path: Path, runs: list[tuple[dict, Path, RunSummary]],
           floor: bool) -> tuple[int, int, int, int, list[str]]:
    """(planted runs FAILed in every mode, of them FAILed or withheld as disturbed, planted judged,
    unchanged runs with any FAIL, ["unchanged judged: N", what did not go as the acceptance asks...])."""
    s_ok = s_n = u_bad = s_held = 0
    u_n, why = 0, []
    for i, (r, run, _) in enumerate(runs):
        before = [line for (x, _, line) in runs[:i] if not x["planted"]][-WINDOW:]
        if len(before) < WINDOW:
            continue
        hist = tmp_path / ("hist-floor" if floor else "hist-median") / r["label"]
        hist.mkdir(parents=True)
        lines = before if floor else [_without_floor(x) for x in before]
        history_file(hist, "aa-toy").write_text("".join(x.to_line() + "\n" for x in lines))
        rep = check_run(run, history=hist)
        rules = [x for v in rep.verdicts for x in v.rules if x.rule == "history-throughput"]
        # the segment since the last change point of the run floors (judge.pooled.select): at most the window
        assert len(rules) == 2 and all(3 <= x.details["runs"] <= WINDOW for x in rules), (r["label"], rep.baseline)
        assert {x.details["statistic"] for x in rules} == {"fast-floor" if floor else "median"}
        fails = [x for v in rep.verdicts for x in v.rules if x.status == "FAIL"]
        if r["planted"]:
            s_n += 1
            s_ok += all(x.status == "FAIL" for x in rules)
            # on a saturated machine the CPU evidence withholds a FAIL the statistic showed (never a PASS)
            s_held += all(x.status == "FAIL" or (x.details["disturbed"] and x.details["fail_upper"] < 0.95)
                          for x in rules)
            why += [f"{r['label']} {x.mode}: {x.status} {x.message}" for x in rules if x.status != "FAIL"]
        else:
            u_n += 1
            u_bad += bool(fails)
            why += [f"{r['label']} {x.mode}: FAIL {x.message}" for x in fails]
    return s_ok, s_held, s_n, u_bad, [f"unchanged judged: {u_n}", *why]


def _without_floor(line: RunSummary) -> RunSummary:
    modes = {k: m.model_copy(update={"floor_samples_per_s": None, "per_trial": [
        p.model_copy(update={"floor_samples_per_s": None}) for p in m.per_trial]}) for k, m in line.modes.items()}
    return line.model_copy(update={"modes": modes})


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_real_runs_meet_the_history_acceptance(tmp_path: Path, path: Path) -> None:
    """Idle sets: >= 3 of 4 planted runs FAIL, no unchanged run FAILs.  Sets made while other jobs saturated
    the two cores (`loaded-*`): the CPU evidence withholds the planted FAILs as "measurement disturbed"
    (judge.interference: a saturated machine does not measure the code), which is asserted to happen only
    where the statistic showed the slowdown; still no unchanged run FAILs."""
    runs = _lines(tmp_path, json.loads(path.read_text()))
    assert sum(r["planted"] for r, _, _ in runs) == 4 and sum(not r["planted"] for r, _, _ in runs) >= 22
    s_ok, s_held, s_n, u_bad, why = _judge(tmp_path, runs, floor=True)
    assert s_n == 4 and why[0] == "unchanged judged: 12", why
    assert u_bad == 0, "\n".join(why)
    assert (s_held if path.stem.startswith("loaded-") else s_ok) >= 3, "\n".join(why)


def test_the_median_figure_alone_misses_the_acceptance_on_the_idle_set(tmp_path: Path) -> None:
    """The set that failed issue 34's first retake (docs/checks.md): judged as before the floor was kept,
    it still fails the acceptance (a planted run missed or an unchanged one FAILed)."""
    path = next(p for p in SETS if p.stem.startswith("idle-2026-12-02-0020"))
    runs = _lines(tmp_path, json.loads(path.read_text()))
    s_ok, _, _, u_bad, why = _judge(tmp_path, runs, floor=False)
    assert s_ok < 3 or u_bad > 0, "\n".join(why)


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_real_runs_against_one_baseline_run(tmp_path: Path, path: Path) -> None:
    """`check RUN --baseline PREVIOUS` (the nightly's fallback while a series is young, and `run
    --until-decided`): every run from U02 on against the unchanged run made just before it, on the fast
    floor with the fixed 1% drift allowance.  No unchanged run FAILs (21 comparisons per set); planted
    runs FAIL in every mode in >= 3 of 4 (where the sets were made beside other work: FAIL or withheld as
    disturbed with the slowdown shown)."""
    runs = _lines(tmp_path, json.loads(path.read_text()))
    s_ok = s_held = u_bad = u_n = 0
    why: list[str] = []
    for i, (r, run, _) in enumerate(runs):
        prev = [x for (x, d, _) in runs[:i] if not x["planted"]]
        if not prev:
            continue
        base = next(d for (x, d, _) in runs[:i] if x is prev[-1])
        rep = check_run(run, baseline=base)
        rules = [x for v in rep.verdicts for x in v.rules if x.rule == "history-throughput"]
        assert len(rules) == 2 and {x.details["statistic"] for x in rules} == {"fast-floor"}
        if r["planted"]:
            s_ok += all(x.status == "FAIL" for x in rules)
            s_held += all(x.status == "FAIL" or (x.details["disturbed"] and x.details["fail_upper"] < 0.95)
                          for x in rules)
            why += [f"{r['label']} {x.mode}: {x.status} {x.message}" for x in rules if x.status != "FAIL"]
        else:
            u_n += 1
            fails = [x for v in rep.verdicts for x in v.rules if x.status == "FAIL"]
            u_bad += bool(fails)
            why += [f"{r['label']} {x.mode}: FAIL {x.message}" for x in fails]
    assert u_n == 21 and u_bad == 0, "\n".join(why)
    # beside a busy neighbour (the loaded and light-load sets) the CPU evidence may withhold a planted FAIL
    assert (s_ok if path.stem.startswith("idle-") else s_held) >= 3, "\n".join(why)
