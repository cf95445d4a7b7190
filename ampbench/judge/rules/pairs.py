"""Were a seed's FP32 and AMP arms measured in place?  A paired comparison (speedup, memory, energy) of arms
that ran on different nodes measures the nodes; of arms that ran at the same time on one device, the
contention between them.  Either result is held back: INCONCLUSIVE with a reason code, never PASS/FAIL.
The history comparison (the run's absolute throughput against another run's) is held back alike when any
two trials of the run, of different seeds too, ran side by side on one device (issue 62).

Where and when come from the trial itself (`Trial.host`, `slurm.node`, `started_unix`/`ended_unix`,
recorded by the worker on every launch path).  Side by side on *different devices of one node* is
`run --devices`' design (launch/pool.py: twin devices, so drift hits both arms alike) and stays judged;
what is refused is an overlap where the arms shared a device, or where nothing tells their devices
apart (a CPU: one slot).  `[suite] pairs` accepts it: "any-node" (different nodes; an overlap on one
device is still refused), "any" (neither checked).  A trial that recorded no node or no times (a file
written before they were) is not refused for what it cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.config import REFERENCE_MODE
from ampbench.judge.rules import reasons
from ampbench.judge.rules.context import Ctx
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.record.models import Trial
from ampbench.results.baselines import node_of
from ampbench.results.verdicts import RuleResult

PAIRED = ("speedup", "memory", "energy")   # the results that compare a seed's AMP arm with its FP32 arm


@dataclass(frozen=True)
class Apart:
    """One seed whose two arms were not measured in place: the reason code and what happened."""

    seed: int
    code: str   # "different-nodes" or "overlapped"
    text: str


def devices_of(t: Trial) -> tuple[str, frozenset[str]]:
    """(kind, ids) of the devices the trial ran on: the CUDA_VISIBLE_DEVICES entries run --devices pinned
    it to (all of a data-parallel trial's), else NVML's UUID of its device, else Slurm's GPU indices;
    ("", {}) unknown."""
    if t.interference is not None and t.interference.devices:
        return "pinned", frozenset(t.interference.devices)
    uuid = (t.memory.nvml_device or t.env.gpu.get("nvml_device") or {}).get("uuid")
    if isinstance(uuid, str) and uuid:
        return "uuid", frozenset({uuid})
    if t.slurm is not None and t.slurm.gpus:
        return "slurm", frozenset(g.strip() for g in t.slurm.gpus.split(",") if g.strip())
    return "", frozenset()


def overlapped(a: Trial, b: Trial) -> bool:
    """The two trials' wall-clock spans intersect (False when either was not recorded)."""
    a0, a1, b0, b1 = a.started_unix, a.ended_unix, b.started_unix, b.ended_unix
    if a0 is None or a1 is None or b0 is None or b1 is None:
        return False
    return a0 < b1 and b0 < a1


def shared_device(a: Trial, b: Trial) -> bool:
    """The arms competed for one device: the same one recorded, or nothing that tells theirs apart."""
    (ka, da), (kb, db) = devices_of(a), devices_of(b)
    return not (ka and ka == kb and da.isdisjoint(db))


def apart(amp: Trial, ref: Trial, policy: str) -> Apart | None:
    """Why this seed's pair was not measured in place under the suite's `pairs` policy, or None."""
    if policy == "any":
        return None
    na, nr = node_of(amp), node_of(ref)
    if policy == "same-node" and na and nr and na != nr:
        return Apart(amp.seed, reasons.Reason.DIFFERENT_NODES.value,
                     f"seed {amp.seed}: {ref.mode} ran on {nr}, {amp.mode} on {na}")
    if (not na or not nr or na == nr) and overlapped(amp, ref) and shared_device(amp, ref):
        span = min(ref.ended_unix or 0.0, amp.ended_unix or 0.0) - max(ref.started_unix or 0.0, amp.started_unix or 0.0)
        return Apart(amp.seed, reasons.Reason.OVERLAPPED.value,
                     f"seed {amp.seed}: {ref.mode} and {amp.mode} ran at the same time for {span:.1f} s "
                     f"on one device{f' of {na}' if na else ''}")
    return None


def apart_pairs(c: Ctx) -> list[Apart]:
    """Every seed of this mode whose ok AMP and FP32 trials were not measured in place."""
    ref = {t.seed: t for t in c.ok(REFERENCE_MODE)}
    found = [apart(t, ref[t.seed], c.suite.suite.pairs) for t in c.ok(c.mode) if t.seed in ref]
    return [a for a in found if a is not None]


def crowded(mine: list[Trial], run: list[Trial], policy: str) -> list[str]:
    """Each trial of `mine` that ran at the same time as another trial of the run (another seed, or its seed's
    other arm) on one device of one node, as text; none under `[suite] pairs = "any"`."""
    if policy == "any":
        return []
    out = []
    for a in mine:
        for b in run:
            if (b.mode, b.seed) == (a.mode, a.seed) or not overlapped(a, b) or not shared_device(a, b):
                continue
            na, nb = node_of(a), node_of(b)
            if na and nb and na != nb:
                continue
            span = min(a.ended_unix or 0.0, b.ended_unix or 0.0) - max(a.started_unix or 0.0, b.started_unix or 0.0)
            out.append(f"{a.mode} seed {a.seed} beside {b.mode} seed {b.seed} for {span:.1f} s on one device"
                       f"{f' of {na}' if na else ''}")
    return out


def held_back_history(c: Ctx, results: list[RuleResult]) -> list[RuleResult]:
    """history-throughput compares this run's absolute throughput with another run's: trials of this run that
    ran side by side on one device measured each other, so its PASS or FAIL is held back (INCONCLUSIVE,
    reason `overlapped`, the trials in `details.crowded`)."""
    hist = [r for r in results if r.rule == HISTORY_THROUGHPUT]
    if not hist:
        return results
    found = crowded(c.ok(c.mode), [t for t in c.trials.values() if t.status == "ok"], c.suite.suite.pairs)
    if not found:
        return results
    what = "; ".join(found[:4]) + (f"; {len(found) - 4} more" if len(found) > 4 else "")
    for r in hist:
        r.details["reasons"] = reasons.plain([*r.details.get("reasons", []), reasons.Reason.OVERLAPPED])
        r.details["crowded"] = found
        if r.status in ("PASS", "FAIL"):
            r.message = (f"Held back from {r.status}: trials of this run ran side by side on one device ({what}), so "
                         "its throughput measured them, not the code: run the trials one after the other on a "
                         'device (run\'s default), or accept it with [suite] pairs = "any". ' + r.message)
            r.status = "INCONCLUSIVE"
        else:
            r.message += f" Trials of this run also ran side by side on one device ({what})."
    return results


def held_back(c: Ctx, results: list[RuleResult]) -> list[RuleResult]:
    """The paired results of this mode, held back when a seed's arms were measured apart: PASS and FAIL
    become INCONCLUSIVE, each result gets the reason codes and the seeds (`details.apart`); and the
    history comparison, when the run's trials crowded one device (held_back_history)."""
    results = held_back_history(c, results)
    if c.is_ref or not any(r.rule in PAIRED for r in results):
        return results
    found = apart_pairs(c)
    if not found:
        return results
    codes = sorted({a.code for a in found})
    what = "; ".join(a.text for a in found[:4]) + (f"; {len(found) - 4} more" if len(found) > 4 else "")
    fix = ("run a seed's arms on one node, one after the other (the default of run and of run --launcher "
           "slurm; run --devices puts them side by side on twin devices), or accept it with [suite] pairs = "
           + ('"any-node"' if codes == ["different-nodes"] else '"any"'))
    for r in results:
        if r.rule not in PAIRED or r.details.get("judged") is False:
            continue
        r.details["reasons"] = reasons.plain([*r.details.get("reasons", []), *codes])   # PAIRS: declared by each
        r.details["apart"] = [a.text for a in found]
        if r.status in ("PASS", "FAIL"):
            r.message = f"Held back from {r.status}: the pairs were not measured in place ({what}): {fix}. " \
                        + r.message
            r.status = "INCONCLUSIVE"
        else:
            r.message += f" The pairs were not measured in place either ({what})."
    return results
