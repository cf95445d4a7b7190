"""Time inside a command trial's measured steps that is not training, and the throughput cross-check's cause.

The hook leaves two kinds of time out of a step (docs/command.md): an evaluation inside the loop
(Layer.eval() to Layer.train()) and, since issue 44, a checkpoint save (paddle.save, the hook's
_ampbench_hook/saves.py), each reported per step. `left_out` sums them over the measured steps: the trial's
note of what was not charged to training. The program's own samples/s lines usually count that time
(PaddleRec's and PaddleClas's rates run over whole intervals), so when the cross-check disagrees,
`cross_check` first asks whether that measured time explains the gap (ampbench's rate with it counted
back in agrees with the program's) and names it; only otherwise does it point at train.batch_size.
"""

from __future__ import annotations

from typing import Any

from ampbench.record.models import StepRecord
from ampbench.record.rates import rates_from, trial_rate
from ampbench.trial.command_record import Proc


def left_out(lead: Proc | None, steps: list[StepRecord]) -> dict[str, Any]:
    """{"evaluations_s", "saves", "saves_s", "note"} over `steps` (the measured ones, or those a throughput
    check counted) ({} when nothing was left out)."""
    if lead is None:
        return {}
    measured = {s.step for s in steps}
    total = sum(ev.eval_s or 0.0 for ev in lead.steps if ev.step in measured)
    saves = {k: v for k, v in lead.saves.items() if k in measured}
    saves_s = sum(saves.values())
    if total <= 0 and not saves:
        return {}
    evals_s = max(0.0, total - saves_s)
    parts = ([f"{len(saves)} checkpoint save(s) (paddle.save, {saves_s:.3g} s)"] if saves else []) + (
        [f"evaluations ({evals_s:.3g} s)"] if evals_s > 0 else [])
    return {"evaluations_s": evals_s, "saves": len(saves), "saves_s": saves_s,
            "note": f"{' and '.join(parts)} inside the measured steps, left out of training time"}


def median_rate(steps: list[StepRecord]) -> float:
    """The trial's samples/s as the record holds it (throughput.samples_per_s): the median per-step rate of the
    measured steps, which the cross-check does not compare (the program's lines are intervals' samples over time)."""
    measured = [s for s in steps if not s.warmup]
    return trial_rate(rates_from([s.time_s for s in measured], [s.samples for s in measured])) or 0.0


def cross_check(check: dict[str, Any] | None, counted: list[StepRecord], excluded: dict[str, Any],
                steps: list[StepRecord]) -> dict[str, Any]:
    """workload_info's throughput_check (with its `cause`) and warning, when the program logs a rate; `counted`:
    the steps its figure counted (its line's window, else the measured ones), `excluded`: what was left out of
    them (left_out), `steps`: the trial's (their median per-step rate is the trial's samples/s)."""
    if check is None:
        return {}
    if check["agrees"]:
        return {"throughput_check": check}
    ours, theirs, tol = check["ampbench_samples_per_s"], check["program_samples_per_s"], check["tolerance"]
    secs = sum(s.time_s for s in counted)
    extra = float(excluded.get("evaluations_s", 0.0)) + float(excluded.get("saves_s", 0.0))
    cause = "check train.batch_size is the program's real batch per optimizer step"
    if extra > 0 and ours > theirs and secs + extra > 0 and theirs > 0:
        back = ours * secs / (secs + extra)   # the same samples over the time with what was left out
        if abs(back / theirs - 1) <= tol:
            cause = (f"the program's own rate counts the {excluded['note'].split(' inside')[0]} inside the measured "
                     f"steps, which ampbench leaves out of training time; counted in, ampbench's rate is "
                     f"{back:.4g} samples/s (ratio {back / theirs:.3g})")
            check = {**check, "ratio_with_left_out": back / theirs}
    check = {**check, "cause": cause}
    over = (f"steps {check['window'][0]}-{check['window'][1]}, the iterations of its line" if check.get("window")
            else "the measured steps")
    warning = (f"ampbench's samples over the time of {over}, {ours:.4g} samples/s, against the program's own log's "
               f"{theirs:.4g} (ratio {check['ratio']:.3g}; the trial's samples/s figure is the median per-step rate, "
               f"{median_rate(steps):.4g}): {cause}")
    return {"throughput_check": check, "warning": warning}
