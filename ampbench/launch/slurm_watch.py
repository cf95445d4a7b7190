"""The one poll loop of the Slurm launchers (`watch`), for a trial's own job and an array task alike, and how
Slurm's answers are read: squeue first (one call for every entry), scontrol (sacct) for an entry its answer
leaves out or could not be read; an entry is taken as ended only when Slurm says so (`over`); Slurm not
answering for `--slurm-outage` seconds ends the wait (`Outage`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ampbench.launch import slurm
from ampbench.launch.slurm import FORGOTTEN, JobState, SlurmOptions


def states(jobs: list[str]) -> tuple[dict[str, JobState], str]:
    """Each job's state where Slurm gave an answer that could be read, and the error where it did not.
    squeue first (one call); a job missing from its answer, or every job when its answer could not be
    read, is asked of scontrol (sacct): absence from squeue is not "ended".  squeue failing outright
    (the controller unreachable) leaves every job unread this interval.  A job Slurm says it does not
    know is FORGOTTEN (it ended and was purged)."""
    try:
        now, error = slurm.squeue(jobs), ""
    except slurm.SlurmUnreadable as e:
        now, error = {}, str(e)
    except slurm.SlurmError as e:
        return {}, str(e)
    for job in jobs:
        if job in now:
            continue
        try:
            now[job] = slurm.job_info(job) or JobState(state=FORGOTTEN, reason="Slurm no longer knows the job")
        except slurm.SlurmError as e:
            error = error or str(e)
    return now, error


def over(st: JobState) -> bool:
    return st.ended or st.state == FORGOTTEN


class Outage:
    """How long Slurm has left some job's state unread: past `limit_s` the run stops waiting."""

    def __init__(self, limit_s: float, say: Callable[[str], None]):
        self.limit_s, self.say, self.since, self.said = limit_s, say, 0.0, ""

    def note(self, error: str, unread: int) -> None:
        if not error:
            self.since, self.said = 0.0, ""
            return
        now = time.monotonic()
        if not unread:  # every job read another way (scontrol): say it once
            if error != self.said:
                self.say(f"warning: {error}; the jobs' states read through scontrol instead")
            self.since, self.said = 0.0, error
            return
        self.since = self.since or now
        waited = now - self.since
        if waited >= self.limit_s:
            raise slurm.SlurmError(f"Slurm did not answer for {waited:.0f} s (--slurm-outage {self.limit_s:g}): {error}")
        self.say(f"warning: {unread} job(s) unread for {waited:.0f} s (gives up at {self.limit_s:g} s): {error}")


class Units(Protocol):
    """What one kind of queue entry adds to the one watch loop (`watch`): a trial's own job (launch/slurm_run.py's `_Jobs`),
    or an array task running a seed's trials in turn (launch/slurm_array.py)."""

    def between(self, now: dict[str, JobState]) -> None:
        """After each poll: what the kind does while its entries wait (held arms released onto their node)."""

    def state_line(self, unit: str, keys: list[str], st: JobState, where: str) -> str:
        """The line said when an entry's state changes (`where`: its node, or why it waits)."""

    def requeue(self, unit: str, st: JobState, keys: list[str], active: dict[str, list[str]]) -> bool:
        """An entry the cluster ended submitted again (into `active`); False: its trials are recorded."""

    def record(self, unit: str, keys: list[str], st: JobState | None) -> None:
        """An ended entry's trials recorded and handed to the run (`st` None: Slurm forgot the entry)."""


def watch(active: dict[str, list[str]], units: Units, options: SlurmOptions, say: Callable[[str], None]) -> None:
    """The one poll loop of both Slurm launchers: until every active entry (job or array task -> the trial
    keys it runs) ended and its trials are recorded (entries leave `active` as they do).  One squeue per
    interval, an unread entry asked again the next one; each state change said once; an entry the cluster
    ended (preempted, its node lost) is requeued by its kind, any other end recorded."""
    seen: dict[str, str] = {}
    outage = Outage(options.outage_s, say)
    while active:
        now, error = states(list(active))
        outage.note(error, sum(j not in now for j in active))
        units.between(now)
        for unit, keys in list(active.items()):
            st = now.get(unit)
            if st is None:  # unread this interval: asked again next one
                continue
            if not over(st):
                if seen.get(unit) != st.state:
                    where = f" on {st.nodes}" if st.state == "RUNNING" and st.nodes else \
                        (f" ({st.reason})" if st.reason and st.reason != "None" else "")
                    say(units.state_line(unit, keys, st, where))
                seen[unit] = st.state
                continue
            del active[unit]
            if st.state in slurm.REQUEUE and units.requeue(unit, st, keys, active):
                continue
            units.record(unit, keys, None if st.state == FORGOTTEN else st)
        if active:
            time.sleep(options.poll_s)
