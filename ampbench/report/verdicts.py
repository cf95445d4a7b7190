"""Why a mode did not pass: each rule's verdict, the advice for each rule that did not pass, and the
trials that did not finish.

Advice comes from `ampbench.diagnose.advice.advice_for` (with the run's diagnosis.json when
`ampbench diagnose` was run), so what the report suggests is what the advice module tests.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ampbench.diagnose.advice import advice_for
from ampbench.judge.rules import registry
from ampbench.report import fmt
from ampbench.report.fmt import md_code, md_link, md_prose, md_text
from ampbench.report.tables import value
from ampbench.report.view import Ctx, RunView, h
from ampbench.results.verdicts import RuleResult


def _trial_links(v: RunView, ctx: Ctx, refs: list[str]) -> str:
    links = []
    for ref in refs:
        p = Path(ref)
        if not p.suffix:
            p = v.run.trial_file(ref)
        elif not p.is_absolute():
            p = p if p.exists() else v.run.path / p
        links.append(fmt.md_code_link(Path(ref).stem, ctx.rel(p)) if p.exists() else md_code(ref))
    return ", ".join(links)


def verdicts(v: RunView, ctx: Ctx, level: int) -> str:
    out = [h(level, "Verdicts")]
    if v.check is None:
        out.append(f"Not checked: this run folder has no check.json. Run `ampbench check "
                   f"{md_text(v.run.path.as_posix())}` to judge it.")
        return "\n\n".join(out)
    items = []
    tips = {(r.mode, r.rule): rule_advice(v, r) for mv in v.check.verdicts for r in mv.reasons}
    said: set[str] = set()
    for mv in v.check.verdicts:
        reasons = mv.reasons
        if not reasons:
            names = ", ".join(md_text(r.rule) for r in mv.rules)
            n = len(mv.rules)
            items.append(f"- {md_code(mv.mode)}: **{mv.verdict_text}** (all {n} rules passed: {names})")
            continue
        items.append(f"- {md_code(mv.mode)}: **{mv.verdict_text}**")
        for r in reasons:
            info = (" (informational)" if r.informational else "") + ("" if r.counted else " (not counted)")
            line = (f"  - **{r.status}**{info} {md_code(r.rule)}: {md_prose(r.message, 600)} "
                    f"(observed {value(r.observed)}; threshold {value(r.threshold)})")
            if r.trials:
                line += f"; trials: {_trial_links(v, ctx, r.trials)}"
            items.append(line)
            items += [_try_line(tip, (r.mode, r.rule), tips) for tip in tips[(r.mode, r.rule)] if tip not in said]
            said.update(tips[(r.mode, r.rule)])
        passed = [md_text(r.rule) for r in mv.rules if r.status == "PASS"]
        if passed:
            items.append(f"  - passed: {', '.join(passed)}")
    out.append("\n".join(items) if items else "The checker judged no AMP mode.")
    if v.check.baseline:
        out.append(f"Compared with baseline {md_code(v.check.baseline)}.")
    if v.check.notes:
        out.append("\n".join(f"- Note: {md_text(n, 600)}" for n in v.check.notes))
    return "\n\n".join(out)


def _try_line(tip: str, here: tuple[str, str], tips: dict[tuple[str, str], list[str]]) -> str:
    """A `Try:` line, said once: the other rules it answers are named instead of repeating it under them."""
    others = [f"{mode} {rule}" if mode != here[0] else rule for (mode, rule), ts in tips.items()
              if tip in ts and (mode, rule) != here]
    also = f" (also for {md_text(', '.join(others))})" if others else ""
    return f"    - Try{also}: {tip}"


def failed_trials(v: RunView, ctx: Ctx, level: int) -> str:
    bad = [t for t in v.trials if t.status != "ok"]
    if not bad:
        return ""
    out = [h(level, "Trials that did not finish")]
    for t in bad:
        path = v.run.trial_path(t.mode, t.seed)
        log = v.run.log_path(t.mode, t.seed)
        links = [md_link("trial file", ctx.rel(path))]
        if log.exists():
            links.append(md_link("log", ctx.rel(log)))
        last = next((s.step for s in reversed(t.steps)), None)
        where = f" after step {last}" if last is not None else " before the first step"
        out.append(f"{md_code(t.key)}: **{md_text(t.status)}**{where} ({', '.join(links)}).")
        tail = fmt.error_tail(t.error)
        out.append(fmt.md_block(tail) if tail else "No error text was recorded.")
        if t.log_tail:
            out.append("Last lines of its log:\n\n" + fmt.md_block(fmt.error_tail(t.log_tail)))
    return "\n\n".join(out)


def rule_advice(v: RunView, r: RuleResult) -> list[str]:
    """advice_for() of one rule that did not pass; none when the suite has no such mode any more, and none
    but the error's (completeness: a log to read) for a mode that errored before any step: nothing of it
    ran, so no speed, memory or precision advice applies (issue 60)."""
    try:
        mode = v.suite.mode(r.mode)
    except (KeyError, ValueError):
        return []
    if v.stepless(r.mode) and registry.result(r.rule).tune != "error":
        return []
    batch = next((m.batch_size for m in v.summary.modes.values() if m.mode == r.mode and m.batch_size), None)
    tips = advice_for(r, mode, v.diagnosis, batch_size=batch)
    here = shlex.quote(str(v.run.path)).replace("`", "")  # the real folder in the commands, not a placeholder
    return [" ".join(t.replace("RUN_DIR", here).split()) for t in tips]  # one line each: a list item cannot break

