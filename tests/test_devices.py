"""`ampbench run --devices`: the scheduler (launch/pool.py), the pool as Paddle's GPU build counts it
(the simulated machines of tests/fake_cuda.py, installed in the ampbench process), and real runs whose
CPU workers are pinned side by side to the fake machine's devices."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from ampbench.config import ConfigError
from ampbench.launch.pool import CPU, Job, Scheduler, batches, cpu_shares, device_env, parse_devices, run_jobs
from ampbench.launch.process import Cancelled
from ampbench.record.models import Interference
from ampbench.results import RunDir
from ampbench.results.run_dir import open_run
from tests.conftest import TOY_SUITE
from tests.factories import make_run, make_suite, make_trial
from tests.fake_cuda import Machine, a100_gpus, four_gpus, install_machine, machines
from tests.fake_nvml import mig_uuid
from tests.test_hostile import _workers_of
from tests.test_run_cli import only_run, run_cli

ROOT = Path(__file__).resolve().parent.parent
AMP = "amp-o1-fp16"


def plan(seeds: int, modes: tuple[str, ...] = ("fp32", AMP)) -> list[tuple[str, int]]:
    return [(m, s) for s in range(seeds) for m in modes]


def keys(started: list[tuple[Job, tuple[int, ...]]]) -> list[tuple[str, int]]:
    return [(j.mode, j.seed) for j, _ in started]


# ------------------------------------------------------------------ the schedule (pure)


def test_each_seeds_modes_start_together_on_distinct_devices_and_swap_devices_next_seed():
    sched = Scheduler(batches(plan(3), 1, 2), 2)
    first = sched.ready()
    assert keys(first) == [("fp32", 0), (AMP, 0)]
    assert sorted(d for _, ds in first for d in ds) == [0, 1]
    sched.release(first[0][1])            # fp32 ends first: one free device cannot take seed 1's pair
    assert sched.ready() == []
    sched.release(first[1][1])
    second = {j.mode: ds for j, ds in sched.ready() if j.seed == 1}
    assert set(second) == {"fp32", AMP}
    assert second == {AMP: (0,), "fp32": (1,)}   # rotated: no mode always gets the same device


def test_a_wider_pool_starts_several_pairs_at_once_each_on_adjacent_devices():
    sched = Scheduler(batches(plan(4), 1, 4), 4)
    started = sched.ready()
    assert len(started) == 4 and len({ds for _, ds in started}) == 4
    by_seed: dict[int, list[int]] = {}
    for job, ds in started:
        by_seed.setdefault(job.seed, []).extend(ds)
    assert {s: sorted(d) for s, d in by_seed.items()} == {0: [0, 1], 1: [2, 3]}


def test_a_pool_of_one_is_the_plan_in_order_one_trial_at_a_time():
    p = plan(3, ("fp32", AMP, "amp-o2-fp16"))
    sched = Scheduler(batches(p, 1, 1), 1)
    order = []
    while now := sched.ready():
        assert len(now) == 1 and now[0][1] == (0,)
        order.append((now[0][0].mode, now[0][0].seed))
        sched.release(now[0][1])
    assert order == p


def test_a_seed_wider_than_the_pool_is_cut_fp32_first():
    assert [[j.mode for j in b] for b in batches(plan(1, ("fp32", AMP, "amp-o2-fp16")), 1, 2)] == \
        [["fp32", AMP], ["amp-o2-fp16"]]


def test_data_parallel_trials_take_disjoint_device_sets():
    sched = Scheduler(batches(plan(1), 2, 4), 4)
    started = {j.mode: ds for j, ds in sched.ready()}
    assert started == {"fp32": (0, 1), AMP: (2, 3)}
    with pytest.raises(ConfigError, match="takes 4 devices; the pool has 2"):
        batches(plan(1), 4, 2)


@pytest.mark.parametrize("text,visible,expect", [
    ("all", ["0", "1"], ["0", "1"]), ("all", [], [CPU]), ("1", ["2", "3"], ["3"]), (" 1,0", ["0", "1"], ["1", "0"]),
    ("0", ["MIG-3-1"], ["MIG-3-1"]),
])
def test_devices_name_the_visible_entries(text, visible, expect):
    assert parse_devices(text, visible) == expect


@pytest.mark.parametrize("text,visible,why", [
    ("0,0", ["0", "1"], "device 0 is given twice"), ("5", ["0", "1"], "device 5 is not visible: 2 GPU(s)"),
    ("x", ["0", "1"], "expected all or comma-separated"), ("0", [], "no GPU is visible"),
    ("-1", ["0"], "device -1 is not visible"), ("", ["0"], "expected all"),
])
def test_bad_devices_are_refused(text, visible, why):
    with pytest.raises(ConfigError, match=re.escape(why)):
        parse_devices(text, visible)


def test_affinity_is_shared_out_per_device_and_the_worker_env_pins_it():
    assert cpu_shares([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    assert cpu_shares([0, 1, 2, 3], 1) == [[0, 1, 2, 3]] and cpu_shares(None, 2) == [None, None]
    with pytest.raises(ConfigError, match="cannot give each of the 3 devices its own"):
        cpu_shares([0, 1], 3)
    assert device_env((CPU,), False) == {}
    assert device_env(("GPU-x",), False) == {"CUDA_VISIBLE_DEVICES": "GPU-x", "FLAGS_selected_gpus": "0"}
    assert device_env(("2", "3"), True) == {"CUDA_VISIBLE_DEVICES": "2,3"}  # the ranks' ordinals: Paddle's launcher


# ------------------------------------------------------------------ running the schedule (threads)


def test_run_jobs_overlaps_a_pair_and_an_error_in_one_keeps_the_other():
    spans: dict[tuple[str, int], tuple[float, float]] = {}

    def start(job, slots, stop):
        t0 = time.monotonic()
        time.sleep(0.4)
        spans[(job.mode, job.seed)] = (t0, time.monotonic())
        if (job.mode, job.seed) == (AMP, 0):
            raise OSError("No space left on device")
        return job.mode

    done = []
    with pytest.raises(OSError, match="No space"):
        run_jobs(Scheduler(batches(plan(2), 1, 2), 2), start, lambda j, r: done.append((j.mode, j.seed, r)))
    assert done == [("fp32", 0, "fp32")]          # the other trial's result is kept; no new seed started after
    (a0, a1), (b0, b1) = spans[("fp32", 0)], spans[(AMP, 0)]
    assert a0 < b1 and b0 < a1                    # at the same time


def test_an_interrupt_stops_every_running_trial_before_it_propagates():
    stopped = []

    def start(job, slots, stop):
        if job.mode == "fp32":
            return "ok"
        assert stop.wait(20)
        stopped.append(job.mode)
        raise Cancelled("stopped")

    def finished(job, result):
        raise KeyboardInterrupt  # Ctrl-C reaches the main thread while the AMP trial still runs

    with pytest.raises(KeyboardInterrupt):
        run_jobs(Scheduler(batches(plan(1), 1, 2), 2), start, finished)
    assert stopped == [AMP]
    assert not [t for t in threading.enumerate() if t.name.startswith("trial ")]


@pytest.mark.parametrize("delay_s", [0.0, 0.003, 0.01, 0.03, 0.1, 0.3])
def test_a_real_signal_stops_the_run_wherever_it_lands_in_the_main_thread(delay_s):
    """SIGINT through our CLI handler, delivered while the main thread waits on the queue or runs
    `finished` (rich-like work under a lock), while trial threads put results: the run must always
    stop and join every trial thread (a handler raising inside the queue's mutex left it held, and
    the trial threads blocked on it for ever)."""
    from ampbench.launch.process import Interrupted, install_signal_handlers

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    install_signal_handlers()
    lock = threading.Lock()
    stopped = []
    jobs = [(m, s) for s in range(40) for m in ("fp32", AMP)]

    def start(job, slots, stop):
        if job.seed < 39:
            return job.seed   # quick trials: the queue and `finished` stay busy
        assert stop.wait(20)
        stopped.append(job.seed)
        raise Cancelled("stopped")

    def finished(job, result):
        with lock:
            sum(range(2000))

    def fire():
        time.sleep(delay_s)
        os.kill(os.getpid(), signal.SIGINT)

    try:
        t0 = time.monotonic()
        with pytest.raises(Interrupted):   # the signal may land anywhere in here, even before run_jobs
            threading.Thread(target=fire, daemon=True).start()
            run_jobs(Scheduler(batches(jobs, 1, 2), 2), start, finished)
        assert time.monotonic() - t0 < 15
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    assert not [t for t in threading.enumerate() if t.name.startswith("trial ")]
    assert not lock.locked()


def test_a_round_of_new_trials_goes_through_the_pool_pinned_with_its_cpu_share(tmp_path, monkeypatch):
    """What --until-decided hands the local launcher for a round (one new seed, every mode): the pair runs side
    by side, each trial on its own device with that device's share of --affinity."""
    from ampbench.engine import display, trials
    from ampbench.engine.launchers.local import LocalLauncher

    suite = make_suite(seeds=[0, 1, 2])
    run = RunDir(make_run(tmp_path, suite, []))
    info = run.load_run()
    info.devices, info.affinity = ["GPU-a", "GPU-b"], [0, 1, 2, 3]
    seen: dict[str, dict] = {}

    def fake_launch(spec, run, on_event=None, env=None, stop=None, forks=None):
        seen[spec.mode] = {"t": time.monotonic(), "env": env, "cpus": spec.cpu_affinity}
        time.sleep(0.3)
        return make_trial(spec.mode, spec.seed, interference=Interference(devices=[env["CUDA_VISIBLE_DEVICES"]]))

    class Counting(display.Progress):  # the display: one task per running trial
        live, most = 0, 0

        def add_task(self, description, *a, **k):
            if description.startswith("  "):
                Counting.live += 1
                Counting.most = max(Counting.most, Counting.live)
            return super().add_task(description, *a, **k)

        def remove_task(self, task_id):
            Counting.live -= 1
            super().remove_task(task_id)

    monkeypatch.setattr(trials, "launch_trial", fake_launch)
    monkeypatch.setattr(display, "Progress", Counting)
    out = io.StringIO()
    new = [("fp32", 3), (AMP, 3)]
    from ampbench.results.manifest import Manifest

    LocalLauncher().run(trials.Trials(run, info, suite, new, new, {}, Console(file=out, width=200),
                                      Manifest(run.path, {})))
    assert abs(seen["fp32"]["t"] - seen[AMP]["t"]) < 0.2
    assert Counting.most == 2 and Counting.live == 0
    by_device = {v["env"]["CUDA_VISIBLE_DEVICES"]: v["cpus"] for v in seen.values()}
    assert by_device == {"GPU-a": [0, 1], "GPU-b": [2, 3]}
    assert "fp32 seed 3 on device GPU-a: ok" in out.getvalue() or "fp32 seed 3 on device GPU-b: ok" in out.getvalue()


