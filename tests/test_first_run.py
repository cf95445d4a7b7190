"""A newcomer's first run (issue 45): the bundled toy suite reaches a verdict in minutes, a terminal shows
the time left from measured step rates, and a pipe (a CI log) gets a status line at a fixed interval.

The runs are the real CLI in a subprocess (its stdout a pipe, or a pseudo-terminal), each trial in its
own worker process; `RunPace`'s arithmetic is also checked on a hand-driven clock."""

from __future__ import annotations

import itertools
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ampbench.config.bundled import bundled_suites
from ampbench.engine.display import STATUS_EVERY_S, RunPace
from ampbench.workloads.suites import load_suite

REPO = Path(__file__).resolve().parent.parent
STATUS = re.compile(r"^status .* elapsed, trial (\d)/(\d) done; (.+); (run ~.+ left( \(.+\))?|run time left: estimating)$")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AMPBENCH_FAULT", "COLUMNS")}
    return {**env, "PYTHONPATH": str(REPO), "AMPBENCH_CACHE": str(tmp_path / "cache")}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ampbench.cli", *args]


def test_the_toy_suite_is_bundled_with_three_modes_and_two_seeds():
    suite = load_suite(bundled_suites()["toy"], None, has_gpu=False).suite
    assert [m.name for m in suite.modes] == ["fp32", "amp-o1-fp16", "amp-o2-bf16"]
    assert suite.suite.seeds == [0, 1]


