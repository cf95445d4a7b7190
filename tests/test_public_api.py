"""The "Public API" block of docs/architecture.md imports as written, and holds every path promised as stable."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
PROMISED = {
    "ampbench.workloads": {"Workload", "Batch", "WorkloadParams", "WorkloadContext"},
    "ampbench.results": {"Trial", "RunInfo", "load_doc", "open_run"},
    "ampbench.commands.check": {"check_run"},
    "ampbench.api": {"load", "summary", "check", "verdicts", "compare", "changes_of"},
}


def public_api_imports() -> dict[str, set[str]]:
    """module -> names, from the python block under docs/architecture.md's `## Public API` heading."""
    section = README.read_text(encoding="utf-8").split("## Public API", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block, "docs/architecture.md: no python block under ## Public API"
    out: dict[str, set[str]] = {}
    for node in ast.parse(block.group(1)).body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        out.setdefault(node.module, set()).update(a.name for a in node.names)
    return out


def test_readme_lists_every_promised_path() -> None:
    listed = public_api_imports()
    missing = {m: sorted(names - listed.get(m, set())) for m, names in PROMISED.items() if names - listed.get(m, set())}
    assert not missing, f"README's Public API lost {missing}"


def test_every_listed_path_imports() -> None:
    broken = []
    for module, names in public_api_imports().items():
        mod = importlib.import_module(module)
        broken += [f"{module}.{n}" for n in sorted(names) if not hasattr(mod, n)]
    assert not broken, f"README promises paths that do not import: {broken}"
