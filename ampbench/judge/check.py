"""Rules -> verdicts: is each AMP mode as accurate as FP32, faster, leaner, stable, and no worse
than the baseline?  Builds the CheckReport (the contract in verdict.py) and its exit code; the
`check` use-case (commands/check.py) opens the run and writes check.json.

The rules live in judge/rules/ (one module per family, listed in rules/registry.py); this module
runs them for every planned mode.  When AMP did not really run (CPU), a mode is INCONCLUSIVE, never
PASS; the parity, speedup and memory numbers are still computed and marked informational.
"""

from __future__ import annotations

from ampbench.config import Suite
from ampbench.core.errors import ResultsError
from ampbench.judge.claims import RunFacts, judge_claims
from ampbench.judge.planner import plan_for
from ampbench.judge.pooled import PooledBaseline
from ampbench.judge.rules import emulated, pairs, registry
from ampbench.judge.rules.context import Ctx
from ampbench.judge.sequential import Design
from ampbench.record.models import Trial
from ampbench.results.baselines import Baseline, device_slug, node_of
from ampbench.results.probe_file import run_probe
from ampbench.results.run_dir import OpenRun
from ampbench.results.verdicts import CheckReport, ClaimResult, ModeVerdict, combine, exit_code


def _mismatches(suite: Suite, trials: list[Trial], b: Baseline) -> list[str]:
    ok = [t for t in trials if t.status == "ok"] or trials
    cur = {
        "suite": suite.suite.name,
        "config_hash": next((t.config_hash for t in ok if t.config_hash), "") or suite.config_hash(),
        "device": device_slug(ok[0].env) if ok else "unknown",
    }
    then = {"suite": b.suite, "config_hash": b.config_hash, "device": b.device}
    out = [f"{k} {then[k]!r} (baseline) vs {cur[k]!r} (this run)" for k in cur if then[k] and then[k] != cur[k]]
    # another machine of the same device model: its throughput measures the machine (judge/rules/pairs.py)
    here, there = {n for t in ok if (n := node_of(t))}, b.nodes()
    if here and there and here.isdisjoint(there):
        out.append(f"node {', '.join(sorted(there))} (baseline) vs {', '.join(sorted(here))} (this run)")
    return out


def judge_mode(c: Ctx) -> ModeVerdict:
    """Every registered rule that applies to this mode, in registry order."""
    rules = pairs.held_back(c, [r for rule in registry.RULES if rule.applies(c) for r in rule.run(c)])
    rules = emulated.mark(c, rules)   # an emulated mode: numerics judged, device figures not measured
    verdict = combine([r.status for r in rules if r.counted])
    if verdict == "PASS" and c.amp_inactive:  # belt and braces: inactive AMP is never PASS
        verdict = "INCONCLUSIVE"
    return ModeVerdict(suite=c.suite.suite.name, mode=c.mode, verdict=verdict, rules=rules, emulated=c.emulated)


def _baseline_note(suite: Suite, trials: list[Trial], baseline: Baseline | None, allow_mismatch: bool) -> str:
    if baseline is None:
        return ""
    diffs = _mismatches(suite, trials, baseline)
    if diffs and not allow_mismatch:
        raise ResultsError(f"{baseline.path or 'baseline'}: not comparable: different {'; '.join(diffs)}. "
                           "Compare runs of the same suite, config, device and node, or pass --allow-mismatch")
    return f"[baseline mismatch allowed: {'; '.join(diffs)}] " if diffs else ""


def check_trials(
    suite: Suite,
    trials: list[Trial],
    plan: list[tuple[str, int]],
    baseline: Baseline | None = None,
    allow_mismatch: bool = False,
    design: Design | None = None,
    drift_sd: float | None = None,
    pooled: PooledBaseline | None = None,
) -> list[ModeVerdict]:
    """Judge every planned mode (fp32 too: its own completeness, stability and history); `design`: the
    looks of a sequential run (its rules decide at the alpha-spending levels of the last look); `pooled`:
    the history runs the history rules compare against (judge.pooled), instead of `baseline`."""
    names = [m.name for m in suite.modes]
    unknown = sorted({m for m, _ in plan} - set(names))
    if unknown:
        raise ResultsError(f"run.json: plan names mode(s) {unknown} that the suite config does not define")
    if pooled is not None:
        baseline = None
    note = _baseline_note(suite, trials, baseline, allow_mismatch)
    by_key = {(t.mode, t.seed): t for t in trials}
    planned_modes = [m for m in names if any(pm == m for pm, _ in plan)]
    return [judge_mode(Ctx(suite, m, plan, by_key, baseline, note, design=design, drift_sd=drift_sd, pooled=pooled))
            for m in planned_modes]


