"""The layer contract (pyproject.toml [tool.importlinter], README "Architecture") holds, and would
catch an upward import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """A copy of the package where the bottom layer imports the report layer: exit 1, the import named."""
    shutil.copytree(ROOT / "ampbench", tmp_path / "ampbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    units = tmp_path / "ampbench" / "core" / "units.py"
    text = units.read_text(encoding="utf-8")
    units.write_text(text + "\nimport ampbench.report  # deliberately upward\n", encoding="utf-8")
    line = len(text.splitlines()) + 2
    out = lint_imports(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "BROKEN" in out.stdout and "ampbench.core is not allowed to import ampbench.report" in out.stdout
    assert f"ampbench.core.units -> ampbench.report (l.{line})" in out.stdout, out.stdout
