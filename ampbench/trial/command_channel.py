"""The channel a command trial's start-up hook reports on: a Unix socket only the program's own
process tree can reach and be read from, which no outside process can blind.

- **Where**: a SOCK_SEQPACKET socket in a folder the worker makes with mode 0700 (tempfile.mkdtemp:
  short, so the path fits sun_path's 108 bytes), removed with the channel. Another user's process
  cannot connect at all (the kernel checks the folder's search permission at connect()); the
  abstract namespace the channel used before has no permissions, so any local process could.
- **Who**: the worker hands its child a handshake token (`HOOK_SOCKET_ENV`, "TOKEN:PATH") through the
  environment only, so processes of the program's tree inherit it. A connection is read only once its
  first message is that token (compared in constant time) and its sender, as the kernel gives it
  (SO_PEERCRED: pid, uid), is of the same user and of the program's live tree (the worker's
  descendants; the worker is their subreaper). The hook waits for `HANDSHAKE_OK` before sending, so
  the check runs while the sender is alive.
- **Refusal costs nothing**: the accepting thread drains the backlog at once; a connection without
  the token is closed after one non-blocking read (its token may still be on its way: it waits in a
  bounded pending set for HANDSHAKE_S, the oldest dropped first), and only a token holder costs the
  walk of the process tree. A flood of connections (kept in the listen backlog to make the hook's
  connect() fail, as issue 41 measured) is accepted away as fast as it comes; the hook retries with
  back-off for wire's CONNECT_FOR_S, and when it gives up it says so on stderr (`wire.DENIED`), so the
  trial's cause names the channel, with what the channel refused (`refused`), never a missing hook.

A program may still send forged events over its own connection (it is the same process), and a
process of the same user can read the token from /proc/PID/environ: docs/command.md says what a
program, and a process outside it, can and cannot do.
"""

from __future__ import annotations

import collections
import contextlib
import hmac
import os
import secrets
import selectors
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Self

from ampbench.core.protocol import HOOK_SOCKET_ENV
from ampbench.record import wire

MAX_CONNECTIONS = 256                  # processes of one program that report (ranks, helper interpreters)
MAX_BYTES_PER_PROCESS = 256 * 2**20    # what one process may send in a trial; more is dropped and counted
MAX_PENDING = 64                       # accepted connections whose token has not arrived yet
HANDSHAKE_S = 2.0                      # how long one of them may take to send it
ACCEPT_BATCH = 256                     # connections accepted per round of the accepting thread
REFUSED_PIDS_KEPT = 20
_CRED = struct.Struct("3i")            # struct ucred: pid, uid, gid
_SUN_PATH = 100                        # sun_path holds 108 bytes with its NUL; a margin


def _private_folder() -> str:
    """A new 0700 folder with a path short enough for a socket (TMPDIR, or /tmp when that is too long)."""
    folder = tempfile.mkdtemp(prefix="ampbench-ch-")
    if len(os.path.join(folder, "events").encode()) <= _SUN_PATH:
        return folder
    os.rmdir(folder)
    return tempfile.mkdtemp(prefix="ampbench-ch-", dir="/tmp")


