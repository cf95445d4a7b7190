"""One samples/s per mode, everywhere: a real `ampbench run`, then every surface read back.

The console's per-mode line, summary.csv's trials, `ampbench summary`, check.json's speedup evidence
and report.md's summary table must all show judge/measure.py's figure for each mode.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.record.models import StepRecord
from ampbench.report import fmt

cli = CliRunner()


@pytest.mark.slow
def test_every_surface_shows_the_same_samples_per_s(toy_suite, tmp_path, cache_env):
    suite = toy_suite(extra="")
    r = cli.invoke(app, ["run", str(suite), "-v", "--out", str(tmp_path / "runs"), "--seeds", "0,1",
                         "--set", "train.steps=30", "--set", "train.warmup_steps=3"], env={"COLUMNS": "200"})
    assert r.exit_code in (0, 1, 3), r.output
    run = next(p for p in (tmp_path / "runs" / "toy").iterdir() if p.is_dir())

    # the definition, recomputed from the raw steps of the trial files
    expected: dict[str, float] = {}
    for mode in ("fp32", "amp-o1-fp16"):
        meds = []
        for f in sorted((run / "trials").glob(f"{mode}__seed*.json")):
            t = json.loads(f.read_text())
            meds.append(np.median([s["samples"] / s["time_s"] for s in t["steps"] if not s["warmup"]]))
        expected[mode] = float(np.exp(np.mean(np.log(meds))))
    shown = {m: fmt.num(v) for m, v in expected.items()}

    # console (-v: the trial table and its per-mode lines): one line per mode under the trial table
    for mode, text in shown.items():
        assert f"{mode}: {text} samples/s" in r.output, r.output

    # summary.csv: each trial's own figure is its median rate; their geometric mean is the mode's
    csv = pd.read_csv(run / "summary.csv")
    for mode, value in expected.items():
        per_trial = csv[csv["mode"] == mode]["samples_per_s"].to_numpy(float)
        assert float(np.exp(np.mean(np.log(per_trial)))) == pytest.approx(value, rel=1e-9)

    # ampbench compare --format csv (was `summary`; csv: full precision)
    s = cli.invoke(app, ["compare", str(run), "--format", "csv"])
    assert s.exit_code == 0, s.output
    frame = pd.read_csv(pd.io.common.StringIO(s.output))
    for mode, value in expected.items():
        assert float(frame[frame["mode"] == mode]["samples_per_s"].iloc[0]) == pytest.approx(value, rel=1e-9)

    # check.json: the speed rule's evidence
    check = json.loads((run / "check.json").read_text())
    speed = next(rr for v in check["verdicts"] for rr in v["rules"] if rr["rule"] == "speedup")
    assert speed["details"]["amp_samples_per_s"] == pytest.approx(expected["amp-o1-fp16"], rel=1e-5)
    assert speed["details"]["fp32_samples_per_s"] == pytest.approx(expected["fp32"], rel=1e-5)
    assert speed["details"]["estimate"] == pytest.approx(expected["amp-o1-fp16"] / expected["fp32"], rel=1e-5)

    # report.md: the summary table's samples/s column (the outcome table opens the report, without it)
    report = (run / "report.md").read_text()
    for mode, text in shown.items():
        rows = [line for line in report.splitlines() if line.startswith(f"| `{mode}`")]  # the outcome, then the summary
        assert any(re.search(rf"\| {re.escape(text)}( \[|\s*\|)", row) for row in rows), rows


# A per-trial rate, a mode's geometric mean or a sum of step samples computed anywhere but the one
# model (record/models.py: Trial's step rates, mean_rate, measured_samples; record/rates.py: trial_rate, floor_rate;
# judge/measure.py: judged_rate, judged_floor, run_floor, geomean, log_rates) is a second definition
# that can drift from it.
MODEL = {Path("ampbench/record/models.py"), Path("ampbench/record/rates.py"), Path("ampbench/judge/measure.py")}
SECOND_DEFINITION = re.compile(
    r"median\([^)]*rate|percentile\([^)]*rate|np\.median\(\s*r\s*\)|exp\((?:float\()?np\.mean\((?:np\.)?log|"
    r"sum\(s\.samples|samples\s*/\s*s\.time_s|/\s*s\.time_s|np\.log\(self\.(?:num|den)\)")


def rate_definitions(root: Path) -> list[str]:
    """`path:line: text` of each line that computes a per-trial rate or a geometric mean itself."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if rel in MODEL:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SECOND_DEFINITION.search(line.split("#", 1)[0]):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_per_trial_rate_is_computed_outside_the_one_model() -> None:
    root = Path(__file__).resolve().parents[1] / "ampbench"
    assert rate_definitions(root) == []


