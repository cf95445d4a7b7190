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
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ampbench.commands.check import check_run
from ampbench.commands.history import summarize_run_dir
from ampbench.record.models import Env
from ampbench.results.history import RunSummary, history_file
from ampbench.results.verdicts import CheckReport
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


@dataclass
class Tally:
    """How a set's comparisons went, as the acceptance counts them."""

    planted_failed: int = 0    # planted runs FAILed in every mode
    planted_held: int = 0      # ... or withheld as disturbed where the statistic showed the slowdown
    planted: int = 0
    unchanged_failed: int = 0  # unchanged runs with any FAIL
    unchanged: int = 0
    trimmed_counted: int = 0   # mode results whose trimmed mean counted (judge.gate's step-time gate open)
    why: list[str] = field(default_factory=list)

    def add(self, label: str, planted: bool, rep: CheckReport) -> None:
        rules = [x for v in rep.verdicts for x in v.rules if x.rule == "history-throughput"]
        if planted:
            self.planted += 1
            self.planted_failed += all(x.status == "FAIL" for x in rules)
            # beside other work the CPU evidence withholds a FAIL the statistic showed (never a PASS)
            self.planted_held += all(x.status == "FAIL" or (x.details["disturbed"] and x.details["fail_upper"] < 0.95)
                                     for x in rules)
            self.why += [f"{label} {x.mode}: {x.status} {x.message}" for x in rules if x.status != "FAIL"]
        else:
            fails = [x for v in rep.verdicts for x in v.rules if x.status == "FAIL"]
            self.unchanged += 1
            self.unchanged_failed += bool(fails)
            self.why += [f"{label} {x.mode}: FAIL {x.message}" for x in fails]

    def text(self) -> str:
        return "\n".join([f"unchanged judged: {self.unchanged}", *self.why])


def _judge(tmp_path: Path, runs: list[tuple[dict, Path, RunSummary]], floor: bool) -> Tally:
    """Each run from the 11th on against the WINDOW unchanged runs before it, through `check --history`."""
    tally = Tally()
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
        # the nights of the series (judge.series): at most the window
        assert len(rules) == 2 and all(3 <= x.details["runs"] <= WINDOW for x in rules), (r["label"], rep.baseline)
        assert {x.details["statistic"] for x in rules} <= ({"fast-floor", "trimmed-mean"} if floor else {"median"})
        # the trimmed mean counts only on a night none of whose trials a slow episode of this machine touched
        # (judge.gate: the history's step-time shape steady, this night's trials none moved or all moved alike)
        for x in rules:
            if floor and x.details["trimmed_counts"]:
                tally.trimmed_counted += 1
                assert x.details["step_time_gate"]["steady"] and x.details["step_time_gate"]["consistent"]
        tally.add(r["label"], r["planted"], rep)
    return tally


def _without_floor(line: RunSummary) -> RunSummary:
    modes = {k: m.model_copy(update={"floor_samples_per_s": None, "per_trial": [
        p.model_copy(update={"floor_samples_per_s": None}) for p in m.per_trial]}) for k, m in line.modes.items()}
    return line.model_copy(update={"modes": modes})


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_real_runs_meet_the_history_acceptance(tmp_path: Path, path: Path) -> None:
    """Idle sets: >= 3 of 4 planted runs FAIL, no unchanged run FAILs.  Sets made while other jobs saturated
    the two cores (`loaded-*`), or kept one of them busy (`light-load-*`: the segment's runs at 1.0 of 2 cores):
    the CPU evidence withholds the planted FAILs as "measurement disturbed" (judge.interference.unlike: a
    saturated machine does not measure the code, on either side of the comparison: load has made identical
    code come out faster as well as slower, issue 62), which is asserted to happen only where the statistic
    showed the slowdown; still no unchanged run FAILs."""
    runs = _lines(tmp_path, json.loads(path.read_text()))
    assert sum(r["planted"] for r, _, _ in runs) == 4 and sum(not r["planted"] for r, _, _ in runs) >= 22
    t = _judge(tmp_path, runs, floor=True)
    assert t.planted == 4 and t.unchanged == 12, t.text()
    assert t.unchanged_failed == 0, t.text()
    assert (t.planted_held if path.stem.startswith(("loaded-", "light-load-")) else t.planted_failed) >= 3, t.text()


def test_the_median_figure_alone_misses_the_acceptance_on_the_idle_set(tmp_path: Path) -> None:
    """The set that failed issue 34's first retake (docs/checks.md): judged as before the floor was kept,
    it still fails the acceptance (a planted run missed or an unchanged one FAILed)."""
    path = next(p for p in SETS if p.stem.startswith("idle-2026-12-02-0020"))
    t = _judge(tmp_path, _lines(tmp_path, json.loads(path.read_text())), floor=False)
    assert t.planted_failed < 3 or t.unchanged_failed > 0, t.text()


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_real_runs_against_one_baseline_run(tmp_path: Path, path: Path) -> None:
    """`check RUN --baseline PREVIOUS` (the nightly's fallback while a series is young, and `run
    --until-decided`): every run from U02 on against the unchanged run made just before it, judged by the
    pooled rule as a history of one run (the fast floor, the trimmed mean where the shape is steady, the
    fixed 1% drift allowance assumed).  No unchanged run FAILs (21 comparisons per set); planted
    runs FAIL in every mode in >= 3 of 4 (where the sets were made beside other work: FAIL or withheld as
    disturbed with the slowdown shown)."""
    runs = _lines(tmp_path, json.loads(path.read_text()))
    t = Tally()
    for i, (r, run, _) in enumerate(runs):
        prev = [d for (x, d, _) in runs[:i] if not x["planted"]]
        if not prev:
            continue
        rep = check_run(run, baseline=prev[-1])
        rules = [x for v in rep.verdicts for x in v.rules if x.rule == "history-throughput"]
        # the pooled rule's figures against a history of one run: the fast floor, the trimmed mean beside it
        # where the two runs' step-time shape is steady (issue 62)
        assert len(rules) == 2 and {x.details["statistic"] for x in rules} <= {"fast-floor", "trimmed-mean"}
        t.add(r["label"], r["planted"], rep)
    assert t.unchanged == 21 and t.unchanged_failed == 0, t.text()
    # beside a busy neighbour (the loaded and light-load sets) the CPU evidence may withhold a planted FAIL
    assert (t.planted_failed if path.stem.startswith("idle-") else t.planted_held) >= 3, t.text()
