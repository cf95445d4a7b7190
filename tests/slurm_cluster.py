"""A real one-host Slurm cluster for the tests: munged, slurmctld and slurmd started by hand, as root.

Debian's slurm-wlm and munge (scripts/setup.sh --test installs them).  Everything the daemons write
(key, sockets, state, spool, logs, pids) lives in one temporary folder, the ports are free ones, and
`SLURM_CONF` points at the folder's slurm.conf, so it runs beside any other cluster on the machine.
Settings for a container without systemd or cgroup control: `ProctrackType=proctrack/linuxproc`,
`TaskPlugin=task/none`, `SelectType=select/cons_tres` with `CR_CPU` (each job one CPU), and the
node's CPUs oversubscribed 4x so a toy suite's jobs all start at once on a 2-core machine.
`MessageTimeout=4` (Slurm's default 10): a client command (squeue, scancel, scontrol) retries its
connection to a stopped slurmctld about once a second for MessageTimeout seconds before it says "Unable to
contact slurm controller" (measured here: 9 s each at the default, 18 s for an scontrol); the tests that stop
the controller waited that out at every call.  An RPC on this one host answers in milliseconds
(slurmctld.log: usec=300-800), so 4 s still leaves a loaded machine its margin.  A job in
partition `urgent` (higher PriorityTier, whole nodes) preempts the `debug` jobs on its node
(`PreemptMode=CANCEL`: they end PREEMPTED).  Two slurmd
(`slurmd -N node1`, `-N node2`, both at 127.0.0.1 on ports of their own) make it a two-node cluster on
one host, so a multi-node job really runs one `srun` task on each of two Slurm nodes.

No accounting (no slurmdbd): ampbench reads job states through squeue and scontrol.  Stopping cancels
every job, stops the daemons it started, and kills any process still carrying this cluster's
SLURM_CONF (a job's slurmstepd or worker), by pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

NODES = ("node1", "node2")  # two slurmd on this host (slurmd -N): a multi-node job really spans two nodes
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")


def why_not() -> str | None:
    """Why a cluster cannot be started here (None: it can)."""
    if os.geteuid() != 0:
        return "the one-host Slurm cluster needs root (slurmd runs jobs as their user)"
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing): "
                "apt-get install slurm-wlm munge (scripts/setup.sh --test does)")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _conf(d: Path, host: str) -> str:
    return f"""\
ClusterName=ampbenchtest
SlurmctldHost={host}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=5
MessageTimeout=4
SchedulerParameters=sched_interval=1
""" + "".join(f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} CPUs={os.cpu_count() or 1} "
              "State=UNKNOWN\n" for n in NODES) + """\
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4 PriorityTier=1
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE PriorityTier=2
"""


class Cluster:
    """The running cluster: its folder, the environment that reaches it, the daemons' processes."""

    def __init__(self, d: Path):
        self.dir = d
        self.env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        d = self.dir
        (d / "state").mkdir()
        host = socket.gethostname().split(".")[0]
        (d / "slurm.conf").write_text(_conf(d, host))
        subprocess.run(["mungekey", "--create", f"--keyfile={d}/munge.key"], check=True, capture_output=True)
        os.chmod(d / "munge.key", 0o600)
        self._daemon(["munged", "--foreground", "--force", f"--key-file={d}/munge.key", f"--socket={d}/munge.socket",
                      f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"])
        self._wait(lambda: (d / "munge.socket").exists(), "munged")
        conf = str(d / "slurm.conf")
        self._daemon(["slurmctld", "-D", "-i", "-f", conf])
        for node in NODES:
            self._daemon(["slurmd", "-D", "-N", node, "-f", conf])
        self._wait(self._idle, "slurmctld and slurmd (both nodes idle)")

    def stop_controller(self) -> None:
        """slurmctld stopped (SIGTERM: it saves its state) while slurmd and the jobs on it go on."""
        for p in self.procs:
            if p.args[0] == "slurmctld" and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)

    def start_controller(self) -> None:
        """slurmctld started again from its saved state (the jobs it knew are recovered), the nodes back."""
        self.procs = [p for p in self.procs if p.args[0] != "slurmctld" or p.poll() is None]
        self._daemon(["slurmctld", "-D", "-i", "-f", str(self.dir / "slurm.conf")])
        self._wait(self._idle, "slurmctld again (both nodes up)", limit=60)

    def _daemon(self, cmd: list[str]) -> None:
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True))

    def _idle(self) -> bool:
        p = subprocess.run(["sinfo", "--noheader", "--Node", "--partition=debug", "--format=%t"], env=self.env, capture_output=True, text=True,
                           check=False, timeout=30)
        states = p.stdout.split()
        return p.returncode == 0 and len(states) == len(NODES) and all(s.rstrip("*") in ("idle", "mix", "alloc")
                                                                       for s in states)

    def _wait(self, ok: object, what: str, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if callable(ok) and ok():
                return
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                break
            time.sleep(0.2)
        logs = "\n".join(f"{p.name}: {p.read_text(errors='replace')[-600:]}" for p in sorted(self.dir.glob("*.log")))
        raise RuntimeError(f"{what} did not come up (exited: {[p.args[0] for p in self.procs if p.poll() is not None]})"
                           f"\n{logs}")

    def jobs(self) -> dict[str, str]:
        """Job id -> state of every job the controller still knows."""
        p = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%T"], env=self.env,
                           capture_output=True, text=True, check=True, timeout=30)
        return dict(line.split("|", 1) for line in p.stdout.split())

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True, timeout=30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(s in ("RUNNING", "PENDING", "COMPLETING")
                                                      for s in self.jobs().values()):
                time.sleep(0.3)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        """Any process still carrying this cluster's SLURM_CONF (a job step's slurmstepd or its worker)."""
        conf = self.env["SLURM_CONF"]
        mine = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if proc.pid != os.getpid() and proc.environ().get("SLURM_CONF") == conf:
                    mine.append(proc)
        for proc in mine:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(mine, timeout=5)


@contextlib.contextmanager
def running(d: Path) -> Iterator[Cluster]:
    """A started cluster in folder `d`; every daemon it started is stopped on the way out."""
    c = Cluster(d)
    try:
        c.start()
        yield c
    finally:
        c.stop()
