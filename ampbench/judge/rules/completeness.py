"""completeness: every planned trial present and ok, seeds matched with FP32's."""

from __future__ import annotations

from ampbench.config import REFERENCE_MODE, ModeConfig
from ampbench.judge.rules import advice_kit as kit
from ampbench.judge.rules.context import Ctx, Rule, last_line, n_of
from ampbench.judge.rules.reasons import R
from ampbench.judge.rules.traits import Result, ResultName
from ampbench.record.models import trial_key
from ampbench.results.diagnosis_file import ModeDiagnosis
from ampbench.results.verdicts import RuleResult, Status, combine

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
COMPLETENESS_NAME = ResultName("completeness")


def _problems(c: Ctx, keys: list[tuple[str, int]]) -> list[tuple[Status, str, str, str]]:
    """(status, text, trial, reason) for each planned trial that is missing or did not end ok; the reason
    (`missing`, the trial's status, `reference-<status>`) is what advice reads, never the text."""
    out: list[tuple[Status, str, str, str]] = []
    for mode, seed in keys:
        name, t = trial_key(mode, seed), c.trials.get((mode, seed))
        if t is None:
            out.append(("INCONCLUSIVE", f"{name} is missing (re-run with --resume)", name, "missing"))
        elif t.status == "crashed":
            out.append(("ERROR", f"{name} crashed: {last_line(t.error)}", name, "crashed"))
        elif t.status != "ok" and mode == c.mode:
            out.append(("FAIL", f"{name} ended '{t.status}': {last_line(t.error)}", name, t.status))
        elif t.status != "ok":
            out.append(("INCONCLUSIVE", (f"reference {name} ended '{t.status}', so there is nothing to "
                                         "compare against"), name, f"reference-{t.status}"))
    return out


def rule_completeness(c: Ctx) -> list[RuleResult]:
    """Every planned trial present and ok; seeds unique and the same as FP32's (a matched comparison).

    observed = {"ok": trials that ended ok, "planned": planned trials}.
    """
    own, ref = c.seeds(c.mode), c.seeds(REFERENCE_MODE)
    keys = [(c.mode, s) for s in own] + ([] if c.is_ref else [(REFERENCE_MODE, s) for s in ref])
    problems = _problems(c, keys)
    if len(set(own)) != len(own):
        problems.append(("ERROR", f"seeds of {c.mode} repeat in the plan: {own}", "", "seeds-repeat"))
    if not c.is_ref and sorted(own) != sorted(ref):
        problems.append(("ERROR", (f"seeds differ: {c.mode} has {sorted(own)}, fp32 has {sorted(ref)}; "
                                   "the comparison is not matched"), "", "seeds-differ"))
    n_ok = sum(1 for k in keys if k in c.trials and c.trials[k].status == "ok")
    observed = {"ok": n_ok, "planned": len(keys)}
    threshold = {"ok": len(keys), "seeds_matched": True}
    if not problems:
        who = f"{n_of(len(own), 'seed')} x {{{c.mode}{'' if c.is_ref else ', fp32'}}}"
        return [c.rule(COMPLETENESS_NAME, "PASS", observed, threshold,
                       f"All {n_of(len(keys), 'planned trial')} ({who}) finished ok with matching seeds.",
                       reasons=["complete"])]
    status = combine([p[0] for p in problems])
    return [c.rule(COMPLETENESS_NAME, status, observed, threshold, "; ".join(p[1] for p in problems) + ".",
                   trials=[p[2] for p in problems if p[2]], reasons=sorted({p[3] for p in problems}))]


def _completeness(m: ModeConfig, batch_size: int | None, reasons: list[str]) -> list[str]:
    out = []
    b = m.batch_size or batch_size
    if "oom" in reasons:
        out.append(f"A trial ran out of memory: halve this mode's batch, {kit.toml_line('batch_size', max(1, b // 2))}."
                   if b else "A trial ran out of memory: set a smaller `batch_size` in this mode.")
    if "timeout" in reasons:
        out.append("A trial hit its timeout: raise `timeout_s` in `[train]` or cut `steps`.")
    if "crashed" in reasons or not out:
        out.append("Read the trial's log in the run folder (`logs/<mode>__seed<k>.log`); `ampbench run --resume "
                   "RUN_DIR` re-runs only the missing trials.")
    return out


def advise_completeness(r: RuleResult, m: ModeConfig, diag: ModeDiagnosis | None, batch_size: int | None) -> list[str]:
    """A smaller batch after an OOM, a longer timeout, the log to read: from the result's reason codes
    (details.reasons), so rewording a message, or an error text that happens to contain "oom", changes nothing."""
    return _completeness(m, batch_size, sorted(kit.reasons(r)))


COMPLETENESS = Rule("completeness", rule_completeness, advice=advise_completeness,
                    results=(Result(COMPLETENESS_NAME, tune="error", reasons=(
                        (R.COMPLETE, ""), (R.MISSING, ""), (R.CRASHED, ""), (R.OOM, "a trial's end state"),
                        (R.DIVERGED, ""), (R.TIMEOUT, ""), (R.CANCELLED, ""), (R.REFERENCE_OOM, "FP32's trial ended so"),
                        (R.REFERENCE_DIVERGED, ""), (R.REFERENCE_CRASHED, ""), (R.REFERENCE_TIMEOUT, ""),
                        (R.REFERENCE_CANCELLED, ""), (R.SEEDS_REPEAT, ""), (R.SEEDS_DIFFER, ""))),))
