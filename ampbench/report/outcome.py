"""A run's outcome at a glance: one row per mode and one next step per cause that did not pass.

One model, two renderings, so the console and report.md say the same thing: `ampbench run` and
`ampbench check` end with this table (report/console.py), report.md opens with it (report/markdown.py).
A person reads it in ten seconds: the verdict, the three figures a decision rests on (speedup with
its interval, memory change, metric delta, each against fp32), what decided the verdict, and for each
rule that did not pass the single most useful thing to try (the first of its advice).  The full rule
text stays behind `ampbench run -v` / `ampbench check --explain` and in report.md's Verdicts section.

A rule computed only for information (AMP inactive: the numbers describe FP32 on both sides) is not a
cause of its own: its next step is that of the result its rule object declares the outcome's "cause"
(amp-active, judge/rules/traits.py), so it joins that line rather than repeating it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ampbench.config import REFERENCE_MODE
from ampbench.core.columns import Col
from ampbench.judge.planner import plan_for
from ampbench.judge.rules import registry
from ampbench.judge.until import SeedAdvice, recommend
from ampbench.record import fields
from ampbench.report.fmt import DASH, EMULATED_LEGEND, EMULATED_MARK, md_code, md_prose, md_table, md_text
from ampbench.report.verdicts import rule_advice
from ampbench.report.view import RunView, h
from ampbench.results.history import MODE_COMPUTED, NOT_CHECKED, ModeSummary
from ampbench.results.verdicts import ModeVerdict, RuleResult


@dataclass(frozen=True)
class ModeRow:
    """One mode's line of the outcome table: the mode's figures (its summary, shown through the catalog's
    columns) and its verdict with what decided it, raw (each rendering escapes them its own way)."""

    figures: ModeSummary  # a planned mode without a trial file: `ModeSummary(mode=name)`, every figure missing
    verdict: str
    decided: str
    informational: bool  # AMP inactive in this mode: its figures compare FP32 with FP32, not judged
    emulated: bool = False   # AMP emulated in this mode: its verdict and figures are marked (EMULATED_MARK)

    @property
    def mode(self) -> str:
        return self.figures.mode


@dataclass(frozen=True)
class NextStep:
    """One piece of advice and every rule result it answers (across modes: it is said once)."""

    step: str                                # markdown-ish: `code` spans quote TOML lines and commands
    causes: tuple[tuple[str, str, str], ...]  # (mode, rule, status) of each result that did not pass
    covered: tuple[str, ...] = ()            # informational rules (AMP inactive) this step answers too
    unjudged: tuple[str, ...] = ()           # rules of a mode that errored before any step: nothing to judge

    def cause_text(self) -> str:
        """`amp-active INCONCLUSIVE (amp-o1-fp16, amp-o2-bf16); speedup, memory informational`."""
        by: dict[tuple[str, str], list[str]] = {}
        for mode, rule, status in self.causes:
            by.setdefault((rule, status), []).append(mode)
        text = "; ".join(f"{rule} {status} ({', '.join(modes)})" for (rule, status), modes in by.items())
        text += f"; so {', '.join(self.covered)} only informational" if self.covered else ""
        return text + (f"; so {', '.join(self.unjudged)} not judged (no step recorded)" if self.unjudged else "")


def mode_rows(v: RunView) -> list[ModeRow]:
    """One row per mode in the plan's order (modes without a trial file included)."""
    verdicts = {mv.mode: mv for mv in (v.check.verdicts if v.check else [])}
    planned = list(dict.fromkeys([*v.summary.modes, *(p.mode for p in v.info.plan)]))
    return [_row(name, v.summary.modes.get(name), verdicts.get(name)) for name in planned]


def _row(name: str, m: ModeSummary | None, mv: ModeVerdict | None) -> ModeRow:
    verdict = mv.verdict if mv is not None else NOT_CHECKED
    emulated = bool(mv is not None and mv.emulated) or bool(m is not None and m.amp_emulated)
    if m is None:
        return ModeRow(ModeSummary(mode=name), verdict, "no trial finished", False, emulated)
    return ModeRow(m, verdict, decided_by(mv), m.amp_requested and not m.amp_active and not emulated and m.ok > 0,
                   emulated)


