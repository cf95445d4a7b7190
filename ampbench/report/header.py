"""The top of a run's section: the verdict, the AMP-inactive warning, and where the numbers come from.

The environment lines name what a reader needs to reproduce or distrust a number: the processor model
on CPU or the GPU name (Env.device_name), library versions, the Paddle flags the trials set (TF32
switches and others change speed and numerics), and the hash of Paddle's default AMP op lists.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ampbench.record.models import Env, RunInfo
from ampbench.report import fmt
from ampbench.report.crosscheck import throughput_disagreements
from ampbench.report.fmt import DASH, md_code, md_text
from ampbench.report.view import RunView
from ampbench.results.history import NOT_CHECKED

INACTIVE_LINE = "AMP inactive on this device: numbers are FP32 vs FP32, parity not judged."
MAX_FLAGS = 30


def overall(v: RunView) -> str:
    if v.check is None:
        where = md_text(v.run.path.as_posix())
        return f"**Verdict: {NOT_CHECKED}** (no check.json; run `ampbench check {where}`)"
    counts: dict[str, int] = {}
    for mv in v.check.verdicts:
        counts[mv.verdict_text] = counts.get(mv.verdict_text, 0) + 1
    tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    strict = ", strict" if v.check.strict else ""
    return (f"**Verdict: {v.summary.verdict}** (exit code {v.check.exit_code}{strict}; "
            f"{tally or 'no AMP modes judged'})")


def inactive(v: RunView) -> str:
    amp_modes = [m for m in v.summary.modes.values() if m.amp_requested]
    off = [m for m in amp_modes if not m.amp_active and not m.amp_emulated and m.ok]
    if not off:
        return ""
    why = recorded_reasons(v)
    if len(off) == len(amp_modes):
        return f"> **{INACTIVE_LINE}**{why}"
    names = ", ".join(md_code(m.mode) for m in off)
    return f"> **AMP inactive for {names}**: those modes ran in FP32; their parity is not judged.{why}"


def recorded_reasons(v: RunView) -> str:
    """Why AMP read inactive, said once per cause (the trials' inactive code), not once per mode: every mode on a
    CPU records the same cause in words that differ only by its dtype, level or how AMP was applied (issue 60).
    One cause: its first recorded sentence; several: each with the modes it holds for."""
    by_code: dict[str, tuple[str, list[str]]] = {}
    for t in v.trials:
        if t.amp.requested and not t.amp.active and t.amp.inactive_reason:
            modes = by_code.setdefault(t.amp.inactive_code or t.amp.inactive_reason, (t.amp.inactive_reason, []))[1]
            if t.mode not in modes:
                modes.append(t.mode)
    if not by_code:
        return ""
    if len(by_code) == 1:
        return " Recorded reason: " + md_text(next(iter(by_code.values()))[0], 300)
    return " Recorded reasons: " + "; ".join(f"{', '.join(md_code(m) for m in modes)}: {md_text(text, 300)}"
                                             for text, modes in by_code.values())


def run_env(v: RunView) -> Env:
    return v.info.env if v.info.env.paddle or not v.trials else v.trials[0].env


def device_text(env: Env) -> str:
    """`cpu: AMD EPYC 7B13` / `gpu: NVIDIA A100-SXM4-80GB`: the model, not the architecture."""
    name = env.device_name
    if not name or name == env.platform or name in ("x86_64", "aarch64", "arm64"):
        name = ""
    return f"{env.device}: {name}" if env.device and name else (env.device or name)


def header(v: RunView) -> str:
    s, info = v.summary, v.info
    env = run_env(v)
    better = "higher" if s.metric_goal == "max" else "lower"
    lines = [
        (f"- **Suite:** {md_code(s.suite)} (workload {md_code(s.workload)}, "
         f"file {md_code(info.suite_file)}), profile {md_code(s.profile)}, "
         f"primary metric {md_code(s.metric)} ({better} is better)"),
        f"- **Run:** {md_code(s.run_id)}, {md_text(when(info))}",
        f"- **Device:** {md_text(device_text(env) or DASH)}; driver {md_text(env.driver or DASH)}",
        f"- **Software:** Paddle {md_text(env.paddle or DASH)}"
        + (f" (commit {md_code(env.paddle_commit)})" if env.paddle_commit else "")
        + f", CUDA {md_text(env.cuda or DASH)}, cuDNN {md_text(env.cudnn or DASH)}, "
        f"Python {md_text(env.python or DASH)}, numpy {md_text(env.numpy or DASH)}",
        (f"- **ampbench:** git {md_code(fmt.short_sha(env.git_sha)) if env.git_sha else DASH}; "
         f"config hash {md_code(s.config_hash) if s.config_hash else DASH}"),
        f"- **AMP op lists:** {oplist_hash_text(v)}",
        f"- **Paddle flags:** {flags_text(v)}",
    ]
    if info.overrides:
        lines.append("- **Overrides:** " + ", ".join(md_code(o) for o in info.overrides))
    lines += [f"- **Decided at import:** {md_text(n, 600)}" for n in suite_notes(info)]
    out = [overall(v)]
    note = inactive(v)
    if note:
        out.append(note)
    disagree = throughput_disagreements(v)
    if disagree:
        out.append(disagree)
    out.append("\n".join(lines))
    return "\n\n".join(out)


def suite_notes(info: RunInfo) -> list[str]:
    """`[suite] notes`: what `ampbench import` decided (modes, data, keys not honoured)."""
    meta = info.config.get("suite") if isinstance(info.config, dict) else None
    notes = meta.get("notes") if isinstance(meta, dict) else None
    return [str(n) for n in notes[:20]] if isinstance(notes, list) else []


def oplist_hash_text(v: RunView) -> str:
    """Paddle's default white/black lists hash, per dtype and level (the lists differ between float16 and
    bfloat16, and O1 and O2: one hash each is expected); only trials of one dtype and level that recorded
    different hashes are a warning: the Paddle under them changed, which moves numbers with no suite change."""
    groups: dict[tuple[str, str], list[str]] = {}
    for t in v.trials:
        if t.amp.requested and t.amp.default_lists_hash:
            hashes = groups.setdefault((t.amp.dtype, t.amp.level), [])
            if t.amp.default_lists_hash not in hashes:
                hashes.append(t.amp.default_lists_hash)
    if not groups:
        return "default lists hash not recorded"
    parts = [f"{md_code(h[0])} ({md_text(dtype)} {md_text(level)})" for (dtype, level), h in groups.items() if len(h) == 1]
    changed = [f"{md_text(dtype)} {md_text(level)}: " + ", ".join(md_code(x) for x in h)
               for (dtype, level), h in groups.items() if len(h) > 1]
    text = "default lists hash " + ", ".join(parts) if parts else ""
    if changed:
        text += ("; " if text else "") + ("**warning:** trials of one dtype and level recorded different default "
                                          "lists (Paddle changed between them): " + "; ".join(changed))
    return text


def trial_flags(v: RunView) -> dict[str, Any]:
    """Paddle FLAGS the trials applied (Trial.flags); a flag set differently per trial shows each value."""
    merged: dict[str, list[Any]] = {}
    for t in v.trials:
        for k, x in (getattr(t, "flags", None) or {}).items():
            vals = merged.setdefault(str(k), [])
            if x not in vals:
                vals.append(x)
    return {k: (vals[0] if len(vals) == 1 else vals) for k, vals in sorted(merged.items())}


def flags_text(v: RunView) -> str:
    flags = trial_flags(v)
    if not flags:
        return "none recorded"
    shown = [f"{md_code(f'{k}={x}')}" for k, x in list(flags.items())[:MAX_FLAGS]]
    more = f" (+{len(flags) - MAX_FLAGS} more in the trial files)" if len(flags) > MAX_FLAGS else ""
    return ", ".join(shown) + more


def when(info: RunInfo) -> str:
    start = info.started or ""
    text = f"started {start.replace('T', ' ')[:19]}" if start else "start time not recorded"
    if start and info.finished:
        try:
            end = dt.datetime.fromisoformat(info.finished)
            dur = (end - dt.datetime.fromisoformat(start)).total_seconds()
            text += f", took {fmt.seconds(dur)}" if dur >= 0 else \
                f", finished {info.finished.replace('T', ' ')[:19]} (before its start: clock changed?)"
        except (ValueError, TypeError):
            pass
    elif start:
        text += ", not finished"
    return text
