"""`ampbench selftest`: in about 10 minutes on one GPU, prove every GPU-side measurement works (nothing starts
after 10 minutes; a suite running then finishes, its trials bounded by their timeout_s, and a `deadline` row says so).

Runs the `gpu-smoke` profile (a few dozen steps per mode) of every bundled suite through the engine, then
judges every trial by the self-test's rule set (judge/selftest.py: its checks, with names of their own);
with two or more GPUs also a 2-rank data-parallel trial. One table, one `selftest.json`; exit 0 only when
every check holds, 1 when one fails, 3 at once on a machine without a GPU (it prints what it would check:
nothing GPU-side can be proven there).  This verb asks the machine's facts (trackers/) the checks read.
`selftest.json` also keeps every raw figure the GPU profiles' thresholds are set from
(`figures`, one row per trial; docs/gpu.md "From a selftest to thresholds").
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampbench.core.files import atomic_write_json
from ampbench.core.names import new_run_id
from ampbench.judge.selftest import (
    CHECKS,
    DATA_PARALLEL,
    DEADLINE,
    EMULATION_FIDELITY,
    TRIAL_OK,
    CheckResult,
    Machine,
    check_data_parallel,
    fidelity_checks,
    figures,
)
from ampbench.judge.selftest import check_trial as judge_trial
from ampbench.record.models import Trial
from ampbench.report.console import table_box

PROFILE = "gpu-smoke"
SCHEMA = "ampbench.selftest/3"   # /3: the checks' names are the rule set's own (low-precision-calls, nvml-energy)
# the fidelity run: the toy suite's AMP modes and their emulated twins (judge.selftest.EMULATED), same seed
FIDELITY_MODES = ('modes=[{name="fp32"}, {name="amp-o1-fp16", level="O1", dtype="float16"}, '
                  '{name="amp-o1-fp16-emulated", level="O1", dtype="float16", emulate=true}, '
                  '{name="amp-o2-bf16", level="O2", dtype="bfloat16"}, '
                  '{name="amp-o2-bf16-emulated", level="O2", dtype="bfloat16", emulate=true}]')
# the whole self-test's budget on one GPU: a suite (or the data-parallel trial) not started by then reads
# n/a with the reason; one already running finishes (its trials have their own timeouts) and a `deadline` row
# names it with the time the self-test really took
DEADLINE_S = 600.0
DTYPES = ("float16", "bfloat16")


def machine_facts() -> Machine:
    from ampbench.trackers import cuda, device
    from ampbench.trackers.nvml import Session

    session = Session(cuda_bus_id=cuda.cuda_bus_id(), cuda_uuid=cuda.cuda_uuid()).open()
    session.close()
    cc = cuda.compute_capability()
    return with_white_lists(Machine(
        gpus=cuda.visible_gpu_count(), unsupported={d: device.amp_unsupported_reason(d) for d in DTYPES},
        nvml_error=session.error, allocator_reset=cuda.has_allocator_reset(), paddle=cuda.paddle_version(),
        device_name=cuda.device_name(), compute_capability=list(cc) if cc else None))


def evidence_ops(dtype: str, custom_white: list[str]) -> set[str]:
    """Ops whose low-precision calls prove AMP ran: Paddle's default white list for the dtype (O1's, which
    O2 also runs in low precision), plus the mode's custom white list."""
    from ampbench.trial.precision import default_lists

    return set(default_lists(dtype, "O1")["white"]) | set(custom_white)


def with_white_lists(mc: Machine) -> Machine:
    """The machine's facts with Paddle's default white list per AMP dtype (what the rule set reads)."""
    return dataclasses.replace(mc, white_lists={d: sorted(evidence_ops(d, [])) for d in DTYPES})


def check_trial(t: Trial, mc: Machine | None = None) -> list[CheckResult]:
    """Every check of the rule set that applies to one trial (`mc` None: a machine that supports everything)."""
    return judge_trial(t, with_white_lists(mc or Machine(gpus=1, unsupported={})))


def describe_checks(console: Console) -> None:
    console.print(Text(f"ampbench selftest runs the '{PROFILE}' profile of every bundled suite on a GPU and checks:"))
    for check in CHECKS:
        console.print(Text(f"  {check.name:19} {check.proves}"))


def _run_suite(name: str, runs: Path, extra: list[str] | None = None, modes: list[str] | None = None,
               tag: str = "") -> list[Trial]:
    from ampbench.engine.execute import Policies, execute
    from ampbench.engine.request import Output, RunRequest
    from ampbench.results.run_dir import open_run

    run_id = f"selftest-{name}{tag}-{new_run_id()}"   # time, pid and random bits: two selftests never collide
    quiet = Console(quiet=True)
    execute(RunRequest(suite_file=Path(name), profile=PROFILE, out_dir=runs, run_id=run_id,
                       overrides=tuple(extra or ()), modes=tuple(modes or ())), Policies(output=Output(report=False)),
            console=quiet)
    folders = sorted(runs.glob(f"*/{run_id}"))   # <suite name>/<run id>
    if not folders:
        raise RuntimeError(f"selftest: suite {name} left no run folder under {runs}")
    return open_run(folders[0]).trials


