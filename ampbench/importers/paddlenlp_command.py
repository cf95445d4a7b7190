"""`ampbench import paddlenlp --script TRAIN.py ARGS.json | --args "..."`: a command suite that runs the
user's own Trainer script with their own arguments (PaddleNLP or paddleformers: the Trainer flags are
the same), instead of translating them into the bundled bert suite.

The arguments that the suite must control become placeholders (`--max_steps {steps}`, `--seed
{seed}`, `--output_dir {out}`, `--per_device_train_batch_size {batch_size}`); the AMP flags move
into the modes (fp32: none; the args' own `--fp16/--bf16 --fp16_opt_level ...`, else O1 and O2
`--fp16` with the Trainer's defaults). The metric is the Trainer's `eval_<metric_for_best_model>`
(else `eval_loss`, lower is better), read from all_results.json / eval_results.json and its log.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ampbench.config.suite import MAX_SEED
from ampbench.core.errors import ConfigError
from ampbench.core.names import slug
from ampbench.importers.base import Imported, braced, number, text
from ampbench.importers.paddlenlp import _amp_mode

AMP_ARGS = {"fp16", "bf16", "fp16_opt_level", "scale_loss", "amp_custom_black_list", "amp_custom_white_list",
            "amp_master_grad"}
CONTROLLED = {"max_steps": "{steps}", "seed": "{seed}", "output_dir": "{out}",
              "per_device_train_batch_size": "{batch_size}"}


def _flag(key: str, value: Any, bare: bool = False) -> list[str]:
    """`--key value` as the Trainer's parser reads it (an Optional[bool] needs its value; --fp16 may be bare),
    braces doubled: the user's values are data, never placeholders."""
    key = braced(key)
    if value is True:
        return [f"--{key}"] if bare else [f"--{key}", "true"]
    if value is False:
        return [f"--{key}", "false"]
    if isinstance(value, list):
        return [f"--{key}", *(braced(v) for v in value)]
    return [f"--{key}", braced(value)]


def _amp_args(a: dict[str, Any]) -> list[str]:
    return [x for k in sorted(AMP_ARGS) if k in a for x in _flag(k, a[k], bare=True)]


def import_paddlenlp_command(args: dict[str, Any], where: str, script: str | Path,
                             python: str | None = None) -> Imported:
    """The command suite that runs `script` with the Trainer arguments `args` (read from `where`), and the
    import's decisions in words."""
    prog = Path(script)
    if not prog.is_file():
        raise ConfigError(str(script), "--script", "no such file (the Trainer script to run)")
    out = Imported(suite={})
    amps, own_flags = _amp_modes(args, where)
    cmd = _command(args, prog, python)
    metric, goal = _metric(args, where)
    seed = number(where, "seed", args.get("seed", 0), int, minimum=0, maximum=MAX_SEED)
    batch = number(where, "per_device_train_batch_size", args.get("per_device_train_batch_size", 8), int,
                   minimum=1, maximum=10**9)
    max_steps = number(where, "max_steps", args.get("max_steps", -1), int, maximum=10**9)  # -1: not set
    out.suite = {
        "suite": {"name": slug(prog.stem, fallback="trainer"), "workload": "command", "metric": metric,
                  "metric_goal": goal, "seeds": [seed],
                  "description": f"{prog.name} with the Trainer arguments of {where}"},
        "workload": {"command": cmd, "cwd": braced(prog.resolve().parent), "metric": {"preset": "trainer"}},
        "train": {"batch_size": batch, "steps": max_steps if max_steps > 0 else 200,
                  "warmup_steps": 5, "timeout_s": 7200},
        "modes": [{"name": "fp32"}, *amps],
    }
    out.decide(f"program: {prog} with your Trainer arguments; --max_steps/--seed/--output_dir/"
               "--per_device_train_batch_size come from the suite")
    out.decide(_modes_decision(args, amps, own_flags))
    out.decide(f"metric: {metric} ({'lower' if goal == 'min' else 'higher'} is better) from the Trainer's "
               "all_results.json / eval_results.json and its eval log lines: your script must evaluate")
    out.finish()
    return out


def _amp_modes(args: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], bool]:
    """The AMP modes and whether they are the args' own: the mode their fp16/bf16 flags make, else O1 and O2
    `--fp16`, each carrying the args' other AMP arguments (lists, scale_loss, master grad)."""
    mode = _amp_mode(args, where)
    if mode:
        mode["args"] = _amp_args(args)
        return [mode], True
    amps = []
    for lv in ("O1", "O2"):
        a = {**args, "fp16": True, "fp16_opt_level": lv}
        if lv == "O1":
            a.pop("amp_master_grad", None)   # O2 only (paddle.amp.decorate)
        m = _amp_mode(a, where) or {}
        amps.append(m | {"args": _amp_args(a)})
    return amps, False


def _command(args: dict[str, Any], prog: Path, python: str | None) -> list[str]:
    """The user's script with their arguments, less the AMP ones (the modes add those) and the ones the suite
    controls, which become placeholders at the end."""
    cmd = [braced(python or sys.executable), braced(prog.resolve())]
    for k, v in args.items():
        if k in AMP_ARGS or k in CONTROLLED:
            continue
        cmd += _flag(k, v)
    for k, ph in CONTROLLED.items():
        cmd += [f"--{k}", ph]
    return cmd


def _metric(args: dict[str, Any], where: str) -> tuple[str, str]:
    """The Trainer's metric and its goal: `eval_<metric_for_best_model>` (else eval_loss); a loss, or one the
    args say is not greater_is_better, is minimised."""
    best = text(where, "metric_for_best_model", args["metric_for_best_model"]) if args.get("metric_for_best_model") else ""
    metric = (best if best.startswith("eval_") else f"eval_{best}") if best else "eval_loss"
    goal = "min" if metric.endswith("loss") or args.get("greater_is_better") is False else "max"
    return metric, goal


def _modes_decision(args: dict[str, Any], amps: list[dict[str, Any]], own_flags: bool) -> str:
    """The import's decision on the modes, in one line: which, from where, and the AMP arguments carried."""
    carried = sorted(k for k in AMP_ARGS - {"fp16", "bf16", "fp16_opt_level"} if k in args)
    return (f"modes: fp32, {', '.join(str(m['name']) for m in amps)} "
            + ("(your fp16/bf16 flags)" if own_flags else "(your args set neither fp16 nor bf16: O1 and O2 --fp16 "
                                                          "with the Trainer's defaults)")
            + (f"; AMP arguments carried into the AMP modes: {', '.join('--' + k for k in carried)}"
               if carried else ""))
