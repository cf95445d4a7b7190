"""The channel a command trial's start-up hook reports on, which the program under test cannot name a
file of: a listening Unix socket in Linux's abstract namespace (no path, no folder the program is given;
a file the program writes is never read as an event), one connection per process of the program.

Each connection's sender is the kernel's answer (SO_PEERCRED: the pid, uid that called connect()),
checked before anything it sends is read: the same user, and a process of the program's live tree
(the worker's descendants; the worker is their subreaper). A process outside it (pid 1, another
user's, one started elsewhere that found the name) is refused and counted, never read as a rank. The
hook waits for the worker's `ok` after connecting, so the check runs while the sender is alive.

A program may still send forged events over its own hook's connection (it is the same process):
docs/command.md says what a program with the same user id can do.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from typing import Self

SOCKET_ENV = "AMPBENCH_HOOK_SOCKET"   # the abstract socket's name (the hook's _SOCKET_ENV)
MAX_CONNECTIONS = 256                  # processes of one program that report (ranks, helper interpreters)
MAX_MESSAGE = 1 << 20                  # one event line; the hook sends far smaller ones (`_MAX_LINE`)
MAX_BYTES_PER_PROCESS = 256 * 2**20    # what one process may send in a trial; more is dropped and counted
_CRED = struct.Struct("3i")            # struct ucred: pid, uid, gid


class EventChannel:
    """Accepts the hook's connections and collects (sender pid, message) pairs on a thread of its own
    (a sender never waits on the worker's 4-a-second poll); `take` hands them over, `close` reads what
    is left once the program's tree has exited."""

    def __init__(self, tree: Callable[[], set[int]]):
        self._tree = tree
        self.name = f"ampbench-{os.getpid()}-{secrets.token_hex(12)}"
        self._listen = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self._listen.bind("\0" + self.name)
        self._listen.listen(64)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._got: list[tuple[int, bytes]] = []
        self._sent: dict[int, int] = {}
        self.refused: list[int] = []   # pids that connected from outside the program's tree (or another user)
        self.dropped = 0               # messages over a process's byte budget
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ampbench-events", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        return {SOCKET_ENV: self.name}

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.05):
                if key.data is None:
                    self._accept()
                else:
                    self._read(*key.data)

    def _accept(self) -> None:
        try:
            conn, _ = self._listen.accept()
        except OSError:
            return
        pid, uid, _gid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
        ours = uid == os.getuid() and pid != os.getpid() and pid in self._tree()
        if not ours or len(self._sel.get_map()) > MAX_CONNECTIONS:
            self.refused.append(pid)
            conn.close()
            return
        try:
            conn.sendall(b"ok")
        except OSError:
            conn.close()
            return
        self._sel.register(conn, selectors.EVENT_READ, (conn, pid))

    def _read(self, conn: socket.socket, pid: int) -> bool:
        """One message of `conn` into the list; False at its end (closed, or nothing waiting)."""
        try:
            data = conn.recv(MAX_MESSAGE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(conn)
            conn.close()
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

    def close(self) -> None:
        """Stop the thread, then read what the (exited) program's processes left in their connections;
        a connection still waiting to be accepted now has no live sender to check and is refused."""
        self._stop.set()
        self._thread.join(timeout=5)
        for key in list(self._sel.get_map().values()):
            if key.data is None:
                continue
            conn, pid = key.data
            conn.setblocking(False)
            while self._read(conn, pid):
                pass
        self._listen.setblocking(False)
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._listen.accept()
                pid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[0]
                self.refused.append(pid)
                conn.close()
        for key in list(self._sel.get_map().values()):
            (self._listen if key.data is None else key.data[0]).close()
        self._sel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.close()
