"""A worker dies with the ampbench process that started it (no orphan keeps a GPU busy)."""

from __future__ import annotations

import os
import signal
import threading
import time

from ampbench.core.protocol import PARENT_ENV, token_alive


def watch_parent(env: dict[str, str] | None = None, every_s: float = 0.5) -> None:
    """In a worker (every rank): a daemon thread that kills this process once the ampbench process
    named in AMPBENCH_PARENT is gone (ranks of a data-parallel trial are not its direct children)."""
    token = (env if env is not None else os.environ).get(PARENT_ENV, "")
    pid_text = token.partition(":")[0]
    if not pid_text.isdigit():
        return

    def watch() -> None:
        while token_alive(token):
            time.sleep(every_s)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="ampbench-parent-watchdog", daemon=True).start()
