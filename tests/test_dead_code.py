"""No dead code (vulture at 60% confidence, pyproject [tool.vulture] + vulture_whitelist.py), and no
suite key that nothing reads: a retired key is refused in a suite file, yet older run folders that
recorded it still open.

A field of a file ampbench writes or reads (every model `ampbench schema` covers, and the models they hold)
and a field of the start-up hook's wire (record/wire.py) is a contract with the file's readers, users and
tools, and with the hook: read by them, by the field catalog or through a wire field's `into`, never by
name in ampbench.  They are no dead code by construction, so vulture is handed their names
(`contract_whitelist`), generated from the models: adding a field needs no whitelist line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.config import ConfigError
from ampbench.results import open_run
from ampbench.results.run_dir import RETIRED_CONFIG_KEYS
from ampbench.workloads.suites import load_suite
from tests.factories import make_run, make_suite, make_trials

ROOT = Path(__file__).resolve().parents[1]


def contract_names() -> dict[str, str]:
    """name -> where it is declared, of every field of a file model (recursively) and of the hook's wire."""
    import dataclasses
    import typing

    from pydantic import BaseModel

    from ampbench.commands.schema import FILES
    from ampbench.record import wire

    names: dict[str, str] = {}
    seen: set[type] = set()

    def walk(model: type[BaseModel]) -> None:
        seen.add(model)
        for name, f in model.model_fields.items():
            names.setdefault(name, model.__name__)
            stack = [f.annotation]
            while stack:
                t = stack.pop()
                stack.extend(typing.get_args(t))
                if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                    walk(t)

    for kind in FILES.values():
        walk(kind.model)
    for cls in wire.EVENTS.values():
        for f in dataclasses.fields(cls):
            names.setdefault(f.name, cls.__name__)
    return names


def contract_whitelist(folder: Path) -> Path:
    """`contract_names` as a vulture whitelist file in `folder`."""
    path = folder / "contract_whitelist.py"
    path.write_text("".join(f"_.{n}  # a field of {where}\n" for n, where in sorted(contract_names().items())),
                    encoding="utf-8")
    return path


def vulture(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vulture", *args], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=300)


@pytest.mark.slow
def test_vulture_finds_no_dead_code(tmp_path: Path) -> None:
    # confidence and ignore rules from pyproject.toml; its paths and the fields of the files and the wire
    out = vulture(ROOT, "ampbench", "vulture_whitelist.py", str(contract_whitelist(tmp_path)))
    assert out.returncode == 0 and not out.stdout.strip(), (
        "dead code (delete it, or add the name to vulture_whitelist.py with its reason):\n"
        f"{out.stdout}{out.stderr}")


@pytest.mark.slow
def test_vulture_run_this_way_sees_a_dead_function(tmp_path: Path) -> None:
    """The check can fail: the same configuration over a copy with one unused function reports it."""
    shutil.copytree(ROOT / "ampbench", tmp_path / "ampbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "vulture_whitelist.py", tmp_path / "vulture_whitelist.py")
    units = tmp_path / "ampbench" / "core" / "units.py"
    units.write_text(units.read_text(encoding="utf-8") + "\n\ndef never_called_anywhere() -> int:\n    return 1\n",
                     encoding="utf-8")
    out = vulture(tmp_path, "ampbench", "vulture_whitelist.py", str(contract_whitelist(tmp_path)))
    assert out.returncode == 3, out.stdout + out.stderr  # vulture's "dead code found"
    assert "ampbench/core/units.py" in out.stdout and "never_called_anywhere" in out.stdout


def test_the_contract_names_cover_the_files_and_the_wire() -> None:
    """The generated names hold a trial's fields (nested models too), a history line's and the wire's."""
    names = contract_names()
    assert {"extra_per_s", "sm_clock_max_mhz", "cpus_seen", "lo_s", "created", "steps_done"} <= set(names)
    assert names["peak_reserved"] == "MemoryEvent" and names["cuda_env"] == "DeviceEvent"


def test_whitelist_lines_each_say_why() -> None:
    lines = [ln for ln in (ROOT / "vulture_whitelist.py").read_text(encoding="utf-8").splitlines()
             if ln.startswith("_.")]
    bare = [ln for ln in lines if "#" not in ln and not ln.startswith("_.history_alpha")]
    assert lines and not bare, f"whitelist entries without a reason: {bare}"


@pytest.mark.parametrize(("section", "key"), RETIRED_CONFIG_KEYS)
def test_a_retired_key_in_a_suite_is_an_unknown_key(toy_suite, section: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: unknown key"):
        load_suite(toy_suite(), overrides=[f"{section}.{key}=1"])


def test_a_run_that_recorded_retired_keys_still_opens_with_the_same_suite(tmp_path: Path) -> None:
    suite = make_suite(seeds=(0,))
    run = make_run(tmp_path, suite, make_trials(suite, n_steps=4))
    info_path = run / "run.json"
    doc = json.loads(info_path.read_text(encoding="utf-8"))
    for section, key in RETIRED_CONFIG_KEYS:  # what an earlier version wrote
        doc["config"].setdefault(section, {})[key] = 7
    info_path.write_text(json.dumps(doc), encoding="utf-8")
    opened = open_run(run)
    assert opened.suite == suite and opened.suite.config_hash() == suite.config_hash()
    kept = json.loads(info_path.read_text(encoding="utf-8"))["config"]
    assert kept["train"]["log_every"] == 7  # the file itself is not rewritten
