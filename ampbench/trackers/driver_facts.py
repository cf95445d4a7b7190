"""What a GPU machine tells without Paddle: the driver, NVML's device listing, the device this process's
CUDA ordinal is (the CUDA driver API in libcuda.so.1, no Paddle), its MIG mode, the process listing and
the energy counter over a short idle window.

The device check (scripts/gpu_check.py) and `ampbench selftest` measure these on a machine where Paddle
is not installed in the interpreter (a bare driver image, a virtual environment without
paddlepaddle-gpu), so the first contact with a GPU still says which of the NVML beliefs hold before
the one line that says Paddle is missing.  Nothing here imports Paddle.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ampbench.trackers import nvml
from ampbench.trackers.cuda import cuda_bus_id, cuda_uuid

IDLE_WINDOW_S = 1.0   # the energy counter of an idle GPU still advances (idle power is tens of watts)


@dataclass(frozen=True)
class Fact:
    """One measured fact: ok True, FAIL False, n/a None (with the reason in `detail`)."""

    name: str
    ok: bool | None
    detail: str


def _listing(nv: Any) -> str:
    """Every NVML device: index, name, UUID, PCI bus id, MIG mode."""
    rows = []
    for i in range(int(nv.nvmlDeviceGetCount())):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        mig = "MIG on" if nvml._mig_enabled(nv, h) else "MIG off"
        rows.append(f"{i}: {nvml._text(nv.nvmlDeviceGetName(h))} {nvml._text(nv.nvmlDeviceGetUUID(h))} "
                    f"{nvml.norm_bus_id(nvml._text(nv.nvmlDeviceGetPciInfo(h).busId))} {mig}")
    return "; ".join(rows) or "no devices"


def _window(nv: Any, dev: nvml.NvmlDevice, window_s: float) -> list[Fact]:
    """The poller the trials use, over an idle window: which process listing answers, the energy counter."""
    poller = nvml.Poller(nv, dev, interval_s=0.05).start()
    time.sleep(window_s)
    out = poller.stop()
    errors = {k: v for k, v in out["nvml_errors"].items()
              if not k.startswith(nvml.NOT_SUPPORTED) and k != nvml.PID_NOTE}
    energy_note = out["nvml_errors"].get(nvml.NOT_SUPPORTED + "nvmlDeviceGetTotalEnergyConsumption")
    joules = out["energy_j"]
    facts = [Fact("processes", not errors.get(out["processes_call"]),
                  f"listed through {out['processes_call']}; other processes {out['interference']['foreign_processes']}"),
             Fact("energy", None if energy_note else bool(joules and joules > 0),
                  energy_note or f"{joules} J over a {window_s:.0f} s idle window")]
    if errors:
        facts.append(Fact("nvml-errors", False, str(errors)[:300]))
    return facts


def driver_facts(environ: Mapping[str, str] | None = None, window_s: float = IDLE_WINDOW_S) -> list[Fact]:
    """The facts above, each as a line's worth; NVML missing (no driver library): one n/a fact."""
    env = os.environ if environ is None else environ
    ordinal = nvml.cuda_ordinal(env)
    bus, uuid = cuda_bus_id(ordinal), cuda_uuid(ordinal)
    session = nvml.Session(env, bus, uuid).open()
    if session.nv is None:
        return [Fact("nvml", None, f"n/a: {session.error}")]
    nv = session.nv
    try:
        facts = [Fact("driver", True, nvml._text(nv.nvmlSystemGetDriverVersion())),
                 Fact("nvml-list", True, _listing(nv))]
        dev = session.dev
        if dev is None:
            return [*facts, Fact("nvml-device", False, session.error or "NVML did not resolve this device")]
        facts.append(Fact("nvml-device", dev.matched_by in ("pci_bus_id", "uuid", "mig_uuid"),
                          f"CUDA ordinal {ordinal} (bus {bus}, uuid {uuid}): {dev.describe()}"))
        facts.append(Fact("mig", True, f"MIG instance {dev.uuid}" if dev.mig else "not a MIG instance"))
        return facts + _window(nv, dev, window_s)
    finally:
        session.close()
