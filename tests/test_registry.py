"""Workload registry: built-ins by name, users' plug-ins via the `ampbench.workloads` entry points."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import ampbench.workloads as reg
from ampbench.workloads.toy import ToyWorkload


def test_builtin_lookup_and_unknown_name():
    assert reg.get_workload_class("toy") is ToyWorkload
    with pytest.raises(KeyError, match="unknown workload 'nope'; known: .*resnet"):
        reg.get_workload_class("nope")


def test_entry_point_plugin_is_found(monkeypatch):
    ep = EntryPoint(name="mytoy", value="ampbench.workloads.toy:ToyWorkload", group=reg.ENTRY_POINT_GROUP)
    monkeypatch.setattr(reg, "entry_points", lambda group: [ep] if group == reg.ENTRY_POINT_GROUP else [])
    assert "mytoy" in reg.available()
    assert reg.get_workload_class("mytoy") is ToyWorkload


def test_plugin_that_is_not_a_workload_is_rejected(monkeypatch):
    ep = EntryPoint(name="bad", value="ampbench.config:Suite", group=reg.ENTRY_POINT_GROUP)
    monkeypatch.setattr(reg, "entry_points", lambda group: [ep])
    with pytest.raises(KeyError, match="not an ampbench Workload"):
        reg.get_workload_class("bad")


def test_plugin_cannot_shadow_builtin(monkeypatch):
    ep = EntryPoint(name="toy", value="ampbench.config:Suite", group=reg.ENTRY_POINT_GROUP)
    monkeypatch.setattr(reg, "entry_points", lambda group: [ep])
    assert reg.get_workload_class("toy") is ToyWorkload


def test_the_command_workload_is_a_program_workload_not_a_model_one() -> None:
    """Two kinds behind one registry: the worker asks `runs_program`, never the workload's name; the
    command workload implements no model method (none raises NotImplementedError)."""
    import inspect

    from ampbench.workloads import ProgramWorkload, Workload, model_workload_class

    cmd = reg.get_workload_class("command")
    assert issubclass(cmd, ProgramWorkload) and not issubclass(cmd, Workload) and cmd.runs_program
    assert "NotImplementedError" not in inspect.getsource(cmd)
    assert not reg.get_workload_class("toy").runs_program and model_workload_class("toy") is ToyWorkload
    with pytest.raises(KeyError, match="runs a program"):
        model_workload_class("command")


def test_a_bundled_workload_registers_itself(tmp_path):
    """Its module (NAME.py, or NAME/workload.py) is the workload's name, and its class marks itself `@bundled`:
    no table or whitelist lists it; the package's own modules (base, extras, suites) are no workload."""
    import types

    from ampbench.workloads.base import bundled

    assert {"toy", "resnet", "dbnet", "bert", "ctr", "command"} <= set(reg.bundled_workloads())   # a new one joins
    assert all(reg.get_workload_class(n) for n in ("toy", "command"))
    for f in ("base.py", "extras.py", "suites.py", "tiny.py", "big/workload.py", "big/__init__.py", "data/__init__.py"):
        (tmp_path / f).parent.mkdir(exist_ok=True)
        (tmp_path / f).write_text("")
    assert reg.bundled_workloads(tmp_path) == {"tiny": "ampbench.workloads.tiny", "big": "ampbench.workloads.big.workload"}
    mod = types.ModuleType("ampbench.workloads.tiny")

    class Helper:
        pass

    class Tiny(ToyWorkload):
        pass

    Tiny.__module__ = Helper.__module__ = mod.__name__
    mod.Helper, mod.Tiny, mod.ToyWorkload = Helper, bundled(Tiny), ToyWorkload   # an import of another one is not it
    assert reg._bundled_in(mod) is Tiny
