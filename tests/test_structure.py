"""The shape rules, checked on the source.

- complexity: ruff's C901 (cyclomatic complexity), PLR0912 (branches), PLR0913 (arguments) and
  PLR0915 (statements) over ampbench/, limits in pyproject.toml [tool.ruff.lint] (they replace the
  old 400-lines-per-module and 60-per-function caps, which cut concepts into files by size);
- a complexity ceiling that counts boolean operators: radon's cyclomatic complexity (every `and`/`or`
  of a condition counts, as ruff's C901 does not) of every block in ampbench/, closures and methods
  included, at most CC_CEILING (radon grade C): one `if` of ten conditions is as hard to read as ten
  `if`s, and a C901 limit alone lets it through;
- no import cycle between ampbench modules, counting every `import` anywhere in a module (function-level
  and TYPE_CHECKING imports included: a hidden cycle is still a cycle), with a package's `__init__`
  as a node of its own (ast only; nothing is imported);
- the folders directly in ampbench/ are exactly the layers of the import-linter contract
  (the contract itself: tests/test_layers.py);
- no module over 500 lines (issue 57's acceptance).

Each assertion message lists every offender, so one run shows the whole to-do list.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ampbench"
COMPLEXITY_RULES = "C901,PLR0912,PLR0913,PLR0915"
CC_CEILING = 20   # radon's grade C; D (21-30) and worse fail


@dataclass(frozen=True)
class Module:
    name: str      # dotted: ampbench.core.files; a package's __init__ is the package name
    path: Path
    tree: ast.Module


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def load_modules() -> dict[str, Module]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        out[module_name(p)] = Module(module_name(p), p, ast.parse(p.read_text(encoding="utf-8"), str(p)))
    return out


MODULES = load_modules()


def _rel(m: Module) -> str:
    return str(m.path.relative_to(PKG.parent))


# ---------------------------------------------------------------- complexity


def ruff(cwd: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    """ruff's complexity rules with the limits in cwd's pyproject.toml."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", *paths, "--select", COMPLEXITY_RULES,
                           "--output-format", "concise", "--no-cache"],
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_no_function_over_the_complexity_limits() -> None:
    out = ruff(ROOT, "ampbench")
    assert out.returncode == 0, ("functions over the complexity limits (split them where that is clearer; "
                                 f"a flat table may say `# noqa: C901  <why>`):\n{out.stdout}{out.stderr}")


def test_the_complexity_check_sees_a_tangled_function(tmp_path: Path) -> None:
    """The check can fail: thirteen independent branches in one function break C901 and PLR0912."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "ampbench").mkdir()
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(13))
    (tmp_path / "ampbench" / "tangled.py").write_text(f"def tangled(x: int) -> int:\n{body}    return -1\n")
    out = ruff(tmp_path, "ampbench")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "tangled.py" in out.stdout and "C901" in out.stdout and "PLR0912" in out.stdout


def blocks_over_the_ceiling(pkg: Path, ceiling: int = CC_CEILING) -> list[str]:
    """Every block of pkg's modules (function, method, class, closure) whose cyclomatic complexity as radon
    counts it (each boolean operator a branch) is over `ceiling`, as `path:line name CC`."""
    try:
        from radon.complexity import add_inner_blocks, cc_visit
    except ImportError as exc:   # pinned in pyproject's test extra (scripts/setup.sh --test installs it)
        pytest.fail(f"radon is not installed ({exc}): pip install -e '.[test]' -c constraints.txt", pytrace=False)
    out = []
    for p in sorted(pkg.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        for b in sorted(add_inner_blocks(cc_visit(p.read_text(encoding="utf-8"))), key=lambda b: b.lineno):
            if b.complexity > ceiling:
                out.append(f"{p.relative_to(pkg.parent)}:{b.lineno} {b.fullname} {b.complexity}")
    return out


def test_no_block_over_the_complexity_ceiling() -> None:
    over = blocks_over_the_ceiling(PKG)
    if over:
        pytest.fail(f"blocks over radon's cyclomatic complexity {CC_CEILING} (boolean operators count; split them "
                    "into helpers named for what they decide):\n  " + "\n  ".join(over), pytrace=False)


def test_the_ceiling_sees_complexity_made_of_boolean_operators_alone(tmp_path: Path) -> None:
    """The ceiling can fail where C901 cannot: one `return` of 25 `or`ed comparisons has radon's complexity
    25 and no branch at all, so ruff's complexity rules at pyproject's limits pass it and the ceiling does not;
    the same inside a closure is caught too (`radon cc` leaves closures out unless asked)."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "ampbench").mkdir()
    cond = " or ".join(f"x == {i}" for i in range(25))
    (tmp_path / "ampbench" / "boolean.py").write_text(
        f"def any_of_25(x: int) -> bool:\n    return {cond}\n\n\n"
        f"def outer() -> object:\n    def inner(x: int) -> bool:\n        return {cond}\n    return inner\n")
    out = ruff(tmp_path, "ampbench")
    assert out.returncode == 0, out.stdout + out.stderr   # C901 counts no `or`
    assert blocks_over_the_ceiling(tmp_path / "ampbench") == ["ampbench/boolean.py:1 any_of_25 25",
                                                              "ampbench/boolean.py:6 outer.inner 25"]
    assert blocks_over_the_ceiling(tmp_path / "ampbench", ceiling=25) == []