def test_the_check_sees_a_second_definition(tmp_path: Path) -> None:
    pkg = tmp_path / "ampbench"
    (pkg / "judge").mkdir(parents=True)
    (pkg / "judge" / "rules.py").write_text(
        "import numpy as np\n"
        "def f(t):\n"
        "    a = float(np.median(t.rates()))\n"
        "    c = np.percentile(t.rates(), 95)\n"
        "    b = float(np.exp(np.mean(np.log(a))))\n"
        "    return sum(s.samples for s in t.steps) / a\n", encoding="utf-8")
    (pkg / "judge" / "measure.py").write_text("x = float(np.exp(np.mean(np.log(v))))\n", encoding="utf-8")
    assert [x.split(":")[1] for x in rate_definitions(pkg)] == ["3", "4", "5", "6"]


# One global batch (issue 42): the per-device batch times accumulation times ranks is record/rates.py's
# `global_batch`; a product of a batch with a world size or an accumulation count anywhere else is a
# second formula (there were three: Trial.step_samples, trial/replicas.py, trial/command_finish.py).
BATCH_FORMULA = Path("ampbench/record/rates.py")
SCALES = ("accum", "world", "nproc", "nnodes", "ranks")


def _names(node: ast.AST) -> set[str]:
    return {(x.id if isinstance(x, ast.Name) else x.attr).lower() for x in ast.walk(node)
            if isinstance(x, (ast.Name, ast.Attribute))}


