"""What to try when a rule does not pass: concrete changes, with the exact TOML lines.

`advice_for(rule_result, mode_config, diagnosis=None)` returns markdown strings for the report:
each names a change, why it may help, and the line(s) to put in that mode's `[[modes]]` entry of the
suite file (or the table it names).  A diagnosis from `ampbench diagnose` makes the black-list advice
name the ops that actually overflowed.  No advice claims to fix anything: each is something to try,
then re-run and re-check.
"""

from __future__ import annotations

from typing import Any

import tomli_w

from ampbench.config import ModeConfig, ScalerConfig
from ampbench.results.diagnosis_file import ModeDiagnosis, mode_diagnosis
from ampbench.results.verdicts import RuleResult

FP16_SAFE_SCALE = 32768.0
INACTIVE = ("AMP was inactive in these trials, so this number describes FP32 on both sides; no suite change "
            "can fix that here. Run the suite on a CUDA GPU to judge it.")
BASELINE_QUALITY = ("FP32 must learn before parity means anything: raise `steps` in `[train]` (or the profile's "
                    "`train = { steps = ... }`), or run the GPU profile, whose budget is sized for quality.")
HISTORY = ("Compare this run's environment (Paddle/CUDA/cuDNN versions, driver, `default_lists_hash` of the AMP "
           "op lists) with the baseline's: a changed op list or library moves numbers without any suite change. "
           "If the change is intended, record a new baseline with `ampbench baseline save RUN_DIR`.")


def toml_line(key: str, value: Any) -> str:
    return f"`{key} = {toml_inline(value)}`" if isinstance(value, dict) else \
        f"`{_one_line(tomli_w.dumps({key: value}))}`"


def scaler_line(mode: ModeConfig, **changes: Any) -> str:
    """The whole `scaler = {...}` inline table with `changes` applied (replaces the mode's scaler line)."""
    data = {**mode.scaler.model_dump(), **changes}
    ScalerConfig.model_validate(data)  # advice must never suggest an invalid table
    return toml_line("scaler", data)


def _diag(diagnosis: Any, mode: ModeConfig) -> ModeDiagnosis | None:
    return mode_diagnosis(diagnosis, mode.name)


# ---------------------------------------------------------------- building blocks


def _run_diagnose(mode: ModeConfig) -> str:
    return (f"Find the op that goes wrong first: `ampbench diagnose RUN_DIR --mode {mode.name}` re-runs a few steps "
            "of FP32 and this mode with Paddle's numerics dumps and names it (diagnosis.md in the run folder).")


def _black_list(mode: ModeConfig, diag: Any) -> list[str]:
    if diag is None:
        return [_run_diagnose(mode)]
    out = []
    if diag.black_list_candidates:
        merged = list(dict.fromkeys([*mode.custom_black_list, *diag.black_list_candidates]))
        line = toml_line("custom_black_list", merged)
        white = [w for w in mode.custom_white_list if w not in diag.black_list_candidates]
        if white != list(mode.custom_white_list):
            line += " and " + toml_line("custom_white_list", white)
        ops = ", ".join(f"`{n}`" for n in diag.black_list_candidates)
        out.append(f"Keep the op(s) the diagnosis found overflowing or drifting in float32 ({ops}): {line}.")
    elif diag.already_black_listed:
        ops = ", ".join(f"`{n}`" for n in diag.already_black_listed)
        out.append(f"The ops the diagnosis flagged ({ops}) already run in float32: their float16 inputs overflow "
                   "upstream, so black-listing more will not help; prefer O1 or bfloat16 below.")
    if any(k == "fp32-nonfinite" for k in diag.counts):
        op = diag.first_by_kind.get("fp32-nonfinite", "?")
        out.append(f"FP32 itself produced NaN/Inf (first at `{op}`): this is a model/data problem, not AMP's. Lower "
                   "the learning rate or clip gradients (`grad_clip_norm = 1.0` in `[train] optimizer`), or guard "
                   "the op (e.g. clamp the input of exp/log).")
    return out


def _o1(mode: ModeConfig) -> list[str]:
    if mode.level != "O2":
        return []
    msg = (f"Use O1 instead of O2: O1 casts only white-list ops (matmul, conv) to {mode.dtype} and keeps the rest, "
           f"including normalisations and the weights, in float32: {toml_line('level', 'O1')}.")
    return [msg]


def _bf16(mode: ModeConfig) -> list[str]:
    if mode.dtype != "float16":
        return []
    msg = ("Try bfloat16: the range of float32 (no overflow at 65504, no loss scaling needed; Paddle turns dynamic "
           "loss scaling off for it) at lower precision; needs an NVIDIA GPU of compute capability 8.0+ (A100, "
           f"RTX 30xx or newer): {toml_line('dtype', 'bfloat16')}.")
    return [msg]


