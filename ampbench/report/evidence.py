"""The evidence under the verdicts: the plots, the batch-size probe and the op-level diagnosis.

probe.json and diagnosis.json are read through their own loaders (launch.probe.load_probe,
diagnose.models.load_diagnosis); a run without them gets no section, and the text says how to make one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampbench.config import REFERENCE_MODE
from ampbench.judge.stats import parity_margin
from ampbench.report import fmt
from ampbench.report import plots as P
from ampbench.report.fmt import DASH, md_code, md_link, md_prose, md_table, md_text
from ampbench.report.view import Ctx, RunView, h

MAX_FINDINGS = 5


def _margin(v: RunView) -> Any:
    ref = [t.metrics[v.summary.metric] for t in v.trials
           if t.mode == REFERENCE_MODE and t.status == "ok" and v.summary.metric in t.metrics]
    if not ref:
        return None
    th = v.suite.thresholds
    return parity_margin(ref, th.metric_abs_tol, th.metric_sigma_k)


def plots_section(v: RunView, ctx: Ctx, level: int) -> str:
    s = v.summary
    colors = P.mode_colors(list(s.modes))
    off = v.plot_stamp(P.INACTIVE_NOTE)
    loss_alt = "Training loss, mean over seeds with min-max band"
    scale_alt = "Loss scale over steps with skipped steps"
    figs: list[tuple[str, Path | None, str]] = [
        (loss_alt, P.loss_curves(v.trials, ctx.plot_path(v, "loss"), colors, v.suite.train.warmup_steps, off),
         "Training loss per optimizer step; the line is the mean over seeds and the band spans the seeds."),
        (scale_alt, P.loss_scale(v.trials, ctx.plot_path(v, "loss_scale"), colors, off),
         "Dynamic loss scale per AMP trial; an x marks a step skipped because gradients were not finite."),
        ("Throughput and peak memory per mode",
         P.throughput_memory(s.modes, ctx.plot_path(v, "throughput_memory"), colors, s.confidence, off),
         (f"Median samples/s per measured step with its {s.confidence:.0%} interval, and peak memory "
          "per mode.")),
        (f"{s.metric} per seed",
         P.metric_per_seed(v.trials, s.metric, ctx.plot_path(v, "metric"), colors, v.fraction, _margin(v),
                           s.metric_goal, off),
         (f"Final {md_text(s.metric)} of every finished trial (points) and the mean per mode (bar); the "
          "shaded band ends at the parity limit: an AMP mean beyond the dashed line fails accuracy-parity.")),
    ]
    out = [h(level, "Plots")]
    if off:
        out.append(f"Every plot is stamped *{md_text(off)}*.")
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


def as_dict(doc: Any) -> dict[str, Any]:
    """A loaded side file as plain data, whether its loader returns a model or a dict."""
    if hasattr(doc, "model_dump"):
        return doc.model_dump(mode="json", by_alias=True)
    return dict(doc)


def probe_section(v: RunView, ctx: Ctx, level: int) -> str:
    """Which batch fits per mode (ampbench probe): the memory AMP saves, as batch size."""
    if v.probe is None:
        return ""
    doc, where = v.probe
    d = as_dict(doc)
    rows = [_probe_row(name, e) for name, e in (d.get("modes") or {}).items()]
    table = md_table(["Mode", "Configured batch", "Largest batch that fits", "Peak at that batch", "Attempts",
                      "AMP", "Error"], rows, ["l", "r", "r", "r", "l", "l", "l"])
    ceiling = (f"ceiling {fmt.bytes_h(d.get('memory_limit_bytes'))} per attempt"
               if d.get("memory_limit_bytes") else "device memory")
    head = (f"From {md_link('probe.json', ctx.rel(where))} ({md_text(d.get('device') or DASH)}, {ceiling}, "
            f"{d.get('steps', DASH)} step(s) per attempt). + = fitted up to the search limit.")
    notes = []
    if any(e.get("amp_requested") and not e.get("amp_active") for e in (d.get("modes") or {}).values()):
        notes.append("AMP was inactive while probing: the AMP rows show float32 limits, not what AMP saves.")
    return "\n\n".join([h(level, "Batch-size probe"), head, table, *notes])


def _probe_row(name: str, e: dict[str, Any]) -> list[str]:
    """One mode's row of the probe table: its largest fitting batch, the attempts as `8✓ 16✗`, whether AMP
    ran, and the error (cut short) of a probe that failed."""
    tries = " ".join(f"{a.get('batch_size')}{'✓' if a.get('fits') else '✗'}" for a in e.get("attempts") or [])
    amp = DASH if not e.get("amp_requested") else ("active" if e.get("amp_active") else "**inactive**")
    return [md_code(name), str(e.get("configured_batch") or DASH), md_text(_largest_batch(e)),
            fmt.bytes_h(e.get("peak_bytes_at_max")), md_text(tries or DASH), amp,
            md_text(e.get("error") or "", 200) or " "]


def _largest_batch(e: dict[str, Any]) -> str:
    """The largest batch that fitted, `+` when the search stopped at its limit still fitting (the true
    largest may be more); "error" for a failed probe, "none (OOM at 1)" when not even batch 1 fitted."""
    if e.get("status") != "ok":
        return "error"
    if not e.get("max_batch"):
        return "none (OOM at 1)"
    return f"{e.get('max_batch')}{'+' if e.get('capped') else ''}"


def diagnosis_section(v: RunView, ctx: Ctx, level: int) -> str:
    """The first ops that went wrong per diagnosed mode (ampbench diagnose), linked to diagnosis.md."""
    if v.diagnosis is None:
        return ""
    d = as_dict(v.diagnosis)
    md_path = v.run.diagnosis_md
    link = md_link(md_path.name, ctx.rel(md_path)) if md_path.exists() else md_code(v.run.diagnosis_json.name)
    out = [h(level, "Op-level diagnosis"), f"From `ampbench diagnose` ({link})."]
    for name, m in (d.get("modes") or {}).items():
        out.append(h(level + 1, md_code(name)))
        facts = [md_prose(m.get("summary") or "", 800)]
        if m.get("inactive_note"):
            facts.append(md_text(m["inactive_note"], 400))
        cands = m.get("black_list_candidates") or []
        if cands:
            facts.append("Black-list candidates: " + ", ".join(md_code(c) for c in cands) + ".")
        out.append(" ".join(x for x in facts if x))
        rows = [[str(f.get("index")), str(f.get("step")), md_code(f.get("op")), md_text(f.get("kind")),
                 md_text(f.get("amp_dtype") or DASH), fmt.num_g(_float(f.get("rel_diff"))), str(f.get("count", 1))]
                for f in (m.get("findings") or [])[:MAX_FINDINGS]]
        if rows:
            out.append(md_table(["#", "Step", "Op", "Finding", "AMP dtype", "Relative difference", "Outputs"], rows,
                                ["r", "r", "l", "l", "l", "r", "r"]))
    return "\n\n".join(out)


def _float(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None
