"""The run engine (engine/): a request and its policies through one `execute`.

A launcher is one class: `FactoryLauncher` below is a whole new launcher in a few lines (each trial "run"
by writing the record a worker would, so these tests start no process), and `InProcessLauncher` a real one
(each trial trained in this process by the worker's own loop).  Either is found by `run --launcher KIND`,
recorded in run.json, and the one `--resume` goes on with; a seed policy is one class too (`OneMoreSeed`).
Old run.json files (no `launcher`) resume with the launcher their slurm.json names, or the local one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import ConfigError, Suite
from ampbench.core.docs import write_doc
from ampbench.engine.execute import Policies, execute
from ampbench.engine.launcher import Launcher, recorded_launcher
from ampbench.engine.launchers.local import LocalLauncher
from ampbench.engine.launchers.multinode import MultiNodeLauncher
from ampbench.engine.launchers.slurm import SlurmLauncher, SlurmOptions
from ampbench.engine.launchers.slurm_array import SlurmArrayLauncher
from ampbench.engine.request import Output, RunRequest
from ampbench.engine.seeds.policy import SeedPolicy
from ampbench.engine.trials import Trials
from ampbench.launch.slurm_run import SlurmRun, save_state
from ampbench.record.models import RunInfo, Trial
from ampbench.results.run_dir import RunDir, open_run
from tests.factories import make_trial

RAN: list[tuple[str, str, int]] = []
CRASH: set[tuple[str, int]] = set()   # trials FactoryLauncher records as crashed (a resume runs them again)


class FactoryLauncher(Launcher):
    """A new launcher, whole: its kind and `run` (here each trial's record is written as its worker would)."""

    kind: ClassVar[str] = "test-factory"

    def run(self, trials: Trials) -> list[Trial]:
        for mode, seed in trials.todo:
            spec = trials.spec(mode, seed)
            RAN.append((self.kind, mode, seed))
            status = "crashed" if (mode, seed) in CRASH else "ok"
            write_doc(Path(spec.trial_path), make_trial(mode, seed, config_hash=spec.config_hash, status=status))
            trials.recorded(mode, seed)
            trials.finished(mode, seed, trials.run.load_trial(Path(spec.trial_path)))
        return trials.ended


class InProcessLauncher(Launcher):
    """A real launcher in a few lines: every trial trained in this process (launch.inprocess)."""

    kind: ClassVar[str] = "test-in-process"

    def run(self, trials: Trials) -> list[Trial]:
        from ampbench.launch.inprocess import launch_in_process

        for mode, seed in trials.todo:
            trials.finished(mode, seed, launch_in_process(trials.spec(mode, seed)))
            trials.recorded(mode, seed)
        return trials.ended


class OneMoreSeed(SeedPolicy):
    """A new seed policy, whole: after the planned trials, one more matched seed of every planned mode."""

    kind: ClassVar[str] = "test-one-more"

    def more(self, run: RunDir, info: RunInfo, suite: Suite, plan: list[tuple[str, int]], run_more: Any,
             console: Console, started: float, baseline: Path | None) -> Suite:
        seed = max(s for _, s in plan) + 1
        new = [(m, seed) for m in dict.fromkeys(m for m, _ in plan)]
        plan.extend(new)
        run_more(new)
        return suite


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def suite_file(toy_suite: Any, work: Path) -> Path:
    return toy_suite('[suite]\nname = "toy"\nworkload = "toy"\nmetric = "accuracy"\nseeds = [0, 1]\n', body="")


def test_a_new_launcher_is_one_class_found_by_its_kind_recorded_and_resumed(work: Path, toy_suite: Any) -> None:
    """`run --launcher test-factory` finds the class above (no list edited), run.json records it, and
    `--resume` without --launcher goes on with it; one asking for Slurm is refused in one line."""
    RAN.clear()
    CRASH.add(("fp32", 1))
    suite = toy_suite()
    r = _cli("run", str(suite), "--launcher", "test-factory", "--out", "runs", "--seeds", "0,1", "--no-report")
    assert r.exit_code == 2, r.output   # a crashed trial: ERROR
    run = next(Path("runs/toy").iterdir())
    assert RunDir(run).load_run().launcher == {"kind": "test-factory"}
    assert sorted(RAN) == [("test-factory", m, s) for m in ("amp-o1-fp16", "fp32") for s in (0, 1)]
    RAN.clear()
    CRASH.clear()
    r = _cli("run", "--resume", str(run), "--no-report")
    assert r.exit_code in (0, 1, 3), r.output
    assert RAN == [("test-factory", "fp32", 1)] and "3 finished trial(s) kept, 1 to run" in r.output
    refused = _cli("run", "--resume", str(run), "--launcher", "slurm", "--partition", "gpu")
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "was run by the test-factory launcher" in refused.output
    unknown = _cli("run", str(suite), "--launcher", "kubernetes", "--out", "runs")
    assert unknown.exit_code == 2 and "test-factory" in unknown.output and "slurm-array" in unknown.output


def test_a_new_seed_policy_is_one_class_the_engine_runs(work: Path, toy_suite: Any) -> None:
    """`OneMoreSeed` above adds a matched seed after the planned ones: through the same launcher, into the
    same plan (run.json) and the same judged run."""
    RAN.clear()
    request = RunRequest(suite_file=toy_suite(), out_dir=Path("runs"), seeds="0,1")
    code = execute(request, Policies(launcher=FactoryLauncher(), seeds=OneMoreSeed(), output=Output(report=False)),
                   Console(quiet=True))
    assert code in (0, 1, 3)
    run = open_run(next(Path("runs/toy").iterdir()))
    assert run.info.planned() == [(m, s) for s in (0, 1, 2) for m in ("fp32", "amp-o1-fp16")]
    assert sorted((t.mode, t.seed) for t in run.trials) == sorted(run.info.planned())
    assert [x[2] for x in RAN[-2:]] == [2, 2] and (run.path / "check.json").is_file()



def test_a_new_seed_policy_is_found_by_its_kind_on_the_command_line(work: Path, toy_suite: Any) -> None:
    """`run --seed-policy test-one-more` finds `OneMoreSeed` above as `--launcher` finds a launcher (no list
    edited); an unknown kind names the known ones; a policy of another kind is refused beside --until-decided."""
    RAN.clear()
    r = _cli("run", str(toy_suite()), "--launcher", "test-factory", "--seed-policy", "test-one-more", "--out", "runs",
             "--seeds", "0,1", "--no-report")
    assert r.exit_code in (0, 1, 3), r.output
    run = open_run(next(Path("runs/toy").iterdir()))
    assert sorted({s for _, s in run.info.planned()}) == [0, 1, 2] and len(run.trials) == 6
    unknown = _cli("run", str(toy_suite()), "--seed-policy", "bayes", "--out", "runs")
    assert unknown.exit_code == 2 and "test-one-more" in unknown.output and "until-decided" in unknown.output
    both = _cli("run", str(toy_suite()), "--seed-policy", "test-one-more", "--until-decided", "--out", "runs")
    assert both.exit_code == 2 and len(both.output.strip().splitlines()) == 1, both.output

@pytest.mark.slow
def test_a_real_launcher_in_a_few_lines_trains_the_trials(work: Path, toy_suite: Any) -> None:
    """`InProcessLauncher` runs the worker's own loop here: real trials, judged as any run's."""
    suite = toy_suite()
    r = _cli("run", str(suite), "--launcher", "test-in-process", "--out", "runs", "--no-report")
    assert r.exit_code == 3, r.output   # AMP is inactive on a CPU: INCONCLUSIVE
    run = open_run(next(Path("runs/toy").iterdir()))
    assert run.info.launcher == {"kind": "test-in-process"}
    assert {t.mode: t.status for t in run.trials} == {"fp32": "ok", "amp-o1-fp16": "ok"}
    assert all(t.throughput.samples_per_s > 0 and t.steps for t in run.trials)


def test_a_run_json_of_an_earlier_version_resumes_with_the_launcher_its_files_name(tmp_path: Path) -> None:
    """No `launcher` in run.json: a slurm.json says Slurm (an array with --slurm-parallel), else local; a
    recorded launcher is taken as recorded."""
    assert recorded_launcher(tmp_path, None) == LocalLauncher()
    save_state(tmp_path, SlurmRun(options=SlurmOptions(partition="gpu")))
    assert recorded_launcher(tmp_path, None) == SlurmLauncher(options=SlurmOptions(partition="gpu"))
    save_state(tmp_path, SlurmRun(options=SlurmOptions(parallel=2)))
    assert recorded_launcher(tmp_path, None) == SlurmArrayLauncher(options=SlurmOptions(parallel=2))
    info = RunInfo.model_construct(launcher={"kind": "multi-node", "master": "10.0.0.1:29400", "node_rank": 1})
    assert recorded_launcher(tmp_path, info) == MultiNodeLauncher(master="10.0.0.1:29400", node_rank=1)
    with pytest.raises(ConfigError, match="no such Launcher here"):
        recorded_launcher(tmp_path, RunInfo.model_construct(launcher={"kind": "gone"}))


@pytest.mark.parametrize("policies", [
    Policies(),
    Policies(launcher=MultiNodeLauncher(master="h:1", node_rank=0, devices="all"),
             output=Output(judge=False, baseline=Path("b.json"))),
    Policies(launcher=SlurmArrayLauncher(options=SlurmOptions(parallel=3, args=["--account=x"]))),
])
def test_policies_travel_to_a_child_process_as_they_are(policies: Policies) -> None:
    """What engine.side_by_side writes for a child (each policy's kind and options) makes the same objects."""
    import json

    data = json.loads(json.dumps(policies.to_json()))
    assert Policies.from_json(data, "o.json") == policies


def test_every_registered_kind_is_one_class_of_its_family() -> None:
    from ampbench.engine.batch import BatchPolicy

    assert {"local", "multi-node", "slurm", "slurm-array"} <= set(Launcher.kinds())
    assert {"fixed", "until-decided", "search"} <= set(SeedPolicy.kinds())
    assert set(BatchPolicy.kinds()) == {"configured", "at-max-batch"}
    assert Launcher.kinds()["test-factory"] is FactoryLauncher and SeedPolicy.kinds()["test-one-more"] is OneMoreSeed


class _Spawned(BaseException):
    """Raised where the first worker would start: the request has reached the trials."""


def test_the_run_requests_path_from_the_cli_to_the_trials_is_short(work: Path, toy_suite: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Following `ampbench run SUITE` from the verb to the first worker's start (spawned or forked) enters at most 15 modules of
    the layers that carry the request (cli/, commands/, engine/, launch/; code run at import time aside):
    the verb, its use case, execute, the policies, the launcher, the trials, the process launcher.  The
    suite's loading and the store below are entered too (config/, workloads/, core/, results/, trackers/:
    the shared bottom, not the request's path)."""
    import sys
    import threading

    from ampbench.launch import forkserver, process

    entered: list[str] = []

    def note(frame: Any, event: str, arg: Any) -> None:
        name = frame.f_globals.get("__name__", "")
        if event != "call" or frame.f_code.co_name == "<module>" or not name.startswith("ampbench.") \
                or name in entered:
            return
        f = frame.f_back
        while f is not None:   # a function called while a module is imported is no step of the path
            if f.f_code.co_name == "<module>" and str(f.f_globals.get("__name__", "")).startswith("ampbench"):
                return
            f = f.f_back
        entered.append(name)

    def spawned(*_a: Any, **_k: Any) -> Any:
        raise _Spawned

    monkeypatch.setattr(process, "spawn", spawned)
    monkeypatch.setattr(forkserver.ForkServer, "start", spawned)    # or forked from the run's fork server
    suite = toy_suite()
    threading.setprofile(note)
    sys.setprofile(note)
    try:
        with pytest.raises(_Spawned):
            CliRunner().invoke(app, ["run", str(suite), "--out", "runs", "--no-report"], catch_exceptions=False)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    path = [m for m in entered if m.split(".")[1] in ("cli", "commands", "engine", "launch")]
    assert len(path) <= 15, path
    for step in ("ampbench.cli.run", "ampbench.commands.run", "ampbench.engine.execute",
                 "ampbench.engine.launchers.local", "ampbench.engine.trials", "ampbench.launch.launcher",
                 "ampbench.launch.process"):
        assert step in path, (step, path)


def test_resume_refuses_a_launcher_that_asks_for_another_in_one_line(tmp_path: Path) -> None:
    """--resume goes on with the recorded launcher: options of another one are refused naming what to drop
    (not silently dropped, as --devices beside a Slurm run was), options of none are not asked."""
    info = RunInfo.model_construct(devices=None, affinity=None)
    suite = Suite.model_validate({"suite": {"name": "toy", "workload": "toy", "metric": "accuracy"},
                                  "modes": [{"name": "fp32"}]})
    slurm_run = SlurmLauncher(options=SlurmOptions())
    with pytest.raises(ConfigError, match="was run by the slurm launcher.*drop --devices and --affinity"):
        slurm_run.resumed(LocalLauncher(devices="0"), tmp_path, info, suite, [("fp32", 0)])
    with pytest.raises(ConfigError, match="was run by the local launcher.*drop --launcher slurm-array"):
        LocalLauncher().resumed(SlurmArrayLauncher(options=SlurmOptions(parallel=2)), tmp_path, info, suite, [])
    with pytest.raises(ConfigError, match="not honoured.*drop the Slurm options"):
        slurm_run.resumed(SlurmLauncher(options=SlurmOptions(partition="other")), tmp_path, info, suite, [])
    node = MultiNodeLauncher(master="h:1", node_rank=1)
    assert node.resumed(LocalLauncher(), tmp_path, info, suite, []) == node.model_copy(update={"affinity": None})
    assert LocalLauncher().resumed(node, tmp_path, info, suite, []) == node