def design_of(info_sequential: dict | None, where: object) -> Design | None:
    """run.json's `sequential` entry as a Design (None: a fixed-seed run)."""
    if info_sequential is None:
        return None
    try:
        return Design.model_validate(info_sequential)
    except ValueError as e:
        raise ResultsError(f"{where}: sequential: {str(e).splitlines()[-1].strip()}") from None


def _emulated_note(verdicts: list[ModeVerdict]) -> list[str]:
    """The note naming the emulated modes and whether their device results count (the suite's `judges`)."""
    emulated = [v.mode for v in verdicts if v.emulated]
    if not emulated:
        return []
    counted = all(r.counted for v in verdicts for r in v.rules)
    return [f"Emulated AMP in {', '.join(emulated)}: numerics judged for real; speed, memory and energy not "
            "measured under emulation" + (", so those modes cannot PASS here (a suite that judges numerics "
                                          "alone sets [suite] judges = \"numerics\")." if counted else
                                          " (the suite judges numerics alone: they are not counted).")]


def _notes(verdicts: list[ModeVerdict], mismatched: bool = False) -> list[str]:
    """The report's notes, from the results' statuses and details (never their messages); `mismatched`:
    the baseline differs in suite, config or device and --allow-mismatch compared it anyway."""
    rules = [r for v in verdicts for r in v.rules]
    notes = []
    if any(registry.result(r.rule).outcome == "cause" and r.status != "PASS" and not r.emulated   # amp-active,
           and "no-trials" not in (r.details.get("reasons") or []) for r in rules):   # where a trial finished
        notes.append("AMP inactive on this device: parity, speedup and memory are informational, not claims.")
    notes += _emulated_note(verdicts)
    if mismatched:
        notes.append("Baseline from a different suite/config/device/node, compared anyway (--allow-mismatch).")
    clustered = next((r.details["clustered"] for r in rules if r.details.get("clustered")), None)
    if clustered:
        notes.append(f"Throughput: {clustered}.")
    if any(r.details.get("disturbed") for r in rules):
        notes.append("Some throughput was measured while another process competed for the machine: "
                     "those speed rules are INCONCLUSIVE (measurement disturbed); re-run on a quiet machine.")
    return notes


def judge_run(run: OpenRun, baseline: Baseline | None = None, strict: bool = False,
              allow_mismatch: bool = False, drift_sd: float | None = None,
              pooled: PooledBaseline | None = None) -> CheckReport:
    """Judge an opened run (against `baseline`, or the `pooled` history runs, when given): the CheckReport
    check.json holds.  A sequential run (run.json `sequential`, run --until-decided) decides at the levels
    of its last look."""
    info = run.info
    design = design_of(info.sequential, run.dir.run_json)
    verdicts = check_trials(run.suite, run.trials, info.planned(), baseline=baseline, allow_mismatch=allow_mismatch,
                            design=design, drift_sd=drift_sd, pooled=pooled)
    mismatched = pooled is None and baseline is not None and bool(_mismatches(run.suite, run.trials, baseline))
    notes = _notes(verdicts, mismatched)
    if pooled is not None:
        notes.append(f"History rules compared with {pooled.describe()}: runs {', '.join(pooled.run_ids)}.")
    if design is not None:
        notes.append(f"Seeds added until decided (run --until-decided): looks at {', '.join(map(str, design.looks))} "
                     f"seeds per mode, cap {design.max_seeds}; every decision at its alpha-spending level "
                     "(PASS Pocock, FAIL O'Brien-Fleming: docs/checks.md).")
    return CheckReport(
        suite=info.suite, run_dir=str(run.path), profile=info.profile, config_hash=info.config_hash, strict=strict,
        baseline=(f"history: {pooled.describe()}" if pooled is not None else
                  str(baseline.path) if baseline is not None else None), verdicts=verdicts,
        exit_code=exit_code([v.verdict for v in verdicts], strict=strict), notes=notes,
        claims=run_claims(run, verdicts),
    )


def run_claims(run: OpenRun, verdicts: list[ModeVerdict]) -> list[ClaimResult]:
    """The suite's published claims judged against the run (judge/claims.py): never part of a verdict."""
    if not run.suite.claims:
        return []
    found = run_probe(run.path, run.info.suite, run.info.profile)
    facts = RunFacts(run.suite, run.info.profile, run.trials, {v.mode: v for v in verdicts},
                     plan_for(run.suite, run.trials), found[0] if found else None)
    return judge_claims(facts)