def test_lint_is_clean() -> None:
    """`tox -e lint` in the test command: the pinned ruff's whole rule set (pyproject's selection and
    per-file reasons) over the package and the tests, so a finding fails CI rather than piling up."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "ampbench", "tests", "--output-format", "concise",
                          "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, f"ruff findings (fix them, or say why on the line: `# noqa: CODE  <why>`):\n{out.stdout}"


def test_lint_sees_a_finding(tmp_path: Path) -> None:
    """The lint check can fail: a blind except outside the hook and the trackers is a finding."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "ampbench").mkdir()
    (tmp_path / "ampbench" / "blind.py").write_text("def f() -> None:\n    try:\n        pass\n"
                                                    "    except Exception:\n        return\n")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "ampbench", "--no-cache"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 1 and "BLE001" in out.stdout, out.stdout + out.stderr


# ---------------------------------------------------------------- imports


def _resolve_relative(m: Module, node: ast.ImportFrom) -> str:
    base = m.name.split(".")
    if m.path.name != "__init__.py":
        base = base[:-1]  # a module's relative imports start from its package
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str) -> str | None:
    """The ampbench module a dotted name lands on (the longest existing prefix), if any."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in MODULES:
            return cand
        parts.pop()
    return None


def import_edges(m: Module) -> dict[str, int]:
    """Every ampbench module `m` imports anywhere (target -> first line), `from p import mod` -> p.mod."""
    edges: dict[str, int] = {}
    for node in ast.walk(m.tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            src = _resolve_relative(m, node) if node.level else (node.module or "")
            targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in MODULES else src for a in node.names]
        for t in targets:
            if t == "ampbench" or t.startswith("ampbench."):
                hit = _known(t)
                if hit is not None and hit != m.name:
                    edges.setdefault(hit, node.lineno)
    return edges


def import_graph() -> dict[str, dict[str, int]]:
    return {name: import_edges(m) for name, m in MODULES.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:  # noqa: PLC0206  the loop reads graph[root] only for roots not yet indexed
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(graph.get(w, {}))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def describe_cycles(graph: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for comp in cycles(graph):
        inside = set(comp)
        edges = [f"{a} -> {b} ({_rel(MODULES[a])}:{line})" for a in comp for b, line in graph[a].items()
                 if b in inside]
        out.append("cycle among " + ", ".join(comp) + ":\n    " + "\n    ".join(edges))
    return out


def test_cycle_finder_sees_a_hidden_function_level_cycle() -> None:
    """The checker itself: a -> b at module level, b -> a inside a function is a cycle; a chain is not."""
    g = {"a": {"b": 1}, "b": {"a": 9}, "c": {"a": 1}}
    assert cycles(g) == [["a", "b"]]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) == []
    m = Module("ampbench.x", PKG / "x.py", ast.parse("def f():\n    from ampbench.core import files\n"))
    assert "ampbench.core.files" in import_edges(m)


def test_no_import_cycle_between_ampbench_modules() -> None:
    offenders = describe_cycles(import_graph())
    if offenders:
        pytest.fail("import cycles (function-level imports count):\n  " + "\n  ".join(offenders), pytrace=False)


# ---------------------------------------------------------------- size

MAX_MODULE_LINES = 500   # issue 57's acceptance: a module a maintainer reads whole


def test_no_module_over_500_lines() -> None:
    """No module in ampbench/ over MAX_MODULE_LINES lines (the hook's files and generated ones included): a
    longer one holds more than one thing to name (split it by what it holds, not by size alone)."""
    long = {_rel(m): n for m in MODULES.values() if (n := len(m.path.read_text(encoding="utf-8").splitlines()))
            > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


# ---------------------------------------------------------------- top level


def test_the_package_holds_exactly_the_contract_layers() -> None:
    """Every folder (and api.py) directly in ampbench/ is a layer of the import-linter contract, and
    every layer exists: the picture in docs/architecture.md and the contract cannot drift from the tree."""
    import tomllib

    conf = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = {name.strip().removeprefix("ampbench.") for c in conf if c["type"] == "layers"
              for layer in c["layers"] for name in re.split(r"[|:]", layer)}
    entries = {p.name.removesuffix(".py") for p in PKG.iterdir()
               if p.name not in ("__pycache__", "__init__.py", "py.typed") and not p.name.startswith(".")}
    assert entries == layers, f"not in the contract: {sorted(entries - layers)}; missing: {sorted(layers - entries)}"


@pytest.mark.parametrize("name", ["ampbench.results", "ampbench.core.files", "ampbench.cli"])
def test_module_table_finds_the_package(name: str) -> None:
    assert name in MODULES
