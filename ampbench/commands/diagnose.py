"""`ampbench diagnose RUN --mode M`: which op made AMP go wrong?

Re-runs a short FP32 / AMP pair of mode M (same seed, init, data order and batch size, one process
each, through the normal runner and worker) with Paddle's numerics dumping at the CHECK_ALL level
(max, min, mean, NaN/Inf/zero counts of every op output), feeds both dumps to Paddle's
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
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ampbench.config import REFERENCE_MODE, ConfigError, ModeConfig, Suite
from ampbench.core.errors import ResultsError
from ampbench.core.files import empty_folder, ensure_folder, last_line, open_for_writing, read_bytes
from ampbench.core.install import install_hint
from ampbench.core.store import RunPaths
from ampbench.core.terminal import TerminalConsole
from ampbench.diagnose.compare import black_list_candidates, compare_dumps, condense
from ampbench.diagnose.emulated import KINDS, mode_losses
from ampbench.diagnose.emulated import advice as emulated_advice
from ampbench.diagnose.render import print_diagnosis, summary_text, write_diagnosis
from ampbench.engine.plan import default_cache_dir
from ampbench.engine.trials import launch_trial
from ampbench.record.models import Trial, trial_key
from ampbench.results.diagnosis_file import KIND_TEXT, Finding, ModeDiagnosis, Tolerances
from ampbench.results.run_dir import OpenRun, RunDir, open_run
from ampbench.trial.numerics import LEVEL_ENV, read_dump
from ampbench.trial.precision import default_lists, known_op_names
from ampbench.trial.spec import TrialSpec

INFINITE_MARKER = "OP Types produce infinite outputs:"  # what compare_accuracy prints before its list
MAX_LAYERS = 50   # an emulated mode's layers kept in diagnosis.json (the trial files hold them all)


def _check_request(run: OpenRun, mode: str, steps: int) -> None:
    """The mode must be an AMP mode of this run's suite, and at least one step re-run."""
    names = [m.name for m in run.suite.modes]
    if mode not in names:
        raise ConfigError("--mode", mode, f"unknown mode; suite modes: {', '.join(names)}")
    if mode == REFERENCE_MODE:
        amp = [n for n in names if n != REFERENCE_MODE]
        raise ConfigError("--mode", mode, f"diagnose compares an AMP mode against fp32; pick one of: {', '.join(amp)}")
    if steps < 1:
        raise ConfigError("--steps", str(steps), "must be at least 1")


def _pick_seed(run: OpenRun, mode: str) -> int:
    """The first seed whose trial of `mode` went wrong (status, non-finite loss, skipped steps), else the first."""
    seeds = [p.seed for p in run.info.plan if p.mode == mode] or list(run.suite.suite.seeds)
    by_seed = {t.seed: t for t in run.trials if t.mode == mode}
    for s in seeds:
        t = by_seed.get(s)
        if t is not None and (t.status != "ok" or t.nonfinite_losses or t.skipped_steps):
            return s
    return seeds[0]


def _diag_config(config: dict[str, Any], steps: int) -> dict[str, Any]:
    """The run's suite, cut to `steps` steps, no warm-up, no mid-run eval, one process."""
    cfg = json.loads(json.dumps(config))
    train = cfg.setdefault("train", {})
    train.update(steps=steps, warmup_steps=0, eval_every=0, target=None, diverge_after=steps + 1)
    cfg["distributed"] = {}
    return cfg


def _run_pair(run: OpenRun, mode: str, seed: int, steps: int, batch: int, out: Path,
              console: Console) -> dict[str, Trial]:
    """FP32 then `mode`, one process each, every op output dumped; trials kept under `out`."""
    suite = Suite.model_validate(_diag_config(run.suite.model_dump(mode="json"), steps))
    trials: dict[str, Trial] = {}
    sub = RunDir(out)
    for m in (REFERENCE_MODE, mode):
        spec = TrialSpec(
            suite=suite, suite_file=run.info.suite_file, profile=run.info.profile, config_hash=run.info.config_hash,
            mode=m, seed=seed, trial_path=str(sub.trial_path(m, seed)), cache_dir=str(default_cache_dir()),
            batch_size=batch, steps=steps,
        )
        console.print(f"  {escape(m)} seed {seed}: {steps} step(s) at batch {batch} with every op output dumped ...")
        trials[m] = launch_trial(spec, sub, env={LEVEL_ENV: "CHECK_ALL"})
        console.print(f"  {escape(m)}: {trials[m].status}")
    return trials


