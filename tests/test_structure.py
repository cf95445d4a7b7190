"""The shape rules of issue #12, checked on the source (ast only; nothing is imported).

- no module over 400 lines, no function over 60 lines (a short, explicit allowlist for pure data
  tables, each entry checked to really be data: assignments only);
- no import cycle between ampbench modules, counting every `import` anywhere in a module (function-level
  and TYPE_CHECKING imports included: a hidden cycle is still a cycle), with a package's `__init__`
  as a node of its own;
- at most 12 entries directly in ampbench/.

Each assertion message lists every offender, so one run shows the whole to-do list.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "ampbench"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_TOP_ENTRIES = 12
# Modules allowed over MAX_MODULE_LINES because they are pure data (module -> what the data is).
# Every entry must hold only a docstring, imports and assignments (checked below).
DATA_TABLES: dict[str, str] = {}


@dataclass(frozen=True)
class Module:
    name: str      # dotted: ampbench.results.files; a package's __init__ is the package name
    path: Path
    tree: ast.Module
    lines: int


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
        text = p.read_text(encoding="utf-8")
        out[module_name(p)] = Module(module_name(p), p, ast.parse(text, str(p)), len(text.splitlines()))
    return out


MODULES = load_modules()


def _rel(m: Module) -> str:
    return str(m.path.relative_to(PKG.parent))


# ---------------------------------------------------------------- sizes


def is_pure_data(tree: ast.Module) -> bool:
    allowed = (ast.Expr, ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)
    return all(isinstance(node, allowed) for node in tree.body)


def long_modules() -> list[str]:
    return [f"{_rel(m)}: {m.lines} lines" for m in MODULES.values()
            if m.lines > MAX_MODULE_LINES and m.name not in DATA_TABLES]


def long_functions() -> list[str]:
    out = []
    for m in MODULES.values():
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{_rel(m)}:{node.lineno} {node.name}(): {n} lines")
    return out


def test_no_module_over_the_line_limit() -> None:
    offenders = long_modules()
    if offenders:
        pytest.fail(f"modules over {MAX_MODULE_LINES} lines (split them):\n  " + "\n  ".join(offenders), pytrace=False)


def test_no_function_over_the_line_limit() -> None:
    offenders = long_functions()
    if offenders:
        pytest.fail(f"functions over {MAX_FUNCTION_LINES} lines (split them):\n  " + "\n  ".join(offenders),
                    pytrace=False)


def test_data_table_allowlist_holds_only_data() -> None:
    bad = [f"{name}: not in ampbench" if name not in MODULES else f"{name}: has code, not only data"
           for name in DATA_TABLES if name not in MODULES or not is_pure_data(MODULES[name].tree)]
    assert not bad, "DATA_TABLES may list only modules of assignments:\n  " + "\n  ".join(bad)


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
    for root in graph:
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
    m = Module("ampbench.x", PKG / "x.py", ast.parse("def f():\n    from ampbench.core import files\n"), 2)
    assert "ampbench.core.files" in import_edges(m)


def test_no_import_cycle_between_ampbench_modules() -> None:
    offenders = describe_cycles(import_graph())
    if offenders:
        pytest.fail("import cycles (function-level imports count):\n  " + "\n  ".join(offenders), pytrace=False)


# ---------------------------------------------------------------- top level


def test_the_package_holds_exactly_the_contract_layers() -> None:
    """Every folder (and cli.py) directly in ampbench/ is a layer of the import-linter contract, and
    every layer exists: the picture in the README and the contract cannot drift from the tree."""
    import tomllib

    conf = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = {name.removeprefix("ampbench.") for c in conf if c["type"] == "layers" for name in c["layers"]}
    entries = {p.name.removesuffix(".py") for p in PKG.iterdir()
               if p.name not in ("__pycache__", "__init__.py", "py.typed") and not p.name.startswith(".")}
    assert entries == layers, f"not in the contract: {sorted(entries - layers)}; missing: {sorted(layers - entries)}"


@pytest.mark.parametrize("name", ["ampbench.results", "ampbench.core.files", "ampbench.cli"])
def test_module_table_finds_the_package(name: str) -> None:
    assert name in MODULES
