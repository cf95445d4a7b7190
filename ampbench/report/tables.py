"""The run's tables: per-mode summary, per-trial results, time to target.

Numbers pass through `ampbench.report.fmt` (one precision everywhere) and text through its escaping.
"""

from __future__ import annotations

from typing import Any

from ampbench.config import REFERENCE_MODE
from ampbench.core.columns import Col
from ampbench.record import fields
from ampbench.record.models import Trial
from ampbench.report import fmt
from ampbench.report.fmt import DASH, EMULATED_MARK, md_code, md_table, md_text
from ampbench.report.view import Ctx, RunView, h
from ampbench.results.history import MODE_COMPUTED, NOT_CHECKED, ModeSummary


def _amp_cell(m: ModeSummary) -> str:
    if not m.amp_requested:
        return "no (reference)" if m.mode == REFERENCE_MODE else "no"
    state = "**emulated**" if m.amp_emulated else "active" if m.amp_active else "**inactive**"
    return f"{md_text(m.level)} {md_text(m.dtype)}, {state}"


def _own_columns(planned: dict[str, int]) -> tuple[fields.Column, ...]:
    """The summary table's columns that are no figure of the mode (its AMP setting, its trials against the
    plan, its verdict): already markdown; a planned mode without any trial file (`trials` 0) says so."""
    def amp(m: ModeSummary, view: fields.View) -> str:
        return DASH if not m.trials else _amp_cell(m)

    def ok(m: ModeSummary, view: fields.View) -> str:
        return f"{m.ok}/{max(m.trials, planned.get(m.mode, 0))}"

    def verdict(m: ModeSummary, view: fields.View) -> str:
        if not m.trials:
            return "no trials"
        cell = _verdict_cell(m)
        return ("reference" + ("" if m.verdict == NOT_CHECKED else f", {cell}")) if m.mode == REFERENCE_MODE else cell

    return (fields.Column("amp", Col("AMP", "markdown", rank=15, shows=("modes",)), amp),
            fields.Column("trials_ok", Col("Trials ok", "markdown", rank=80, shows=("modes",), align="r"), ok),
            fields.Column("verdict", Col("Verdict", "markdown", rank=90, shows=("modes",)), verdict))


EMULATED_NOTE = (f"{EMULATED_MARK} emulated AMP: the emulation's own time and memory (float32 kernels plus "
                 "rounding), not a measurement of AMP.")


def _mode_cell(c: fields.Column, m: ModeSummary, view: fields.View) -> str:
    return md_code(m.mode) if c.col.kind == "code" else fmt.mark_emulated(c.text(m, view, md_text), c.col.kind, m.amp_emulated)


def summary_table(v: RunView) -> str:
    """One row per mode: the catalog's per-mode columns (record/fields.py; ModeSummary's, results/history.py)
    with this table's own (AMP, trials ok, verdict)."""
    s = v.summary
    frac = v.fraction
    view = fields.View(s.metric, frac, s.confidence)
    planned: dict[str, int] = {}
    for p in v.info.plan:
        planned[p.mode] = planned.get(p.mode, 0) + 1
    if not v.trials:
        return f"No trial results in {md_code('trials/')} yet ({len(v.info.plan)} planned)."
    cols = fields.columns("modes", ModeSummary, (*MODE_COMPUTED, *_own_columns(planned)))
    modes = [s.modes.get(name) or ModeSummary(mode=name) for name in [*s.modes, *(m for m in planned if m not in s.modes)]]
    rows = [[_mode_cell(c, m, view) for c in cols] for m in modes]
    note = [EMULATED_NOTE] if any(m.amp_emulated for m in s.modes.values()) else []
    if any(m.metric_n == 1 for m in s.modes.values()):
        note.append("One seed: no spread is shown, and parity uses the absolute tolerance alone.")
    if frac:
        note.append(f"{md_text(s.metric or 'metric')} is shown in percent; its Δ in percentage points (pt).")
    table = md_table([c.header(view, md_text) for c in cols], rows, [c.align for c in cols])
    return table + ("\n\n" + " ".join(note) if note else "")


def _verdict_cell(m: ModeSummary) -> str:
    if m.verdict == NOT_CHECKED:
        return "not checked"
    mark = " (emulated)" if m.amp_emulated else ""
    if m.flagged_rules:
        return f"**{m.verdict}**{mark} ({', '.join(md_text(r) for r in m.flagged_rules)})"
    return m.verdict + mark


def value(x: Any) -> str:
    """An observed/threshold value from check.json, whatever its JSON type, as escaped text."""
    if x is None:
        return DASH
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return fmt.num_g(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, dict):
        return ", ".join(f"{md_text(k)} {value(v)}" for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(value(v) for v in x) + "]"
    return md_text(x, 200)


def time_to_target(v: RunView, level: int) -> str:
    recs = [(t, t.time_to_target) for t in v.trials if t.time_to_target]
    if not recs:
        return ""
    frac = v.fraction
    rows = []
    for t, r in recs:
        metric = str(r.get("metric", ""))
        goal = "≤" if r.get("goal") == "min" else "≥"
        primary = metric == v.summary.metric

        def show(x: Any, primary: bool = primary) -> str:
            return fmt.metric(x, frac) if primary and isinstance(x, (int, float)) else value(x)

        valf, bestf = show(r.get("value")), show(r.get("best"))
        reached = bool(r.get("reached"))
        rows.append([md_code(t.mode), str(t.seed), f"{md_text(metric)} {goal} {valf}",
                     "yes" if reached else "**no**",
                     str(r.get("step")) if reached and r.get("step") is not None else DASH,
                     fmt.seconds(r.get("wall_s")) if reached else DASH, bestf])
    table = md_table(["Mode", "Seed", "Target", "Reached", "Step", "Training time", "Best"], rows,
                     ["l", "r", "l", "l", "r", "r", "r"])
    return h(level, "Time to target") + "\n\n" + table


def _trial_cell(c: fields.Column, t: Trial, v: RunView, ctx: Ctx, view: fields.View) -> str:
    """One report.md cell: the catalog's text, escaped for markdown; the trial key links its file and a
    status other than ok is bold."""
    if c.col.kind == "trial":
        path = v.run.trial_path(t.mode, t.seed)
        return fmt.md_code_link(t.key, ctx.rel(path)) if path.exists() else md_code(t.key)
    if c.col.kind == "code":
        return md_code(c.value(t, view))
    cell = fmt.mark_emulated(c.text(t, view, md_text), c.col.kind, t.amp.emulated)
    return f"**{cell}**" if c.col.kind == "status" and t.status != "ok" else cell


def trials_table(v: RunView, ctx: Ctx, level: int) -> str:
    """Each trial's own figures: the catalog's report.md columns (record/fields.py)."""
    view = fields.View(v.summary.metric, v.fraction)
    cols = fields.columns("md")
    rows = [[_trial_cell(c, t, v, ctx, view) for c in cols] for t in v.trials]
    table = md_table([c.header(view, md_text) for c in cols], rows, [c.align for c in cols])
    note = "\n\n" + EMULATED_NOTE if any(t.amp.emulated for t in v.trials) else ""
    return h(level, "Trials") + "\n\n" + table + note
