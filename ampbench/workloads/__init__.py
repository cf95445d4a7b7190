"""Workload registry: built-ins by name, plus users' own through the `ampbench.workloads`
entry-point group (`name = "package.module:Class"`). A suite file only ever names a key here,
never arbitrary code to import."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from ampbench.core.install import SETUP_FLAGS, install_hint
from ampbench.workloads.base import (
    Batch,
    ProgramWorkload,
    Workload,
    WorkloadBase,
    WorkloadContext,
    WorkloadParams,
)
from ampbench.workloads.extras import NEEDS

# name -> "module:Class"; modules are imported only when the workload is used.
BUILTIN: dict[str, str] = {
    "resnet": "ampbench.workloads.resnet.workload:ResNetWorkload",
    "dbnet": "ampbench.workloads.dbnet.workload:DBNetWorkload",
    "bert": "ampbench.workloads.bert.workload:BertWorkload",
    "ctr": "ampbench.workloads.ctr.workload:CTRWorkload",
    "toy": "ampbench.workloads.toy:ToyWorkload",
    "command": "ampbench.workloads.command.workload:CommandWorkload",
}

ENTRY_POINT_GROUP = "ampbench.workloads"


def available() -> dict[str, str]:
    found = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def get_workload_class(name: str) -> type[WorkloadBase[Any]]:
    """A registered workload of either kind (a `Workload` or a `ProgramWorkload`)."""
    table = available()
    if name not in table:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(table))}")
    target = table[name]
    mod_name, _, attr = target.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise KeyError(
            f"workload {name!r} needs a package that is not installed ({e}); "
            + (install_hint(extra) if (extra := NEEDS.get(name, (name,))[0]) in SETUP_FLAGS else "install it")
        ) from None
    cls = getattr(mod, attr)
    if not (isinstance(cls, type) and issubclass(cls, (Workload, ProgramWorkload))):
        raise KeyError(f"workload {name!r} ({target}) is not an ampbench Workload subclass")
    return cls


def model_workload_class(name: str) -> type[Workload[Any]]:
    """A registered workload that trains in ampbench's worker (what the model loop instantiates)."""
    cls = get_workload_class(name)
    if not issubclass(cls, Workload):
        raise KeyError(f"workload {name!r} runs a program; it has no model for the worker to train")
    return cls


__all__ = ["Batch", "ProgramWorkload", "Workload", "WorkloadBase", "WorkloadContext", "WorkloadParams", "available",
           "get_workload_class", "model_workload_class"]
