"""report.md (and optionally report.html) with PNG plots for one run, several runs, or a trend.

What people read the morning after nightly CI and paste into PRs: the verdict first, then the
numbers, then why something failed (rule, observed value, threshold, the trial file), then the
evidence (plots, op precision coverage, trials).  Everything from trials passes through
`ampbench.report.fmt` escaping; all links are relative, so the folder can be moved or uploaded as is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.judge.history import (
    NOT_CHECKED,
    REFERENCE_MODE,
    ModeSummary,
    RunSummary,
    history_sources,
    load_check_optional,
    load_history,
    summarize_run,
)
from ampbench.judge.verdict import CheckReport
from ampbench.report import fmt
from ampbench.report import plots as P
from ampbench.report.fmt import DASH, md_code, md_link, md_table, md_text
from ampbench.results import ResultsError, RunDir, RunInfo, Trial, atomic_write_text, open_run

INACTIVE_LINE = "AMP inactive on this device: numbers are FP32 vs FP32, parity not judged."
FORMATS = ("md", "html")
MAX_OP_ROWS = 40


@dataclass
class RunView:
    """One loaded run folder and what the report derives from it."""

    run: RunDir
    info: RunInfo
    trials: list[Trial]
    check: CheckReport | None
    summary: RunSummary

    @property
    def fraction(self) -> bool:
        vals = [t.metrics[self.summary.metric] for t in self.trials if self.summary.metric in t.metrics]
        return fmt.is_fraction_metric(vals)


def load_view(path: Path) -> RunView:
    opened = open_run(path)  # refuses trials copied in from another suite or config, as check does
    run, info, trials = opened.dir, opened.info, opened.trials
    check = load_check_optional(run)
    return RunView(run, info, trials, check, summarize_run(run, trials, check))


# ---------------------------------------------------------------- entry point


def write_report(run_dirs: list[Path], output: Path | None = None, history: Path | None = None,
                 fmt: str = "md") -> Path:
    """Write the report; returns its path.  (`fmt` is the format name, as the CLI passes it.)

    One run: RUN/report.md with plots in RUN/plots/.  Several runs or `history`: one report with a
    section per run plus a trend per suite; default file: the last run's folder, comparison.md.
    """
    if fmt not in FORMATS:
        raise ResultsError(f"--format {fmt}: unknown report format; use one of {', '.join(FORMATS)}")
    if not run_dirs:
        raise ResultsError("report: give at least one run folder")
    views = [load_view(Path(p)) for p in run_dirs]
    multi = len(views) > 1
    ext = ".html" if fmt == "html" else ".md"
    if output is None:
        output = views[-1].run.path / (("comparison" if multi else "report") + ext)
    output = Path(output)
    plots_dir = output.parent / "plots" if output.parent.resolve() in {v.run.path.resolve() for v in views} \
        else output.parent / f"{output.stem}-plots"
    ctx = _Ctx(out_dir=output.parent, plots_dir=plots_dir, multi=multi, history=history is not None)
    trend_entries = _trend_entries(views, history)
    md = render(views, ctx, trend_entries)
    if fmt == "html":
        atomic_write_text(output, to_html(md, title=_title(views)))
    else:
        atomic_write_text(output, md)
    return output


@dataclass
class _Ctx:
    out_dir: Path
    plots_dir: Path
    multi: bool
    history: bool = False

    def rel(self, path: Path) -> str:
        return Path(os.path.relpath(Path(path).resolve(), self.out_dir.resolve())).as_posix()

    def plot_path(self, view: RunView, name: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{view.summary.suite}-{view.summary.run_id}")
        prefix = f"{safe}-" if self.multi else ""
        return self.plots_dir / f"{prefix}{name}.png"


def _title(views: list[RunView]) -> str:
    suites = list(dict.fromkeys(v.summary.suite for v in views))
    if len(views) == 1:
        return f"ampbench report: {suites[0]}"
    return f"ampbench report: {len(views)} runs ({', '.join(suites)})"


def render(views: list[RunView], ctx: _Ctx, trend_entries: dict[str, list[dict[str, Any]]]) -> str:
    parts = [f"# {md_text(_title(views))}"]
    if ctx.multi:
        parts.append(_overview(views, ctx))
    for suite, entries in trend_entries.items():
        if len(entries) >= 2:
            parts.append(_trend_section(suite, entries, ctx))
        elif ctx.history:
            parts.append(f"No trend for {md_code(suite)}: the history holds no earlier run of this suite.")
    for v in views:
        parts.append(_run_section(v, ctx, level=3 if ctx.multi else 2))
    parts.append("---\n\nWritten by `ampbench report`. Numbers: median samples/s per measured step "
                 "(warm-up excluded) with a two-stage bootstrap interval (seeds, then steps); memory is the "
                 "allocator's peak; metric mean ± standard deviation over seeds.")
    return "\n\n".join(p.strip("\n") for p in parts if p) + "\n"


# ---------------------------------------------------------------- one run


def _h(level: int, text: str) -> str:
    return "#" * level + " " + text


def _run_section(v: RunView, ctx: _Ctx, level: int) -> str:
    s = v.summary
    out = []
    if ctx.multi:
        out.append(_h(level - 1, f"{md_text(s.suite)}: run {md_code(s.run_id)}"))
    out += [_header(v, ctx), _h(level, "Summary"), _summary_table(v)]
    out += [_verdicts(v, ctx, level)]
    failed = _failed_trials(v, ctx, level)
    if failed:
        out.append(failed)
    out.append(_plots(v, ctx, level))
    out.append(_op_coverage(v, level))
    ttt = _time_to_target(v, level)
    if ttt:
        out.append(ttt)
    claims = _seed_claims(v, level)
    if claims:
        out.append(claims)
    out.append(_trials_table(v, ctx, level))
    return "\n\n".join(x for x in out if x)


def _overall(v: RunView) -> str:
    if v.check is None:
        where = md_text(v.run.path.as_posix())
        return f"**Verdict: {NOT_CHECKED}** (no check.json; run `ampbench check {where}`)"
    counts: dict[str, int] = {}
    for mv in v.check.verdicts:
        counts[mv.verdict] = counts.get(mv.verdict, 0) + 1
    tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    strict = ", strict" if v.check.strict else ""
    return (f"**Verdict: {v.summary.verdict}** (exit code {v.check.exit_code}{strict}; "
            f"{tally or 'no AMP modes judged'})")


def _inactive(v: RunView) -> str:
    amp_modes = [m for m in v.summary.modes.values() if m.amp_requested]
    off = [m for m in amp_modes if not m.amp_active and m.ok]
    if not off:
        return ""
    reasons = sorted({t.amp.inactive_reason for t in v.trials if t.amp.requested and not t.amp.active
                      and t.amp.inactive_reason})
    why = (" Recorded reason: " + md_text("; ".join(reasons), 300)) if reasons else ""
    if len(off) == len(amp_modes):
        return f"> **{INACTIVE_LINE}**{why}"
    names = ", ".join(md_code(m.mode) for m in off)
    return f"> **AMP inactive for {names}**: those modes ran in FP32; their parity is not judged.{why}"


def _header(v: RunView, ctx: _Ctx) -> str:
    s, info = v.summary, v.info
    env = info.env if info.env.paddle or not v.trials else v.trials[0].env
    device = " ".join(x for x in (env.device, f"({env.device_name})" if env.device_name else "") if x)
    when = _when(info)
    better = "higher" if s.metric_goal == "max" else "lower"
    lines = [
        (f"- **Suite:** {md_code(s.suite)} (workload {md_code(s.workload)}, "
         f"file {md_code(info.suite_file)}), profile {md_code(s.profile)}, "
         f"primary metric {md_code(s.metric)} ({better} is better)"),
        f"- **Run:** {md_code(s.run_id)}, {md_text(when)}",
        f"- **Device:** {md_text(device or DASH)}; driver {md_text(env.driver or DASH)}",
        f"- **Software:** Paddle {md_text(env.paddle or DASH)}"
        + (f" (commit {md_code(env.paddle_commit)})" if env.paddle_commit else "")
        + f", CUDA {md_text(env.cuda or DASH)}, cuDNN {md_text(env.cudnn or DASH)}, "
        f"Python {md_text(env.python or DASH)}, numpy {md_text(env.numpy or DASH)}",
        (f"- **ampbench:** git {md_code(fmt.short_sha(env.git_sha)) if env.git_sha else DASH}; "
         f"config hash {md_code(s.config_hash) if s.config_hash else DASH}"),
    ]
    overrides = getattr(info, "overrides", None)
    if overrides:
        lines.append("- **Overrides:** " + ", ".join(md_code(o) for o in overrides))
    out = [_overall(v)]
    inactive = _inactive(v)
    if inactive:
        out.append(inactive)
    out.append("\n".join(lines))
    return "\n\n".join(out)


def _when(info: RunInfo) -> str:
    import datetime as dt

    start = info.started or ""
    text = f"started {start.replace('T', ' ')[:19]}" if start else "start time not recorded"
    if start and info.finished:
        try:
            end = dt.datetime.fromisoformat(info.finished)
            dur = (end - dt.datetime.fromisoformat(start)).total_seconds()
            text += f", took {fmt.seconds(dur)}"
        except ValueError:
            pass
    elif start:
        text += ", not finished"
    return text


def _amp_cell(m: ModeSummary) -> str:
    if not m.amp_requested:
        return "no (reference)" if m.mode == REFERENCE_MODE else "no"
    state = "active" if m.amp_active else "**inactive**"
    return f"{md_text(m.level)} {md_text(m.dtype)}, {state}"


def _summary_table(v: RunView) -> str:
    s = v.summary
    frac = v.fraction
    metric_h = md_text(s.metric or "metric")
    ci = f"[{s.confidence:.0%} CI]"
    header = ["Mode", "AMP", "Batch", f"Samples/s {ci}", f"Speedup {ci}", "Peak memory",
              "Memory vs fp32", f"{metric_h} (mean ± sd)", "Δ vs fp32", "Skipped steps", "Trials ok",
              "Verdict"]
    planned: dict[str, int] = {}
    for p in v.info.plan:
        if isinstance(p, dict) and "mode" in p:
            planned[str(p["mode"])] = planned.get(str(p["mode"]), 0) + 1
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


def _value(x: Any) -> str:
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
        return ", ".join(f"{md_text(k)} {_value(v)}" for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in x) + "]"
    return md_text(x, 200)


def _trial_links(v: RunView, ctx: _Ctx, refs: list[str]) -> str:
    links = []
    for ref in refs:
        p = Path(ref)
        if not p.suffix:
            p = v.run.trials_dir / f"{ref}.json"
        elif not p.is_absolute():
            p = p if p.exists() else v.run.path / p
        links.append(fmt.md_code_link(Path(ref).stem, ctx.rel(p)) if p.exists() else md_code(ref))
    return ", ".join(links)


def _verdicts(v: RunView, ctx: _Ctx, level: int) -> str:
    out = [_h(level, "Verdicts")]
    if v.check is None:
        out.append(f"Not checked: this run folder has no check.json. Run `ampbench check "
                   f"{md_text(v.run.path.as_posix())}` to judge it.")
        return "\n\n".join(out)
    items = []
    for mv in v.check.verdicts:
        reasons = mv.reasons
        if not reasons:
            names = ", ".join(md_text(r.rule) for r in mv.rules)
            n = len(mv.rules)
            items.append(f"- {md_code(mv.mode)}: **{mv.verdict}** (all {n} rules passed: {names})")
            continue
        items.append(f"- {md_code(mv.mode)}: **{mv.verdict}**")
        for r in reasons:
            info = " (informational)" if (r.model_extra or {}).get("informational") else ""
            line = (f"  - **{r.status}**{info} {md_code(r.rule)}: {md_text(r.message, 600)} "
                    f"(observed {_value(r.observed)}; threshold {_value(r.threshold)})")
            if r.trials:
                line += f"; trials: {_trial_links(v, ctx, r.trials)}"
            items.append(line)
        passed = [md_text(r.rule) for r in mv.rules if r.status == "PASS"]
        if passed:
            items.append(f"  - passed: {', '.join(passed)}")
    out.append("\n".join(items) if items else "The checker judged no AMP mode.")
    if v.check.baseline:
        out.append(f"Compared with baseline {md_code(v.check.baseline)}.")
    if v.check.notes:
        out.append("\n".join(f"- Note: {md_text(n, 600)}" for n in v.check.notes))
    return "\n\n".join(out)


def _failed_trials(v: RunView, ctx: _Ctx, level: int) -> str:
    bad = [t for t in v.trials if t.status != "ok"]
    if not bad:
        return ""
    out = [_h(level, "Trials that did not finish")]
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


def _plots(v: RunView, ctx: _Ctx, level: int) -> str:
    s = v.summary
    colors = P.mode_colors(list(s.modes))
    train = (v.info.config.get("train") or {}) if isinstance(v.info.config, dict) else {}
    warmup = int(train.get("warmup_steps", 0))
    loss_alt = "Training loss, mean over seeds with min-max band"
    scale_alt = "Loss scale over steps with skipped steps"
    figs: list[tuple[str, Path | None, str]] = [
        (loss_alt, P.loss_curves(v.trials, ctx.plot_path(v, "loss"), colors, warmup),
         "Training loss per optimizer step; the line is the mean over seeds and the band spans the seeds."),
        (scale_alt, P.loss_scale(v.trials, ctx.plot_path(v, "loss_scale"), colors),
         "Dynamic loss scale per AMP trial; an x marks a step skipped because gradients were not finite."),
        ("Throughput and peak memory per mode",
         P.throughput_memory(s.modes, ctx.plot_path(v, "throughput_memory"), colors, s.confidence),
         (f"Median samples/s per measured step with its {s.confidence:.0%} interval, and peak memory "
         "per mode.")),
        (f"{s.metric} per seed",
         P.metric_per_seed(v.trials, s.metric, ctx.plot_path(v, "metric"), colors, v.fraction),
         f"Final {md_text(s.metric)} of every finished trial (points) and the mean per mode (bar)."),
    ]
    out = [_h(level, "Plots")]
    missing = []
    for alt, path, caption in figs:
        if path is None:
            missing.append(alt)
            continue
        out.append(f"{fmt.md_image(alt, ctx.rel(path))}\n\n{caption}")
    if missing:
        why = {scale_alt: "no trial recorded a loss scale: FP32, bf16, scaler off, or AMP inactive"}
        not_drawn = "; ".join(f"{md_text(m)} ({why.get(m, 'no data')})" for m in missing)
        out.append(f"Not drawn: {not_drawn}.")
    return "\n\n".join(out)


_DTYPES = ("float16", "bfloat16", "float32", "other")


def _op_coverage(v: RunView, level: int) -> str:
    out = [_h(level, "Op precision coverage")]
    modes_cfg = {m.get("name"): m for m in (v.info.config.get("modes") or []) if isinstance(m, dict)} \
        if isinstance(v.info.config, dict) else {}
    amp_modes = [m for m in v.summary.modes.values() if m.amp_requested]
    if not amp_modes:
        out.append("No AMP mode in this run.")
        return "\n\n".join(out)
    out.append("Forward op calls per dtype, counted by Paddle's operator statistics over the first "
               "training steps of one trial per mode. *white* / *black*: the op is on the mode's "
               "custom list.")
    for m in amp_modes:
        ts = [t for t in v.trials if t.mode == m.mode]
        t = next((t for t in ts if t.status == "ok" and t.amp.op_calls), None) or \
            next((t for t in ts if t.amp.op_calls), ts[0] if ts else None)
        out.append(_h(level + 1, f"{md_code(m.mode)} ({md_text(m.level)}, {md_text(m.dtype)})"))
        if t is None:
            continue
        cfg = modes_cfg.get(m.mode, {})
        white = list(dict.fromkeys([*t.amp.white_list, *(cfg.get("custom_white_list") or [])]))
        black = list(dict.fromkeys([*t.amp.black_list, *(cfg.get("custom_black_list") or [])]))
        facts = []
        if white or black:
            facts.append("Custom white list: " + (", ".join(md_code(x) for x in white) or "none")
                         + "; custom black list: " + (", ".join(md_code(x) for x in black) or "none") + ".")
        else:
            facts.append("No custom op lists: Paddle's default lists for this level and dtype.")
        unknown = list(dict.fromkeys(t.amp.unknown_op_names))
        if unknown:
            facts.append("**Unknown op names** (Paddle ignores them silently; use legacy names such as "
                         "`lookup_table_v2`, `matmul_v2`): " + ", ".join(md_code(x) for x in unknown) + ".")
        if not t.amp.op_calls:
            facts.append("No op statistics were recorded for this mode.")
            out.append(" ".join(facts))
            continue
        calls = t.amp.op_calls
        total = {d: sum(c.get(d, 0) for c in calls.values()) for d in _DTYPES}
        n_all = sum(total.values())
        low = total["float16"] + total["bfloat16"]
        share = f"{fmt.pct(low / n_all, signed=False)}" if n_all else DASH
        facts.append(f"{low} of {n_all} op calls ({share}) ran in low precision (trial {md_code(t.key)}"
                     + (f"; {md_text(t.amp.evidence)}" if t.amp.evidence else "") + ").")
        if not t.amp.active:
            facts.append("AMP was **inactive**: every op ran in float32.")
        out.append(" ".join(facts))
        ordered = sorted(calls.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        rows = []
        for op, c in ordered[:MAX_OP_ROWS]:
            n = sum(c.values())
            lp = c.get("float16", 0) + c.get("bfloat16", 0)
            tag = ", ".join(x for x, lst in (("white", white), ("black", black)) if op in lst)
            rows.append([md_code(op), *(str(c.get(d, 0)) for d in _DTYPES),
                         fmt.pct(lp / n, signed=False, decimals=0) if n else DASH, tag or " "])
        moved = [x for x in [*white, *black] if x not in calls and x not in unknown]
        table = md_table(["Op", "fp16", "bf16", "fp32", "other", "low-precision share", "custom list"], rows,
                         ["l", "r", "r", "r", "r", "r", "l"])
        extra = []
        if len(ordered) > MAX_OP_ROWS:
            extra.append(f"{len(ordered) - MAX_OP_ROWS} more ops not shown (see the trial file).")
        if moved:
            names = ", ".join(md_code(x) for x in moved)
            extra.append(f"Listed but not called in the recorded steps: {names}.")
        out.append(table + ("\n\n" + " ".join(extra) if extra else ""))
    return "\n\n".join(out)


def _time_to_target(v: RunView, level: int) -> str:
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
            return fmt.metric(x, frac) if primary and isinstance(x, (int, float)) else _value(x)

        valf, bestf = show(r.get("value")), show(r.get("best"))
        reached = bool(r.get("reached"))
        rows.append([md_code(t.mode), str(t.seed), f"{md_text(metric)} {goal} {valf}",
                     "yes" if reached else "**no**",
                     str(r.get("step")) if reached and r.get("step") is not None else DASH,
                     fmt.seconds(r.get("wall_s")) if reached else DASH, bestf])
    table = md_table(["Mode", "Seed", "Target", "Reached", "Step", "Training time", "Best"], rows,
                     ["l", "r", "l", "l", "r", "r", "r"])
    return _h(level, "Time to target") + "\n\n" + table


def _find_claims(cfg: Any) -> Any:
    if not isinstance(cfg, dict):
        return None
    if cfg.get("seed_claims"):
        return cfg["seed_claims"]
    suite = cfg.get("suite")
    return suite.get("seed_claims") if isinstance(suite, dict) and suite.get("seed_claims") else None


def _seed_claims(v: RunView, level: int) -> str:
    claims = _find_claims(v.info.config) or next((c for t in v.trials if (c := _find_claims(t.config))), None)
    if not claims:
        return ""
    out = [_h(level, "Claims this suite checks"),
           "What the suite's source claims, to compare with the measured numbers above."]
    if isinstance(claims, dict):
        out.append("\n".join(f"- {md_text(k)}: {_value(x)}" for k, x in claims.items()))
    elif isinstance(claims, list) and all(isinstance(c, dict) for c in claims):
        cols = list(dict.fromkeys(k for c in claims for k in c))
        out.append(md_table([md_text(c) for c in cols], [[_value(c.get(k)) for k in cols] for c in claims]))
    else:
        items = claims if isinstance(claims, list) else [claims]
        out.append("\n".join(f"- {_value(c)}" for c in items))
    return "\n\n".join(out)


def _trials_table(v: RunView, ctx: _Ctx, level: int) -> str:
    frac = v.fraction
    metric = v.summary.metric
    rows = []
    for t in v.trials:
        path = v.run.trial_path(t.mode, t.seed)
        link = fmt.md_code_link(t.key, ctx.rel(path)) if path.exists() else md_code(t.key)
        m = t.memory
        mem = fmt.bytes_h(m.peak_allocated_bytes)
        other = "; ".join(x for x in (
            f"reserved {fmt.bytes_h(m.peak_reserved_bytes)}" if m.peak_reserved_bytes else "",
            f"device {fmt.bytes_h(m.device_used_bytes)}" if m.device_used_bytes else "",
            f"RSS {fmt.bytes_h(m.rss_peak_bytes)}" if m.rss_peak_bytes else "") if x)
        final_loss = next((s.loss for s in reversed(t.steps) if s.loss is not None), None)
        step_ms = t.throughput.step_time_median_s * 1000
        status = t.status if t.status == "ok" else f"**{md_text(t.status)}**"
        rows.append([
            link, status, str(t.batch_size or DASH),
            fmt.num(t.throughput.samples_per_s) if t.throughput.samples_per_s else DASH,
            f"{fmt.num(step_ms)} ms" if step_ms else DASH,
            f"{mem} ({md_text(m.source)})" if m.peak_allocated_bytes else DASH, other or DASH,
            fmt.metric(t.metrics.get(metric), frac), str(t.skipped_steps),
            fmt.num(final_loss, 4), fmt.seconds(t.wall_s) if t.wall_s else DASH,
        ])
    header = ["Trial", "Status", "Batch", "Samples/s", "Step (median)", "Peak allocated", "Other memory",
              md_text(metric or "metric"), "Skipped", "Final loss", "Wall time"]
    table = md_table(header, rows, ["l", "l", "r", "r", "r", "r", "l", "r", "r", "r", "r"])
    return _h(level, "Trials") + "\n\n" + table


# ---------------------------------------------------------------- several runs and history


def _overview(views: list[RunView], ctx: _Ctx) -> str:
    rows = []
    for v in views:
        s = v.summary
        link_target = v.run.path / "report.md"
        run = md_link(s.run_id, ctx.rel(link_target)) if link_target.exists() else md_code(s.run_id)
        off = any(m.amp_requested and not m.amp_active and m.ok for m in s.modes.values())
        verdict = s.verdict if s.verdict in ("PASS", NOT_CHECKED) else f"**{s.verdict}**"
        rows.append([md_code(s.suite), run, md_code(s.profile), md_text(s.device or DASH),
                     verdict + (" (AMP inactive)" if off else ""),
                     str(s.exit_code) if s.exit_code is not None else DASH])
    worst = _worst([v.summary.verdict for v in views])
    return (f"**Overall: {worst}** over {len(views)} runs.\n\n"
            + md_table(["Suite", "Run", "Profile", "Device", "Verdict", "Exit code"], rows))


def _worst(verdicts: list[str]) -> str:
    order = {NOT_CHECKED: -1, "PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}
    return max(verdicts, key=lambda x: order.get(x, -1), default=NOT_CHECKED)


def _trend_entries(views: list[RunView], history: Path | None) -> dict[str, list[dict[str, Any]]]:
    """Per suite: history lines plus the given runs (a given run replaces its own history line)."""
    suites = list(dict.fromkeys(v.summary.suite for v in views))
    entries: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in suites}
    if history is not None:
        for path in history_sources(Path(history), suites):
            for e in load_history(path):
                entries.setdefault(e["suite"], {})[e["run_id"]] = e
    for v in views:
        entries[v.summary.suite][v.summary.run_id] = v.summary.model_dump(mode="json", by_alias=True)
    def order(e: dict[str, Any]) -> tuple[str, str]:
        return (e.get("started") or "", e["run_id"])

    return {s: sorted(d.values(), key=order) for s, d in entries.items()}


def _trend_verdict(mode: str, m: dict[str, Any]) -> str:
    verdict = m.get("verdict") or NOT_CHECKED
    flagged = m.get("flagged_rules") or []
    if mode == REFERENCE_MODE and verdict == NOT_CHECKED:
        cell = "reference"
    elif verdict in ("FAIL", "ERROR", "INCONCLUSIVE"):
        cell = f"**{md_text(verdict)}**" + (f" ({', '.join(md_text(r) for r in flagged)})" if flagged else "")
    else:
        cell = md_text(verdict)
    if m.get("amp_requested") and not m.get("amp_active"):
        cell += " (AMP inactive)"
    return cell


def _trend_section(suite: str, entries: list[dict[str, Any]], ctx: _Ctx) -> str:
    modes = list(dict.fromkeys(m for e in entries for m in e.get("modes", {})))
    metric = next((e.get("metric") for e in reversed(entries) if e.get("metric")), "") or "metric"
    vals = [m.get("metric_mean") for e in entries for m in e.get("modes", {}).values()]
    frac = fmt.is_fraction_metric([x for x in vals if x is not None])
    out = [f"## Trend: {md_code(suite)} over {len(entries)} runs"]
    latest = entries[-1]
    keys = ("config_hash", "device_name", "paddle")
    changed = [e for e in entries if any(e.get(k) != latest.get(k) for k in keys)]
    if changed:
        out.append(f"{len(changed)} earlier run(s) differ from the latest in config hash, device or Paddle "
                   "version (marked *changed*): a step in the trend there may come from that change, "
                   "not from a regression.")
    for mode in modes:
        rows = []
        prev = None
        for e in entries:
            m = e.get("modes", {}).get(mode)
            if not m:
                continue
            tput = m.get("samples_per_s")
            change = fmt.pct(tput / prev - 1) if tput and prev else DASH
            prev = tput or prev
            note = "changed" if e in changed else ""
            rows.append([
                md_text(P.run_label(e)), md_code(e.get("run_id", "")),
                md_code(fmt.short_sha(e.get("git_sha"))) if e.get("git_sha") else DASH,
                fmt.num(tput) if tput else DASH, change,
                fmt.ratio(m.get("speedup")) if m.get("speedup") is not None else DASH,
                fmt.bytes_h(m.get("peak_bytes")),
                fmt.metric_pm(m.get("metric_mean"), m.get("metric_std"), frac),
                _trend_verdict(mode, m), note or " ",
            ])
        out.append(f"**{md_code(mode)}**")
        out.append(md_table(["Run", "Run id", "git", "Samples/s", "vs previous", "Speedup", "Peak memory",
                             md_text(metric), "Verdict", "Note"], rows,
                            ["l", "l", "l", "r", "r", "r", "r", "r", "l", "l"]))
    colors = P.mode_colors(modes)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", suite)
    path = P.trend(entries, ctx.plots_dir / f"trend-{name}.png", colors, metric, frac)
    if path is not None:
        out.append(fmt.md_image(f"Trend of throughput, memory and {metric} for {suite}", ctx.rel(path)))
        out.append("Red circles: runs in which the checker flagged that mode (FAIL or ERROR).")
    return "\n\n".join(out)


# ---------------------------------------------------------------- html


_CSS = """body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:980px;margin:2em auto;
padding:0 1em;line-height:1.45;color:#1f2328}table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #d0d7de;padding:4px 8px}th{background:#f6f8fa}img{max-width:100%}
code{background:#f6f8fa;padding:1px 4px;border-radius:4px}pre{background:#f6f8fa;padding:10px;overflow:auto}
blockquote{border-left:4px solid #d0d7de;margin:0;padding:0 1em;color:#59636e}"""


def to_html(md: str, title: str) -> str:
    """Markdown -> a standalone HTML page; raw HTML in the markdown is escaped, not passed through."""
    from html import escape

    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head>\n<body>\n{body}</body></html>\n")


__all__ = ["INACTIVE_LINE", "render", "to_html", "write_report"]
