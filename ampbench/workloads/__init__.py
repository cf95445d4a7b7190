"""Workload registry: the bundled ones by name, plus users' own through the `ampbench.workloads`
entry-point group (`name = "package.module:Class"`). A suite file only ever names a key here,
never arbitrary code to import.

A bundled workload registers itself: its module is ampbench/workloads/NAME.py or NAME/workload.py and
marks its class `@bundled` (workloads/base.py), found by NAME when a suite names it; the modules of this
package that hold no workload are `FRAMEWORK`.  Nothing else lists it (a table, a whitelist)."""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ampbench.core.install import SETUP_FLAGS, install_hint
from ampbench.workloads.base import (
    BUNDLED_MARK,
    Batch,
    ProgramWorkload,
    Workload,
    WorkloadBase,
    WorkloadContext,
    WorkloadParams,
)
from ampbench.workloads.extras import NEEDS

FRAMEWORK = ("base", "extras", "suites")   # the modules of this package that hold no workload
ENTRY_POINT_GROUP = "ampbench.workloads"


def bundled_workloads(here: Path = Path(__file__).parent) -> dict[str, str]:
    """name -> module of each bundled workload, from the package's files (nothing imported: a workload's
    module is imported only when a suite uses it)."""
    found = {}
    for m in pkgutil.iter_modules([str(here)]):
        if m.ispkg and (here / m.name / "workload.py").is_file():
            found[m.name] = f"{__name__}.{m.name}.workload"
        elif not m.ispkg and m.name not in FRAMEWORK:
            found[m.name] = f"{__name__}.{m.name}"
    return found


def available() -> dict[str, str]:
    """name -> where: a bundled workload's module, a plug-in's "module:Class"."""
    found = bundled_workloads()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def _bundled_in(mod: Any) -> Any:
    """The class a bundled module marks `@bundled` (None if it marks none)."""
    return next((v for v in vars(mod).values() if isinstance(v, type) and vars(v).get(BUNDLED_MARK) == mod.__name__),
                None)


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
    cls = getattr(mod, attr) if attr else _bundled_in(mod)
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
