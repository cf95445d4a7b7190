"""The end of a command trial: steps, throughput (and the program's own as a cross-check), memory,
AMP evidence, the metric from the program's output, and a status that says what went wrong."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from ampbench.record import wire
from ampbench.record.assemble import cpu_seconds, step_from_wire
from ampbench.record.rates import global_batch
from ampbench.trackers.load import LoadSamples
from ampbench.trial.command_crash import crash_text
from ampbench.trial.command_gpu import ProgramGpu, measured_window
from ampbench.trial.command_inject import injected_into, refusal
from ampbench.trial.command_left_out import cross_check, left_out
from ampbench.trial.command_record import (
    EventReader,
    Proc,
    Ran,
    amp_record,
    emulated_into,
    memory_of,
    shape_audit,
    throughput_check,
    window_steps,
)
from ampbench.trial.context import TrialContext
from ampbench.workloads.command.params import CommandParams, placeholder_values
from ampbench.workloads.command.presets import json_metrics


def _metrics(tr: TrialContext, p: CommandParams, output: Any, out: Path) -> dict[str, float]:
    found = dict(output.scan.metrics)
    files = [p.metric.json_file] if p.metric.json_file else (
        ["{out}/all_results.json", "{out}/eval_results.json"] if p.metric.preset == "trainer" else [])
    values = placeholder_values(p, tr.steps_total, tr.batch, seed=tr.spec.seed, out=str(out), mode=tr.mode.name)
    for f in files:
        path = Path(f.format(**values))
        if not path.is_absolute() and p.cwd:
            path = Path(p.cwd.format(**values)) / path
        found.update(json_metrics(path, p.metric.json_key))
    return found


def exit_text(code: int | None) -> str:
    if code is not None and code < 0 and -code in signal.Signals._value2member_map_:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def _problem(tr: TrialContext, p: CommandParams, reader: EventReader, code: int | None, launch_error: str,
             metrics: dict[str, float], output: Any) -> str | None:
    """Why this trial is not ok, in one sentence (None: it is ok)."""
    lead = reader.lead()
    stopped = lead is not None and lead.end is not None and lead.end.reason == "stopped"
    steps = len(lead.steps) if lead else 0
    want = tr.suite.train.steps if tr.spec.steps is None else tr.spec.steps
    if launch_error:
        return launch_error
    refused = refusal([ev for x in reader.procs.values() for ev in x.injected])
    if refused:
        return refused
    if code != 0 and not (stopped and code == 0):
        measured = max(0, steps - tr.suite.train.warmup_steps)   # as the record counts them (StepRecord.warmup)
        return (f"the program {exit_text(code)} after {steps} optimizer step(s), {measured} measured"
                + crash_text(output.tail))
    if p.instrument and steps == 0:
        return _no_steps(reader, [*p.command, *tr.mode.args], getattr(output, "denied", ""))
    if p.instrument and steps < want:
        return (f"the program ended after {steps} optimizer steps; train.steps = {want} (pass {{steps}} to it, "
                "or for a program that counts epochs describe them in [workload.program] and pass {epochs})")
    metric = tr.suite.suite.metric
    if metric not in metrics:
        seen = ", ".join(sorted(metrics)) or "none"
        return (f"no metric {metric!r} in the program's output (preset {p.metric.preset!r}; metrics seen: {seen})")
    return None


_SKIPS_SITE = re.compile(r"-[bBdEhiIOqsSuvVx]*[IES][bBdEhiIOqsSuvVx]*")  # python's own -I, -E, -S (combined too)


def _site_flag(argv: list[str]) -> str | None:
    """The interpreter flag in the command that keeps Python from importing the hook, if any."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return None
    for a in argv[1:]:
        if a in ("-m", "-c", "--", "-") or not a.startswith("-"):
            return None
        if _SKIPS_SITE.fullmatch(a):
            return a
    return None