def _scaler_for_collapse(mode: ModeConfig, diag: Any) -> list[str]:
    s = mode.scaler
    if mode.dtype != "float16" or not s.enable or not s.use_dynamic_loss_scaling:
        return []
    forward_overflow = diag is not None and any(
        f.phase == "forward" and f.kind in ("amp-nonfinite", "fp16-range") for f in diag.findings)
    why = ("Loss scaling only acts on gradients, so it cannot stop the forward overflow the diagnosis found; "
           "this helps only once that is fixed. " if forward_overflow else "")
    line = scaler_line(mode, init_loss_scaling=s.init_loss_scaling * 4,
                       decr_every_n_nan_or_inf=max(2, s.decr_every_n_nan_or_inf))
    msg = (f"{why}If the Inf steps are occasional spikes, start higher and halve only after 2 Inf steps in a row, so "
           f"one spike does not ratchet the scale down: {line}.")
    return [msg]


def _scaler_for_underflow(mode: ModeConfig, diag: Any) -> list[str]:
    s = mode.scaler
    if mode.dtype != "float16" or not s.enable:
        return []
    seen = diag is not None and any(f.kind == "underflow" and f.phase == "backward" for f in diag.findings)
    lead = "The diagnosis saw gradients flushed to zero in float16. " if seen else ""
    line = scaler_line(mode, init_loss_scaling=s.init_loss_scaling * 4,
                       incr_every_n_steps=max(1, min(s.incr_every_n_steps, 500)))
    msg = (f"{lead}Small gradients underflow in float16 when the loss scale is low: start from a larger scale "
           f"and grow it sooner: {line}.")
    return [msg]


# ---------------------------------------------------------------- per rule


def advice_for(rule_result: RuleResult, mode_config: ModeConfig, diagnosis: Any = None,
               batch_size: int | None = None) -> list[str]:
    """Advice for one rule of one mode (empty for PASS).

    `diagnosis`: the mode's ModeDiagnosis, the run's DiagnosisFile, or their JSON (diagnosis.json).
    `batch_size`: the mode's effective batch size, for exact batch-size lines (optional).
    """
    r, m = rule_result, mode_config
    if r.status == "PASS":
        return []
    diag = _diag(diagnosis, m)
    informational = r.informational
    rule = r.rule
    text = (r.message or "").lower()
    if rule == "amp-active":
        return _amp_active(m, text)
    if informational and rule in ("accuracy-parity", "speedup", "memory"):
        return [INACTIVE]
    if rule == "accuracy-parity":
        return _parity(m, diag, r, text)
    if rule == "stability":
        return _stability(m, diag, r, text)
    if rule == "speedup":
        return _speedup(m, batch_size, text)
    if rule == "memory":
        return _memory(m, text)
    if rule == "completeness":
        return _completeness(m, batch_size, text)
    if rule == "baseline-quality":
        return [BASELINE_QUALITY]
    if rule.startswith("history"):
        return [HISTORY]
    return []


def _amp_active(m: ModeConfig, text: str) -> list[str]:
    out = []
    if "device" in text or "cpu" in text or "inactive on this device" in text:
        out.append("AMP cannot run on this device (Paddle's auto_cast is a no-op without a CUDA/XPU device): run the "
                   "suite on a GPU; no suite change activates it here.")
    if m.dtype == "bfloat16":
        out.append("bfloat16 kernels need compute capability 8.0+; on older GPUs use float16 with loss scaling: "
                   f"{toml_line('dtype', 'float16')}.")
    if m.custom_black_list and ("custom op list" in text or "no op ran" in text or not out):
        out.append("Paddle ran no op in low precision: check that `custom_black_list` does not hold the matmul/conv "
                   f"ops (current: {_toml_list(m.custom_black_list)}); e.g. {toml_line('custom_black_list', [])}.")
    return out


def _parity(m: ModeConfig, diag: Any, r: RuleResult, text: str) -> list[str]:
    out = _black_list(m, diag)
    out += _o1(m)
    if m.level == "O2" and m.master_weight is False:
        out.append(f"Keep float32 master weights in O2 (small updates vanish in float16 weights): "
                   f"{toml_line('master_weight', True)}.")
    if not m.use_promote:
        out.append(f"Let mixed float16/float32 inputs promote to float32: {toml_line('use_promote', True)}.")
    out += _scaler_for_underflow(m, diag)
    out += _bf16(m)
    if m.dtype == "bfloat16":
        out.append("bfloat16 keeps only 8 mantissa bits; float16 keeps 11 (with loss scaling): "
                   f"{toml_line('dtype', 'float16')}.")
    if "one fp32 seed" in text:
        out.append("With one FP32 seed the margin ignores seed-to-seed noise: add seeds (`seeds = [0, 1, 2]` in "
                   "`[suite]`) for a noise-aware margin.")
    return out