# ------------------------------------------------------------------ the pool as Paddle's GPU build counts it


@pytest.mark.parametrize("name,expect", [("a100", ["0"]), ("subset", ["2", "3"]), ("mig", [mig_uuid(3, 1)])])
def test_the_pool_is_paddles_count_of_visible_devices(monkeypatch, tmp_path, name, expect):
    from ampbench.trackers import cuda

    install_machine(monkeypatch, machines()[name], tmp_path)
    assert cuda.visible_devices() == expect


def test_four_gpus_without_cuda_visible_devices_are_ordinals(monkeypatch, tmp_path):
    from ampbench.trackers import cuda

    install_machine(monkeypatch, Machine("four", four_gpus(own_on=0)), tmp_path)
    assert cuda.visible_devices() == ["0", "1", "2", "3"]


# ------------------------------------------------------------------ real runs (CPU workers)




def span(run: Path, mode: str, seed: int) -> tuple[float, float]:
    """When a trial ran: its spec is written just before the worker starts, its trial file when it ends."""
    return ((run / "specs" / f"{mode}__seed{seed}.json").stat().st_mtime,
            (run / "trials" / f"{mode}__seed{seed}.json").stat().st_mtime)


@pytest.fixture
def two_gpus(monkeypatch, tmp_path):
    """The ampbench process sees a machine with two GPUs (Paddle's GPU build, faked); its workers train on CPU."""
    (tmp_path / "machine").mkdir()
    return install_machine(monkeypatch, Machine("two", a100_gpus(2)), tmp_path / "machine")