def _no_steps(reader: EventReader, argv: list[str], denied: str = "") -> str:
    """Why no optimizer step was seen, as far as the hook's events tell: it never ran (a Python flag,
    a cleared PYTHONPATH), it ran but Paddle was never imported, or no step(). (The events travel on
    a socket, trial/command_channel.py: a program that deletes its folders loses none of them.)"""
    if not reader.procs and denied:   # the hook ran, and said it could not reach the worker
        return f"no optimizer step was seen: the start-up hook could not reach ampbench's event channel ({denied})"
    if not reader.procs:
        flag = _site_flag(argv)
        if flag:
            return (f"no optimizer step was seen: the command runs Python with {flag}, which skips site and "
                    "PYTHONPATH, so ampbench's start-up hook never loaded; drop the flag, or set "
                    "workload.instrument = false to run it unmeasured")
        return ("no optimizer step was seen: ampbench's start-up hook never reported from the program (a Python "
                "started with -I, -E or -S, or an environment without ampbench's PYTHONPATH, skips it; a "
                "program that is not Python is never measured: set workload.instrument = false)")
    hook_err = "; ".join(e for x in reader.procs.values() for e in x.errors)
    said = f"; the hook said: {hook_err}" if hook_err else ""
    if not any(x.reported for x in reader.procs.values()):
        return f"no optimizer step was seen: the hook ran but the program never imported paddle{said}"
    return ("no optimizer step was seen: the program imported paddle but never called a Paddle optimizer's "
            f"step()/minimize(){said}")


def finish_command(tr: TrialContext, p: CommandParams, reader: EventReader, output: Any, launch_error: str,
                   out: Path, ran: Ran) -> None:
    """Fill the trial from what the finished program left: the hook's events (`reader`), its output, and what
    running it left (`ran`: its exit code, peak RSS, GPU, the machine's load, leftover processes).  The order
    matters: the steps first (every later figure is per step), the allocator's memory before NVML's window
    overwrites its device fields, the status last (it reads the metrics and the leftovers)."""
    code, left, peak_rss, gpu = ran.code, ran.left, ran.peak, ran.gpu
    t = tr.trial
    lead = reader.lead()
    t.world_size = max(1, len(reader.stepping()))
    _feed_steps(tr, p, lead)
    _contention(tr, lead, ran.load)
    if lead is not None:   # the program's own Paddle, Python and device, as its hook saw them
        tr.record.env_from(ev for ev in (lead.start, lead.device) if ev is not None)
    tr.record.memory(memory_of(reader, peak_rss))
    if gpu is not None and lead is not None:
        nvml_fields(tr, gpu, lead.steps[:len(t.steps)], tr.suite.train.warmup_steps)
    _amp_evidence(tr, p, reader, lead)
    t.metrics = _metrics(tr, p, output, out)
    t.workload_info = _workload_info(tr, p, lead, output, out, left)   # an extra field of the open Trial model
    _set_status(tr, p, reader, code, launch_error, output, left)
    tr.record.finish()   # throughput, energy per sample


def _feed_steps(tr: TrialContext, p: CommandParams, lead: Proc | None) -> None:
    """The lead process's steps into the record, each with the samples of one optimizer step over every rank
    and the hook's DataLoader wait where it saw one.  A program ampbench stops after train.steps may still
    report a step or two past them before it ends: those are not the trial's."""
    samples = global_batch(tr.batch, tr.accum, tr.trial.world_size)
    events = lead.steps if lead else []
    cpu = cpu_seconds(events)   # each step's CPU seconds from the hook's process clock
    recs = [step_from_wire(ev, samples, tr.suite.train.warmup_steps, cpu.get(ev.step)) for ev in events]
    waits = lead.data_waits if lead is not None else {}
    for rec in recs:
        rec.data_s = waits.get(rec.step)
    tr.record.feed_all(recs[:tr.steps_total] if p.stop_after_steps else recs)