def _compare_accuracy(ref_dir: Path, amp_dir: Path, xlsx: Path, scale: float, log: Path, root: Path) -> str:
    """Paddle's own FP32-vs-low-precision workbook (every op, colour-coded); kept beside the summary."""
    import importlib.util

    import paddle

    if importlib.util.find_spec("xlsxwriter") is None:
        return f"skipped: xlsxwriter is not installed; {install_hint('diagnose')}"
    try:
        ensure_folder(xlsx.parent, root, create=False)   # still the run's own folder after the pair ran
        with open_for_writing(log, root=root) as fh, contextlib.redirect_stdout(fh), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # its x/0 on NaN stats
            paddle.amp.debugging.compare_accuracy(str(ref_dir), str(amp_dir), str(xlsx), loss_scale=scale)
    except ResultsError as e:
        return f"compare_accuracy not run: {e}"
    except Exception as e:  # noqa: BLE001 - the workbook is a convenience; the summary below stands alone
        return f"compare_accuracy failed: {type(e).__name__}: {e}"
    return f"ok: {xlsx.name}" if xlsx.exists() else "compare_accuracy wrote no workbook"


def _paddle_infinite_ops(log: Path, root: Path) -> list[str]:
    """The op types compare_accuracy itself reports as producing infinite outputs (it prints them)."""
    try:
        text = read_bytes(log, "compare_accuracy log", root=root, limit=64 * 2**20).decode("utf-8", "replace")
    except ResultsError:
        return []
    for line in text.replace("\r", "\n").splitlines():
        if INFINITE_MARKER in line:
            try:
                found = ast.literal_eval(line.split(INFINITE_MARKER, 1)[1].strip())
            except (ValueError, SyntaxError):
                return []
            return [str(x) for x in found] if isinstance(found, list) else []
    return []


def _rel(p: Path, base: Path) -> str:
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


def _inactive_note(amp_t: Trial) -> str:
    if amp_t.amp.active:
        return ""
    if amp_t.amp.emulated:
        return (f"AMP emulated (emulate = true): the re-run's kernels ran in float32 with values rounded to "
                f"{amp_t.amp.dtype}, so the pair compares FP32 with emulated numerics; where the run's emulated "
                "trials lost values, layer by layer, is listed below.")
    reason = amp_t.amp.inactive_reason or f"AMP inactive on this device ({amp_t.env.device or 'unknown'})"
    return (f"{reason.rstrip('.')}. Both runs took the FP32 path, so they "
            "cannot diverge; only the FP32 path's own NaN/Inf and float16-range checks (and the tooling) ran here. "
            "Re-run `ampbench diagnose` on a GPU to compare real low-precision numerics.")


def _new_diagnosis(run: OpenRun, mcfg: ModeConfig, seed: int, steps: int, batch: int, trials: dict[str, Trial],
                   dumps: dict[str, Path], out: Path, tol: Tolerances) -> ModeDiagnosis:
    amp_t = trials[mcfg.name]
    return ModeDiagnosis(
        mode=mcfg.name, seed=seed, steps=steps, batch_size=batch, device=amp_t.env.device,
        amp_active=amp_t.amp.active, amp_level=mcfg.level or "", amp_dtype=mcfg.dtype,
        trials={m: t.status for m, t in trials.items()}, inactive_note=_inactive_note(amp_t), tolerances=tol,
        files={"fp32_dump": _rel(dumps[REFERENCE_MODE], run.path), "amp_dump": _rel(dumps[mcfg.name], run.path),
               "logs": _rel(RunPaths(out).logs_dir, run.path)},
    )


def _fill_findings(diag: ModeDiagnosis, mcfg: ModeConfig, trials: dict[str, Trial], dumps: dict[str, Path],
                   out: Path, run_path: Path, top: int) -> None:
    """Compare the two dumps into `diag`; marks it failed when either run left no dump."""
    ref_t, amp_t = trials[REFERENCE_MODE], trials[mcfg.name]
    ref_ops = read_dump(dumps[REFERENCE_MODE], (ref_t.numerics or {}).get("lines_per_step"))
    amp_ops = read_dump(dumps[mcfg.name], (amp_t.numerics or {}).get("lines_per_step"))
    if not ref_ops or not amp_ops:
        _mark_no_dump(diag, trials)
        return
    scales = {s.step: s.loss_scale for s in amp_t.steps if s.loss_scale}
    diag.loss_scale = amp_t.steps[0].loss_scale if amp_t.steps else None
    findings, diag.ops_compared = compare_dumps(ref_ops, amp_ops, fp16=mcfg.dtype == "float16", scales=scales,
                                                tol=diag.tolerances)
    _tally(diag, findings, top)
    paddle_black = set(default_lists(mcfg.dtype, mcfg.level or "O1")["black"])
    diag.black_list_candidates, diag.already_black_listed = black_list_candidates(
        findings, mcfg, known=known_op_names(), paddle_black=paddle_black)
    _paddle_comparison(diag, dumps[REFERENCE_MODE], dumps[mcfg.name], out, run_path)
    diag.summary = summary_text(diag, findings, len(amp_ops))


