"""A diagnosis in words: the summary sentence, diagnosis.md, the terminal table, and writing both files.

The markdown is re-rendered from diagnosis.json every time a mode is added, so the two never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ampbench.config import ModeConfig, Suite
from ampbench.core.docs import write_doc
from ampbench.core.files import atomic_write_text
from ampbench.core.opstat import FP16_MAX
from ampbench.core.store import RunPaths
from ampbench.diagnose.advice import diagnosis_advice
from ampbench.results.diagnosis_file import KIND_TEXT, DiagnosisFile, Finding, ModeDiagnosis, load_diagnosis

HEADERS = ["#", "step", "phase", "op", "finding", "FP32 dtype", "AMP dtype", "FP32 max abs", "AMP max abs",
           "FP32 mean", "AMP mean", "AMP NaN/Inf", "rel. diff", "times"]
LEGEND = ("Findings: *NaN/Inf already in FP32* (the model overflows without AMP), *NaN/Inf in AMP only*, "
          "*beyond float16 range* (an FP32 output above 65504 in magnitude), *values flushed to zero* (more zeros "
          "in low precision than in FP32), *drifts from FP32* (max/min/mean differ by more than the tolerance, "
          "relative to the FP32 output's magnitude; backward outputs are divided by the loss scale first). Ops are "
          "matched per step by type and call order, as Paddle's compare_accuracy does.")


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.4g}"


def _where(f: Finding) -> str:
    return f"`{f.op}` ({f.phase}, step {f.step}, op #{f.index})"


def _kind_sentence(kind: str, f: Finding, d: ModeDiagnosis) -> str:
    """What the first finding of one kind means for the user."""
    if kind == "fp32-nonfinite":
        return (f"The FP32 run itself produces NaN/Inf, first at {_where(f)}: the model or data overflows "
                "regardless of AMP; fix that first (input scaling, learning rate, gradient clipping, a safer op).")
    if kind == "amp-nonfinite":
        return f"The AMP run goes non-finite first at {_where(f)} ({f.amp_dtype}) where FP32 stays finite."
    if kind == "fp16-range":
        return (f"{_where(f)} reaches |x| = {_num(f.fp32_max_abs)} in FP32, beyond float16's {FP16_MAX:.0f}: "
                "in float16 it overflows to Inf.")
    if kind == "underflow":
        return f"{_where(f)} loses small values to zero in {f.amp_dtype}."
    return (f"The first output that drifts from FP32 beyond {d.tolerances.rtol:.0%} is {_where(f)} "
            f"(relative difference {_num(f.rel_diff)}).")


def summary_text(d: ModeDiagnosis, findings: list[Finding], n_ops: int) -> str:
    """The finding in words: which op first, and what that means for the user."""
    if not findings:
        return (f"No op output of {n_ops} in {d.steps} step(s) went non-finite, left float16's range, lost values "
                f"to zero or drifted more than {d.tolerances.rtol:.0%} from FP32.")
    first = findings[0]
    by = {k: next(f for f in findings if f.kind == k) for k in KIND_TEXT if any(f.kind == k for f in findings)}
    head = f"First flagged op: `{first.op}` ({KIND_TEXT[first.kind]}). "
    return head + " ".join(_kind_sentence(k, f, d) for k, f in by.items())


def _row(f: Finding) -> list[str]:
    nan_inf = "/".join(str(x) for x in f.amp_nan_inf) if f.amp_nan_inf else "-"
    return [str(f.index), str(f.step), f.phase, f.op, KIND_TEXT[f.kind], f.fp32_dtype or "-", f.amp_dtype or "-",
            _num(f.fp32_max_abs), _num(f.amp_max_abs), _num(f.fp32_mean), _num(f.amp_mean), nan_inf,
            _num(f.rel_diff), str(f.count)]


def _findings_table(d: ModeDiagnosis) -> list[str]:
    if not d.findings:
        return []
    totals = ", ".join(f"{v} {KIND_TEXT[k]}" for k, v in d.counts.items())
    intro = (f"The first {len(d.findings)} op(s) flagged, in execution order (first output of each op and finding; "
             f"*times* = how many of its outputs were flagged; {totals} in total):")
    lines = [intro, "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    return lines + ["| " + " | ".join(_row(f)) + " |" for f in d.findings] + [""]


def _lists(d: ModeDiagnosis) -> list[str]:
    lines = []
    if d.black_list_candidates:
        ops = ", ".join(f"`{n}`" for n in d.black_list_candidates)
        lines += [f"Black-list candidates (legacy op names for `custom_black_list`): {ops}.", ""]
    if d.already_black_listed:
        ops = ", ".join(f"`{n}`" for n in d.already_black_listed)
        lines += [f"Already black-listed (they run in float32; the overflow comes from their float16 inputs): {ops}.", ""]
    return lines


EMULATED_HEADERS = ("Layer", "Type", "Overflowed", "Flushed to 0", "Grad overflowed", "Grad flushed to 0",
                    "Lost updates")
EMULATED_KINDS = ("overflow", "underflow", "grad_overflow", "grad_underflow", "lost_updates")


def first_overflow_text(f: dict | None) -> str:
    if not f:
        return "No value overflowed in the run's emulated trials."
    return (f"First overflow in the run's emulated trials: step {f.get('step')} ({f.get('phase')}), layer "
            f"`{f.get('layer')}`, op `{f.get('op')}`, seed {f.get('seed')}.")


def _emulated_lines(d: ModeDiagnosis) -> list[str]:
    """Where the run's emulated trials lost values, the worst layers first (an emulated mode only)."""
    if not d.emulated:
        return []
    lines = ["Where the run's emulated trials lost values (counted before each rounding, all steps, all seeds):", "",
             first_overflow_text(d.emulated_first_overflow), ""]
    if d.emulated_layers:
        lines += ["| " + " | ".join(EMULATED_HEADERS) + " |", "|" + "---|" * len(EMULATED_HEADERS)]
        lines += ["| " + " | ".join([f"`{r.layer}`", r.type or "-", *(str(getattr(r, k)) for k in EMULATED_KINDS)])
                  + " |" for r in d.emulated_layers] + [""]
    return lines + [f"- Try: {t}" for t in d.emulated_advice] + ([""] if d.emulated_advice else [])