def _contention(tr: TrialContext, lead: Proc | None, load: LoadSamples | None) -> None:
    """The CPU contention the built-in loop records (trial/finish.py), for a program: its CPU share over the
    measured steps (their CPU seconds, from the hook) and the cores other processes used meanwhile (the worker's
    load samples around the measured steps: from the last warm-up step's end to the last measured step's end, on
    the program's own clock), so "measurement disturbed" can be said of it; nothing when neither was seen."""
    steps = [ev for ev in (lead.steps if lead else []) if ev.step <= tr.steps_total and ev.at is not None]
    warmup = tr.suite.train.warmup_steps
    start = next((ev.at - ev.t for ev in steps if ev.step == warmup + 1 and ev.at is not None), None)
    end = steps[-1].at if steps and steps[-1].step > warmup else None
    others = load.others(start, end) if load is not None else None
    share = tr.trial.cpu_share()
    if share is not None or others is not None:
        tr.record.interference({"cpu_share": share, "others_cpu": others})


def _amp_evidence(tr: TrialContext, p: CommandParams, reader: EventReader, lead: Proc | None) -> None:
    """The shape audit, the AMP settings and evidence and what `amp = "inject"` applied (the steps' counts of
    skipped steps and non-finite losses the assembler kept as they were fed)."""
    t = tr.trial
    t.shape_audit = shape_audit(lead, tr.batch)   # the hook's layers at step 1, judged as the built-in loop's
    amp_record(tr.record, tr.mode, reader, p.instrument)   # with what the AMP calls made used (the program's own)
    if tr.mode.amp and tr.mode.emulate:
        emulated_into(tr.record, reader)
    injected_into(t.amp, tr.mode, lead.injected if lead else [])


def _workload_info(tr: TrialContext, p: CommandParams, lead: Proc | None, output: Any, out: Path,
                   left: list[str]) -> dict[str, Any]:
    """What the report says about the program beside the numbers: its arguments and output folder, log lines
    dropped, what was left out of the steps (evaluations, checkpoint saves), the cross-check of its own
    throughput against ampbench's, and the processes it left running."""
    t = tr.trial
    info: dict[str, Any] = {"argv": tr.mode.args, "output_dir": str(out), "log_lines_dropped": output.dropped,
                            "log_bytes_dropped": output.dropped_bytes}
    excluded = left_out(lead, t.measured_steps())   # evaluations, checkpoint saves inside steps (command_left_out.py)
    if excluded:
        info["left_out"] = excluded
    check = throughput_check(t.mean_rate(), output.scan, p.throughput_tolerance, t.steps)
    counted = window_steps(t.steps, check.get("window") if check else None)   # the steps the check compared
    info.update(cross_check(check, counted, excluded if check is None or "window" not in check else
                            left_out(lead, counted), t.steps))
    if left:
        info["leftover_processes"] = left
    return info


def _set_status(tr: TrialContext, p: CommandParams, reader: EventReader, code: int | None, launch_error: str,
                output: Any, left: list[str]) -> None:
    """ok, or crashed with every reason in one sentence: what went wrong first, then the processes the program
    left behind (a trial otherwise fine still fails on them: they would skew the next trial's figures)."""
    why = _problem(tr, p, reader, code, launch_error, tr.trial.metrics, output)
    if left:
        why = (f"{why}; " if why else "") + _leftovers_text(left)
    tr.record.outcome("ok" if why is None else "crashed", why,
                      None if why is None else output.tail_text() or None)


def _leftovers_text(left: list[str]) -> str:
    """The processes the program left running, the first five named."""
    more = ", ..." if len(left) > 5 else ""
    return (f"the program left {len(left)} process(es) running after it ended ({', '.join(left[:5])}{more}): "
            "ampbench killed them")


def nvml_fields(tr: TrialContext, gpu: ProgramGpu, steps: list[wire.StepEvent], warmup: int) -> None:
    """NVML's memory, energy and interference over the measured window, into the
    fields the built-in workloads fill; nothing when the program never reported a GPU (CPU: null)."""
    window, gaps = measured_window(steps, warmup)
    got = gpu.fields(window, gaps)
    if not got:
        return
    interference = got.pop("interference", {})
    tr.record.memory_update(got)
    if interference:
        tr.record.interference(interference)
