"""`ampbench selftest`: in <= 10 minutes on one GPU, prove every GPU-side measurement works.

Runs the `gpu-smoke` profile (a few dozen steps per mode) of every bundled suite, then asserts
the evidence below on every trial; with two or more GPUs also a 2-rank data-parallel trial. One
table, one `selftest.json`; exit 0 only when every check holds, 1 when one fails, 3 at once on a
machine without a GPU (it prints what it would check: nothing GPU-side can be proven there).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampbench.core.files import atomic_write_json
from ampbench.core.records import Trial

PROFILE = "gpu-smoke"
LOW_OPS = ("conv2d", "matmul", "matmul_v2")   # what Paddle's default white lists name for fp16/bf16
CHECKS: dict[str, str] = {
    "trial-ok": "every trial of every bundled suite's gpu-smoke profile finished (status ok)",
    "amp-active": "every AMP mode ran float16/bfloat16 calls of conv2d or matmul (Paddle's default white lists)",
    "loss-scale": "every fp16 mode with a live GradScaler recorded a loss scale on every step",
    "memory-order": "0 < peak allocated <= peak reserved <= driver-seen (NVML) memory in every trial",
    "nvml-device": "NVML resolved the trial's own GPU (PCI bus id, UUID or MIG) with no NVML errors",
    "step-times": "per-step times add up to 80-100% of the measured window's wall time in every trial",
    "energy": "NVML energy over the measured window > 0 J in every trial",
    "data-parallel": "with >= 2 GPUs: a 2-rank trial with per-rank memory measured on two different NVML devices",
}
STEP_SUM_RANGE = (0.8, 1.0 + 1e-6)


@dataclass
class CheckResult:
    check: str
    subject: str
    ok: bool | None     # None: not applicable here (e.g. data-parallel on one GPU)
    detail: str


def _check_trial(t: Trial) -> list[CheckResult]:
    """Every check that applies to one trial."""
    out = []
    subj = f"{t.suite}/{t.mode}"

    def add(name: str, ok: bool | None, detail: str) -> None:
        out.append(CheckResult(name, subj, ok, detail))

    add("trial-ok", t.status == "ok", t.status if t.status == "ok" else f"{t.status}: {(t.error or '')[:200]}")
    if t.amp.requested:
        low = {op: c.get(t.amp.dtype, 0) for op, c in t.amp.op_calls.items() if op in LOW_OPS}
        add("amp-active", t.amp.active and sum(low.values()) > 0, f"{t.amp.dtype} calls {low or 'none'}")
    if t.amp.requested and t.amp.dtype == "float16" and t.amp.scaler_enabled:
        missing = [s.step for s in t.steps if s.loss_scale is None]
        add("loss-scale", not missing and bool(t.steps), f"steps without a loss scale: {missing[:5]}")
    m = t.memory
    a, r, d = m.peak_allocated_bytes, m.peak_reserved_bytes, m.device_used_bytes
    add("memory-order", a is not None and r is not None and d is not None and 0 < a <= r <= d,
        f"allocated {a}, reserved {r}, device {d} ({m.device_used_source})")
    errs = {k: v for k, v in m.errors.items() if k.startswith("nvml")}
    add("nvml-device", bool(m.nvml_device) and not errs, f"{m.nvml_device or 'none'}; errors {errs or 'none'}")
    total, window = sum(s.time_s for s in t.measured_steps()), t.throughput.window_s
    share = total / window if window else None
    add("step-times", share is not None and STEP_SUM_RANGE[0] <= share <= STEP_SUM_RANGE[1],
        f"sum of steps {total:.3f} s of window {window or 0:.3f} s")
    add("energy", (m.energy_j or 0) > 0, f"{m.energy_j} J, {m.energy_j_per_sample} J/sample")
    return out


def _check_data_parallel(t: Trial) -> list[CheckResult]:
    ranks = t.memory.per_rank
    devices = {(r.get("nvml_device") or {}).get("pci_bus_id") or (r.get("nvml_device") or {}).get("uuid")
               for r in ranks}
    measured = all((r.get("device_used_bytes") or 0) > 0 and (r.get("peak_allocated_bytes") or 0) > 0 for r in ranks)
    ok = t.status == "ok" and len(ranks) == 2 and measured and len(devices - {None}) == 2
    return [CheckResult("data-parallel", f"{t.suite}/{t.mode} x2", ok,
                        f"status {t.status}; per-rank devices {sorted(d for d in devices if d)}; memory measured {measured}")]


def describe_checks(console: Console) -> None:
    console.print(Text(f"ampbench selftest runs the '{PROFILE}' profile of every bundled suite on a GPU and checks:"))
    for name, text in CHECKS.items():
        console.print(Text(f"  {name:14} {text}"))


def _run_suite(name: str, runs: Path, extra: list[str] | None = None, modes: list[str] | None = None,
               tag: str = "") -> list[Trial]:
    from ampbench.commands.run import RunOptions, execute
    from ampbench.results.run_dir import open_run

    run_id = f"selftest-{name}{tag}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    quiet = Console(quiet=True)
    execute(RunOptions(suite_file=Path(name), profile=PROFILE, out_dir=runs, report=False, run_id=run_id,
                       overrides=list(extra or []), modes=list(modes or [])), console=quiet)
    folders = sorted(runs.glob(f"*/{run_id}"))   # <suite name>/<run id>
    if not folders:
        raise RuntimeError(f"selftest: suite {name} left no run folder under {runs}")
    return open_run(folders[0]).trials


def run_selftest(out_dir: Path, console: Console) -> int:
    """0 all checks hold, 1 one failed, 3 no GPU (nothing run)."""
    from ampbench.trackers.cuda import has_gpu, has_gpu_cheap

    if not has_gpu_cheap() or not has_gpu():
        console.print(Text("no GPU found: ampbench selftest proves GPU-side measurements and ran nothing (exit 3)."))
        describe_checks(console)
        return 3
    from ampbench.config.bundled import bundled_suites
    from ampbench.trackers.nvml import Session

    t0 = time.monotonic()
    results: list[CheckResult] = []
    runs = out_dir / "runs"
    for name in sorted(bundled_suites()):
        try:
            trials = _run_suite(name, runs)
        except Exception as exc:  # a suite that cannot run here (missing extra, bad data) fails its check
            results.append(CheckResult("trial-ok", name, False, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        for t in trials:
            results += _check_trial(t)
    session = Session().open()
    gpus = int(session.nv.nvmlDeviceGetCount()) if session.nv is not None else 1
    session.close()
    if gpus >= 2:
        for t in _run_suite("resnet", runs, ["distributed.nproc_per_node=2"], ["fp32"], tag="-dp"):
            results += _check_data_parallel(t)
    else:
        results.append(CheckResult("data-parallel", "-", None, f"{gpus} GPU: needs two"))
    return _report(results, out_dir, console, time.monotonic() - t0)


def _report(results: list[CheckResult], out_dir: Path, console: Console, wall_s: float) -> int:
    table = Table(title=f"ampbench selftest ({wall_s / 60:.1f} min)")
    for col in ("check", "trial", "result", "detail"):
        table.add_column(col)
    for r in results:
        mark = "n/a" if r.ok is None else ("ok" if r.ok else "FAIL")
        table.add_row(Text(r.check), Text(r.subject), Text(mark, style="green" if r.ok else "red"), Text(r.detail))
    console.print(table)
    failed = [r for r in results if r.ok is False]
    doc: dict[str, Any] = {"schema": "ampbench.selftest/1", "passed": not failed, "wall_s": wall_s,
                           "checks": CHECKS, "results": [asdict(r) for r in results]}
    atomic_write_json(out_dir / "selftest.json", doc)
    console.print(Text(f"selftest: {'all checks hold' if not failed else f'{len(failed)} check(s) failed'}; "
                       f"{out_dir / 'selftest.json'}"))
    return 0 if not failed else 1
