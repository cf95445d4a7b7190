"""Which `[thresholds]` keys a rule reads, found in its code: what docs/reference/rules.md lists per rule.

A rule declares its results and their traits, not its thresholds: the keys are read from the source of
the functions the rule object names (its judge, applies, advice, and each result's planner, effect and
interval) and of every function of `ampbench.judge` they call, followed through module globals
(`sizing.margin_k(...)`) and `Ctx` methods (`c.levels()`).  A key is any attribute named like a
`Thresholds` field (`c.th.min_speedup`, `th.confidence`), so a new rule that reads a new threshold is listed
with it without a line written anywhere else.  `Ctx.levels` and `Ctx.history_levels` are two methods (not a
flag) for this reason: each reads one FAIL alpha.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types
from collections.abc import Callable, Iterator
from typing import Any

from ampbench.config import Thresholds
from ampbench.judge.rules.context import Ctx, Rule

_PACKAGE = "ampbench.judge"


def _entry_points(rule: Rule) -> Iterator[Callable[..., Any]]:
    """The functions a rule object names."""
    yield from (rule.judge, rule.applies)
    if rule.advice is not None:
        yield rule.advice
    for r in rule.results:
        if r.seeds is not None:
            yield from (f for f in (r.seeds.plan, r.seeds.effect) if f is not None)
        if r.interval is not None:
            yield r.interval


def _calls(node: ast.AST, scope: dict[str, Any]) -> Iterator[Any]:
    """The objects a function's names and calls may reach: a global name, `module.name`, `ctx.method`."""
    if isinstance(node, ast.Name):
        yield scope.get(node.id)
    elif isinstance(node, ast.Attribute):
        base = scope.get(node.value.id) if isinstance(node.value, ast.Name) else None
        if isinstance(base, types.ModuleType):
            yield getattr(base, node.attr, None)
        elif isinstance(inspect.getattr_static(Ctx, node.attr, None), (types.FunctionType, property)):
            member = inspect.getattr_static(Ctx, node.attr)
            yield member.fget if isinstance(member, property) else member


@functools.cache
def _reads(fn: types.FunctionType) -> tuple[frozenset[str], tuple[Any, ...]]:
    """The keys `fn`'s own source names and the objects it may reach.  Its source is parsed once per process:
    the reference and the docs check ask for every rule, each render (0.24 CPU s a render of rules.md before)."""
    fields = Thresholds.model_fields
    keys: set[str] = set()
    reached: list[Any] = []
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        if isinstance(node, ast.Attribute) and node.attr in fields:
            keys.add(node.attr)
        reached += [target for target in _calls(node, fn.__globals__) if target is not None]
    return frozenset(keys), tuple(reached)


def _walk(fn: Any, seen: set[Any], keys: set[str], where: tuple[str, ...]) -> None:
    """Add the keys `fn` reads, and those of the functions it reaches in the modules `where` names."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    if not isinstance(fn, types.FunctionType) or fn in seen or not fn.__module__.startswith(where):
        return
    seen.add(fn)
    own, reached = _reads(fn)
    keys.update(own)
    for target in reached:
        _walk(target, seen, keys, where)


def threshold_keys(rule: Rule) -> list[str]:
    """The `[thresholds]` keys the rule's code reads, in the model's order."""
    seen: set[Any] = set()
    keys: set[str] = set()
    for fn in _entry_points(rule):   # a rule defined outside judge/ (a plug-in, a test) is read in its module too
        _walk(fn, seen, keys, (_PACKAGE, getattr(fn, "__module__", None) or _PACKAGE))
    return [k for k in Thresholds.model_fields if k in keys]
