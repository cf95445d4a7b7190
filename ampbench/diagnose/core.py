"""`ampbench diagnose RUN --mode M`: which op made AMP go wrong?

Re-runs a short FP32 / AMP pair of mode M (same seed, init, data order and batch size, one process
each, through the normal worker) with Paddle's numerics dumping at the CHECK_ALL level (max, min,
mean, NaN/Inf/zero counts of every op output), feeds both dumps to Paddle's
`paddle.amp.debugging.compare_accuracy` (its Excel workbook is kept for browsing), and condenses
them into the first ops whose outputs go non-finite, leave float16's range, lose small values to
zero, or drift from FP32.  Writes diagnosis.json + diagnosis.md into the run folder.

Where AMP is inactive (CPU) both runs take the FP32 path: the pair cannot diverge, so only the
FP32 path's own NaN/Inf and float16-range checks (and the tooling) are exercised; the output says so.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import shutil
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from ampbench.config import REFERENCE_MODE, ConfigError, ModeConfig, Suite
from ampbench.results import (
    ResultsError,
    RunDir,
    Trial,
    atomic_write_json,
    atomic_write_text,
    load_trial,
    read_json,
    trial_key,
)
from ampbench.trial.numerics import FP16_MAX, LEVEL_ENV, OpStat, read_dump

DIAGNOSIS_SCHEMA = "ampbench.diagnosis/1"
Kind = Literal["fp32-nonfinite", "amp-nonfinite", "fp16-range", "underflow", "diverged"]
KIND_TEXT = {
    "fp32-nonfinite": "NaN/Inf already in FP32",
    "amp-nonfinite": "NaN/Inf in AMP only",
    "fp16-range": "beyond float16 range",
    "underflow": "values flushed to zero",
    "diverged": "drifts from FP32",
}
# Ops that are bookkeeping, not numerics a custom list could move: never suggested for black-listing.
NOT_LISTABLE = {"cast", "full", "full_like", "set_value", "set_value_", "assign", "share_data", "check_finite_and_unscale",
                "update_loss_scaling", "reshape", "transpose", "squeeze", "unsqueeze", "flatten", "slice", "concat"}


class Tolerances(BaseModel):
    """When two op outputs count as different (relative to the FP32 output's magnitude)."""

    model_config = ConfigDict(frozen=True)
    rtol: float = 1e-2          # |AMP stat - FP32 stat| / max|FP32| beyond this -> "diverged"
    zero_frac: float = 0.01     # extra zeros in AMP beyond this share of elements -> "underflow"


class Finding(BaseModel):
    index: int                  # position in the AMP run's op sequence (execution order, 1-based)
    step: int
    phase: str
    op: str
    kind: Kind
    fp32_dtype: str | None = None
    amp_dtype: str | None = None
    fp32_max_abs: float | str | None = None
    amp_max_abs: float | str | None = None
    fp32_mean: float | str | None = None
    amp_mean: float | str | None = None
    fp32_nan_inf: tuple[int, int] | None = None
    amp_nan_inf: tuple[int, int] | None = None
    rel_diff: float | None = None
    numel: int = 0
    count: int = 1              # outputs of this op with this finding in the whole dump (first one shown)


class ModeDiagnosis(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: str
    seed: int
    steps: int
    batch_size: int
    device: str = ""
    amp_active: bool = False
    amp_level: str = ""
    amp_dtype: str = ""
    loss_scale: float | None = None
    status: Literal["ok", "failed"] = "ok"
    summary: str = ""
    inactive_note: str = ""
    ops_compared: int = 0
    counts: dict[str, int] = {}
    first_by_kind: dict[str, str] = {}
    findings: list[Finding] = []
    black_list_candidates: list[str] = []
    already_black_listed: list[str] = []
    compare_accuracy: str = ""
    paddle_infinite_op_types: list[str] = []   # compare_accuracy's own list, a cross-check
    trials: dict[str, str] = {}
    files: dict[str, str] = {}
    tolerances: Tolerances = Tolerances()


class DiagnosisFile(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(DIAGNOSIS_SCHEMA, alias="schema")
    suite: str
    run_dir: str
    modes: dict[str, ModeDiagnosis] = {}


# ---------------------------------------------------------------- comparing two dumps


def _f(x: float) -> float | str:
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def _scaled(st: OpStat, scale: float) -> OpStat:
    """AMP backward outputs carry the loss scale; divide it out before comparing with FP32."""
    if scale == 1.0 or st.phase != "backward":
        return st
    return OpStat(op=st.op, dtype=st.dtype, numel=st.numel, max=st.max / scale, min=st.min / scale,
                  mean=st.mean / scale, num_nan=st.num_nan, num_inf=st.num_inf, num_zero=st.num_zero, error=st.error)


def classify(ref: OpStat | None, amp: OpStat, fp16: bool, tol: Tolerances) -> tuple[Kind | None, float | None]:
    """What, if anything, is wrong with one op output of the AMP run given the matching FP32 one."""
    if amp.nonfinite:
        return ("fp32-nonfinite" if ref is not None and ref.nonfinite else "amp-nonfinite"), None
    if ref is None:
        return None, None
    if ref.nonfinite:
        return "fp32-nonfinite", None
    if fp16 and amp.phase == "forward" and ref.magnitude > FP16_MAX:
        return "fp16-range", None
    mag = ref.magnitude
    rel = max(abs(a - b) for a, b in ((amp.max, ref.max), (amp.min, ref.min), (amp.mean, ref.mean))) / mag \
        if mag > 0 else (0.0 if amp.magnitude == 0 else math.inf)
    low = amp.dtype in ("fp16", "bf16", "float16", "bfloat16")
    if low and amp.numel == ref.numel and amp.num_zero - ref.num_zero > max(1, tol.zero_frac * amp.numel):
        return "underflow", rel
    if rel > tol.rtol:
        return "diverged", rel
    return None, rel


def compare_dumps(
    ref: list[tuple[int, OpStat]],
    amp: list[tuple[int, OpStat]],
    fp16: bool,
    scales: dict[int, float] | None = None,
    tol: Tolerances | None = None,
) -> tuple[list[Finding], int]:
    """Every flagged AMP op output in execution order, and how many outputs had an FP32 partner.

    Ops are matched per step by (op type, k-th call of that type), as Paddle's compare tool does;
    AMP-only ops (casts) have no partner and are flagged only when non-finite.
    """
    tol = tol or Tolerances()
    ref_by: dict[tuple[int, str, int], OpStat] = {}
    seen: dict[tuple[int, str], int] = {}
    for step, st in ref:
        k = seen.get((step, st.op), 0)
        seen[(step, st.op)] = k + 1
        ref_by[(step, st.op, k)] = st
    seen.clear()
    out: list[Finding] = []
    matched = 0
    for i, (step, raw) in enumerate(amp, start=1):
        k = seen.get((step, raw.op), 0)
        seen[(step, raw.op)] = k + 1
        partner = ref_by.get((step, raw.op, k))
        matched += partner is not None
        st = _scaled(raw, (scales or {}).get(step) or 1.0)
        kind, rel = classify(partner, st, fp16, tol)
        if kind is None:
            continue
        out.append(Finding(
            index=i, step=step, phase=st.phase, op=st.op, kind=kind, numel=st.numel,
            fp32_dtype=partner.dtype if partner else None, amp_dtype=st.dtype,
            fp32_max_abs=_f(partner.magnitude) if partner else None, amp_max_abs=_f(st.magnitude),
            fp32_mean=_f(partner.mean) if partner else None, amp_mean=_f(st.mean),
            fp32_nan_inf=(partner.num_nan, partner.num_inf) if partner else None,
            amp_nan_inf=(st.num_nan, st.num_inf),
            rel_diff=rel if rel is not None and math.isfinite(rel) else None,
        ))
    return out, matched


# ---------------------------------------------------------------- op names for custom lists


def legacy_op_names() -> dict[str, str]:
    """Phi kernel name (what dumps print: `add`, `matmul`) -> the legacy name custom lists take."""
    from paddle.base import core

    out: dict[str, str] = {}
    for name in core.get_all_op_names():
        try:
            phi = core._get_phi_kernel_name(name)
        except Exception:  # noqa: BLE001, S112 - some legacy ops have no phi kernel
            continue
        if phi and phi != name:
            out.setdefault(phi, name)
    return out


def black_list_candidates(findings: list[Finding], mode: ModeConfig, limit: int = 5) -> tuple[list[str], list[str]]:
    """Forward ops worth black-listing (legacy names Paddle knows), and those Paddle already black-lists.

    FP32-path NaN/Inf is not an AMP problem, so those ops are not candidates.
    """
    from ampbench.trial.precision import default_lists, known_op_names

    legacy, known = legacy_op_names(), known_op_names()
    default_black = set(default_lists(mode.dtype, mode.level or "O1")["black"]) | set(mode.custom_black_list)
    new: list[str] = []
    already: list[str] = []
    for f in findings:
        if f.phase != "forward" or f.kind == "fp32-nonfinite":
            continue
        if f.kind == "fp16-range" and mode.dtype != "float16":
            continue
        base = f.op.rstrip("_")  # in-place variants (relu_) share the list entry of their op
        name = legacy.get(base, base)
        if name in NOT_LISTABLE or name not in known:
            continue
        target = already if name in default_black else new
        if name not in target:
            target.append(name)
        if len(new) >= limit:
            break
    return new, already


# ---------------------------------------------------------------- running the pair


def _pick_seed(run: RunDir, suite: Suite, mode: str, plan: list[tuple[str, int]]) -> int:
    """The first seed whose trial of `mode` went wrong (status, non-finite loss, skipped steps), else the first."""
    seeds = [s for m, s in plan if m == mode] or list(suite.suite.seeds)
    for s in seeds:
        p = run.trial_path(mode, s)
        if not p.exists():
            continue
        try:
            t = load_trial(p)
        except ResultsError:
            continue
        if t.status != "ok" or t.nonfinite_losses or t.skipped_steps:
            return s
    return seeds[0]


def _diag_config(config: dict[str, Any], steps: int) -> dict[str, Any]:
    """The run's suite, cut to `steps` steps, no warm-up, no mid-run eval, one process."""
    cfg = json.loads(json.dumps(config))
    train = cfg.setdefault("train", {})
    train.update(steps=steps, warmup_steps=0, eval_every=0, target=None, diverge_after=steps + 1)
    cfg["distributed"] = {}
    return cfg


def _run_pair(run: RunDir, info: Any, cfg: dict[str, Any], mode: str, seed: int, steps: int, batch: int,
              out: Path, console: Console) -> dict[str, Trial]:
    from ampbench.launch.runner import default_cache_dir, launch_trial
    from ampbench.launch.spec import TrialSpec

    trials: dict[str, Trial] = {}
    sub = RunDir(out)
    for m in (REFERENCE_MODE, mode):
        spec = TrialSpec(
            suite=cfg, suite_file=info.suite_file, profile=info.profile, config_hash=info.config_hash, mode=m,
            seed=seed, trial_path=str(sub.trial_path(m, seed)), cache_dir=str(default_cache_dir()),
            batch_size=batch, steps=steps,
        )
        console.print(f"  {m} seed {seed}: {steps} step(s) at batch {batch} with every op output dumped ...")
        trials[m] = launch_trial(spec, sub, env={LEVEL_ENV: "CHECK_ALL"})
        console.print(f"  {m}: {trials[m].status}")
    return trials


def _compare_accuracy(ref_dir: Path, amp_dir: Path, xlsx: Path, scale: float, log: Path) -> str:
    """Paddle's own FP32-vs-low-precision workbook (every op, colour-coded); kept beside the summary."""
    import importlib.util

    import paddle

    if importlib.util.find_spec("xlsxwriter") is None:
        return "skipped: xlsxwriter is not installed (pip install 'ampbench[diagnose]')"
    try:
        with open(log, "w") as fh, contextlib.redirect_stdout(fh), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # its x/0 on NaN stats
            paddle.amp.debugging.compare_accuracy(str(ref_dir), str(amp_dir), str(xlsx), loss_scale=scale)
    except Exception as e:  # noqa: BLE001 - the workbook is a convenience; the summary below stands alone
        return f"compare_accuracy failed: {type(e).__name__}: {e}"
    return f"ok: {xlsx.name}" if xlsx.exists() else "compare_accuracy wrote no workbook"


def _paddle_infinite_ops(log: Path) -> list[str]:
    """The op types compare_accuracy itself reports as producing infinite outputs (it prints them)."""
    marker = "OP Types produce infinite outputs:"
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    for line in text.replace("\r", "\n").splitlines():
        if marker in line:
            try:
                found = ast.literal_eval(line.split(marker, 1)[1].strip())
            except (ValueError, SyntaxError):
                return []
            return [str(x) for x in found] if isinstance(found, list) else []
    return []


def condense(findings: list[Finding]) -> list[Finding]:
    """First occurrence of each (op, phase, finding), in execution order, with how often it recurs."""
    firsts: dict[tuple[str, str, str], Finding] = {}
    for f in findings:
        key = (f.op, f.phase, f.kind)
        if key in firsts:
            firsts[key].count += 1
        else:
            firsts[key] = f.model_copy()
    return list(firsts.values())


def diagnose_mode(run_dir: Path, mode: str, steps: int = 3, seed: int | None = None, top: int = 10,
                  console: Console | None = None, tol: Tolerances | None = None) -> ModeDiagnosis:
    """Run the pair, compare, and return the condensed diagnosis (also kept under <run>/diagnose/<mode>/)."""
    tol = tol or Tolerances()
    console = console or Console()
    run = RunDir(run_dir)
    info = run.load_run()
    suite = Suite.model_validate(info.config)
    names = [m.name for m in suite.modes]
    if mode not in names:
        raise ConfigError("--mode", mode, f"unknown mode; suite modes: {', '.join(names)}")
    if mode == REFERENCE_MODE:
        amp = [n for n in names if n != REFERENCE_MODE]
        raise ConfigError("--mode", mode, f"diagnose compares an AMP mode against fp32; pick one of: {', '.join(amp)}")
    if steps < 1:
        raise ConfigError("--steps", str(steps), "must be at least 1")
    mcfg, ref_cfg = suite.mode(mode), suite.mode(REFERENCE_MODE)
    plan = [(p["mode"], int(p["seed"])) for p in info.plan]
    seed = _pick_seed(run, suite, mode, plan) if seed is None else seed
    # Both runs at one batch size, or the op outputs cannot be matched; the smaller one fits both.
    batch = min(suite.batch_size(ref_cfg), suite.batch_size(mcfg))
    out = run.path / "diagnose" / mode
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    console.print(f"diagnosing [bold]{mode}[/] of {run.path} (seed {seed})")
    trials = _run_pair(run, info, _diag_config(info.config, steps), mode, seed, steps, batch, out, console)
    ref_t, amp_t = trials[REFERENCE_MODE], trials[mode]
    dumps = {m: out / "numerics" / trial_key(m, seed) for m in trials}
    diag = ModeDiagnosis(
        mode=mode, seed=seed, steps=steps, batch_size=batch, device=amp_t.env.device, amp_active=amp_t.amp.active,
        amp_level=mcfg.level or "", amp_dtype=mcfg.dtype, trials={m: t.status for m, t in trials.items()},
        files={"fp32_dump": _rel(dumps[REFERENCE_MODE], run.path), "amp_dump": _rel(dumps[mode], run.path),
               "logs": _rel(out / "logs", run.path)},
        tolerances=tol,
    )
    if not amp_t.amp.active:
        reason = amp_t.amp.inactive_reason or f"AMP inactive on this device ({amp_t.env.device or 'unknown'})"
        diag.inactive_note = (
            f"{reason.rstrip('.')}. Both runs took the FP32 path, so they "
            "cannot diverge; only the FP32 path's own NaN/Inf and float16-range checks (and the tooling) ran here. "
            "Re-run `ampbench diagnose` on a GPU to compare real low-precision numerics.")
    ref_rec = (ref_t.numerics or {}).get("lines_per_step")
    amp_rec = (amp_t.numerics or {}).get("lines_per_step")
    ref_ops, amp_ops = read_dump(dumps[REFERENCE_MODE], ref_rec), read_dump(dumps[mode], amp_rec)
    if not ref_ops or not amp_ops:
        diag.status = "failed"
        bad = [f"{m}: {t.status}" + (f" ({_last(t.error)})" if t.error else "") for m, t in trials.items()]
        diag.summary = ("No op dump to compare (" + "; ".join(bad) + f"). See the logs in {diag.files['logs']}.")
        return diag
    scales = {s.step: s.loss_scale for s in amp_t.steps if s.loss_scale}
    diag.loss_scale = amp_t.steps[0].loss_scale if amp_t.steps else None
    findings, matched = compare_dumps(ref_ops, amp_ops, fp16=mcfg.dtype == "float16", scales=scales, tol=tol)
    diag.ops_compared = matched
    diag.counts = {k: sum(1 for f in findings if f.kind == k) for k in KIND_TEXT if any(f.kind == k for f in findings)}
    diag.first_by_kind = {k: next(f.op for f in findings if f.kind == k) for k in diag.counts}
    diag.findings = condense(findings)[:top]
    diag.black_list_candidates, diag.already_black_listed = black_list_candidates(findings, mcfg)
    xlsx = out / "compare_accuracy.xlsx"
    diag.compare_accuracy = _compare_accuracy(dumps[REFERENCE_MODE], dumps[mode], xlsx, diag.loss_scale or 1.0,
                                              out / "compare_accuracy.log")
    diag.paddle_infinite_op_types = _paddle_infinite_ops(out / "compare_accuracy.log")
    if xlsx.exists():
        diag.files["workbook"] = _rel(xlsx, run.path)
    diag.summary = summary_text(diag, findings, len(amp_ops))
    return diag


def _rel(p: Path, base: Path) -> str:
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


def _last(text: str | None) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:160] if lines else ""


def _where(f: Finding) -> str:
    return f"`{f.op}` ({f.phase}, step {f.step}, op #{f.index})"


def summary_text(d: ModeDiagnosis, findings: list[Finding], n_ops: int) -> str:
    """The finding in words: which op first, and what that means for the user."""
    if not findings:
        return (f"No op output of {n_ops} in {d.steps} step(s) went non-finite, left float16's range, lost values "
                f"to zero or drifted more than {d.tolerances.rtol:.0%} from FP32.")
    first = findings[0]
    by = {k: next(f for f in findings if f.kind == k) for k in KIND_TEXT if any(f.kind == k for f in findings)}
    parts = []
    if "fp32-nonfinite" in by:
        f = by["fp32-nonfinite"]
        parts.append(f"The FP32 run itself produces NaN/Inf, first at {_where(f)}: the model or data overflows "
                     "regardless of AMP; fix that first (input scaling, learning rate, gradient clipping, a safer op).")
    if "amp-nonfinite" in by:
        f = by["amp-nonfinite"]
        parts.append(f"The AMP run goes non-finite first at {_where(f)} ({f.amp_dtype}) where FP32 stays finite.")
    if "fp16-range" in by:
        f = by["fp16-range"]
        parts.append(f"{_where(f)} reaches |x| = {_num(f.fp32_max_abs)} in FP32, beyond float16's {FP16_MAX:.0f}: "
                     "in float16 it overflows to Inf.")
    if "underflow" in by:
        f = by["underflow"]
        parts.append(f"{_where(f)} loses small values to zero in {f.amp_dtype}.")
    if "diverged" in by:
        f = by["diverged"]
        parts.append(f"The first output that drifts from FP32 beyond {d.tolerances.rtol:.0%} is {_where(f)} "
                     f"(relative difference {_num(f.rel_diff)}).")
    head = f"First flagged op: `{first.op}` ({KIND_TEXT[first.kind]}). "
    return head + " ".join(parts)


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.4g}"


# ---------------------------------------------------------------- writing


def write_diagnosis(run_dir: Path, suite_name: str, diag: ModeDiagnosis) -> tuple[Path, Path]:
    """Merge this mode into diagnosis.json and re-render diagnosis.md (one section per diagnosed mode)."""
    run_dir = Path(run_dir)
    jpath, mpath = run_dir / "diagnosis.json", run_dir / "diagnosis.md"
    doc = load_diagnosis(run_dir) if jpath.exists() else None
    if doc is None or doc.suite != suite_name:
        doc = DiagnosisFile(suite=suite_name, run_dir=str(run_dir))
    doc.modes[diag.mode] = diag
    atomic_write_json(jpath, doc.model_dump(mode="json", by_alias=True))
    atomic_write_text(mpath, render_markdown(doc))
    return jpath, mpath


def load_diagnosis(run_dir: Path) -> DiagnosisFile | None:
    """diagnosis.json of a run folder, or None when `ampbench diagnose` was never run there."""
    p = Path(run_dir) / "diagnosis.json"
    if not p.exists():
        return None
    data = read_json(p, "diagnosis file")
    if not isinstance(data, dict) or data.get("schema") != DIAGNOSIS_SCHEMA:
        raise ResultsError(f"{p}: not an ampbench diagnosis file (expected schema {DIAGNOSIS_SCHEMA!r})")
    return DiagnosisFile.model_validate(data)


def _row(f: Finding) -> list[str]:
    nan_inf = "/".join(str(x) for x in f.amp_nan_inf) if f.amp_nan_inf else "-"
    return [str(f.index), str(f.step), f.phase, f.op, KIND_TEXT[f.kind], f.fp32_dtype or "-", f.amp_dtype or "-",
            _num(f.fp32_max_abs), _num(f.amp_max_abs), _num(f.fp32_mean), _num(f.amp_mean), nan_inf,
            _num(f.rel_diff), str(f.count)]


HEADERS = ["#", "step", "phase", "op", "finding", "FP32 dtype", "AMP dtype", "FP32 max abs", "AMP max abs",
           "FP32 mean", "AMP mean", "AMP NaN/Inf", "rel. diff", "times"]


LEGEND = ("Findings: *NaN/Inf already in FP32* (the model overflows without AMP), *NaN/Inf in AMP only*, "
          "*beyond float16 range* (an FP32 output above 65504 in magnitude), *values flushed to zero* (more zeros "
          "in low precision than in FP32), *drifts from FP32* (max/min/mean differ by more than the tolerance, "
          "relative to the FP32 output's magnitude; backward outputs are divided by the loss scale first). Ops are "
          "matched per step by type and call order, as Paddle's compare_accuracy does.")


def _mode_section(name: str, d: ModeDiagnosis, mode_cfg: ModeConfig | None) -> list[str]:
    from ampbench.diagnose.advice import diagnosis_advice

    scale = f", loss scale {d.loss_scale:g}" if d.loss_scale else ""
    head = (f"Seed {d.seed}, {d.steps} step(s) at batch {d.batch_size}, device {d.device or 'unknown'}, "
            f"{d.amp_level} {d.amp_dtype}{scale}; {d.ops_compared} op outputs matched between the FP32 and AMP runs.")
    lines = [f"## {name}", "", head, ""]
    if d.inactive_note:
        lines += [f"> **{d.inactive_note}**", ""]
    lines += [d.summary, ""]
    if d.findings:
        totals = ", ".join(f"{v} {KIND_TEXT[k]}" for k, v in d.counts.items())
        intro = (f"The first {len(d.findings)} op(s) flagged, in execution order (first output of each op and finding; "
                 f"*times* = how many of its outputs were flagged; {totals} in total):")
        lines += [intro, "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(_row(f)) + " |" for f in d.findings]
        lines.append("")
    if d.black_list_candidates:
        ops = ", ".join(f"`{n}`" for n in d.black_list_candidates)
        lines += [f"Black-list candidates (legacy op names for `custom_black_list`): {ops}.", ""]
    if d.already_black_listed:
        ops = ", ".join(f"`{n}`" for n in d.already_black_listed)
        lines += [f"Already black-listed (they run in float32; the overflow comes from their float16 inputs): {ops}.", ""]
    tips = diagnosis_advice(mode_cfg, d) if mode_cfg is not None else []
    if tips:
        lines += ["What to try:", ""] + [f"- {t}" for t in tips] + [""]
    files = ", ".join(f"{k}: `{v}`" for k, v in d.files.items())
    lines += [f"Files (relative to the run folder): {files}. Paddle's compare_accuracy: {d.compare_accuracy or '-'}.", ""]
    return lines


def render_markdown(doc: DiagnosisFile) -> str:
    suite = None
    try:
        suite = Suite.model_validate(RunDir(doc.run_dir).load_run().config)
    except (ResultsError, ValueError):
        pass
    modes = {m.name: m for m in suite.modes} if suite is not None else {}
    lines = [f"# AMP diagnosis: {doc.suite}", ""]
    for name, d in doc.modes.items():
        lines += _mode_section(name, d, modes.get(name))
    lines += [LEGEND, ""]
    return "\n".join(lines)


def print_diagnosis(d: ModeDiagnosis, console: Console) -> None:
    if d.inactive_note:
        console.print(f"[yellow]{d.inactive_note}[/]")
    if d.findings:
        table = Table("#", "step", "op", "finding", "dtype FP32/AMP", "max abs FP32/AMP", "NaN/Inf", "times",
                      title=f"{d.mode}: first flagged ops")
        for f in d.findings:
            nan_inf = "/".join(str(x) for x in f.amp_nan_inf) if f.amp_nan_inf else "-"
            table.add_row(str(f.index), str(f.step), f.op, KIND_TEXT[f.kind], f"{f.fp32_dtype or '-'}/{f.amp_dtype}",
                          f"{_num(f.fp32_max_abs)}/{_num(f.amp_max_abs)}", nan_inf, str(f.count))
        console.print(table)
    console.print(d.summary)
    if d.black_list_candidates:
        console.print("black-list candidates: " + ", ".join(d.black_list_candidates))


def run_diagnose(run_dir: Path, mode: str, steps: int = 3, seed: int | None = None,
                 console: Console | None = None, top: int = 10) -> int:
    """CLI entry: 0 nothing flagged, 1 ops flagged (see diagnosis.md), 2 the pair could not be run."""
    console = console or Console()
    run = RunDir(run_dir)
    info = run.load_run()
    diag = diagnose_mode(Path(run_dir), mode, steps=steps, seed=seed, top=top, console=console)
    jpath, mpath = write_diagnosis(run.path, info.suite, diag)
    print_diagnosis(diag, console)
    console.print(f"diagnosis: {mpath} (+ {jpath.name})")
    if diag.status == "failed":
        return 2
    return 1 if diag.findings else 0
