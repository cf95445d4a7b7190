"""stability: no non-finite loss, few skipped (found_inf) steps, no loss-scale collapse."""

from __future__ import annotations

from typing import Any

from ampbench.config import ModeConfig
from ampbench.judge import stats
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.context import Ctx, Rule, finite, g, n_of
from ampbench.judge.rules.reasons import R
from ampbench.judge.rules.traits import Result, ResultName
from ampbench.record.models import Trial
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
STABILITY_NAME = ResultName("stability")


def _collapse_text(col: stats.Collapse, floor: float) -> str:
    if col.kind == "floor":
        why = f"fell below loss_scale_floor {g(floor)} (to {g(col.scale)}) at step {col.detected_step}"
    else:
        why = (f"halved {col.halvings} times without recovering (to {g(col.scale)} by step {col.detected_step}) "
               "while the loss stopped falling")
    return f"loss-scale collapse began at step {col.began_step}: scale {why}"


def _trial_problems(c: Ctx, t: Trial) -> tuple[list[str], int, float, stats.Collapse | None]:
    """(problems, non-finite losses, skipped fraction, collapse) of one trial."""
    th = c.th
    seen = [s for s in t.steps if s.loss_seen]   # a loss not read is neither finite nor not
    bad_steps = [s.step for s in seen if not finite(s.loss)]
    nonfinite = max(t.nonfinite_losses, len(bad_steps))
    skipped = max(t.skipped_steps, sum(1 for s in t.steps if s.found_inf))
    frac = skipped / len(t.steps)
    problems = []
    if nonfinite:
        first = bad_steps[0] if bad_steps else None
        problems.append(f"{t.key}: {nonfinite} non-finite loss(es)" + (f", first at step {first}" if first else ""))
    if frac > th.max_skipped_fraction:
        problems.append(f"{t.key}: {skipped} of {len(t.steps)} steps skipped (found_inf), {frac:.1%} > "
                        f"{th.max_skipped_fraction:.1%}")
    col = stats.find_scale_collapse([s.step for s in seen], [s.loss_scale for s in seen],
                                    [s.loss for s in seen], th.loss_scale_floor, th.collapse_halvings)
    if col:
        problems.append(f"{t.key}: {_collapse_text(col, th.loss_scale_floor)}")
    return problems, nonfinite, frac, col


def _emulated_overflow(ts: list[Trial]) -> dict[str, Any] | None:
    """The earliest first overflow the emulated trials recorded (trial/emulate: its step, phase, layer and op,
    and the seed), or None: where an emulated float16 mode's numerics broke, named from the trials."""
    firsts = [{**t.amp.emulation.first_overflow, "seed": t.seed} for t in ts
              if t.amp.emulated and t.amp.emulation is not None and t.amp.emulation.first_overflow]
    return min(firsts, key=lambda f: int(f.get("step") or 0)) if firsts else None


def _overflow_text(first: dict[str, Any], dtype: str) -> str:
    return (f" Emulated {dtype}: the first value past its range was in layer {first.get('layer')} (op "
            f"{first.get('op')}, {first.get('phase')} of step {first.get('step')}, seed {first.get('seed')}).")


