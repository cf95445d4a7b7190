"""The worker protocol: how ampbench and a trial's process talk (events, environment names).

The runner hands a worker its TrialSpec as a JSON file (trial/spec.py); the worker answers with
event lines on stdout after `EVENT_PREFIX` and its trial file. Every environment variable that
crosses the process boundary is named here, once.
"""

from __future__ import annotations

from typing import Literal

Fault = Literal["crash", "hang", "oom", "exit", "nan"]

# Events the worker writes on its private channel, one JSON object per line after this prefix.
EVENT_PREFIX = "@@ampbench "

PARENT_ENV = "AMPBENCH_PARENT"            # process_token() of the ampbench process a worker belongs to
FAULT_ENV = "AMPBENCH_FAULT"              # "MODE:SEED:KIND[,MODE:SEED:KIND...]", KIND one of Fault
CACHE_ENV = "AMPBENCH_CACHE"              # where generated data sets are cached
# What a command trial's start-up hook reads (workloads/command/hook/, which loads this file by its path
# because the program's interpreter may not have ampbench: this module imports the standard library only,
# psutil inside the functions that need it).
HOOK_SOCKET_ENV = "AMPBENCH_HOOK_SOCKET"          # "TOKEN:PATH": the worker's event socket and its handshake token
HOOK_STOP_AFTER_ENV = "AMPBENCH_HOOK_STOP_AFTER"  # end the program cleanly after this many steps (0: never)
HOOK_STATS_STEPS_ENV = "AMPBENCH_HOOK_STATS_STEPS"   # training steps Paddle's operator stats cover
HOOK_WARMUP_ENV = "AMPBENCH_HOOK_WARMUP"          # warm-up steps: the memory window opens after them
HOOK_INJECT_ENV = "AMPBENCH_HOOK_INJECT"          # amp = "inject": the mode's AMP settings (JSON) the hook applies
HOOK_EMULATE_ENV = "AMPBENCH_HOOK_EMULATE"        # emulate = true: "1", the hook emulates the program's AMP (trial/emulate)
HOOK_LOSS_EVERY_ENV = "AMPBENCH_HOOK_LOSS_EVERY_STEPS"   # the loss is read at steps 1, 1 + k, 1 + 2k, ...
# The worker's word to a process that reported its GPU: NVML samples that GPU (its first sample taken), or it
# will not (no NVML, the device not resolved); the hook waits for it (at most NVML_WAIT_S) before its measured
# window opens, so the window's energy has a sample before its start (issue 58.2)
NVML_SAMPLING, NVML_NONE, NVML_WAIT_S = b"nvml", b"none", 30.0
RANK_DIR_ENV = "AMPBENCH_RANK_DIR"        # the distributed launcher's --log_dir, where ranks leave failure notes
FAULT_RANK_ENV = "AMPBENCH_FAULT_RANK"    # inject AMPBENCH_FAULT / spec.fault on this rank only


def process_token(pid: int) -> str:
    """`PID:CREATE_TIME`: with its start time, a pid names one process (pids are reused)."""
    import psutil

    try:
        return f"{pid}:{psutil.Process(pid).create_time():.3f}"
    except psutil.Error:
        return ""


# psutil's create_time is the kernel's start ticks plus the boot time each process reads once from
# /proc/stat's btime, which the kernel derives from the wall clock minus uptime: two processes can read
# btime a second apart (clock slewing, a value near a second's edge), so the same process's token seen
# from the worker may differ by up to a second. A reused pid starts far later than that.
TOKEN_SLACK_S = 2.0


def token_alive(token: str) -> bool:
    """The process `token` names is still running: its pid exists, is not a zombie, and started within
    TOKEN_SLACK_S of the token's time (another process that got the pid started later). A transient
    psutil error other than 'no such process' counts as alive: a worker never kills itself on a doubt."""
    import psutil

    pid_text, _, when = token.partition(":")
    try:
        pid, started = int(pid_text), float(when)
    except ValueError:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - started) < TOKEN_SLACK_S
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True
