"""One trial in one process: seed, build, apply the precision mode, train, evaluate, write JSON.

Run as `python -m ampbench.trial.worker SPEC.json`. Progress goes to the runner as JSON lines on a
private channel (the original stdout); everything else Paddle or the workload prints goes to
stderr, which the runner saves as the trial's log. The trial file is written atomically, also
when training raises, so a failure is recorded with its traceback and the steps done so far.

The parts, in order: setup.py (device, replicas, workload, model, optimizer, AMP), loop.py (the
timed steps), finish.py (evidence, memory, throughput, final evaluation); optimizer.py,
faults.py, replicas.py (data parallel inside a rank), evaluation.py.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from ampbench.record.trial_file import write_trial_file
from ampbench.trial.context import Events, TrialContext
from ampbench.trial.faults import classify_error
from ampbench.trial.parent_watch import watch_parent
from ampbench.trial.replicas import env_world_size, write_failure_note, writes_trial
from ampbench.trial.setup import seed_everything
from ampbench.trial.spec import TrialSpec

__all__ = ["Events", "TrialRunner", "main", "run_trial", "seed_everything"]


class TrialRunner(TrialContext):
    """One trial: set up, run the steps, finish; `trial` holds whatever was done if a part raises."""

    def run(self) -> None:
        from ampbench.trial.finish import finish
        from ampbench.trial.loop import run_steps
        from ampbench.trial.setup import set_up

        parts = set_up(self)
        try:
            result = run_steps(self, parts)
            finish(self, parts, result)
        finally:
            parts.prec.close()   # an emulated mode's patches out of this process's Paddle (in-process launches)

    def write(self) -> None:
        write_trial_file(Path(self.spec.trial_path), self.trial, self.spec.run_folder)  # inside its run folder


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m ampbench.trial.worker SPEC.json", file=sys.stderr)
        return 2
    # Private event channel = the original stdout; all other output (Paddle's prints) -> stderr/log.
    event_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    events = Events(os.fdopen(event_fd, "w", buffering=1))
    spec = TrialSpec.model_validate_json(Path(argv[0]).read_text())
    if spec.cpu_affinity:  # before the workload starts threads: they inherit it
        from ampbench.trackers.placement import pin

        pin(spec.cpu_affinity)
    watch_parent()  # ends this process (every rank) if ampbench is gone, even SIGKILLed
    from ampbench.workloads import get_workload_class

    if get_workload_class(spec.suite.suite.workload).runs_program:  # a ProgramWorkload: run and measured
        from ampbench.trial.command import run_command

        return run_command(spec, events)
    lead = writes_trial(spec.suite.model_dump(mode="json"))  # data parallel: only rank 0 reports and writes
    if not lead:
        events = Events(None)
    return run_trial(spec, events, write=lead)


def run_trial(spec: TrialSpec, events: Events, write: bool = True) -> int:
    """Set up, train and finish one trial in this process; the trial file is written (when `write`)
    whatever happens, an exception included. Returns the worker's exit code (0 ok, 1 failed)."""
    tr = TrialRunner(spec, events)
    code = 0
    try:
        tr.run()
    except BaseException as exc:  # recorded, never lost: the trial file says what happened
        error = "".join(traceback.format_exception(exc))[-8000:]
        tr.record.outcome(classify_error(exc), error)
        traceback.print_exc()
        write_failure_note(tr.trial.status, error)
        code = 1
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        tr.stop_clock()
        if write:
            tr.write()
        events.emit(event="done", status=tr.trial.status)
    return code


def leave(code: int) -> None:
    """The worker's exit.  A data-parallel rank leaves without the interpreter's teardown: Paddle's
    process-group teardown at exit (paddle/base/__init__.py registers `core.ProcessGroupIdMap.destroy`
    with atexit) now and then segfaults after the rank has finished (SIGSEGV after rank 0's `done` event
    and its written trial file, twice in two full test runs with gloo on 2 ranks), which turned a complete
    trial into a crashed one.  By then the trial file is written and the event channel line-flushed."""
    if env_world_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    leave(main())