def rule_stability(c: Ctx) -> list[RuleResult]:
    """No non-finite loss, at most max_skipped_fraction of the steps skipped (Inf/NaN gradients) and no
    loss-scale collapse (loss_scale_floor, collapse_halvings), in every trial of the mode.

    observed = {"nonfinite_losses": count, "max_skipped_fraction": worst trial's share of skipped
    steps, "collapse_began_step": step where the earliest loss-scale collapse began, or null}."""
    th = c.th
    threshold = {"nonfinite_losses": 0, "max_skipped_fraction": th.max_skipped_fraction,
                 "loss_scale_floor": th.loss_scale_floor, "collapse_halvings": th.collapse_halvings}
    ts = [t for t in c.present(c.mode) if t.steps]
    if not ts:
        return [c.rule(STABILITY_NAME, "INCONCLUSIVE", None, threshold, "No step records to inspect.", reasons=["no-steps"])]
    problems, names, nonfinite_total, worst_frac, worst_key = [], [], 0, 0.0, ""
    first_collapse: int | None = None
    for t in ts:
        found, nonfinite, frac, col = _trial_problems(c, t)
        problems += found
        names += [t.key] * bool(found)
        nonfinite_total += nonfinite
        if frac >= worst_frac:
            worst_frac, worst_key = frac, t.key
        if col and (first_collapse is None or col.began_step < first_collapse):
            first_collapse = col.began_step
    scale_seen = any(s.loss_scale is not None for t in ts for s in t.steps)
    observed = {"nonfinite_losses": nonfinite_total, "max_skipped_fraction": worst_frac,
                "collapse_began_step": first_collapse}
    scale_txt = "" if scale_seen else " No loss scale was recorded (scaler off or inactive)."
    codes = (["nonfinite"] if nonfinite_total else []) + (["skipped"] if worst_frac > th.max_skipped_fraction else []) \
        + (["collapse"] if first_collapse is not None else [])
    if problems:   # the program's own AMP calls, if it made them: its advice is about what ran (issue 58.8)
        first = _emulated_overflow(ts)
        where = _overflow_text(first, ts[0].amp.dtype) if first else ""
        extra: dict[str, Any] = {"first_overflow": first} if first else {}
        return [c.rule(STABILITY_NAME, "FAIL", observed, threshold, "; ".join(problems) + "." + scale_txt + where,
                       trials=sorted(set(names)), reasons=codes, program_amp=kit.program_amp(ts), **extra)]
    return [c.rule(STABILITY_NAME, "PASS", observed, threshold,
                   f"{n_of(len(ts), 'trial')}: no non-finite loss, at most {worst_frac:.1%} of steps skipped "
                   f"({worst_key}; limit {th.max_skipped_fraction:.1%}), no loss-scale collapse." + scale_txt,
                   reasons=["stable"])]


def _emulated_black_list(m: ModeConfig, first: Any) -> list[str]:
    """An emulated mode's first overflow names its op: keeping that op in float32 is the line to try (no
    diagnose re-run needed: the emulated trials recorded where values were lost)."""
    op = first.get("op") if isinstance(first, dict) else None
    if not isinstance(op, str) or not op or op in m.custom_black_list or op in ("optimizer", "check_finite_and_unscale"):
        return []
    merged = list(dict.fromkeys([*m.custom_black_list, op]))
    return [f"Keep `{op}` in float32, where the emulated {m.dtype} first overflowed (layer {first.get('layer')}): "
            f"{kit.toml_line('custom_black_list', merged)}; `ampbench diagnose RUN_DIR --mode {m.name}` lists every "
            "layer that lost values (from the emulated trials, no re-run)."]


def _stability(m: ModeConfig, diag: ModeDiagnosis | None, reasons: set[str],
               own: frozenset[str] = frozenset(), first: Any = None) -> list[str]:
    """`own`: what the program applied itself ("scaler", "lists"; kit.program_applied): its advice names its call;
    `first`: an emulated mode's first overflow (its op is the black-list line to try)."""
    collapse, nonfinite, skipped = ("collapse" in reasons, "nonfinite" in reasons, "skipped" in reasons)
    out: list[str] = []
    emulated = _emulated_black_list(m, first) if diag is None and (collapse or nonfinite or skipped) else []
    out += emulated
    if collapse or nonfinite:
        out += [] if emulated else kit.black_list(m, diag, own)
        out += kit.o1(m)
        out += kit.bf16(m)
    if collapse:
        out += kit.scaler_for_collapse(m, diag, own)
    elif skipped and m.dtype == "float16" and (m.scaler_wanted or "scaler" in own):
        s = m.scaler
        lower = kit.FP16_SAFE_SCALE if s.init_loss_scaling > kit.FP16_SAFE_SCALE else s.init_loss_scaling / 8
        out.append("Many steps were skipped for Inf gradients: a start scale that is too large spends the first steps "
                   f"halving; start lower: {kit.scaler_line(m, own, init_loss_scaling=lower)}.")
    if nonfinite and not m.scaler_wanted and "scaler" not in own and m.dtype == "float16":
        out.append(f"float16 without loss scaling: enable the scaler so Inf steps are skipped instead of applied: "
                   f"{kit.scaler_line(m, own, enable=True)}.")
    return list(dict.fromkeys(out))


def advise_stability(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """Overflow (black-list, O1, bfloat16, scaler settings) or a start scale that skips too many steps, about the
    program's own AMP calls when it applied AMP itself (issue 58.8)."""
    mode, own = kit.program_applied(m, r)
    return _stability(mode, diag, kit.reasons(r), own, r.details.get("first_overflow"))


STABILITY = Rule("stability", rule_stability, advice=advise_stability,
                 results=(Result(STABILITY_NAME, tune="stability", reasons=(
                     (R.STABLE, ""), (R.NONFINITE, ""), (R.SKIPPED, ""), (R.COLLAPSE, ""), (R.NO_STEPS, ""))),))
