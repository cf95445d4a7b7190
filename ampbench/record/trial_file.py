"""Writing a trial file: inside its own run folder, and nowhere else, whatever the program under test did.

A command trial's program can reach its run folder (`{out}/../..`) and replace `trials/` by a symbolic
link to a folder of its choosing, or move, remove or replace the run folder itself. The one writer of
trial files (the worker's own, and the runner's for a worker that wrote none) names the folder the
file must stay in: no link is followed below the run folder (core/files.py walks it with directory
descriptors and O_NOFOLLOW) and, given the run folder's identity taken before the program started
(`TrialSpec.run_folder`), the run folder must still be that folder. A link found in the way is removed
(the link only; what it points to is untouched), the trial is marked as tampered with and its record
written inside the run folder: the measurement is refused, never lost. A run folder that is no longer
the one ampbench made is refused (ResultsError naming it): nothing is written into what is there now.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ampbench.core.docs import write_doc
from ampbench.core.files import FolderId, LinkInTheWay, remove_link, shown_path
from ampbench.core.store import RunPaths
from ampbench.record.models import Trial

TAMPERED = "tampered:"   # how a trial whose folder the program replaced by a link begins its error


def write_trial_file(path: Path, trial: Trial, run_folder: FolderId | None = None) -> None:
    """`trial` as its file at `path`; below a run folder, never through a link and (with `run_folder`)
    never into another folder than the run's own. A link in the way makes the trial a tampered crash."""
    path = Path(path)
    run = RunPaths.of_trial_file(path)
    if run is None:   # a worker started by hand on a scratch path: the file itself is still never a link
        write_doc(path, trial)
        return
    try:
        write_doc(path, trial, root=run.path, root_id=run_folder)
    except LinkInTheWay as e:
        target = ""
        with contextlib.suppress(OSError):
            target = f" (to {shown_path(os.readlink(e.path))})"
        remove_link(e.path, run.path, run_folder)
        mark_tampered(trial, f"{shown_path(e.path)} was replaced by a symbolic link{target} while the trial "
                             "ran; ampbench wrote nothing through it, removed the link and kept this record "
                             "inside the run folder")
        write_doc(path, trial, root=run.path, root_id=run_folder)


def mark_tampered(trial: Trial, what: str) -> None:
    """The trial is not a measurement any more (status crashed, judged ERROR); what was done to it is the
    last line of its error (the line every report quotes), after the error it had, if any."""
    before = f"{trial.error.rstrip()}\n" if trial.error else ""
    trial.status = "crashed"
    trial.error = f"{before}{TAMPERED} {what}"
