"""The `[workload]` table of a `command` suite, and the up-front checks of its placeholders.

`command` is an argv list (no shell); `{seed}`, `{steps}`, `{out}`, `{mode}`, `{batch_size}`,
`{eval_step}` (the last step after which the program's evaluation is still seen: train.steps - 1 when
ampbench stops the program, else train.steps) and `{epochs}` (with `[workload.program]`: the program's
own epoch count, raised to the fewest epochs that hold train.steps) in it (and in `cwd`, `env` values,
each mode's `args`/`env`) are filled per trial. A setting the suite
makes that cannot reach the program is an error before any run folder exists, never a silent
mismatch: several seeds need `{seed}`, a per-mode batch size needs `{batch_size}`, and unless the
hook ends the program after `train.steps` steps (`stop_after_steps`), the steps need `{steps}`.
Steps, evaluation and epochs must agree before any trial: a program whose preset says when it
evaluates (PaddleOCR's `Global.eval_batch_step`) must evaluate inside the steps ampbench lets it run;
a program that counts epochs (`[workload.program]`) must run the steps asked, and such a suite (what
`ampbench import --repo` writes) must leave the speed rule its minimum of measured steps.
"""

from __future__ import annotations

import os
import shutil
import string
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, StrictInt, model_validator

from ampbench.config.suite import MIN_MEASURED_STEPS
from ampbench.workloads.base import WorkloadParams
from ampbench.workloads.command.presets import PRESETS, evaluations

if TYPE_CHECKING:
    from ampbench.config.suite import Suite

PLACEHOLDERS = ("seed", "steps", "out", "mode", "batch_size", "eval_step", "epochs")
Preset = Literal["paddleocr", "trainer", "paddleclas", "paddleseg", "paddlerec", "hapi", "regex", "json"]
assert set(PRESETS) == set(typing.get_args(Preset))  # one list of presets, here and in presets.py


class MetricSource(WorkloadParams):
    """Where the program's metric is read: a preset log format, your regexes, and/or a JSON file."""

    preset: Preset = "regex"
    patterns: dict[str, str] = {}   # metric name -> regex (group `value`, else group 1)
    json_file: str | None = None    # e.g. "{out}/eval_results.json" (the trainer preset reads it by default)
    json_key: str | None = None     # a dotted path inside it; default: every top-level number
    throughput_pattern: str | None = None  # regex of the program's own samples/s (the presets know theirs)

    @model_validator(mode="after")
    def _something_to_read(self) -> MetricSource:
        import re

        for name, rx in {**self.patterns, "throughput_pattern": self.throughput_pattern or ""}.items():
            try:
                re.compile(rx)
            except re.error as e:
                raise ValueError(f"patterns.{name}: not a valid regex ({e})") from None
        if self.preset == "regex" and not self.patterns:
            raise ValueError("preset 'regex' needs patterns = { METRIC = 'REGEX' }")
        if self.preset == "json" and not self.json_file:
            raise ValueError("preset 'json' needs json_file (e.g. \"{out}/metrics.json\")")
        return self