@pytest.mark.slow
def test_run_toy_piped_reaches_a_verdict_with_status_lines(tmp_path):
    """`ampbench run toy` from an empty folder: a verdict (exit 3, AMP inactive) in under 2 minutes even on
    this shared machine, and a status line at least every `--status-every` seconds (+ slack for load).
    An idle machine runs the toy's 600 steps in ~0.3 s of a ~2 s trial (most of it the worker's start), so
    a status line may never land on a running step: the trials here run 1500 steps (~0.7 s), a status line
    every quarter second."""
    every = 0.25
    t0 = time.monotonic()
    proc = subprocess.Popen(_cli("run", "toy", "--out", str(tmp_path / "runs"), "--status-every", str(every),
                                 "--no-report", "--set", "train.steps=1500"),
                            cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[tuple[float, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
    code = proc.wait(timeout=300)
    wall = time.monotonic() - t0
    text = "\n".join(ln for _, ln in lines)
    assert code == 3, text
    assert wall < 120, f"{wall:.0f} s"
    assert "toy: fp32 PASS, amp-o1-fp16 INCONCLUSIVE, amp-o2-bf16 INCONCLUSIVE -> exit 3" in text
    status = [(t, ln) for t, ln in lines if ln.startswith("status ")]
    assert status, text
    for _, ln in status:
        assert STATUS.match(ln), ln
    assert any(re.search(r"step \d+/1500, [\d.,]+ steps/s, trial ~.+ left; run ~.+ left( \(.+\))?$", ln)
               for _, ln in status), \
        "\n".join(ln for _, ln in status)
    # from the first status line until the last trial ended, never silent for long
    last_trial = max(t for t, ln in lines if re.match(r"  [\w-]+ seed \d: ok", ln))
    times = [t for t, _ in status if t <= last_trial] + [last_trial]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) < every + 6, gaps
    assert status[0][0] < every + 8


@pytest.mark.slow
def test_tune_toy_runs_its_first_rung(tmp_path):
    """`ampbench tune toy` (the README's other sample) finds the suite and ends with its honest CPU answer."""
    r = subprocess.run(_cli("tune", "toy", "--out", str(tmp_path / "runs")), cwd=tmp_path, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "inactive: AMP did not run" in r.stdout
    assert list((tmp_path / "runs" / "toy").glob("tune-*/tune.md"))


@pytest.mark.slow
def test_a_terminal_shows_the_time_left(tmp_path):
    """On a (pseudo-)terminal the progress bars carry "~N s left" from the measured step rate."""
    main, child = pty.openpty()
    proc = subprocess.Popen(_cli("run", "toy", "--out", str(tmp_path / "runs"), "--seeds", "0", "--mode", "fp32",
                                 "--no-report"),
                            cwd=tmp_path, env={**_env(tmp_path), "COLUMNS": "160"}, stdin=child, stdout=child,
                            stderr=child, close_fds=True)
    os.close(child)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 1.0)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:   # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    os.close(main)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    assert proc.returncode == 3, screen   # fp32 alone: nothing compared, INCONCLUSIVE
    assert re.search(r"\d+/600 .*~[\d.]+ s left", screen), screen[-2000:]
    assert "status " not in screen        # the plain status lines are for pipes only


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_time_left_comes_from_the_measured_step_rate():
    clock = Clock()
    pace = RunPace(total=4, done_before=0, clock=clock)
    pace.start("fp32", 0, steps=100)
    assert pace.run_left_s() is None and "estimating" in pace.status_line()   # nothing measured: no guess
    clock.now += 5                     # 5 s of start-up, then 10 steps/s
    for step in range(1, 21):
        pace.step("fp32", 0, step)
        clock.now += 0.1
    # 80 steps left at 10 steps/s, less the 0.1 s since the last step event
    assert pace.trial_left_s("fp32", 0) == pytest.approx(7.9)
    # before any trial ended: each trial is projected as this one (7.0 s so far + 7.9 s left = 14.9 s)
    assert pace.run_left_s() == pytest.approx(7.9 + 3 * 14.9)
    line = pace.status_line()
    assert ("trial 0/4 done; fp32 seed 0: step 20/100, 10.0 steps/s, trial ~7.90 s left; run ~52.6 s or more left "
            "(start-up and evaluation not measured yet)") in line, line   # the steps alone: a lower bound
    clock.now += 7.9
    pace.finish("fp32", 0)             # it took 14.9 s: the other three are expected to as well
    assert STATUS.match(pace.status_line()) and "; no trial running; " in pace.status_line()  # between two
    pace.start("amp-o1-fp16", 0, steps=100)
    assert pace.run_left_s() == pytest.approx(3 * 14.9)
    clock.now += 2
    assert pace.run_left_s() == pytest.approx(12.9 + 2 * 14.9)   # the running one: 14.9 s less its 2 s


def test_a_slowdown_shows_in_the_time_left():
    """The rate is a recent window's: a trial that slows to a tenth has ten times the time left."""
    clock = Clock()
    pace = RunPace(total=1, done_before=0, clock=clock)
    pace.start("fp32", 0, steps=10_000)
    step = 0
    for _ in range(300):               # 30 s at 100 steps/s
        step += 10
        pace.step("fp32", 0, step)
        clock.now += 0.1
    fast = pace.trial_left_s("fp32", 0)
    for _ in range(300):               # then 30 s at 10 steps/s
        step += 1
        pace.step("fp32", 0, step)
        clock.now += 0.1
    slow = pace.trial_left_s("fp32", 0)
    assert fast == pytest.approx((10_000 - 3000) / 100, rel=0.01)
    assert slow == pytest.approx((10_000 - 3300) / 10, rel=0.01)


def test_trials_side_by_side_share_the_time_left():
    clock = Clock()
    pace = RunPace(total=4, done_before=0, slots=2, clock=clock)
    for mode in ("fp32", "amp"):
        pace.start(mode, 0, steps=10)
    clock.now += 10
    for mode in ("fp32", "amp"):
        pace.finish(mode, 0)           # two trials of 10 s side by side: the other two take 10 s more
    assert pace.run_left_s() == pytest.approx(10.0)


def test_the_default_status_interval_is_within_30_s():
    assert 0 < STATUS_EVERY_S <= 30


def test_the_suites_earlier_runs_give_the_time_left_as_a_range_from_the_start():
    """Earlier runs here say each trial costs 18 to 24 s (median 20 s): the first status line, before
    any rate is measured, says the range for the 4 trials; once two trials of this run ended, its own figure."""
    clock = Clock()
    pace = RunPace(total=4, done_before=0, clock=clock, prior=[18.0, 18.0, 20.0, 20.0, 24.0, 24.0])
    pace.start("fp32", 0, steps=100)
    clock.now += 1
    assert pace.run_left_s() == pytest.approx(19 + 3 * 20)
    # quartiles 18.5 s and 23 s: 17.5 + 3 x 18.5 = 73 s to 22 + 3 x 23 = 91 s
    assert pace.status_line().endswith("run ~1 min 13 s to 1 min 31 s left (as this suite's earlier runs here)")
    for k in range(2):                     # this run's trials take 10 s: after two, its own figure
        clock.now += 9 if k == 0 else 10
        pace.finish("fp32", k)
        pace.start("fp32", k + 1, steps=100)
    assert pace.status_line().endswith("; run ~20.0 s left")


def test_prior_costs_are_each_trials_launch_to_its_record(tmp_path):
    """From an earlier finished run of the same suite and config beside this one: the gaps between its trial
    ends, from its start (an unfinished run, another config and this run itself are left out)."""
    import datetime as dt

    from ampbench.engine.display import prior_costs
    from ampbench.record.models import RunInfo
    from ampbench.results.run_dir import RunDir
    from tests.factories import make_run, make_suite, make_trials

    suite = make_suite(("fp32",), seeds=(0, 1, 2))
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    trials = make_trials(suite)
    for t, end in zip(trials, (10.0, 22.0, 31.0)):
        t.ended_unix = start.timestamp() + end
    done = make_run(tmp_path, suite, trials, run_id="20260101-000000-aaaa")
    rd = RunDir(done)
    info = rd.load_run()
    rd.write_run(info.model_copy(update={"started": start.isoformat(), "finished": start.isoformat()}))
    unfinished = make_run(tmp_path, suite, trials, run_id="20260101-000100-bbbb")
    now = make_run(tmp_path, suite, [], run_id="20260101-000200-cccc")
    got = prior_costs(now, "toy", suite.config_hash())
    assert got.trials == pytest.approx([10.0, 12.0, 9.0]) and got.startup == 0.0   # no first gap beyond the rest
    assert prior_costs(now, "toy", "sha256:other").trials == []
    assert RunInfo.model_validate_json((unfinished / "run.json").read_text()).finished is None


@pytest.mark.slow
def test_a_second_piped_run_states_its_time_left_within_30_percent_from_the_first_status_line(tmp_path):
    """The acceptance on the toy suite (FP32, 3 seeds): run once, then again piped; the second run's first
    status line, before any of its trials ended, states the time left from the first run's trials, and it
    is within 30% of the time its last trial then took to end (the first run's own first line was a lower
    bound, 'or more')."""
    args = ("run", "toy", "--out", str(tmp_path / "runs"), "--mode", "fp32", "--seeds", "0,1,2", "--no-report",
            "--status-every", "0.5")

    def piped() -> list[tuple[float, str]]:
        t0 = time.monotonic()
        proc = subprocess.Popen(_cli(*args), cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        lines = [(time.monotonic() - t0, line.rstrip("\n")) for line in proc.stdout]
        assert proc.wait(timeout=300) == 3, "\n".join(ln for _, ln in lines)
        return lines

    def trial_ends(lines: list[tuple[float, str]]) -> list[float]:
        return [t for t, ln in lines if re.match(r"  fp32 seed \d: ok", ln)]

    first = piped()
    # before its first trial ended, the first run either estimates or states a lower bound ("or more"); a
    # status line with a running trial's progress may not come at all under load (CI: 3 workers on 2 cores,
    # the 4 s trial's first progress report after its end), so the bound is asserted where a time is stated
    ended = trial_ends(first)[0]
    early = [ln for t, ln in first if ln.startswith("status ") and t < ended]
    assert early and all("estimating" in ln or "or more left" in ln for ln in early), early
    second = piped()
    t_status, line = next((t, ln) for t, ln in second if ln.startswith("status ") and "run ~" in ln)
    last_trial = max(trial_ends(second))
    m = re.search(r"run ~(.+?) to (.+?) left \(as this suite's earlier runs here\)$", line)
    assert m, line
    to_s = {"s": 1, "min": 60, "h": 3600}

    def secs(text: str) -> float:
        parts = text.split()
        return sum(float(v) * to_s[u] for v, u in zip(parts[::2], parts[1::2]))

    lo, hi = secs(m.group(1)), secs(m.group(2))
    truth = last_trial - t_status
    # What the estimate is made from: the first run's time from the same moment (its status line at the same
    # elapsed time on the run's own clock; the two interpreters may print their first line seconds apart under
    # load) to its last trial's end; the estimate must hold to it on any machine. The second run's own time
    # also moves with the machine's load between the two runs (CI: 3 test workers on 2 cores made one run
    # 6.2 s and the next 11.2 s), which no estimate from earlier runs can know: that change is allowed on top.
    def elapsed(ln: str) -> float:
        return float(ln.split()[1])

    same, _ = min(((t, ln) for t, ln in first if ln.startswith("status ")),
                  key=lambda tl: abs(elapsed(tl[1]) - elapsed(line)))
    before = max(trial_ends(first)) - same
    drift = abs(truth - before) / truth
    print(f"stated {lo:.1f}-{hi:.1f} s, took {truth:.1f} s; the first run took {before:.1f} s from then")
    assert abs((lo + hi) / 2 - before) <= 0.3 * before, (line, before)
    assert abs((lo + hi) / 2 - truth) <= (0.3 + drift) * truth, (line, truth, before)


def test_a_runs_start_up_before_its_first_trial_is_counted_once(tmp_path):
    """An earlier run whose first trial ended 6 s later than its others' 8 s (the fork server's Paddle import,
    paid once a run): its trials cost 8 s each and a run's start-up 6 s, so the next run's time left before any
    trial ended is the start-up left plus 8 s a trial, not 8 to 14 s a trial."""
    import datetime as dt

    from ampbench.engine.display import prior_costs
    from ampbench.results.run_dir import RunDir
    from tests.factories import make_run, make_suite, make_trials

    suite = make_suite(("fp32",), seeds=(0, 1, 2))
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    trials = make_trials(suite)
    for t, end in zip(trials, (14.0, 22.0, 30.0)):
        t.ended_unix = start.timestamp() + end
    rd = RunDir(make_run(tmp_path, suite, trials, run_id="20260101-000000-aaaa"))
    rd.write_run(rd.load_run().model_copy(update={"started": start.isoformat(), "finished": start.isoformat()}))
    got = prior_costs(make_run(tmp_path, suite, [], run_id="20260101-000200-cccc"), "toy", suite.config_hash())
    assert got.trials == pytest.approx([8.0, 8.0, 8.0]) and got.startup == pytest.approx(6.0)
    clock = Clock()
    pace = RunPace(total=3, done_before=0, clock=clock, prior=got.trials, startup=got.startup)
    pace.start("fp32", 0, steps=100)
    clock.now += 1
    assert pace.run_left_s() == pytest.approx((8 - 1) + 2 * 8 + (6 - 1))
    clock.now += 13
    pace.finish("fp32", 0)             # once a trial of this run ended, no start-up is left to count
    pace.start("fp32", 1, steps=100)
    assert pace.run_left_s() == pytest.approx(8 + 8)   # the earlier runs' 8 s a trial, nothing for a start-up