class EventChannel:
    """Accepts the hook's connections and collects (sender pid, message) pairs on a thread of its own
    (a sender never waits on the worker's 4-a-second poll); `take` hands them over, `close` reads what
    is left once the program's tree has exited."""

    def __init__(self, tree: Callable[[], set[int]]):
        self._tree = tree
        self._folder = _private_folder()
        self.path = os.path.join(self._folder, "events")
        self._token = secrets.token_hex(16).encode()
        self._listen = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self._listen.bind(self.path)
        self._listen.listen(socket.SOMAXCONN)
        self._listen.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ, None)
        self._pending: collections.OrderedDict[socket.socket, float] = collections.OrderedDict()
        self._readers = 0
        self._lock = threading.Lock()
        self._got: list[tuple[int, bytes]] = []
        self._sent: dict[int, int] = {}
        self.refused: list[int] = []   # the first pids refused (a token holder outside the tree, another user)
        self.refusals: collections.Counter[str] = collections.Counter()   # refused connections, per reason
        self.dropped = 0               # messages over a process's byte budget
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ampbench-events", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """What the program's environment carries: only its own processes inherit it."""
        return {HOOK_SOCKET_ENV: f"{self._token.decode()}:{self.path}"}

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.05):
                if key.data is None:
                    self._accept()
                elif key.data == "pending":
                    self._greet(key.fileobj)   # type: ignore[arg-type]  # registered as a socket: selectors types it as any file
                else:
                    self._read(*key.data)
            self._expire(time.monotonic())

    def _accept(self) -> None:
        """Drain the backlog (a bounded batch per round, so readers are served between rounds of a flood):
        each connection is greeted at once (its token is usually there already)."""
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self._listen.accept()
            except OSError:   # BlockingIOError: the backlog is empty
                return
            conn.setblocking(False)
            self._pending[conn] = time.monotonic() + HANDSHAKE_S
            self._sel.register(conn, selectors.EVENT_READ, "pending")
            if len(self._pending) > MAX_PENDING:
                self._refuse(next(iter(self._pending)), "no token in time (pending connections full)")
            self._greet(conn)

    def _greet(self, conn: socket.socket) -> None:
        """The connection's first message: the token, then (only then) its sender's identity."""
        if conn not in self._pending:
            return
        try:
            first = conn.recv(64)
        except BlockingIOError:
            return   # not yet: it waits (`_expire`)
        except OSError:
            first = b""
        if not hmac.compare_digest(first, self._token):
            self._refuse(conn, "no token" if first else "closed before its token")
            return
        pid, uid, _gid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
        if uid != os.getuid() or pid == os.getpid() or pid not in self._tree():
            self._refuse(conn, "a token from outside the program's process tree", pid)
            return
        if self._readers >= MAX_CONNECTIONS:
            self._refuse(conn, "over the connection limit", pid)
            return
        del self._pending[conn]
        try:
            conn.sendall(wire.HANDSHAKE_OK)
        except OSError:
            self._sel.unregister(conn)
            conn.close()
            return
        self._readers += 1
        self._sel.modify(conn, selectors.EVENT_READ, (conn, pid))

    def _refuse(self, conn: socket.socket, reason: str, pid: int | None = None) -> None:
        """Close without a word; counted. The pid is the kernel's, read only where it costs one call."""
        self._pending.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn)
        if pid is None:
            with contextlib.suppress(OSError):
                pid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[0]
        conn.close()
        self.refusals[reason] += 1
        if pid is not None and len(self.refused) < REFUSED_PIDS_KEPT:
            self.refused.append(pid)

    def _expire(self, now: float) -> None:
        while self._pending:
            conn, deadline = next(iter(self._pending.items()))
            if deadline > now:
                return
            self._refuse(conn, "no token in time")

    def _read(self, conn: socket.socket, pid: int) -> bool:
        """One message of `conn` into the list; False at its end (closed, or nothing waiting)."""
        try:
            data = conn.recv(wire.MAX_MESSAGE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(conn)
            conn.close()
            self._readers -= 1
            return False
        with self._lock:
            sent = self._sent.get(pid, 0) + len(data)
            self._sent[pid] = sent
            if sent > MAX_BYTES_PER_PROCESS:
                self.dropped += 1
            else:
                self._got.append((pid, data))
        return True

    def take(self) -> list[tuple[int, bytes]]:
        """Every message received since the last call, in arrival order per sender."""
        with self._lock:
            got, self._got = self._got, []
        return got

    def summary(self) -> str:
        """What the channel refused, in words ("" when nothing)."""
        if not self.refusals:
            return ""
        reasons = ", ".join(f"{n:,} {why}" for why, n in self.refusals.most_common())
        pids = ", ".join(map(str, self.refused[:5]))
        return f"the channel refused {sum(self.refusals.values()):,} connection(s) ({reasons}; pids {pids or 'unknown'})"

    def close(self) -> None:
        """Stop the thread, then read what the (exited) program's processes left in their connections;
        a connection still waiting to be accepted now has no live sender to check and is refused."""
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            os.unlink(self.path)   # nothing new can connect: the drain below ends however fast a flood comes
        for key in list(self._sel.get_map().values()):
            if isinstance(key.data, tuple):
                conn, pid = key.data
                while self._read(conn, pid):
                    pass
        for conn in list(self._pending):
            self._refuse(conn, "not greeted before the program ended")
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._listen.accept()
                self._refuse(conn, "not accepted before the program ended")
        for key in list(self._sel.get_map().values()):
            key.fileobj.close()   # type: ignore[union-attr]  # every registered object is a socket
        self._sel.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.close()