class ProgramEpochs(WorkloadParams):
    """The length of a program that counts epochs, not steps (PaddleOCR's Global.epoch_num over its
    label files): it runs epochs x steps_per_epoch(batch) optimizer steps by itself, whatever ampbench
    asks, so ampbench checks that count (or fills `{epochs}` with enough) before any trial."""

    epochs: int = Field(ge=1)        # the program's own epoch count
    samples: int = Field(ge=1)       # training samples per epoch (its label files' lines)
    drop_last: bool = False          # its DataLoader drops a last partial batch

    def steps_per_epoch(self, batch: int) -> int:
        return self.samples // batch if self.drop_last else -(-self.samples // batch)

    def epochs_for(self, steps: int, batch: int) -> int:
        """`{epochs}`: the program's own count, raised to the fewest epochs that hold `steps`."""
        per = self.steps_per_epoch(batch)
        return max(self.epochs, -(-steps // per)) if per > 0 else self.epochs


class CommandParams(WorkloadParams):
    command: list[str] = Field(min_length=1)   # argv; the first item is the program (your interpreter)
    cwd: str | None = None
    env: dict[str, str] = {}
    metric: MetricSource             # where the program's metric is read (a preset, regexes, a JSON file)
    instrument: bool = True          # false: no start-up hook (no per-step times, loss or op evidence)
    stop_after_steps: bool = False   # the hook ends the program cleanly after train.steps steps
    # k: the hook reads the loss at steps 1, 1 + k, 1 + 2k, ... (fixed indices: runs line up step for step;
    # a read costs 20-40 us inside a training loop, so 1 costs ~3% of a 0.7 ms step, docs/command.md)
    loss_every_steps: StrictInt = Field(5, ge=1)
    max_log_mib: int = Field(64, ge=1)    # the trial log keeps at most this much of the output
    throughput_tolerance: float = Field(0.25, gt=0)  # |ours / theirs - 1| beyond this is reported
    program: ProgramEpochs | None = None   # an epoch-counting program's own length (see ProgramEpochs)


def placeholder_values(params: CommandParams, steps: int, batch: int, **rest: object) -> dict[str, object]:
    """Every placeholder's value for one trial (seed, out, mode come from the trial; `rest`)."""
    epochs = params.program.epochs_for(steps, batch) if params.program else 0
    return {"steps": steps, "batch_size": batch, "eval_step": steps - 1 if params.stop_after_steps else steps,
            "epochs": epochs, **rest}


def fields_of(text: str) -> set[str]:
    """Placeholder names in a text (`{{` and `}}` are literal braces), those nested in a format spec
    (`{seed:{x}}`) included; ValueError for an unbalanced brace."""
    found: set[str] = set()
    for _, name, spec, _ in string.Formatter().parse(text):
        if name is not None:
            found.add(name)
        if spec:
            found |= fields_of(spec)
    return found


SAMPLE_VALUES: dict[str, object] = {"seed": 0, "steps": 1, "out": "out", "mode": "fp32", "batch_size": 1,
                                    "eval_step": 1, "epochs": 1}


FILL_ERRORS = (ValueError, KeyError, IndexError, AttributeError, TypeError)   # what str.format of a text can raise


def text_problem(text: str) -> str | None:
    """Why a text cannot be filled per trial (an unbalanced brace, an unknown or nested placeholder, a
    format spec its value cannot take), or None: the trial's `str.format` then cannot fail."""
    hint = " (write {{ and }} for a literal brace)"
    try:
        names = fields_of(text)
    except ValueError as e:
        return f"{text!r}: {e}{hint}"
    bad = sorted(n for n in names if n not in PLACEHOLDERS)
    if bad:
        return f"unknown placeholder {{{bad[0]}}}; known: " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS) + hint
    try:
        text.format(**SAMPLE_VALUES)
    except FILL_ERRORS as e:
        return f"{text!r} cannot be filled: {type(e).__name__}: {e}{hint}"
    return None


def literal(text: str) -> str:
    """A text with no placeholder as the program gets it (`{{` -> `{`); fields_of(text) must be empty."""
    return text.format()


def placeholder_texts(params: CommandParams, suite: Suite) -> dict[str, str]:
    """Where each text lives -> the text (command, cwd, env, every mode's args/env, metric.json_file)."""
    where: dict[str, str] = {f"workload.command[{i}]": a for i, a in enumerate(params.command)}
    if params.cwd:
        where["workload.cwd"] = params.cwd
    where.update({f"workload.env.{k}": v for k, v in params.env.items()})
    for m in suite.modes:
        where.update({f"modes ({m.name}).args[{i}]": a for i, a in enumerate(m.args)})
        where.update({f"modes ({m.name}).env.{k}": v for k, v in m.env.items()})
    if params.metric.json_file:
        where["workload.metric.json_file"] = params.metric.json_file
    return where


def placeholder_problems(params: CommandParams, suite: Suite) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    used: set[str] = set()
    for key, text in placeholder_texts(params, suite).items():
        why = text_problem(text)
        if why is not None:
            problems.append((key, why))
        elif key != "workload.metric.json_file":
            used |= fields_of(text)
    if problems:
        return problems
    if len(suite.suite.seeds) > 1 and "seed" not in used:
        problems.append(("workload.command", f"suite.seeds has {len(suite.suite.seeds)} seeds but the command "
                         "never uses {seed}: every trial would train the same way (pass e.g. --seed {seed})"))
    if any(m.batch_size and m.batch_size != suite.train.batch_size for m in suite.modes) and "batch_size" not in used:
        problems.append(("workload.command", "a mode sets its own batch_size but the command never uses "
                         "{batch_size}: the program would not run it (pass e.g. --batch_size {batch_size})"))
    carried = "steps" in used or ("epochs" in used and params.program is not None)   # whole epochs >= train.steps
    if not params.stop_after_steps and not carried:
        problems.append(("workload.command", f"train.steps = {suite.train.steps} cannot reach the program: use "
                         "{steps} in the command (e.g. --max_steps {steps}), {epochs} with [workload.program] for "
                         "a program that counts epochs, or set workload.stop_after_steps = true so ampbench ends "
                         "it after that many optimizer steps"))
    if "epochs" in used and params.program is None:
        problems.append(("workload.command", "{epochs} needs [workload.program] (epochs, samples): the program's "
                         "own epoch count and samples per epoch"))
    return problems


def program_problems(params: CommandParams) -> list[tuple[str, str]]:
    """The program must exist and be executable before the run starts (exit 2, not N crashed trials)."""
    try:
        if fields_of(params.command[0]) or (params.cwd and fields_of(params.cwd)):
            return []  # filled per trial; checked by the trial itself
        prog = literal(params.command[0])
        cwd = Path(literal(params.cwd)) if params.cwd else None
    except FILL_ERRORS:
        return []  # placeholder_problems names it
    if cwd is not None and not cwd.is_dir():
        return [("workload.cwd", f"{cwd} is not a folder")]
    if os.sep in prog:
        p = Path(prog) if Path(prog).is_absolute() or cwd is None else cwd / prog
        if not p.exists():
            return [("workload.command[0]", f"{prog}: no such file")]
        if not (p.is_file() and os.access(p, os.X_OK)):
            return [("workload.command[0]", f"{prog}: not an executable file")]
        return []
    if shutil.which(prog, path=params.env.get("PATH") or os.environ.get("PATH")) is None:
        return [("workload.command[0]", f"{prog}: not found on PATH")]
    return []


def schedule_problems(params: CommandParams, suite: Suite) -> list[tuple[str, str]]:
    """Steps, evaluation and epochs that cannot agree, found before any trial (one line each)."""
    steps, warmup = suite.train.steps, suite.train.warmup_steps
    try:
        used = set().union(*(fields_of(t) for k, t in placeholder_texts(params, suite).items()
                             if k != "workload.metric.json_file"))
    except ValueError:
        return []   # an unbalanced brace: placeholder_problems names it
    problems: list[tuple[str, str]] = []
    for mode in suite.modes:
        batch = suite.batch_size(mode)
        values = placeholder_values(params, steps, batch, seed=0, out="out", mode=mode.name)
        try:
            argv = [a.format(**values) for a in [*params.command, *mode.args]]
        except FILL_ERRORS:   # {seed[0]}, {out.__class__}, ...: placeholder_problems names it
            return problems
        p = params.program
        if p is not None and "epochs" not in used and p.epochs * p.steps_per_epoch(batch) < steps:
            problems.append(("train.steps", f"the program runs at most {p.epochs * p.steps_per_epoch(batch)} "
                             f"optimizer steps by itself (epochs {p.epochs} x {p.steps_per_epoch(batch)} steps of "
                             f"batch {batch} over {p.samples} samples) but train.steps = {steps}: lower train.steps "
                             "or pass {epochs} to it (e.g. Global.epoch_num={epochs})"))
            break
        when = evaluations(params.metric.preset, argv)
        last = values["eval_step"]
        if when is not None and when[1] > 0 and when[0] + when[1] > int(str(last)):
            first = when[0] + when[1]
            problems.append(("train.steps", f"train.steps = {steps} leaves the program no evaluation: it "
                             f"evaluates first after step {first} ({when[2]}), and its last step ampbench sees "
                             f"is {steps}{' (ampbench stops it there)' if params.stop_after_steps else ''}: raise "
                             f"train.steps to {first + (1 if params.stop_after_steps else 0)} or more, or tie the "
                             "evaluation to the steps with {eval_step}"))
            break
    if params.program is not None and steps - warmup < MIN_MEASURED_STEPS:
        problems.append(("train.steps", f"train.steps = {steps} with warmup_steps = {warmup} leaves "
                         f"{steps - warmup} measured steps; the speed rule needs {MIN_MEASURED_STEPS}: set "
                         f"train.steps to {warmup + MIN_MEASURED_STEPS} or more"))
    return problems
