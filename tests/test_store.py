"""One store: the run folder's layout is spelled in core/store.py only; every other module asks it.

The check is on the source (ast): a run-folder name used to build or test a path (`x / "trials"`,
`Path("results/runs")`, `.glob("*/probe.json")`, `p.parent.name == "trials"`) anywhere outside the
store module fails, with every offender listed.  Names in messages and docstrings are prose, not layout.
"""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

from ampbench.core.store import RunPaths, newest, probe_folders

PKG = Path(__file__).resolve().parents[1] / "ampbench"
STORE = PKG / "core" / "store.py"
LAYOUT = ("run.json", "check.json", "check-vs-", "summary.csv", "probe.json", "-probe", "diagnosis.json",
          "diagnosis.md", "report.md", "report.html", ".lock", "results/runs", "results/baselines",
          "results/history")
FOLDERS = {"trials", "plots", "logs", "specs", "numerics", "report", "comparison", "diagnose", "attempts", "outputs"}


def _texts(node: ast.AST) -> list[str]:
    """The literal text of a str constant or the literal parts of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def _path_operands(tree: ast.AST) -> list[ast.AST]:
    """Expressions used as path parts: operands of `/`, arguments of Path()/glob()/joinpath(), and what a
    `.name` is compared with."""
    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            out += [node.left, node.right]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in ("Path", "glob", "rglob", "joinpath", "with_name"):
                out += node.args
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr in ("name", "stem"):
            out += node.comparators
    return out


def layout_spelled(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in _path_operands(tree):
        for text in _texts(node):
            if text in FOLDERS or any(name in text for name in LAYOUT):
                found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {text!r}")
    return found


def test_no_module_but_the_store_spells_the_run_folder_layout() -> None:
    offenders = [o for p in sorted(PKG.rglob("*.py")) if p != STORE for o in layout_spelled(p)]
    assert not offenders, "run-folder names outside core/store.py (ask RunPaths instead):\n" + "\n".join(offenders)


def test_the_check_sees_a_layout_name(tmp_path: Path) -> None:
    """The scan is not vacuous: each way of spelling a path is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text('from pathlib import Path\nrun = Path("x")\na = run / "trials"\nb = Path("results/runs")\n'
                   'c = run.glob("*-probe/probe.json")\nd = run.parent.name == "trials"\ne = run / f"check-vs-{a}.json"\n')
    lines = [o.split(":")[1] for o in layout_spelled_anywhere(bad)]
    assert lines == ["3", "4", "5", "6", "7"], lines


def layout_spelled_anywhere(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{node.lineno}" for node in _path_operands(tree) for text in _texts(node)
            if text in FOLDERS or any(name in text for name in LAYOUT)]


def test_run_paths_of_a_trial_file_and_the_newest_finders(tmp_path: Path) -> None:
    run = RunPaths(tmp_path / "toy" / "20260101-000000-0001aaaa")
    trial = run.trial_path("amp-o1-fp16", 1)
    assert RunPaths.of_trial_file(trial).path == run.path and RunPaths.of_trial_file(tmp_path / "t.json") is None
    assert run.numerics_path("fp32__seed0", rank=2).name == "fp32__seed0.rank2"
    run.path.mkdir(parents=True)
    assert run.latest_check_path() == run.check_path  # none yet: the run's own
    run.check_path.write_text("{}")
    vs = run.check_vs_path("base")
    vs.write_text("{}")
    stamp = time.time_ns()
    os.utime(run.check_path, ns=(stamp, stamp))
    os.utime(vs, ns=(stamp, stamp))
    assert run.latest_check_path() == vs  # a tie: the comparison is the newer verdict
    os.utime(run.check_path, ns=(stamp + 10**9, stamp + 10**9))
    assert newest(run.check_paths(), prefer=run.check_path) == run.check_path
    for rid in ("20260101-000000-0001-probe", "20260102-000000-0002-probe"):
        (run.path.parent / rid).mkdir()
        RunPaths(run.path.parent / rid).probe_json.write_text("{}")
    (run.path.parent / "elsewhere").symlink_to(run.path.parent / "20260101-000000-0001-probe")
    assert [p.name for p in probe_folders(run.path.parent)] == ["20260102-000000-0002-probe",
                                                                "20260101-000000-0001-probe"]
