"""`workload = "command"`: the user's own training program, run per mode and seed (issue 21).

Nothing trains in ampbench's process: the worker (ampbench/trial/command.py) runs the program with
the start-up hook of ./hook on PYTHONPATH and turns what it records into the Trial. This class is
what the registry and the up-front checks see.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ampbench.workloads.base import ProgramWorkload, bundled
from ampbench.workloads.command.params import (
    CommandParams,
    placeholder_problems,
    program_problems,
    schedule_problems,
)


@bundled
class CommandWorkload(ProgramWorkload[CommandParams]):
    name = "command"
    Params = CommandParams
    metric_goals: ClassVar[dict[str, str]] = {}   # any name the program reports
    accepts_mode_args: ClassVar[bool] = True

    @classmethod
    def check_suite(cls, params: Any, suite: Any) -> list[tuple[str, str]]:
        problems = super().check_suite(params, suite)
        problems += placeholder_problems(params, suite)
        problems += program_problems(params)
        problems += schedule_problems(params, suite)
        problems += [(f"modes ({m.name}).amp", ("amp = \"inject\" is applied by ampbench's start-up hook: it needs "
                                                "workload.instrument = true"))
                     for m in suite.modes if m.amp_by == "inject" and not params.instrument]
        if suite.train.warmup_steps < 1:
            problems.append(("train.warmup_steps", "a command suite needs at least 1 warm-up step: the first "
                             "step's time runs from `import paddle`, start-up included"))
        if suite.train.grad_accum != 1 or any(m.grad_accum for m in suite.modes):
            problems.append(("train.grad_accum", "set gradient accumulation in your program's own arguments; "
                             "ampbench counts its optimizer steps"))
        if suite.distributed.nproc_per_node > 1 or suite.distributed.nnodes > 1:
            problems.append(("distributed", "for several processes put `python -m paddle.distributed.launch ...` "
                             "in workload.command itself; ampbench measures every rank it starts"))
        if suite.train.eval_every or suite.train.target is not None:
            problems.append(("train.eval_every", "evaluations are the program's own in a command suite"))
        return problems
