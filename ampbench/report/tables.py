"""The run's tables: per-mode summary, per-trial results, time to target.

Numbers pass through `ampbench.report.fmt` (one precision everywhere) and text through its escaping.
"""

from __future__ import annotations

from typing import Any

from ampbench.config import REFERENCE_MODE
from ampbench.core.records import Trial
from ampbench.record import fields
from ampbench.report import fmt
from ampbench.report.fmt import DASH, md_code, md_table, md_text
from ampbench.report.view import Ctx, RunView, h
from ampbench.results.history import NOT_CHECKED, ModeSummary


def _amp_cell(m: ModeSummary) -> str:
    if not m.amp_requested:
        return "no (reference)" if m.mode == REFERENCE_MODE else "no"
    state = "active" if m.amp_active else "**inactive**"
    return f"{md_text(m.level)} {md_text(m.dtype)}, {state}"


def summary_table(v: RunView) -> str:
    s = v.summary
    frac = v.fraction
    metric_h = md_text(s.metric or "metric")
    ci = f"[{s.confidence:.0%} CI]"
    header = ["Mode", "AMP", "Batch", f"Samples/s {ci}", f"Speedup {ci}", "Peak memory",
              "Memory vs fp32", f"{metric_h} (mean ± sd)", "Δ vs fp32", "Skipped steps", "Trials ok",
              "Verdict"]
    planned: dict[str, int] = {}
    for p in v.info.plan:
        planned[p.mode] = planned.get(p.mode, 0) + 1
    if not v.trials:
        return f"No trial results in {md_code('trials/')} yet ({len(v.info.plan)} planned)."
    rows = []
    for name in [*s.modes, *(m for m in planned if m not in s.modes)]:
        m = s.modes.get(name)
        if m is None:  # planned, but no trial file at all
            rows.append([md_code(name), DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH,
                         f"0/{planned[name]}", "no trials"])
            continue
        tput = DASH
        if m.samples_per_s:
            tput = fmt.num(m.samples_per_s)
            if m.samples_per_s_ci:
                tput += f" [{fmt.num(m.samples_per_s_ci[0])}, {fmt.num(m.samples_per_s_ci[1])}]"
        speed = DASH if m.speedup is None else fmt.ratio(m.speedup) + (
            f" {fmt.ratio_ci(*m.speedup_ci)}" if m.speedup_ci else "")
        mem = fmt.bytes_h(m.peak_bytes) + (f" ({md_text(m.memory_source)})" if m.peak_bytes else "")
        red = DASH if m.memory_reduction is None else fmt.pct(-m.memory_reduction)
        met = fmt.metric_pm(m.metric_mean, m.metric_std, frac)
        if m.metric_n:
            met += f" (n={m.metric_n})"
        skipped = f"{m.skipped_steps} / {m.total_steps}" if m.total_steps else DASH
        verdict = _verdict_cell(m)
        if m.mode == REFERENCE_MODE:
            verdict = "reference" + ("" if m.verdict == NOT_CHECKED else f", {verdict}")
        rows.append([md_code(m.mode), _amp_cell(m), str(m.batch_size or DASH), tput, speed, mem, red, met,
                     fmt.metric_delta(m.metric_delta, frac) if m.mode != REFERENCE_MODE else DASH,
                     skipped, f"{m.ok}/{max(m.trials, planned.get(m.mode, 0))}", verdict])
    note = []
    if any(m.metric_n == 1 for m in s.modes.values()):
        note.append("One seed: no spread is shown, and parity uses the absolute tolerance alone.")
    if frac:
        note.append(f"{metric_h} is shown in percent; its Δ in percentage points (pt).")
    table = md_table(header, rows, ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l"])
    return table + ("\n\n" + " ".join(note) if note else "")


def _verdict_cell(m: ModeSummary) -> str:
    if m.verdict == NOT_CHECKED:
        return "not checked"
    if m.flagged_rules:
        return f"**{m.verdict}** ({', '.join(md_text(r) for r in m.flagged_rules)})"
    return m.verdict


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
    cell = c.text(t, view, md_text)
    return f"**{cell}**" if c.col.kind == "status" and t.status != "ok" else cell


def trials_table(v: RunView, ctx: Ctx, level: int) -> str:
    """Each trial's own figures: the catalog's report.md columns (record/fields.py)."""
    view = fields.View(v.summary.metric, v.fraction)
    cols = fields.columns("md")
    rows = [[_trial_cell(c, t, v, ctx, view) for c in cols] for t in v.trials]
    table = md_table([md_text(c.header(view)) for c in cols], rows, [c.align for c in cols])
    return h(level, "Trials") + "\n\n" + table
