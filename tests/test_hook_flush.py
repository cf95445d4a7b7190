"""The hook's flusher and the program's exit flush never lose or reorder steps between them.

A dp run on a loaded 2-core machine recorded steps 1 and 6 of 6 (CI): the flusher thread had taken steps
2-5 off the queue and lost the core before sending them, the program's exit flush sent step 6, and the
process ended with the daemon thread. Here the flusher's send is held up on purpose and the exit flush
must wait for it."""

from __future__ import annotations

import importlib
import json
import threading
import time

import pytest

from ampbench.workloads.command import HOOK_DIR


class SlowSock:
    """A connection whose first send stalls, as a flusher thread that lost the core would."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.first = threading.Event()

    def sendall(self, data: bytes) -> None:
        if not self.sent and not self.first.is_set():
            self.first.set()
            time.sleep(0.3)
        self.sent.append(data)


@pytest.fixture
def hooked(monkeypatch):
    """The hook's own State (imported as the user's program imports it) over a SlowSock."""
    monkeypatch.syspath_prepend(str(HOOK_DIR))
    sock = SlowSock()
    return importlib.import_module("_ampbench_hook.state").State(sock), sock


def test_the_exit_flush_waits_for_the_flushers_send_and_keeps_the_order(hooked):
    st, sock = hooked
    st.emit(e="first")
    flusher = threading.Thread(target=st.flush)
    flusher.start()
    assert sock.first.wait(5)          # the flusher has taken its events and is inside its send
    st.emit(e="last")
    st.flush()                         # the program's exit flush
    done = [json.loads(m)["e"] for m in sock.sent]
    assert done == ["first", "last"], done   # before the fix: ["last"] here, the flusher's event still in flight
    flusher.join(5)


def test_a_forked_child_never_flushes(hooked):
    st, sock = hooked
    st.emit(e="x")
    st.pid = -1                        # as a DataLoader worker forked from the program sees it
    st.flush()
    assert sock.sent == [] and st.pending   # nothing sent, nothing taken
