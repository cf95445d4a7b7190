"""A fork server for trial workers: Paddle imported once per run, each trial worker forked from it.

Why: on a machine without an accelerator a trial worker's start is Paddle's import (`python -X importtime -c
"import paddle"`: ~2 CPU s on this project's 2-core machine, paddle.base.core 1.2 s, paddle.distributed.fleet
0.5 s), as much as a short CPU trial's own work; a run of N trials paid it N times.  With the server it pays it
once: scripts/bench_forkserver.py, the toy suite's 6 trials on the idle 2-core machine, 17.9 -> 13.7 CPU s
(0.77) and 16.7 -> 9.3 s wall (0.56), three pairs of runs.

A command workload's server imports ampbench's command trial only, not Paddle: its workers are forked too,
and the user's program they start, which imports Paddle, still runs in the user's own interpreter.

Where it is not used (the worker is spawned as before, `python -m ampbench.trial.worker SPEC`):
- a Paddle built for an accelerator (the server says so after its import): forking a process that may have
  initialised CUDA is unsafe, and a GPU trial's minutes dwarf the import;
- a worker environment that differs from the server's in anything but the worker's marker, or another
  working folder: Paddle reads FLAGS_*, CUDA_VISIBLE_DEVICES, OMP_* and more when it is imported;
- a data-parallel trial (paddle.distributed.launch starts its ranks: launch/launcher.py asks no server);
- `AMPBENCH_FORKSERVER=0`, or where ampbench cannot be a child subreaper (see below).

A forked worker is a worker like a spawned one, so everything that watches workers holds unchanged:
- its parent is ampbench.  The server forks twice and the middle process exits, so the kernel re-parents the
  worker to ampbench (a child subreaper, core/processes.py); ampbench waits for it as for any child of its
  own, its exit status included (`ForkedWorker`, Popen's interface as run_worker uses it);
- a session of its own (setsid), the kernel's parent-death signal (set once it is ampbench's), the parent
  watchdog thread (the worker's own main starts it);
- stdin, stdout (the event channel) and stderr (its log) are the files ampbench passes over the server's
  socket (SCM_RIGHTS); its environment and working folder are those spawn would have given it;
- its /proc/PID/environ names its own marker (AMPBENCH_WORKER): the server starts with a placeholder of the
  marker's fixed width and the worker writes its marker over it in place, so the leftovers of its tree are
  found by marker after it ends (end_descendants), a process it forked without exec included.
Its command line is the server's (`python -m ampbench.launch.forkserver RUN_FOLDER`): `ps` shows which run.

The server lives as long as the run: it ends when ampbench closes the socket (the run ended) or dies (the
parent-death signal of core.processes.guarded), and imports nothing it would compute with (no thread pool of
Paddle's starts before a fork).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any, Self

from ampbench.core.processes import MARKER_PLACEHOLDER as PLACEHOLDER
from ampbench.core.processes import WORKER_ENV, become_subreaper, guarded
from ampbench.core.protocol import PARENT_ENV, process_token
from ampbench.trackers.cuda import has_gpu_cheap

SWITCH_ENV = "AMPBENCH_FORKSERVER"       # "0": spawn every worker (no server)
PRELOAD = ("paddle", "ampbench.trial.worker", "ampbench.trial.setup", "ampbench.trial.loop", "ampbench.trial.finish",
           "ampbench.workloads")
# The key a worker's environment may differ in from the server's: its marker (written in place when forked).
FREE_KEYS = frozenset({WORKER_ENV})
_HEADER = struct.Struct("!I")
_MAX_MESSAGE = 1 << 24
_START_S = 120.0


# ---------------------------------------------------------------- framing (both sides)


def _send(sock: socket.socket, doc: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(doc).encode()
    head = _HEADER.pack(len(data))
    if fds:
        socket.send_fds(sock, [head], fds)
    else:
        sock.sendall(head)
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the other end closed the socket")
        buf += chunk
    return buf


def _recv(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, 3)
    if not head:
        raise EOFError("the other end closed the socket")
    head += _recv_exact(sock, _HEADER.size - len(head))
    (size,) = _HEADER.unpack(head)
    if size > _MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    doc = json.loads(_recv_exact(sock, size))
    return (doc if isinstance(doc, dict) else {}), list(fds)   # not an object: an empty request, refused


# ---------------------------------------------------------------- ampbench's side


class ForkedWorker:
    """A forked worker seen from ampbench, its parent: the part of Popen's interface run_worker uses."""

    def __init__(self, pid: int, stdout: IO[str]):
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None

    def _reaped(self, flags: int) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:    # reaped elsewhere (psutil's wait in kill_tree): as Popen, status unknown -> 0
            self.returncode = 0
            return 0
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._reaped(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            code = self._reaped(0)
            assert code is not None
            return code
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return code


class ForkServer:
    """One run's fork server, started at its first worker and ended with the run (`with ForkServer(...)`).

    `start(cmd, env, log)` forks the worker `python -m ampbench.trial.worker SPEC` from the server and
    returns it, or None where this worker must be spawned (see the module's docstring); once the server
    failed to start or named an accelerator, every later worker is spawned too (said once in `why_not`)."""

    def __init__(self, label: str = "", workload: str = ""):
        self.label = label                 # on the server's command line: which run it serves
        self.workload = workload           # the suite's workload, imported by the server too
        self.why_not = "" if os.environ.get(SWITCH_ENV, "1") != "0" else f"{SWITCH_ENV}=0"
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._env: dict[str, str] = {}
        self._cwd = ""
        self._lock = threading.Lock()
        self._closed = threading.Event()     # set by close: the thread that started the server may end

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ends the server: its socket closed (it exits on EOF), then killed if it has not."""
        sock, proc, self._sock, self._proc = self._sock, self._proc, None, None
        if sock is not None:
            sock.close()
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._closed.set()

    def _environment(self) -> dict[str, str]:
        return {**os.environ, PARENT_ENV: process_token(os.getpid()), WORKER_ENV: PLACEHOLDER}

    def _start(self) -> None:
        """The server, importing PRELOAD; it answers with whether its Paddle was built for an accelerator.
        It is started by a thread of its own that lives until `close`: the kernel's parent-death signal
        (core.processes.guarded) fires when the *thread* that started a process ends, and a trial's thread
        ends with its trial."""
        if not become_subreaper():
            self.why_not = "ampbench cannot be a child subreaper here (Linux prctl)"
            return
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._env, self._cwd = self._environment(), os.getcwd()
        machine = "gpu" if has_gpu_cheap() else "cpu"   # a GPU here: the server imports no Paddle to ask its build
        cmd = [sys.executable, "-m", "ampbench.launch.forkserver", str(theirs.fileno()), self.label, self.workload,
               machine]
        started = threading.Event()
        failed: list[BaseException] = []

        def keep() -> None:
            try:
                self._proc = subprocess.Popen(guarded(cmd), env=self._env, pass_fds=(theirs.fileno(),),
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, start_new_session=True)
            except BaseException as e:  # noqa: BLE001 - said in why_not, workers spawned instead
                failed.append(e)
            finally:
                theirs.close()
                started.set()
            self._closed.wait()

        self._closed.clear()
        threading.Thread(target=keep, name="ampbench-fork-server", daemon=True).start()
        started.wait()
        if failed:
            mine.close()
            self.why_not = f"the fork server did not start ({failed[0]})"
            return
        self._sock = mine
        mine.settimeout(_START_S)
        try:
            hello, _ = _recv(mine)
        except (OSError, EOFError, ValueError) as e:
            hello = {"error": f"the fork server did not start ({e})"}
        mine.settimeout(None)
        if hello.get("error") or hello.get("accelerator") is not False:
            self.why_not = str(hello.get("error") or "a GPU here, or a Paddle built for an accelerator: workers are "
                               "spawned")
            self.close()

    def _fits(self, env: dict[str, str]) -> bool:
        """The worker's environment and folder are the server's but for FREE_KEYS."""
        keys = (set(env) | set(self._env)) - FREE_KEYS
        return os.getcwd() == self._cwd and all(env.get(k) == self._env.get(k) for k in keys)

    def start(self, cmd: list[str], env: dict[str, str], log: Any) -> ForkedWorker | None:
        """`cmd` (a worker command: `python -m ampbench.trial.worker SPEC`) forked with `env` added to this
        process's environment, stdout a pipe to read, stderr `log`; None: spawn it instead."""
        full = {**os.environ, **env, PARENT_ENV: process_token(os.getpid())}
        if cmd[:3] != [sys.executable, "-m", "ampbench.trial.worker"] or len(cmd) != 4 \
                or len(full.get(WORKER_ENV, "")) != len(PLACEHOLDER):
            return None
        with self._lock:
            if self.why_not:
                return None
            if self._sock is None:
                self._start()
                if self._sock is None:
                    return None
            if not self._fits(full):
                return None
            return self._fork(cmd[3], full, log)

    def _fork(self, spec: str, env: dict[str, str], log: Any) -> ForkedWorker | None:
        assert self._sock is not None
        r, w = os.pipe()
        try:
            with open(os.devnull, "rb") as null:
                _send(self._sock, {"spec": spec, "env": env, "cwd": os.getcwd(), "parent": os.getpid()},
                      [null.fileno(), w, log.fileno()])
            reply, _ = _recv(self._sock)
        except (OSError, EOFError, ValueError) as e:
            os.close(r)
            self.why_not = f"the fork server stopped answering ({e})"
            self.close()
            return None
        finally:
            os.close(w)
        pid = reply.get("pid")
        if not isinstance(pid, int) or pid <= 0:
            os.close(r)
            self.why_not = f"the fork server could not fork: {reply.get('error', reply)}"
            self.close()
            return None
        return ForkedWorker(pid, os.fdopen(r, "r", errors="replace"))


# ---------------------------------------------------------------- the server


def _write_marker(marker: str) -> None:
    """The placeholder of AMPBENCH_WORKER in this process's initial environment block (what /proc/PID/environ
    shows, and what a child forked without exec inherits) overwritten with `marker`, in place: the block
    lies between env_start and env_end of /proc/self/stat (proc(5), fields 50-51)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])   # fields 50 and 51, counted after pid and comm
    block = ctypes.string_at(start, end - start)
    at = block.find(f"{WORKER_ENV}={PLACEHOLDER}\0".encode())
    if at < 0 or len(marker) != len(PLACEHOLDER):
        raise RuntimeError("the fork server's environment block has no marker placeholder")
    ctypes.memmove(start + at + len(WORKER_ENV) + 1, marker.encode(), len(marker))


def _await_adoption(middle: int, parent: int) -> None:
    """In the worker: wait until the middle process has exited and the kernel has re-parented this one to
    ampbench, then ask for SIGKILL when ampbench dies (set earlier, the middle's exit would fire it)."""
    deadline = time.monotonic() + 60   # the middle exits right after writing the pid; a loaded machine may stall it
    while os.getppid() == middle:
        if time.monotonic() > deadline:
            os._exit(1)
        time.sleep(0.001)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    if os.getppid() != parent:    # ampbench already gone (or not a subreaper): no orphan
        os._exit(1)


def _become_worker(sock: socket.socket, doc: dict[str, Any], fds: list[int], middle: int) -> None:
    """The forked worker: ampbench's files on 0/1/2, its environment and folder, then the worker's main.
    Never returns: the process exits as a spawned worker would (exit handlers run, streams flushed)."""
    code = 1
    try:
        gc.enable()   # off in the server (serve): this process collects its own objects, never the frozen ones
        sock.close()
        os.setsid()
        _await_adoption(middle, int(doc["parent"]))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(doc["cwd"])
        os.environ.clear()
        os.environ.update(doc["env"])
        _write_marker(doc["env"][WORKER_ENV])
        from ampbench.trial import worker

        sys.argv = [str(worker.__file__), doc["spec"]]
        try:
            code = worker.main([doc["spec"]])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever it is, this process ends here (never back in the server's loop)
        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
        finally:
            os._exit(code)


def _fork_worker(sock: socket.socket, doc: dict[str, Any], fds: list[int]) -> int:
    """Fork twice (the worker's parent becomes ampbench); the worker's pid, once the middle has exited."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            me = os.getpid()     # taken before the fork: the worker may ask after this process is gone
            pid = os.fork()
            if pid == 0:
                os.close(w)
                _become_worker(sock, doc, fds, me)
            os.write(w, str(pid).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read()
    os.waitpid(middle, 0)
    return int(text)


def _preload(workload: str, gpu_machine: bool = False) -> bool:
    """Import what the run's workers will: a model workload's worker Paddle, the trial's modules and the
    workload; a command workload's worker (the user's program imports Paddle, in its own interpreter) only
    ampbench's command trial.  True where a model workload's workers must be spawned: a GPU on this machine
    (nothing of Paddle imported to find out) or a Paddle built for an accelerator."""
    import importlib

    from ampbench.workloads import get_workload_class

    cls = None
    if workload:
        with contextlib.suppress(Exception):   # the worker imports it again and says what is missing
            cls = get_workload_class(workload)
    if cls is not None and cls.runs_program:
        for name in ("ampbench.trial.worker", "ampbench.trial.command"):
            importlib.import_module(name)
        return "paddle" in sys.modules and _accelerator()
    if gpu_machine:
        return True
    for name in PRELOAD:
        importlib.import_module(name)
    return _accelerator()


def _accelerator() -> bool:
    """Whether this Paddle is built for a device a forked process must not inherit (CUDA, ROCm, XPU, a
    custom device plug-in): forking after its runtime may have started is unsafe."""
    import paddle

    return bool(paddle.is_compiled_with_cuda() or paddle.is_compiled_with_rocm() or paddle.is_compiled_with_xpu()
                or paddle.device.get_all_custom_device_type())


def serve(fd: int, workload: str = "", gpu_machine: bool = False) -> int:
    """The server's loop: import what the workers need, say hello, then one worker per request until the
    socket closes."""
    sock = socket.socket(fileno=fd)
    # Python's own recipe for a server that forks without exec (the gc module's docs, gc.freeze): the cyclic
    # collector off in the server (Paddle's import: 339 collections, ~0.1-0.2 CPU s of its ~1.2 s), every object
    # it holds frozen before each fork, the collector on again in the worker, whose collections then neither
    # walk the server's objects (a full collection of them: 0.07 CPU s) nor write to their pages (copy-on-write).
    gc.disable()
    try:
        accelerator = _preload(workload, gpu_machine)
    except BaseException as e:  # noqa: BLE001 - said to ampbench, which spawns its workers instead
        with contextlib.suppress(OSError):
            _send(sock, {"error": f"the fork server's import failed: {type(e).__name__}: {e}"})
        return 1
    _send(sock, {"accelerator": accelerator})
    while True:
        try:
            doc, fds = _recv(sock)
        except (EOFError, OSError, ValueError):
            return 0
        try:
            gc.freeze()
            reply: dict[str, Any] = {"pid": _fork_worker(sock, doc, fds)}
        except (OSError, ValueError, KeyError) as e:
            reply = {"error": f"{type(e).__name__}: {e}"}
        finally:
            for passed in fds:
                with contextlib.suppress(OSError):
                    os.close(passed)
        _send(sock, reply)


if __name__ == "__main__":   # the module by its own name (not __main__), as every other importer sees it
    from ampbench.launch.forkserver import serve as serve_named

    args = [*sys.argv[1:], "", "", ""]   # FD LABEL WORKLOAD MACHINE
    sys.exit(serve_named(int(args[0]), args[2], args[3] == "gpu"))