def _mode_section(name: str, d: ModeDiagnosis, mode_cfg: ModeConfig | None) -> list[str]:
    scale = f", loss scale {d.loss_scale:g}" if d.loss_scale else ""
    head = (f"Seed {d.seed}, {d.steps} step(s) at batch {d.batch_size}, device {d.device or 'unknown'}, "
            f"{d.amp_level} {d.amp_dtype}{scale}; {d.ops_compared} op outputs matched between the FP32 and AMP runs.")
    lines = [f"## {name}", "", head, ""]
    if d.inactive_note:
        lines += [f"> **{d.inactive_note}**", ""]
    lines += [d.summary, ""]
    lines += _findings_table(d) + _lists(d) + _emulated_lines(d)
    tips = diagnosis_advice(mode_cfg, d) if mode_cfg is not None else []
    if tips:
        lines += ["What to try:", ""] + [f"- {t}" for t in tips] + [""]
    files = ", ".join(f"{k}: `{v}`" for k, v in d.files.items())
    lines += [f"Files (relative to the run folder): {files}. Paddle's compare_accuracy: {d.compare_accuracy or '-'}.", ""]
    return lines


def render_markdown(doc: DiagnosisFile, modes: dict[str, ModeConfig] | None = None) -> str:
    """diagnosis.md; `modes` (the suite's mode configs) adds the what-to-try advice per mode."""
    modes = modes or {}
    lines = [f"# AMP diagnosis: {doc.suite}", ""]
    for name, d in doc.modes.items():
        lines += _mode_section(name, d, modes.get(name))
    lines += [LEGEND, ""]
    return "\n".join(lines)


def write_diagnosis(run_dir: Path, suite: Suite, diag: ModeDiagnosis) -> tuple[Path, Path]:
    """Merge this mode into diagnosis.json and re-render diagnosis.md (one section per diagnosed mode)."""
    run_dir = Path(run_dir)
    jpath, mpath = RunPaths(run_dir).diagnosis_json, RunPaths(run_dir).diagnosis_md
    name = suite.suite.name
    doc = load_diagnosis(run_dir)
    if doc is None or doc.suite != name:
        doc = DiagnosisFile(suite=name, run_dir=str(run_dir))
    doc.modes[diag.mode] = diag
    write_doc(jpath, doc, root=run_dir)
    atomic_write_text(mpath, render_markdown(doc, {m.name: m for m in suite.modes}), root=run_dir)
    return jpath, mpath


def print_diagnosis(d: ModeDiagnosis, console: Console) -> None:
    """The terminal view: the flagged ops as a table, then the summary (op names escaped for rich)."""
    if d.inactive_note:
        console.print(f"[yellow]{escape(d.inactive_note)}[/]")
    if d.findings:
        table = Table("#", "step", "op", "finding", "dtype FP32/AMP", "max abs FP32/AMP", "NaN/Inf", "times",
                      title=f"{escape(d.mode)}: first flagged ops",
                      box=box.HEAVY_HEAD if console.is_terminal else box.ASCII)  # report.console.table_box's choice
        for f in d.findings:
            nan_inf = "/".join(str(x) for x in f.amp_nan_inf) if f.amp_nan_inf else "-"
            table.add_row(str(f.index), str(f.step), escape(f.op), KIND_TEXT[f.kind],
                          escape(f"{f.fp32_dtype or '-'}/{f.amp_dtype}"),
                          f"{_num(f.fp32_max_abs)}/{_num(f.amp_max_abs)}", nan_inf, str(f.count))
        console.print(table)
    console.print(d.summary, markup=False)
    if d.emulated:
        console.print(first_overflow_text(d.emulated_first_overflow), markup=False)
        if d.emulated_layers:
            table = Table(*EMULATED_HEADERS, title=f"{escape(d.mode)}: where the emulated trials lost values")
            for r in d.emulated_layers[:15]:
                table.add_row(escape(r.layer), escape(r.type or "-"), *(str(getattr(r, k)) for k in EMULATED_KINDS))
            console.print(table)
        for tip in d.emulated_advice:
            console.print(f"try: {tip}", markup=False, highlight=False)
    if d.black_list_candidates:
        console.print("black-list candidates: " + ", ".join(d.black_list_candidates), markup=False)
