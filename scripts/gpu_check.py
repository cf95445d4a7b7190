#!/usr/bin/env python3
"""The device check for the day a GPU is lent: one line per measured fact, in well under 5 minutes.

ampbench's GPU path is tested in CI only against fakes (the real nvidia-ml-py over a stub driver
library, Paddle's CPU build with the GPU build's behaviour; docs/gpu.md "Supported matrix"). This
script asks the real machine the questions those fakes answer from documentation, through the
same ampbench code the trials use (trackers/cuda.py, trackers/nvml.py), so a wrong belief shows
as a FAIL line here before it shows as a wrong number in a result:

  identity        Paddle's device, CUDA ordinal, CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES,
                  PCI bus id and UUID from the CUDA driver (cuDeviceGetUuid_v2: the MIG instance's)
  nvml-device     the NVML device ampbench resolves for it (bus id, UUID or MIG instance) and how
  identity-cvd    a process given only CUDA_VISIBLE_DEVICES=<that device's NVML UUID> resolves the same
  driver          the driver version and the process listing that answers (_v3 or _v2)
  nvml-self       this process listed by NVML with the memory it holds (n/a in a PID namespace)
  nvml-child      a child process listed by NVML on the same device
  energy          the energy counter advancing over a 1 s window of GPU work (n/a: Not Supported)
  allocator-reset Paddle's peak falls back after reset_max_memory_allocated (n/a before Paddle 3.0)
  clocks          SM clock (median, max), power, temperature, throttle reasons over that window
  synchronize     paddle.device.synchronize() on the GPU place returns

Needs only ampbench installed with its `gpu` extra and paddlepaddle-gpu. Usage:

    bash scripts/gpu_check.sh            # or: python3 scripts/gpu_check.py

Exit codes: 0 every fact measured or n/a with its reason; 1 a fact failed (FAIL lines say which);
3 it cannot run here: no GPU (one line says so, nothing measured), or no Paddle in this interpreter (one
line says so; the facts that need no Paddle are still measured: driver, NVML listing, MIG, energy).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

MIB = 2**20
CHILD = """
import sys, time, paddle
paddle.set_device(sys.argv[1])
x = paddle.zeros([int(sys.argv[2]) // 4], dtype="float32")
paddle.device.synchronize()
print("ready", flush=True)
time.sleep(60)
"""
IDENTITY = """
import os
from ampbench.trackers import cuda, nvml
s = nvml.Session(os.environ, cuda.cuda_bus_id(0), cuda.cuda_uuid(0)).open()
print(s.dev.uuid if s.dev else "unresolved: " + s.error)
s.close()
"""


class Report:
    """Prints one line per fact as it is measured; remembers whether one failed."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def line(self, fact: str, ok: bool | None, detail: str) -> None:
        mark = "n/a " if ok is None else ("ok  " if ok else "FAIL")
        print(f"{mark} {fact:16} {detail}", flush=True)
        if ok is False:
            self.failed.append(fact)

    def run(self, fact: str, check: Callable[[], tuple[bool | None, str]]) -> None:
        try:
            ok, detail = check()
        except Exception as exc:  # a fact that cannot be measured is a FAIL with its reason, never a traceback
            ok, detail = False, f"{type(exc).__name__}: {exc}"[:300]
        self.line(fact, ok, detail)


def _work(paddle: Any, seconds: float) -> None:
    """Keep the GPU busy (matmuls) for `seconds`."""
    a = paddle.randn([2048, 2048])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            a = paddle.matmul(a, a) / 2048.0
        paddle.device.synchronize()


def _listed_fact(r: Report, out: dict[str, Any], fact: str, who: str, held: int) -> None:
    """One process's NVML listing from a poller's result: ok when listed with what it holds."""
    used, source = out["device_used_bytes"], out["device_used_source"]
    if source != "nvml-process":
        r.line(fact, None, f"{who} not in NVML's process list (a PID namespace?): device-wide {used} B recorded")
    else:
        r.line(fact, used >= held, f"{who} holds {used / MIB:.0f} MiB by NVML ({held / MIB:.0f} MiB allocated)")


def _child(nv: Any, dev: Any, place: str) -> tuple[bool | None, str]:
    """A child process on the same device, polled by pid as a command trial's ranks are."""
    from ampbench.trackers import nvml

    child = subprocess.Popen([sys.executable, "-c", CHILD, place, str(128 * MIB)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        if child.stdout is None or child.stdout.readline().strip() != "ready":
            child.wait(timeout=60)
            why = (child.stderr.read() if child.stderr else "").strip().splitlines()
            return False, f"the child (pid {child.pid}) did not start on {place}: {why[-1] if why else child.returncode}"
        poller = nvml.Poller(nv, dev, pid=child.pid, interval_s=0.05).start()
        time.sleep(1.0)
        out = poller.stop()
    finally:
        child.kill()
        child.wait()
    used = out["device_used_bytes"]
    if out["device_used_source"] != "nvml-process":
        return None, f"child pid {child.pid} not in NVML's process list (a PID namespace?)"
    return used >= 128 * MIB, f"child pid {child.pid} holds {used / MIB:.0f} MiB by NVML (128 MiB allocated)"


def without_paddle(why: str) -> int:
    """A GPU machine whose interpreter has no Paddle: one line says so, then what needs no Paddle (the
    driver, NVML's listing, this ordinal's device and MIG mode, the process listing, the energy counter)."""
    from ampbench.trackers.driver_facts import driver_facts

    print(f"paddle is not installed in this interpreter: {why}; install paddlepaddle-gpu (docs/gpu.md), "
          "the facts below need no Paddle (exit 3)", flush=True)
    r = Report()
    try:
        facts = driver_facts()
    except Exception as exc:  # noqa: BLE001  # a driver that cannot answer is a FAIL line, never a traceback
        r.line("nvml", False, f"{type(exc).__name__}: {exc}"[:300])
        return 3
    for fact in facts:
        r.line(fact.name, fact.ok, fact.detail)
    return 3


def main() -> int:
    from ampbench.trackers import cuda, nvml

    if not cuda.has_gpu_cheap():
        print("no GPU here (no nvidia-smi GPU, no /dev/nvidia*): nothing to measure (exit 3)")
        return 3
    missing = cuda.paddle_missing()
    if missing:
        return without_paddle(missing)
    if not cuda.has_gpu():
        print("no GPU visible to Paddle (a CPU build, or CUDA_VISIBLE_DEVICES hides every GPU): nothing to measure (exit 3)")
        return 3
    import paddle

    r = Report()
    ordinal = nvml.cuda_ordinal(os.environ)
    place = f"gpu:{ordinal}"
    paddle.set_device(place)
    bus, uuid = cuda.cuda_bus_id(ordinal), cuda.cuda_uuid(ordinal)
    env = {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "FLAGS_selected_gpus")
           if k in os.environ}
    r.line("identity", bool(bus), f"paddle {paddle.__version__} {place} {cuda.device_name()!r} cc "
           f"{cuda.compute_capability()}; bus {bus}; uuid {uuid}; {env or 'no *_VISIBLE_DEVICES'}")
    session = nvml.Session(os.environ, bus, uuid).open()
    try:
        if session.nv is None or session.dev is None:
            r.line("nvml-device", False, session.error or "NVML did not resolve this process's device")
        else:
            _nvml_facts(r, session, paddle, place)
        _paddle_facts(r, paddle, ordinal, place)
    finally:
        session.close()
    print(f"gpu_check: {'every fact measured' if not r.failed else 'FAILED: ' + ', '.join(r.failed)}")
    return 1 if r.failed else 0


def _nvml_facts(r: Report, session: Any, paddle: Any, place: str) -> None:
    from ampbench.trackers import nvml

    nv, dev = session.nv, session.dev
    r.line("nvml-device", dev.matched_by in ("pci_bus_id", "uuid", "mig_uuid"), str(dev.describe()))
    r.run("identity-cvd", lambda: _identity_under_cvd(dev.uuid))
    # this process, over a 1 s window of GPU work: the poller the built-in trials use
    held = paddle.zeros([256 * MIB // 4], dtype="float32")
    poller = nvml.Poller(nv, dev, interval_s=0.05).start()
    _work(paddle, 1.0)
    out = poller.stop()
    del held
    r.line("driver", True, f"{nvml._text(nv.nvmlSystemGetDriverVersion())}; processes listed through "
                           f"{out['processes_call']}")
    _listed_fact(r, out, "nvml-self", f"pid {os.getpid()}", 256 * MIB)
    notes = {k: v for k, v in out["nvml_errors"].items() if k.startswith(nvml.NOT_SUPPORTED)}
    energy_note = notes.get(nvml.NOT_SUPPORTED + "nvmlDeviceGetTotalEnergyConsumption")
    joules = out["energy_j"]
    r.line("energy", None if energy_note else bool(joules and joules > 0),
           energy_note or f"{joules} J over a 1 s window of matmuls")
    inter = out["interference"]
    r.line("clocks", bool(inter["sm_clock_mhz_median"]),
           f"SM {inter['sm_clock_mhz_median']} MHz median, {inter['sm_clock_max_mhz']} max; "
           f"{inter['power_w_median']} W; {inter['temperature_c_max']} C; throttle {inter['throttle_reasons']}; "
           f"static {session.static_info()}")
    errors = {k: v for k, v in out["nvml_errors"].items() if k not in notes and k != nvml.PID_NOTE}
    if errors:
        r.line("nvml-errors", False, str(errors))
    r.run("nvml-child", lambda: _child(nv, dev, place))


def _paddle_facts(r: Report, paddle: Any, ordinal: int, place: str) -> None:
    from ampbench.trackers import cuda

    def allocator() -> tuple[bool | None, str]:
        reason = cuda.allocator_reset(ordinal)
        if reason:
            return None, reason
        big = paddle.zeros([512 * MIB // 4], dtype="float32")
        paddle.device.synchronize()
        del big
        before = cuda.allocator_peaks(ordinal)["peak_allocated_bytes"]
        cuda.allocator_reset(ordinal)
        after = cuda.allocator_peaks(ordinal)["peak_allocated_bytes"]
        return before >= 512 * MIB > after, f"peak {before / MIB:.0f} MiB, after reset {after / MIB:.0f} MiB"

    r.run("allocator-reset", allocator)
    r.run("synchronize", lambda: (paddle.device.synchronize() is None, f"paddle.device.synchronize() on {place}"))


def _identity_under_cvd(uuid: str) -> tuple[bool, str]:
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_selected_gpus"} | {"CUDA_VISIBLE_DEVICES": uuid}
    out = subprocess.run([sys.executable, "-c", IDENTITY], env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    lines = out.stdout.strip().splitlines()
    got = lines[-1] if lines else f"nothing (exit {out.returncode}): {out.stderr.strip()[-200:]}"
    return got == uuid, f"CUDA_VISIBLE_DEVICES={uuid} resolves {got}"


if __name__ == "__main__":
    sys.exit(main())
