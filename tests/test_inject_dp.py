"""amp = "inject" at O2 on a data-parallel program that builds paddle.DataParallel before its optimizer
(Paddle's own DataParallel example does; issue 58.1), on 2 real CPU ranks under paddle.distributed.launch.

The hook decorates the model as the wrapper is built, before DataParallel.__init__ builds its reducer. On a
CPU decorate is a no-op, so the order is what the plain run can show (the hook's decorate/DataParallel events,
decorate_order). With the place check a CPU lacks replaced (tests/fixtures/command/fake_amp_place.py) decorate
really casts the parameters to float16, and Paddle's own C++ reducer is the judge: built over float32
parameters (decorate after the wrapper, as the hook did before) its first backward concatenates the float16
gradients as float32 and raises (reducer.cc, EagerGroup::ConcatTensors over the bucket dtype fixed in
EagerReducer::InitializeDenseGroups); built over float16 ones it all-reduces them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app

SCRIPT = Path(__file__).parent / "fixtures" / "command" / "dp_first_train.py"
SUITE = """
[suite]
name = "dpinj"
workload = "command"
metric = "accuracy"
seeds = [0]

[workload]
command = ["{python}", "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir", "{{out}}/ranks",
           "{script}", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"]
metric = {{ preset = "json", json_file = "{{out}}/metrics.json" }}

[train]
batch_size = 16
steps = 6
warmup_steps = 1
timeout_s = 300

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o2"
level = "O2"
amp = "inject"

[[modes]]
name = "amp-o2-gpuplace"
level = "O2"
amp = "inject"
args = ["--fake-gpu-place"]
"""


@pytest.fixture(scope="module")
def dp_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("dpinj")
    (d / "suite.toml").write_text(SUITE.format(python=sys.executable, script=SCRIPT))
    r = CliRunner().invoke(app, ["run", str(d / "suite.toml"), "--out", str(d / "runs"), "--no-report",
                                 "--mode", "amp-o2", "--mode", "amp-o2-gpuplace"], env={"COLUMNS": "200"})
    assert "Traceback" not in r.output, r.output
    return next((d / "runs" / "dpinj").iterdir())


def _trial(run: Path, mode: str) -> dict:
    return json.loads((run / "trials" / f"{mode}__seed0.json").read_text())


@pytest.mark.slow
def test_inject_o2_decorates_before_a_data_parallel_built_before_the_optimizer(dp_run):
    t = _trial(dp_run, "amp-o2")
    assert t["status"] == "ok", t["error"]
    assert t["world_size"] == 2 and len(t["steps"]) == 6
    assert t["amp"]["decorate_order"] == "decorate-first"   # main: "data-parallel-first" (decorated at the optimizer)
    (applied,) = t["amp"]["injected"]["applied"]
    assert applied["decorated"] is True and applied["before_data_parallel"] is True and applied["models"] == ["Net"]


@pytest.mark.slow
def test_paddles_own_reducer_accepts_the_gradients_of_the_model_decorated_first(dp_run):
    """With the GPU place check replaced, decorate casts for real: both ranks' reducers were built over float16
    parameters and their first backward all-reduced float16 gradients (main: the reducer's ValueError)."""
    out = dp_run / "outputs" / "amp-o2-gpuplace__seed0"
    for rank in (0, 1):
        got = json.loads((out / f"reducer_rank{rank}.json").read_text())
        assert got == {"backward": "ok", "grad_dtype": "paddle.float16", "param_dtype": "paddle.float16"}, got
