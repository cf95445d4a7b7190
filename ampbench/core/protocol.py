"""The worker protocol: how ampbench and a trial's process talk (events, environment names).

The runner hands a worker its TrialSpec as a JSON file (trial/spec.py); the worker answers with
event lines on stdout after `EVENT_PREFIX` and its trial file. Every environment variable that
crosses the process boundary is named here, once.
"""

from __future__ import annotations

from typing import Literal

import psutil

Fault = Literal["crash", "hang", "oom", "exit", "nan"]

# Events the worker writes on its private channel, one JSON object per line after this prefix.
EVENT_PREFIX = "@@ampbench "

PARENT_ENV = "AMPBENCH_PARENT"            # process_token() of the ampbench process a worker belongs to
FAULT_ENV = "AMPBENCH_FAULT"              # "MODE:SEED:KIND[,MODE:SEED:KIND...]", KIND one of Fault
CACHE_ENV = "AMPBENCH_CACHE"              # where generated data sets are cached
RANK_DIR_ENV = "AMPBENCH_RANK_DIR"        # the distributed launcher's --log_dir, where ranks leave failure notes
FAULT_RANK_ENV = "AMPBENCH_FAULT_RANK"    # inject AMPBENCH_FAULT / spec.fault on this rank only


def process_token(pid: int) -> str:
    """`PID:CREATE_TIME`: with its start time, a pid names one process (pids are reused)."""
    try:
        return f"{pid}:{psutil.Process(pid).create_time():.3f}"
    except psutil.Error:
        return ""