def _mark_no_dump(diag: ModeDiagnosis, trials: dict[str, Trial]) -> None:
    """A pair with a run that left no dump is failed, with each run's status and the last line of its error:
    a run that crashed is why, and its logs are where to look."""
    diag.status = "failed"
    bad = [f"{m}: {t.status}" + (f" ({last_line(t.error)})" if t.error else "") for m, t in trials.items()]
    diag.summary = "No op dump to compare (" + "; ".join(bad) + f"). See the logs in {diag.files['logs']}."


def _tally(diag: ModeDiagnosis, findings: list[Finding], top: int) -> None:
    """How many findings of each kind and the first op of each (the summary leads with those), and the `top`
    condensed findings the diagnosis lists."""
    diag.counts = {k: sum(1 for f in findings if f.kind == k) for k in KIND_TEXT if any(f.kind == k for f in findings)}
    diag.first_by_kind = {k: next(f.op for f in findings if f.kind == k) for k in diag.counts}
    diag.findings = condense(findings)[:top]


def _paddle_comparison(diag: ModeDiagnosis, ref_dump: Path, amp_dump: Path, out: Path, run_path: Path) -> None:
    """Paddle's own compare tool over the same two dumps, as a second opinion: its infinite op types, and its
    workbook among the diagnosis's files where it wrote one."""
    xlsx, log = out / "compare_accuracy.xlsx", out / "compare_accuracy.log"
    diag.compare_accuracy = _compare_accuracy(ref_dump, amp_dump, xlsx, diag.loss_scale or 1.0, log, run_path)
    diag.paddle_infinite_op_types = _paddle_infinite_ops(log, run_path)
    if xlsx.exists():
        diag.files["workbook"] = _rel(xlsx, run_path)


def diagnose_mode(run_dir: Path | OpenRun, mode: str, steps: int = 3, seed: int | None = None, top: int = 10,
                  console: Console | None = None, tol: Tolerances | None = None) -> ModeDiagnosis:
    """Run the pair, compare, and return the condensed diagnosis (also kept under <run>/diagnose/<mode>/)."""
    console = console or TerminalConsole()
    run = run_dir if isinstance(run_dir, OpenRun) else open_run(run_dir)
    _check_request(run, mode, steps)
    mcfg, ref_cfg = run.suite.mode(mode), run.suite.mode(REFERENCE_MODE)
    seed = _pick_seed(run, mode) if seed is None else seed
    # Both runs at one batch size, or the op outputs cannot be matched; the smaller one fits both.
    batch = min(run.suite.batch_size(ref_cfg), run.suite.batch_size(mcfg))
    out = run.dir.diagnose_dir(mode)
    empty_folder(out, run.path)   # diagnose/ and diagnose/<mode>/ real folders of the run: a link is refused
    console.print(f"diagnosing [bold]{escape(mode)}[/] of {escape(str(run.path))} (seed {seed})")
    trials = _run_pair(run, mode, seed, steps, batch, out, console)
    dumps = {m: RunPaths(out).numerics_path(trial_key(m, seed)) for m in trials}
    diag = _new_diagnosis(run, mcfg, seed, steps, batch, trials, dumps, out, tol or Tolerances())
    _fill_findings(diag, mcfg, trials, dumps, out, run.path, top)
    _emulated_losses(diag, run)
    return diag


def _emulated_losses(diag: ModeDiagnosis, run: OpenRun) -> None:
    """An emulated mode: its run's per-layer losses (overflowed, flushed, lost updates), the first overflow
    and what to try, from the trials as recorded (every step of every seed, not the short re-run)."""
    losses = mode_losses(diag.mode, run.trials)
    if losses is None:
        return
    diag.emulated = True
    diag.emulated_layers = [r for r in losses.layers if any(getattr(r, k) for k in KINDS)][:MAX_LAYERS]
    diag.emulated_first_overflow = losses.first_overflow
    diag.emulated_advice = emulated_advice(losses)


def run_diagnose(run_dir: Path, mode: str, steps: int = 3, seed: int | None = None,
                 console: Console | None = None, top: int = 10) -> int:
    """CLI entry: 0 nothing flagged, 1 ops flagged (see diagnosis.md), 2 the pair could not be run."""
    console = console or TerminalConsole()
    run = open_run(run_dir)
    diag = diagnose_mode(run, mode, steps=steps, seed=seed, top=top, console=console)
    jpath, mpath = write_diagnosis(run.path, run.suite, diag)
    print_diagnosis(diag, console)
    console.print(f"diagnosis: {mpath} (+ {jpath.name})", markup=False)
    if diag.status == "failed":
        return 2
    return 1 if diag.findings or diag.emulated_first_overflow else 0