# The outcome's columns that are no figure of the mode (its verdict, what decided it); the figures are the
# catalog's (record/fields.py: ModeSummary's `Col` markers that show in "outcome", fp32's own figures
# against itself missing there), so they read as report.md's summary table shows them.
NOT_MEASURED_STEP = ("not measured under emulation: to measure speed, memory and energy, run the mode without "
                     "`emulate = true` on a GPU")


def _verdict(r: ModeRow, v: fields.View) -> str:
    return f"{r.verdict} (emulated)" if r.emulated and r.verdict != NOT_CHECKED else r.verdict


_OWN = (
    fields.Column("verdict", Col("Verdict", "status", rank=20, shows=("outcome",)), _verdict),
    fields.Column("decided_by", Col("Decided by", "text", rank=90, shows=("outcome",)), lambda r, v: r.decided),
)


def outcome_columns() -> list[fields.Column]:
    """The outcome table's columns, in order: the catalog's and its own."""
    return fields.columns("outcome", ModeSummary, (*MODE_COMPUTED, *_OWN))


def outcome_view(v: RunView) -> fields.View:
    return fields.View(v.summary.metric, v.fraction, v.summary.confidence)


def cell(c: fields.Column, row: ModeRow, view: fields.View, esc: Callable[[str], str] = str, star: str = "*") -> str:
    """One cell's text (`esc` escapes its user text): the verdict columns read the row, the catalog's read the
    mode's figures; a figure of an informational row is marked with `star`."""
    if c in _OWN:
        return c.text(row, view, esc)
    text = c.text(row.figures, view, esc)
    if c.col.kind == "code" or text == DASH:
        return text
    return text + star if row.informational else text + EMULATED_MARK if row.emulated else text


def decided_by(mv: ModeVerdict | None) -> str:
    """The rules that set the verdict (the worst status among the judged ones), or that all passed."""
    if mv is None:
        return "not checked"
    if mv.verdict == "PASS":
        counted = [r for r in mv.rules if r.counted]
        return f"all {len(counted)} rules passed" + (" (numerics)" if len(counted) < len(mv.rules) else "")
    judged = [r.rule for r in mv.rules if r.status == mv.verdict and not r.informational and r.counted]
    if judged:
        return ", ".join(judged)
    return ", ".join(r.rule for r in mv.rules if r.status == mv.verdict) + " (AMP inactive)"


def next_steps(v: RunView) -> list[NextStep]:
    """One line per piece of advice, in the order first needed: results (of any mode) whose first advice is
    the same share it; an informational result shares its mode's cause line (amp-active) when that did not pass;
    in a mode that errored before any step only the error is a cause (its other results join its line)."""
    if v.check is None:
        return []
    causes: dict[str, list[tuple[str, str, str]]] = {}
    covered: dict[str, list[str]] = {}
    unjudged: dict[str, list[str]] = {}
    for mv in v.check.verdicts:
        active = next((r for r in mv.reasons if registry.result(r.rule).outcome == "cause" and not r.informational),
                      None)
        error = next((r for r in mv.reasons if registry.result(r.rule).tune == "error"), None)
        for r in mv.reasons:
            if error is not None and r is not error and v.stepless(mv.mode):
                unjudged.setdefault(_first_step(v, error), []).append(r.rule)
                continue
            if r.informational and active is not None:
                covered.setdefault(_first_step(v, active), []).append(r.rule)
                continue
            causes.setdefault(_first_step(v, r), []).append((mv.mode, r.rule, r.status))
    return [NextStep(step, tuple(c), tuple(dict.fromkeys(covered.get(step, []))),
                     tuple(dict.fromkeys(unjudged.get(step, [])))) for step, c in causes.items()]


FEW_SEEDS = 3  # at most this many trials per mode: the interval note is shown