def run_selftest(out_dir: Path, console: Console, suites: list[str] | None = None) -> int:
    """0 all checks hold, 1 one failed, 3 no GPU or no Paddle here (nothing run)."""
    from ampbench.trackers.cuda import has_gpu, has_gpu_cheap, paddle_missing

    missing = paddle_missing() if has_gpu_cheap() else ""
    if missing:
        return _without_paddle(missing, console)
    if not has_gpu_cheap() or not has_gpu():
        console.print(Text("no GPU found: ampbench selftest proves GPU-side measurements and ran nothing (exit 3)."))
        describe_checks(console)
        return 3
    from ampbench.config.bundled import bundled_suites

    t0 = time.monotonic()
    mc = machine_facts()
    results: list[CheckResult] = []
    rows: list[dict[str, Any]] = []
    runs = out_dir / "runs"
    for name in sorted(suites or bundled_suites()):
        if _past_deadline(t0, name, results):
            continue
        started = time.monotonic()
        try:
            trials = _run_suite(name, runs)
        except Exception as exc:  # noqa: BLE001  a suite that cannot run here (missing extra, bad data) fails its check
            results.append(CheckResult(TRIAL_OK.name, name, False, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        finally:
            _ran_past_deadline(t0, started, name, results)
        for t in trials:
            results += judge_trial(t, mc)
            rows.append(figures(t))
    if mc.gpus < 2:   # Paddle's count of usable GPUs, not NVML's (which ignores CUDA_VISIBLE_DEVICES and MIG)
        results.append(CheckResult(DATA_PARALLEL.name, "-", None, f"n/a: {mc.gpus} GPU visible to Paddle, needs two"))
    elif not _past_deadline(t0, "resnet x2", results, check=DATA_PARALLEL.name):
        started = time.monotonic()
        for t in _run_suite("resnet", runs, ["distributed.nproc_per_node=2"], ["fp32"], tag="-dp"):
            results += check_data_parallel(t)
        _ran_past_deadline(t0, started, "resnet x2", results)
    if not _past_deadline(t0, "toy emulated", results, check=EMULATION_FIDELITY.name):
        results += fidelity_checks(_run_suite("toy", runs, [FIDELITY_MODES], tag="-fidelity"), mc)
    if not rows and any(r.check == TRIAL_OK.name and r.ok is None for r in results):
        _report(results, out_dir, console, time.monotonic() - t0, mc, rows)
        return 3   # the deadline left nothing run: nothing was proven
    return _report(results, out_dir, console, time.monotonic() - t0, mc, rows)


def _past_deadline(t0: float, subject: str, results: list[CheckResult], check: str = TRIAL_OK.name) -> bool:
    """Past DEADLINE_S: `subject` is not started and reads n/a with the reason."""
    spent = time.monotonic() - t0
    if spent <= DEADLINE_S:
        return False
    results.append(CheckResult(check, subject, None, f"n/a: not run, selftest's {DEADLINE_S / 60:.0f}-minute "
                                                     f"deadline passed ({spent:.0f} s spent)"))
    return True


def _ran_past_deadline(t0: float, started: float, subject: str, results: list[CheckResult]) -> None:
    """A suite started before DEADLINE_S and still running at it finished past it (a started suite is not stopped):
    said in a `deadline` row (n/a), with the time the self-test took, so "10 minutes" is never claimed silently."""
    spent = time.monotonic() - t0
    if started - t0 <= DEADLINE_S < spent:
        results.append(CheckResult(DEADLINE.name, subject, None, f"n/a: {subject} was running when selftest's "
                                   f"{DEADLINE_S / 60:.0f}-minute deadline passed and finished at {spent / 60:.1f} min "
                                   "(a started suite is not stopped; each trial is bounded by its timeout_s)"))


def _without_paddle(why: str, console: Console) -> int:
    """A GPU machine whose interpreter has no Paddle: one line, what needs no Paddle (trackers/driver_facts.py:
    the driver, NVML's listing, the device, MIG, the energy counter), the checks it would run; exit 3."""
    from ampbench.trackers.driver_facts import driver_facts

    console.print(Text(f"paddle is not installed in this interpreter: {why}; install paddlepaddle-gpu (docs/gpu.md), "
                       "selftest ran nothing (exit 3)."))
    try:
        facts = driver_facts()
    except Exception as exc:  # noqa: BLE001  # a driver that cannot answer is said, never a traceback
        console.print(Text(f"FAIL nvml {type(exc).__name__}: {exc}"[:300]))
        facts = []
    for f in facts:
        console.print(Text(f"{'n/a ' if f.ok is None else ('ok  ' if f.ok else 'FAIL')} {f.name:12} {f.detail}"))
    describe_checks(console)
    return 3


def _report(results: list[CheckResult], out_dir: Path, console: Console, wall_s: float,
            mc: Machine | None = None, rows: list[dict[str, Any]] | None = None) -> int:
    table = Table(title=f"ampbench selftest ({wall_s / 60:.1f} min)", box=table_box(console))
    for col in ("check", "trial", "result", "detail"):
        table.add_column(col)
    for r in results:
        mark = "n/a" if r.ok is None else ("ok" if r.ok else "FAIL")
        table.add_row(Text(r.check), Text(r.subject), Text(mark, style="green" if r.ok else "red"), Text(r.detail))
    console.print(table)
    failed = [r for r in results if r.ok is False]
    doc: dict[str, Any] = {"schema": SCHEMA, "passed": not failed, "wall_s": wall_s,
                           "machine": asdict(mc) if mc else None, "checks": {c.name: c.proves for c in CHECKS},
                           "results": [asdict(r) for r in results], "figures": list(rows or [])}
    atomic_write_json(out_dir / "selftest.json", doc)
    console.print(Text(f"selftest: {'all checks hold' if not failed else f'{len(failed)} check(s) failed'}; "
                       f"{out_dir / 'selftest.json'}"))
    return 0 if not failed else 1