def batch_formulas(root: Path) -> list[str]:
    """`path:line: expression` of each product of a batch and a rank or accumulation count."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if rel == BATCH_FORMULA:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                names = _names(node)
                if any("batch" in n for n in names) and any(k in n for n in names for k in SCALES):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_one_global_batch_formula() -> None:
    root = Path(__file__).resolve().parents[1] / "ampbench"
    assert batch_formulas(root) == []
    from ampbench.record.models import Trial
    from ampbench.record.rates import global_batch

    assert global_batch(32, 4, 2) == 256 and global_batch(32, 0, 0) == 32
    t = Trial(suite="s", workload="toy", mode="fp32", seed=0, status="ok", batch_size=8, grad_accum=2, world_size=3)
    assert t.global_batch() == 48
    assert t.model_copy(update={"steps": [StepRecord(step=1, loss=1.0, time_s=0.1)]}).step_samples() == [48]


def test_the_check_sees_a_second_batch_formula(tmp_path: Path) -> None:
    pkg = tmp_path / "ampbench"
    (pkg / "trial").mkdir(parents=True)
    (pkg / "trial" / "x.py").write_text("a = tr.batch * world\nb = t.batch_size * max(1, t.grad_accum)\n"
                                        "c = batch * 2\nd = cfg.nproc_per_node * per_device_batch\n", encoding="utf-8")
    assert [x.split(":")[1] for x in batch_formulas(pkg)] == ["1", "2", "4"]


# The derived fields of a trial are set by its assembler only (record/assemble.py), for the built-in loop
# and a program under the hook alike: energy per sample was computed twice (trial/finish.py,
# trial/command_finish.py), the throughput summary in both too.
DERIVED = ("throughput", "energy_j_per_sample")
ASSEMBLER = Path("ampbench/record/assemble.py")


def derived_assignments(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in DERIVED and rel != ASSEMBLER:
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(t)}")
    return found


def test_derived_fields_are_set_by_the_assembler_only(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "ampbench"
    assert derived_assignments(root) == []
    (tmp_path / "ampbench").mkdir()
    (tmp_path / "ampbench" / "f.py").write_text("t.memory.energy_j_per_sample = e / n\nt.throughput = x\n")
    assert len(derived_assignments(tmp_path / "ampbench")) == 2


# Each part of a trial's record is filled by the assembler (record/assemble.py), never by a producer itself: the
# built-in loop (trial/setup.py, loop.py, finish.py, replicas.py, worker.py) and a program under the hook
# (trial/command.py, command_finish.py) each filled status, memory, AMP, env and interference their own way.
PARTS = ("status", "error", "log_tail", "memory", "amp", "env", "interference", "skipped_steps", "nonfinite_losses",
         "steps")
TRIALS = ("t", "trial", "tr.trial", "self.trial")


def part_assignments(root: Path) -> list[str]:
    """`path:line: target` of each assignment of a trial's part (a tuple's items too) below `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in (x for target in targets for x in (target.elts if isinstance(target, ast.Tuple) else [target])):
                if isinstance(t, ast.Attribute) and t.attr in PARTS and ast.unparse(t.value) in TRIALS:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(t)}")
    return found


def test_the_producers_fill_no_part_of_the_record_themselves(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "ampbench"
    assert part_assignments(root / "trial") == []
    assert len(part_assignments(root / "record")) >= 10   # the assembler's own (the check sees them)
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "f.py").write_text("tr.trial.status = 'ok'\nt.env, x = e, 1\nt.skipped_steps += 1\n"
                                             "res.memory = m\n")
    assert len(part_assignments(tmp_path / "trial")) == 3


def test_the_assembler_sets_throughput_and_energy_per_sample() -> None:
    """Fed steps as either producer feeds them: the median per-step rate over the measured steps, and
    the window's energy over the measured samples (warm-up left out of both); no energy, no J/sample."""
    from ampbench.record.assemble import TrialAssembler
    from ampbench.record.models import Trial

    t = Trial(suite="s", workload="toy", mode="fp32", seed=0, status="ok", batch_size=10)
    asm = TrialAssembler(t)
    asm.feed(StepRecord(step=1, loss=1.0, time_s=5.0, samples=10, warmup=True))
    asm.feed_all(StepRecord(step=i, loss=1.0, time_s=dt, samples=10) for i, dt in ((2, 0.1), (3, 0.2), (4, 0.4)))
    asm.finish(counts={"tokens": 70}, window_s=0.7)
    assert t.throughput.samples_per_s == pytest.approx(50.0) and t.throughput.measured_steps == 3
    assert t.throughput.extra_per_s == {"tokens": pytest.approx(100.0)} and t.throughput.window_s == 0.7
    assert t.memory.energy_j_per_sample is None
    t.memory.energy_j = 6.0
    asm.finish()
    assert t.memory.energy_j_per_sample == pytest.approx(0.2)


def test_the_measurement_docstring_cites_names_that_exist() -> None:
    """judge/measure.py calls itself the one definition: every dotted name its docstring cites resolves (it
    cited a `Trial.samples_per_s()` that never existed), as a module path under ampbench or on a Trial."""
    import importlib

    from ampbench.judge import measure
    from ampbench.record.models import Trial

    trial = Trial(suite="s", workload="toy", mode="fp32", seed=0, status="ok")

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module("ampbench." + ".".join(parts[:cut]))
            except ImportError:
                continue
            rest = parts[cut:]
            break
        else:
            obj, rest = trial, parts[1:] if parts[0] == "Trial" else parts
        for p in rest:
            if not hasattr(obj, p):
                return False
            obj = getattr(obj, p)
        return True

    cited = [n for n in re.findall(r"`([A-Za-z_][\w.]*\.[\w.]+)(?:\(\))?`", measure.__doc__ or "")]
    assert len(cited) >= 3, cited
    assert [n for n in cited if not resolves(n)] == []
    assert not resolves("Trial.samples_per_s")


def test_both_producers_inputs_fill_the_record_by_one_rule() -> None:
    """A hook's step event and the built-in loop's step are counted alike (a skipped step, a non-finite loss only
    where the loss was read); a hook's memory event fills the record fields it declares (`into`), a value the
    record's type refuses left out; every rank's memory merges by one rule; the hook's facts join the env."""
    from ampbench.record import wire
    from ampbench.record.assemble import (
        RankMemory,
        TrialAssembler,
        memory_from_wire,
        merge_ranks,
        step_from_wire,
    )
    from ampbench.record.models import Env, Memory, Trial

    t = Trial(suite="s", workload="command", mode="amp", seed=0, status="crashed", batch_size=4)
    asm = TrialAssembler(t)
    asm.feed(StepRecord(step=1, loss=None, time_s=0.1, found_inf=True, samples=4))        # the built-in loop's
    asm.feed(step_from_wire(wire.StepEvent(step=2, t=0.1, loss=None, loss_seen=False), 4, 0))   # not read
    asm.feed(step_from_wire(wire.StepEvent(step=3, t=0.1, loss=None, found_inf=True), 4, 0))
    assert (t.skipped_steps, t.nonfinite_losses, len(t.steps)) == (2, 2, 3)
    rank0 = memory_from_wire(wire.MemoryEvent(source="tpu", peak_allocated=7, peak_reserved=9, evaluations=2))
    assert (rank0.source, rank0.peak_allocated_bytes, rank0.peak_reserved_bytes) == ("none", 7, 9)
    rank1 = Memory(source="cuda", peak_allocated_bytes=8, energy_j=1.0)
    merged = Memory()
    merge_ranks(merged, [RankMemory(0, rank0, pid=11), RankMemory(1, rank1)])
    assert (merged.source, merged.peak_allocated_bytes, merged.peak_reserved_bytes, merged.energy_j) == (
        "cuda", 8, 9, None)
    assert [(r["rank"], r.get("pid"), r["peak_allocated_bytes"]) for r in merged.per_rank] == [(0, 11, 7), (1, None, 8)]
    asm.env(Env(python="3.11", device="cpu", device_name="Xeon"))
    asm.env_from([wire.StartEvent(python="3.9", paddle=""), wire.DeviceEvent(device="gpu", device_name="A100")])
    assert (t.env.python, t.env.device, t.env.device_name, t.env.paddle) == ("3.9", "gpu", "A100", "")
    asm.outcome("crashed", "why", "tail")
    asm.outcome("ok")
    assert (t.status, t.error, t.log_tail) == ("ok", None, "tail")
