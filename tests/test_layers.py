"""The import contract (pyproject.toml [tool.importlinter], docs/architecture.md) holds, and would catch
an upward import and an import that crosses between the run side and the analysis side."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the `ampbench` under `root` (PYTHONPATH: not the installed copy)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", LINT, "--config", str(root / "pyproject.toml"), "--no-cache",
                           "--no-logo"], cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_layer_contract_is_kept() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, f"import-linter contract broken:\n{out.stdout}{out.stderr}"
    assert "0 broken" in out.stdout, out.stdout


def copy_with_import(tmp_path: Path, module: str, target: str) -> tuple[Path, int]:
    """A copy of the package (and its pyproject) where `module` (a path under ampbench/) also imports
    `target`; returns the copy's root and the line number of the added import."""
    shutil.copytree(ROOT / "ampbench", tmp_path / "ampbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "ampbench" / module
    text = path.read_text(encoding="utf-8")
    path.write_text(text + f"\nimport {target}  # deliberately against the contract\n", encoding="utf-8")
    return tmp_path, len(text.splitlines()) + 2


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """A copy of the package where the bottom layer imports the report layer: exit 1, the import named."""
    root, line = copy_with_import(tmp_path, "core/units.py", "ampbench.report")
    out = lint_imports(root)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "BROKEN" in out.stdout and "ampbench.core is not allowed to import ampbench.report" in out.stdout
    assert f"ampbench.core.units -> ampbench.report (l.{line})" in out.stdout, out.stdout


@pytest.mark.parametrize(("module", "target", "contract"), [
    # the two crossings the old linear contract let through (issue 33)
    ("judge/stats.py", "ampbench.trial.worker", "the analysis side never imports the run side"),
    ("results/summary.py", "ampbench.trial.setup", "the analysis side never imports the run side"),
    ("trackers/load.py", "ampbench.results.run_dir", "the run side never imports the analysis side"),
    # one use case per verb (issue 57): pr-check once took compare's comparison from its verb
    ("commands/pr_check.py", "ampbench.commands.compare", "verbs do not call verbs"),
])
def test_a_crossing_import_breaks_the_contract(tmp_path: Path, module: str, target: str, contract: str) -> None:
    """The run side and the analysis side are independent, and so are the verbs: one import across, either way,
    fails lint-imports (exit 1) under the contract that forbids it, with the importing line named."""
    root, line = copy_with_import(tmp_path, module, target)
    out = lint_imports(root)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{contract} BROKEN" in " ".join(out.stdout.split()), out.stdout
    source = "ampbench." + module.removesuffix(".py").replace("/", ".")
    assert f"{source} -> {target} (l.{line})" in out.stdout, out.stdout
