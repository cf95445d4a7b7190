"""energy: joules per sample, AMP against FP32, from NVML's energy counter over the measured window.

Lower is better. Each trial gives one number (`memory.energy_j_per_sample`); the two arms are
compared as a ratio of geometric means with the trial-level log-ratio bounds every rate rule uses.
PASS: the one-sided upper bound <= MAX_ENERGY_RATIO (AMP is shown to spend no more energy per
sample); FAIL: the lower bound is above it; INCONCLUSIVE otherwise, and wherever no energy was
measured (CPU; a GPU without NVML's total-energy counter gets no energy line at all).
"""

from __future__ import annotations

from ampbench.config import REFERENCE_MODE, ModeConfig
from ampbench.judge import inference
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.context import Ctx, Rule, amp_only, g, more_seeds_text
from ampbench.judge.rules.reasons import NOT_EMULATED, PAIRS, R
from ampbench.judge.rules.traits import Result, ResultName
from ampbench.record.models import Trial
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult, Status

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
ENERGY_NAME = ResultName("energy")

MAX_ENERGY_RATIO = 1.0  # AMP J/sample over FP32 J/sample: AMP should not cost more energy per sample


def _per_sample(trials: list[Trial]) -> list[float]:
    values = [t.memory.energy_j_per_sample for t in trials]
    return [float(v) for v in values if v is not None and v > 0]


def rule_energy(c: Ctx) -> list[RuleResult]:
    """AMP/FP32 energy per sample (NVML's energy counter, GPU only) against MAX_ENERGY_RATIO: PASS when its
    upper bound is at most that, FAIL when its lower bound is above.  observed = the ratio."""
    amp, ref = _per_sample(c.ok(c.mode)), _per_sample(c.ok(REFERENCE_MODE))
    if not amp or not ref:
        return [c.rule(ENERGY_NAME, "INCONCLUSIVE", None, MAX_ENERGY_RATIO,
                       "Energy per sample not measured (NVML's energy counter: GPU only).",
                       informational=c.amp_inactive, reasons=["not-measured"])]
    if min(len(amp), len(ref)) < inference.MIN_TRIALS:
        return [c.rule(ENERGY_NAME, "INCONCLUSIVE", None, MAX_ENERGY_RATIO,
                       f"Energy per sample from too few trials: {more_seeds_text(min(len(amp), len(ref)), inference.MIN_TRIALS)}.",
                       informational=c.amp_inactive, reasons=["few-seeds"])]
    b = inference.log_ratio_bounds(amp, ref, c.th.confidence)
    status: Status = "PASS" if b.upper <= MAX_ENERGY_RATIO else "FAIL" if b.lower > MAX_ENERGY_RATIO else "INCONCLUSIVE"
    msg = (f"AMP/FP32 energy per sample {b.estimate:.3f} ({g(b.confidence * 100, 3)}% CI [{b.low:.3f}, {b.high:.3f}], "
           f"{len(amp)} vs {len(ref)} seeds) against at most {g(MAX_ENERGY_RATIO)}.")
    return [c.rule(ENERGY_NAME, status, b.estimate, MAX_ENERGY_RATIO, msg, informational=c.amp_inactive,
                   estimate=b.estimate, ci_low=b.low, ci_high=b.high, lower=b.lower, upper=b.upper,
                   reasons=[{"PASS": "no-more", "FAIL": "more", "INCONCLUSIVE": "undecided"}[status]])]


def _applies(c: Ctx) -> bool:
    """An AMP mode where energy was measured in some trial, or where AMP was inactive (CPU: the mode is
    INCONCLUSIVE anyway, and the report says why there is no energy); a GPU without the counter
    gets no energy line rather than an INCONCLUSIVE that nothing could ever decide."""
    return amp_only(c) and (c.amp_inactive or bool(_per_sample(c.ok(c.mode)) or _per_sample(c.ok(REFERENCE_MODE))))


def advise_energy(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """Energy per sample follows time per sample: what speeds AMP up usually saves energy too."""
    if r.informational:
        return [kit.INACTIVE]
    if kit.reasons(r) & {"not-measured", "few-seeds"}:
        return ["Energy comes from NVML's total-energy counter (Volta or newer): run on such a GPU with "
                "nvidia-ml-py installed (the gpu extra: AMPBENCH_PADDLE=gpu bash scripts/setup.sh installs it), "
                "and at least two seeds per mode."]
    return ["AMP spends more energy per sample when it is not faster: see the speedup rule's advice "
            f"(O2, a larger batch){'; ' + kit.toml_line('level', 'O2') if m.level == 'O1' else ''}."]


ENERGY = Rule("energy", rule_energy, _applies, advice=advise_energy, results=(Result(ENERGY_NAME, device=True, reasons=(
    (R.NO_MORE, ""), (R.MORE, ""), (R.UNDECIDED, ""), (R.NOT_MEASURED, ""), (R.FEW_SEEDS, ""), *PAIRS, NOT_EMULATED)),))