def _stability(m: ModeConfig, diag: Any, r: RuleResult, text: str) -> list[str]:
    obs = r.observed if isinstance(r.observed, dict) else {}
    collapse = obs.get("collapse_began_step") is not None or "collapse" in text
    nonfinite = bool(obs.get("nonfinite_losses")) or "non-finite" in text
    skipped = "skipped" in text
    out: list[str] = []
    if collapse or nonfinite:
        out += _black_list(m, diag)
        out += _o1(m)
        out += _bf16(m)
    if collapse:
        out += _scaler_for_collapse(m, diag)
    elif skipped and m.dtype == "float16" and m.scaler.enable:
        s = m.scaler
        lower = FP16_SAFE_SCALE if s.init_loss_scaling > FP16_SAFE_SCALE else s.init_loss_scaling / 8
        out.append("Many steps were skipped for Inf gradients: a start scale that is too large spends the first steps "
                   f"halving; start lower: {scaler_line(m, init_loss_scaling=lower)}.")
    if nonfinite and not m.scaler.enable and m.dtype == "float16":
        out.append(f"float16 without loss scaling: enable the scaler so Inf steps are skipped instead of applied: "
                   f"{scaler_line(m, enable=True)}.")
    return list(dict.fromkeys(out))


def _speedup(m: ModeConfig, batch_size: int | None, text: str) -> list[str]:
    out = []
    if m.level == "O1":
        out.append("O2 runs nearly everything in low precision and skips most casts (keep FP32 master weights): "
                   f"{toml_line('level', 'O2')} with {toml_line('master_weight', True)}.")
    b = m.batch_size or batch_size
    if b:
        out.append(f"AMP usually frees memory for a larger batch, which keeps Tensor Cores busy: {toml_line('batch_size', b * 2)} "
                   "(parity is then judged across batch sizes; the report notes it).")
    else:
        out.append("AMP usually frees memory for a larger batch: set `batch_size` in this mode to twice the FP32 batch.")
    if m.custom_black_list:
        out.append(f"Every black-listed op adds casts around it; drop entries you do not need (current: "
                   f"{_toml_list(m.custom_black_list)}).")
    out.append("Tensor Cores need matmul/conv dimensions (hidden sizes, channels, batch x sequence) in multiples of 8; "
               "`tox -e bench` times the white- and black-list ops in FP32 and auto_cast on this GPU.")
    return out


def _memory(m: ModeConfig, text: str) -> list[str]:
    out = []
    if "not device memory" in text:
        out.append("This peak is host memory, not GPU memory: judge memory on a GPU run.")
    if m.level == "O1":
        out.append(f"O1 keeps weights and most activations in float32; O2 stores them in {m.dtype}: "
                   f"{toml_line('level', 'O2')}.")
    elif m.master_weight is not False:
        out.append("O2 keeps a float32 master copy of the weights (and Adam keeps float32 moments); without it the "
                   f"weights take half the memory, at some accuracy risk: {toml_line('master_weight', False)}.")
    return out


def _completeness(m: ModeConfig, batch_size: int | None, text: str) -> list[str]:
    out = []
    b = m.batch_size or batch_size
    if "oom" in text or "out of memory" in text:
        out.append(f"A trial ran out of memory: halve this mode's batch, {toml_line('batch_size', max(1, b // 2))}."
                   if b else "A trial ran out of memory: set a smaller `batch_size` in this mode.")
    if "timeout" in text:
        out.append("A trial hit its timeout: raise `timeout_s` in `[train]` or cut `steps`.")
    if "crashed" in text or not out:
        out.append("Read the trial's log in the run folder (`logs/<mode>__seed<k>.log`); `ampbench run --resume "
                   "RUN_DIR` re-runs only the missing trials.")
    return out


def diagnosis_advice(mode_config: ModeConfig, diagnosis: Any) -> list[str]:
    """What to try given only a diagnosis (for diagnosis.md): black-list, O1, bfloat16, scaler."""
    diag = _diag(diagnosis, mode_config)
    if diag is None or not diag.findings:
        return []
    if not diag.amp_active:
        tips = [t for t in _black_list(mode_config, diag)]
        if tips and diag.black_list_candidates:
            tips = [t + " (from the FP32 path's float16-range check: AMP did not run here)" if "custom_black_list" in t
                    else t for t in tips]
        return tips
    out = _black_list(mode_config, diag)
    if any(f.kind in ("amp-nonfinite", "fp16-range", "diverged") for f in diag.findings):
        out += _o1(mode_config) + _bf16(mode_config)
    if any(f.kind == "underflow" for f in diag.findings):
        out += _scaler_for_underflow(mode_config, diag)
    return list(dict.fromkeys(out))


def _one_line(text: str) -> str:
    """tomli-w's multi-line array joined onto one line (still valid TOML: trailing commas are allowed)."""
    return " ".join(part.strip() for part in text.strip().splitlines())


def toml_inline(value: object) -> str:
    """A value as an inline TOML value; every scalar rendered (escaped) by tomli-w."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_one_line(tomli_w.dumps({str(k): 0})).rsplit('=', 1)[0].strip()} = {toml_inline(v)}"
                                for k, v in value.items()) + " }"
    return _one_line(tomli_w.dumps({"x": value})).removeprefix("x = ")


def _toml_list(items: list[str]) -> str:
    """A list as the right-hand side of a TOML line (tomli-w: names from a suite reach TOML escaped)."""
    return toml_inline(list(items))