@pytest.fixture
def toy2(toy_suite):
    return toy_suite(body=TOY_SUITE.replace("seeds = [0]", "seeds = [0, 1]"))


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> tuple[Path, str, float]:
    """toy2's trials one after another: `--devices all` on this CPU machine (one slot), the reference the
    two-device run's losses must equal and what the one-slot test judges (one run for both: trials are the
    cost). On a machine with a GPU, the plain sequential run (the one-slot test skips there)."""
    from ampbench.trackers.cuda import has_gpu_cheap

    tmp = tmp_path_factory.mktemp("sequential")
    (suite := tmp / "toy.toml").write_text(TOY_SUITE.replace("seeds = [0]", "seeds = [0, 1]"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AMPBENCH_CACHE", str(tmp / "cache"))
        t0 = time.monotonic()
        r = run_cli("run", str(suite), "--out", str(tmp / "seq"), "--no-report",
                    *(() if has_gpu_cheap() else ("--devices", "all")))
        seq_s = time.monotonic() - t0
    assert r.exit_code in (0, 1, 3), r.output
    return only_run(tmp / "seq"), r.output, seq_s


@pytest.mark.slow
def test_two_devices_run_each_pair_side_by_side_pinned_with_the_losses_of_a_sequential_run(
        two_gpus, toy2, tmp_path, cache_env, sequential):
    t0 = time.monotonic()
    r = run_cli("run", str(toy2), "--out", str(tmp_path / "par"), "--no-report", "--devices", "all")
    par_s = time.monotonic() - t0
    assert r.exit_code in (0, 1, 3), r.output
    assert "2 device(s) (0, 1): trials side by side" in r.output
    par = only_run(tmp_path / "par")
    assert json.loads((par / "run.json").read_text())["devices"] == ["0", "1"]
    trials = {t.key: t for t in open_run(par).trials}
    assert len(trials) == 4 and all(t.status == "ok" for t in trials.values())
    for seed in (0, 1):
        a, b = trials[f"fp32__seed{seed}"], trials[f"{AMP}__seed{seed}"]
        # each worker saw its own CUDA_VISIBLE_DEVICES (recorded by the worker itself)
        assert {tuple(a.interference.devices), tuple(b.interference.devices)} == {("0",), ("1",)}
        (sa, ea), (sb, eb) = span(par, "fp32", seed), span(par, AMP, seed)
        assert sa < eb and sb < ea, "the pair did not run at the same time"
    assert trials["fp32__seed0"].interference.devices != trials["fp32__seed1"].interference.devices
    assert f"fp32 seed 0 on device {trials['fp32__seed0'].interference.devices[0]}: ok" in r.output

    seq, _, seq_s = sequential
    same = subprocess.run([sys.executable, str(ROOT / "scripts" / "same_losses.py"), str(par), str(seq)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert same.returncode == 0, same.stdout + same.stderr
    print(f"\nwall: 2 devices {par_s:.1f} s, sequential {seq_s:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("fault,error", [("crash", "injected crash"), ("exit", "exit code 13")])
def test_a_crash_in_one_parallel_trial_keeps_the_others_result(two_gpus, toy_suite, tmp_path, cache_env,
                                                               fault, error):
    r = run_cli("run", str(toy_suite()), "--out", str(tmp_path / "runs"), "--no-report", "--devices", "0,1",
                env={"AMPBENCH_FAULT": f"{AMP}:0:{fault}"})
    assert r.exit_code == 2, r.output                 # a crashed trial: ERROR
    trials = {t.key: t for t in open_run(only_run(tmp_path / "runs")).trials}
    ok, bad = trials["fp32__seed0"], trials[f"{AMP}__seed0"]
    assert ok.status == "ok" and len(ok.steps) == 12
    assert bad.status == "crashed" and error in (bad.error or "")
    # where the failed trial ran: recorded by its worker (crash) or by the launcher (a worker that left no file)
    assert {tuple(ok.interference.devices), tuple(bad.interference.devices)} == {("0",), ("1",)}


@pytest.mark.slow
def test_devices_all_on_a_cpu_machine_is_one_slot_in_plan_order(sequential):
    from ampbench.trackers.cuda import has_gpu_cheap

    if has_gpu_cheap():
        pytest.skip("a GPU is visible here")
    run, output, _ = sequential
    assert "no GPU visible, one slot (the CPU): the trials run one after another" in output
    info = json.loads((run / "run.json").read_text())
    assert info["devices"] == [CPU]
    order = [(p["mode"], p["seed"]) for p in info["plan"]]
    assert len(order) == 4
    for before, after in itertools.pairwise(order):            # one after the other, in plan order
        assert span(run, *before)[1] <= span(run, *after)[0], (before, after)
    assert all(t.interference.devices == [] for t in open_run(run).trials)  # not pinned


@pytest.mark.parametrize("value,why", [
    ("0,0", "--devices: 0,0: device 0 is given twice"),
    ("5", "--devices: 5: device 5 is not visible: 2 GPU(s) visible to Paddle here (0..1)"),
    ("x", "--devices: x: expected all or comma-separated device numbers"),
])
def test_bad_devices_exit_2_with_one_line_before_any_folder(two_gpus, toy_suite, tmp_path, value, why):
    r = run_cli("run", str(toy_suite()), "--out", str(tmp_path / "runs"), "--devices", value)
    assert r.exit_code == 2, r.output
    assert why in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "runs").exists()


def test_explicit_devices_on_a_cpu_machine_exit_2(toy_suite, tmp_path):
    from ampbench.trackers.cuda import has_gpu_cheap

    if has_gpu_cheap():
        pytest.skip("a GPU is visible here")
    r = run_cli("run", str(toy_suite()), "--out", str(tmp_path / "runs"), "--devices", "0")
    assert r.exit_code == 2 and "no GPU is visible to Paddle here" in r.output and "Traceback" not in r.output


# ------------------------------------------------------------------ signals: every worker tree stopped

# ampbench in a process of its own that sees the fake two-GPU machine (as the fixtures above install it)
FAKE_AMPBENCH = """
import sys
from pathlib import Path
from _pytest.monkeypatch import MonkeyPatch
from tests.fake_cuda import Machine, a100_gpus, install_machine
install_machine(MonkeyPatch(), Machine("two", a100_gpus(2)), Path(sys.argv[1]))
sys.argv = ["ampbench", *sys.argv[2:]]
from ampbench.cli import main
main()
"""


@contextlib.contextmanager
def _killed_at_the_end(proc: subprocess.Popen) -> Iterator[None]:
    """A failed assertion before the signal would leave ampbench and its two hanging workers running into the
    next tests of this xdist worker (whose child-CPU accounting then charged them 6 CPU s): killed and reaped."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def _start_two_hanging(tmp_path: Path, toy_suite) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "runs"
    (tmp_path / "machine").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AMPBENCH_CACHE": str(tmp_path / "cache"),
           "AMPBENCH_FAULT": f"fp32:0:hang,{AMP}:0:hang"}
    proc = subprocess.Popen([sys.executable, "-c", FAKE_AMPBENCH, str(tmp_path / "machine"), "run", str(toy_suite()),
                             "--out", str(out), "--no-report", "--devices", "all"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = [p for p in (out / "toy").iterdir() if p.is_dir()] if (out / "toy").exists() else []
        if runs and len(_workers_of(runs[0])) >= 2:
            time.sleep(2.0)  # both hanging workers are up
            return proc, runs[0]
        time.sleep(0.3)
    proc.kill()
    raise AssertionError("the two trials never ran side by side: " + (proc.communicate()[0] or ""))


@pytest.mark.slow
def test_sigterm_stops_every_parallel_worker_and_says_how_to_resume(tmp_path, toy_suite):
    proc, run = _start_two_hanging(tmp_path, toy_suite)
    with _killed_at_the_end(proc):
        assert len(_workers_of(run)) == 2
        proc.send_signal(signal.SIGTERM)
        text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, text
    assert "Traceback" not in text and "--resume" in text and "trial(s) stopped" in text
    time.sleep(0.5)
    assert _workers_of(run) == []
    assert not list((run / "trials").glob("*.json"))  # stopped trials are not recorded as crashed


@pytest.mark.slow
def test_sigkilled_ampbench_leaves_no_parallel_worker(tmp_path, toy_suite):
    proc, run = _start_two_hanging(tmp_path, toy_suite)
    with _killed_at_the_end(proc):
        workers = _workers_of(run)
        proc.kill()
        proc.communicate(timeout=10)
    deadline = time.monotonic() + 15
    while _workers_of(run) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(workers) == 2 and _workers_of(run) == []