def seed_advice(v: RunView) -> SeedAdvice | None:
    """The run's one seed recommendation (judge.until.recommend: the planner's seeds for the undecided rule that
    needs most), the same figure `check --explain` ends with and `ampbench plan` prints."""
    if v.check is None:
        return None
    return recommend(v.check.verdicts, plan_for(v.suite, v.trials), v.suite.thresholds)


def interval_note(v: RunView) -> str | None:
    """The one line about seeds: beside speedup intervals from 2-3 seeds why they are so wide (a reader takes
    `[0.36, 1.69]` for a bug), and wherever a rule is undecided the one recommendation that decides them all.
    None when neither applies."""
    ref = v.summary.modes.get(REFERENCE_MODE)
    few = [m.ok for name, m in v.summary.modes.items()
           if name != REFERENCE_MODE and m.speedup_ci and m.speedup and 0 < min(m.ok, ref.ok if ref else m.ok) <= FEW_SEEDS]
    advice = seed_advice(v)
    if not few:
        return None if advice is None else f"seeds: {advice.text()}"
    tail = advice.text() if advice is not None else "more seeds narrow them"
    return f"{min(few)} seeds per mode: wide intervals are expected; {tail}"


def outcome_md(v: RunView, level: int) -> str:
    """The outcome table and the next steps as report.md opens with them (same rows as the console)."""
    cols, view = outcome_columns(), outcome_view(v)
    rows = [[_md_cell(c, r, view) for c in cols] for r in mode_rows(v)]
    out = [h(level, "Outcome"), md_table([c.header(view, md_text) for c in cols], rows, [c.align for c in cols])]
    if any(r.informational for r in mode_rows(v)):
        out.append("\\* AMP inactive: FP32 against FP32, computed and shown, not judged.")
    if any(r.emulated for r in mode_rows(v)):
        out.append(f"{EMULATED_MARK} {md_text(EMULATED_LEGEND)}.")
    if (note := interval_note(v)) is not None:
        out.append(f"Note: {md_text(note)}")
    steps = [f"- {md_text(s.cause_text())}: {md_prose(s.step)}" for s in next_steps(v)]
    if steps:
        out.append("Next steps (each said once; the rules' full text is under Verdicts):\n\n" + "\n".join(steps))
    return "\n\n".join(out)


def _md_cell(c: fields.Column, r: ModeRow, view: fields.View) -> str:
    if c.col.kind == "code":
        return md_code(c.value(r.figures, view))
    text = cell(c, r, view, md_text, "\\*")
    return f"**{text}**" if c.col.kind == "status" and r.verdict not in ("PASS", NOT_CHECKED) else text


def _first_step(v: RunView, r: RuleResult) -> str:
    """The rule's first advice; a rule without advice says what it found (its message's first sentence); a
    device result of an emulated mode, one shared line."""
    if r.emulated and registry.result(r.rule).device:
        return NOT_MEASURED_STEP
    tips = rule_advice(v, r)
    return tips[0] if tips else first_sentence(r.message)


_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "etc.", "cf.", "approx.", "no.")


def first_sentence(text: str) -> str:
    """The first sentence, whitespace collapsed, never cut inside it: it ends at the first '. ' outside
    parentheses, brackets and `code` spans and not after an abbreviation (e.g., i.e., vs.), else the whole text (issue 60: "(e.g." was shown as a next step)."""
    s = " ".join(str(text).split())
    depth, code = 0, False
    for i, ch in enumerate(s):
        if ch == "`":
            code = not code
        elif code:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and s[i + 1:i + 2] == " " and not _abbreviation(s, i):
            return s[:i + 1]
    return s if s.endswith(".") else s + "."


def _abbreviation(s: str, dot: int) -> bool:
    """The '.' at `dot` ends an abbreviation (e.g., vs.), not a sentence."""
    word = s[:dot + 1].rsplit(" ", 1)[-1].lstrip("([{\"'").lower()
    return word in _ABBREVIATIONS


__all__ = ["ModeRow", "NextStep", "cell", "decided_by", "interval_note", "mode_rows", "next_steps", "outcome_columns",
           "outcome_md", "outcome_view"]
