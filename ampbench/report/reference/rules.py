"""docs/reference/rules.md: every rule of the registry (judge/rules/registry.py), in the order `check` runs them.

Per rule: which modes it judges (its `applies` function's docstring), what it judges (its judge's
docstring), the `[thresholds]` keys its code reads with their defaults and meaning (judge/rules/reads.py,
the `Thresholds` model), and each result it emits with its reason codes and traits, rendered by the
registry's own renderers (`reasons.reason_table` per rule; `registry.traits_table` and
`registry.reason_codes_table` at the end: the tables a hand-written page may also hold as a generated block).
"""

from __future__ import annotations

from ampbench.config import Thresholds
from ampbench.core.field_docs import described
from ampbench.judge.rules.context import Rule
from ampbench.judge.rules.reads import threshold_keys
from ampbench.judge.rules.reasons import reason_table
from ampbench.judge.rules.registry import RULES, reason_codes_table, traits_table
from ampbench.report.fmt import md_code
from ampbench.report.reference.md import bounds_text, default_text, header, paragraphs, prose, table

TITLE = "Rule reference"


def _first(doc: str | None) -> str:
    return (doc or "").strip().split("\n\n")[0]


def _thresholds(keys: list[str]) -> str:
    rows = []
    fields = described(Thresholds).model_fields
    for key in keys:
        info = fields[key]
        rows.append([md_code(f"thresholds.{key}"), default_text(info), bounds_text(info), prose(info.description)])
    return table(["key", "default", "bounds", "what it is"], rows)


def _section(rule: Rule) -> str:
    keys = threshold_keys(rule)
    results = [rule.declared(name) for name in (rule.labels or (rule.name,))]
    codes = [([str(r.name)], r.reasons) for r in results if r.reasons]
    parts = [f"## {rule.name}", f"**Judges:** {prose(_first(rule.applies.__doc__)) or '-'}",
             paragraphs(rule.judge.__doc__),
             "**Results:** " + ", ".join(md_code(r.name) for r in results) + "."]
    parts += ["**Thresholds it reads:**", _thresholds(keys)] if keys else ["**Thresholds it reads:** none."]
    if codes:
        parts += ["**Reason codes:**", reason_table(codes)]
    return "\n\n".join(p for p in parts if p)


def render() -> str:
    """The page."""
    parts = [header(TITLE, "the rule registry (ampbench/judge/rules/registry.py)"),
             "`ampbench check` runs these rules for each mode of a run, in this order; each emits one or more "
             "results (a status, the observed figure, the threshold it was held to, one sentence, and reason "
             "codes in its details). docs/checks.md explains the statistics behind each test; the keys are set "
             "in a suite's `[thresholds]` (docs/reference/suite.md).",
             "| rule | judges | results | thresholds |\n|---|---|---|---|\n" + "\n".join(
                 f"| [{r.name}](#{r.name}) | {prose(_first(r.applies.__doc__))} | "
                 f"{', '.join(md_code(n) for n in (r.labels or (r.name,)))} | "
                 f"{', '.join(md_code(k) for k in threshold_keys(r)) or '-'} |" for r in RULES)]
    parts += [_section(rule) for rule in RULES]
    parts += ["## What each result is to the other verbs",
              "Declared on each rule's results (judge/rules/traits.py): whether more seeds can decide it, the "
              "failure kind tune's ladder reads, its role in the outcome table, whether `ampbench bisect --rule` "
              "searches it, the figure it gives and whether it measures the device.", traits_table(),
              "## Reason codes, every result", "Each result's codes in one table (results with the same codes on "
              "one row): what `check.json` holds in a result's `details.reasons`.", reason_codes_table()]
    return "\n\n".join(parts) + "\n"
