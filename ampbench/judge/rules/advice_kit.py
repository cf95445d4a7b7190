"""The building blocks of rule advice: suite edits suggested as exact TOML lines (tomli-w).

Each rule module's `advise` composes these; diagnose/advice.py looks the rule up in the registry.
No advice claims to fix anything: each is something to try, then re-run and re-check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tomli_w

from ampbench.config import ModeConfig, ScalerConfig
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult

Advice = Callable[[RuleResult, ModeConfig, "ModeDiagnosis | None", "int | None"], list[str]]

FP16_SAFE_SCALE = 32768.0
INACTIVE = ("AMP was inactive in these trials, so this number describes FP32 on both sides; no suite change "
            "can fix that here. Run the suite on a CUDA GPU to judge it.")
# A throughput result its own interference evidence explains (reason code "disturbed"): the measurement, not
# the code or the suite, is what to change; advice about either would contradict the rule's own finding.
DISTURBED = ("Re-run on a quiet machine (nothing else busy; `--affinity` pins the trials to a CPU set): the "
             "slower side was measured while other processes competed, so no code, library or suite change is "
             "indicated by this number.")

# A paired result held back because a seed's arms were not measured in place (judge/rules/pairs.py): the
# measurement is what to change, as for DISTURBED; a suite change would answer a question nobody measured.
APART_CODES = frozenset({"different-nodes", "overlapped"})
APART = ("Re-run so each seed's FP32 and AMP trials run on one node, one after the other (`ampbench run`, and "
         "`run --launcher slurm`, which chains a seed's jobs onto one node, do; `run --devices` puts them side by "
         "side on twin devices), or, when the nodes are identical and that is what you mean to compare, accept it: "
         "`pairs = \"any-node\"` (two nodes) or `pairs = \"any\"` (at once on one device too) in `[suite]`.")


def reasons(r: RuleResult) -> set[str]:
    """The result's reason codes (`details.reasons`, set by its rule with the numbers its message shows):
    the only thing advice reads about why a rule did not pass, so rewording a message changes no advice."""
    got = r.details.get("reasons")
    return {str(x) for x in got} if isinstance(got, list) else set()


def toml_line(key: str, value: Any) -> str:
    return f"`{key} = {toml_inline(value)}`" if isinstance(value, dict) else \
        f"`{_one_line(tomli_w.dumps({key: value}))}`"


def scaler_line(mode: ModeConfig, own: frozenset[str] = frozenset(), **changes: Any) -> str:
    """The whole `scaler = {...}` inline table with `changes` applied (replaces the mode's scaler line); for a
    program that builds its own GradScaler ("scaler" in `own`, `program_applied`), the call with the changed
    arguments, in the program's code."""
    data = {k: v for k, v in {**mode.scaler.model_dump(), **changes}.items() if v is not None}  # TOML has no null
    ScalerConfig.model_validate(data)  # advice must never suggest an invalid table
    if "scaler" in own:
        args = ", ".join(f"{k}={v!r}" for k, v in changes.items() if k != "enable")
        return (f"`paddle.amp.GradScaler({args})` in the program's own GradScaler call (a suite's `scaler` table "
                "does not reach a program that builds its own)")
    return toml_line("scaler", data)


def program_amp(trials: list[Any]) -> dict[str, Any]:
    """The AMP calls a command program made itself (`amp.program` of its first trial that has them), for a rule's
    details (`program_amp`), so its advice is about what ran (issue 58.8)."""
    return next((dict(t.amp.program) for t in trials if getattr(t.amp, "program", None)), {})


def _scaler_of(raw: dict[str, Any]) -> ScalerConfig:
    ints = ("incr_every_n_steps", "decr_every_n_nan_or_inf")
    return ScalerConfig.model_validate({k: int(v) if k in ints else bool(v) if k == "use_dynamic_loss_scaling"
                                        else float(v) for k, v in raw.items()} | {"enable": True})


def program_applied(mode: ModeConfig, r: RuleResult) -> tuple[ModeConfig, frozenset[str]]:
    """The mode as its program's own AMP calls ran it (their GradScaler settings and custom op lists), when the
    rule's trials recorded them (`details.program_amp`), and which of them are the program's ("scaler",
    "lists": their advice names the program's call, not a suite line); the mode itself otherwise."""
    prog = r.details.get("program_amp")
    prog = prog if isinstance(prog, dict) else {}
    update: dict[str, Any] = {}
    scaler = (prog.get("grad_scaler") or {}).get("scaler")
    if isinstance(scaler, dict):
        try:
            update["scaler"] = _scaler_of(scaler)
        except (ValueError, TypeError):
            pass
    cast = prog.get("auto_cast")
    if isinstance(cast, dict):
        update["custom_white_list"] = [str(x) for x in cast.get("white") or []]
        update["custom_black_list"] = [str(x) for x in cast.get("black") or []]
    own = frozenset(k for k, key in (("scaler", "scaler"), ("lists", "custom_black_list")) if key in update)
    return (mode.model_copy(update=update) if update else mode), own


# ---------------------------------------------------------------- building blocks


def run_diagnose(mode: ModeConfig) -> str:
    return (f"Find the op that goes wrong first: `ampbench diagnose RUN_DIR --mode {mode.name}` re-runs a few steps "
            "of FP32 and this mode with Paddle's numerics dumps and names it (diagnosis.md in the run folder).")


def black_list(mode: ModeConfig, diag: ModeDiagnosis | None, own: frozenset[str] = frozenset()) -> list[str]:
    if diag is None:
        return [run_diagnose(mode)]
    out = []
    if diag.black_list_candidates:
        merged = list(dict.fromkeys([*mode.custom_black_list, *diag.black_list_candidates]))
        line = toml_line("custom_black_list", merged)
        white = [w for w in mode.custom_white_list if w not in diag.black_list_candidates]
        if white != list(mode.custom_white_list):
            line += " and " + toml_line("custom_white_list", white)
        if "lists" in own:   # the program's own auto_cast lists: the change goes in its call
            line = (f"`paddle.amp.auto_cast(custom_white_list={white!r}, custom_black_list={merged!r})` in the "
                    "program's own auto_cast call (a suite's lists do not reach a program that applies AMP itself)")
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


def o1(mode: ModeConfig) -> list[str]:
    if mode.level != "O2":
        return []
    msg = (f"Use O1 instead of O2: O1 casts only white-list ops (matmul, conv) to {mode.dtype} and keeps the rest, "
           f"including normalisations and the weights, in float32: {toml_line('level', 'O1')}.")
    return [msg]


def bf16(mode: ModeConfig) -> list[str]:
    if mode.dtype != "float16":
        return []
    msg = ("Try bfloat16: the range of float32 (no overflow at 65504, no loss scaling needed; Paddle turns dynamic "
           "loss scaling off for it) at lower precision; needs an NVIDIA GPU of compute capability 8.0+ (A100, "
           f"RTX 30xx or newer): {toml_line('dtype', 'bfloat16')}.")
    return [msg]


def scaler_for_collapse(mode: ModeConfig, diag: ModeDiagnosis | None, own: frozenset[str] = frozenset()) -> list[str]:
    s = mode.scaler
    if mode.dtype != "float16" or not mode.scaler_wanted or not s.use_dynamic_loss_scaling:
        return []
    forward_overflow = diag is not None and any(
        f.phase == "forward" and f.kind in ("amp-nonfinite", "fp16-range") for f in diag.findings)
    why = ("Loss scaling only acts on gradients, so it cannot stop the forward overflow the diagnosis found; "
           "this helps only once that is fixed. " if forward_overflow else "")
    line = scaler_line(mode, own, init_loss_scaling=s.init_loss_scaling * 4,
                       decr_every_n_nan_or_inf=max(2, s.decr_every_n_nan_or_inf))
    msg = (f"{why}If the Inf steps are occasional spikes, start higher and halve only after 2 Inf steps in a row, so "
           f"one spike does not ratchet the scale down: {line}.")
    return [msg]


def scaler_for_underflow(mode: ModeConfig, diag: ModeDiagnosis | None) -> list[str]:
    s = mode.scaler
    if mode.dtype != "float16" or not mode.scaler_wanted:
        return []
    seen = diag is not None and any(f.kind == "underflow" and f.phase == "backward" for f in diag.findings)
    lead = "The diagnosis saw gradients flushed to zero in float16. " if seen else ""
    line = scaler_line(mode, init_loss_scaling=s.init_loss_scaling * 4,
                       incr_every_n_steps=max(1, min(s.incr_every_n_steps, 500)))
    msg = (f"{lead}Small gradients underflow in float16 when the loss scale is low: start from a larger scale "
           f"and grow it sooner: {line}.")
    return [msg]


def _one_line(text: str) -> str:
    """tomli-w's multi-line array joined onto one line (still valid TOML: trailing commas are allowed)."""
    return " ".join(part.strip() for part in text.strip().splitlines())


def toml_inline(value: object) -> str:
    """A value as an inline TOML value; every scalar rendered (escaped) by tomli-w."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_one_line(tomli_w.dumps({str(k): 0})).rsplit('=', 1)[0].strip()} = {toml_inline(v)}"
                                for k, v in value.items()) + " }"
    return _one_line(tomli_w.dumps({"x": value})).removeprefix("x = ")


def toml_list(items: list[str]) -> str:
    """A list as the right-hand side of a TOML line (tomli-w: names from a suite reach TOML escaped)."""
    return toml_inline(list(items))
