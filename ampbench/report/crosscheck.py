"""The command workload's throughput cross-check in report.md: where ampbench's samples/s and the
program's own log (`ips: ...`, `interval_samples_per_second: ...`) disagree beyond the suite's
`throughput_tolerance`, each such trial gets a warning line (usually train.batch_size is not the
program's real batch per optimizer step). Agreeing trials and other workloads add nothing."""

from __future__ import annotations

from typing import Any

from ampbench.record.models import Trial
from ampbench.report.fmt import md_code, md_text, num_g
from ampbench.report.view import RunView

MAX_LINES = 10


def _check(t: Trial) -> dict[str, Any] | None:
    info = t.workload_info if isinstance(t.workload_info, dict) else {}
    check = info.get("throughput_check")
    if not isinstance(check, dict) or check.get("agrees") is not False:
        return None
    numbers = all(isinstance(check.get(k), (int, float)) for k in ("program_samples_per_s", "ratio"))
    return check if numbers else None


def throughput_disagreements(v: RunView) -> str:
    """A blockquote, one line per disagreeing trial ('' when every cross-check agreed or none ran)."""
    rows = [(t, c) for t in v.trials if (c := _check(t)) is not None]
    if not rows:
        return ""
    measured = all(isinstance(c.get("ratio_with_left_out"), (int, float)) for _, c in rows)
    lines = [(f"> **Throughput disagrees with the program's own log** in {len(rows)} trial(s): "
              + ("the program's own rate counts the evaluations and checkpoint saves inside the steps, which "
                 "ampbench leaves out of training time (each line says how long)." if measured else
                 "check that `train.batch_size` is the program's real batch per optimizer step (docs/command.md)."))]
    for t, c in rows[:MAX_LINES]:
        tol, ours = c.get("tolerance"), c.get("ampbench_samples_per_s")
        ours = ours if isinstance(ours, (int, float)) else t.throughput.samples_per_s
        w = c.get("window")
        over = (f"steps {int(w[0])}-{int(w[1])}, the iterations of its line" if isinstance(w, list) and len(w) == 2
                and all(isinstance(x, int) for x in w) else "the measured steps")
        lines.append(f"> - {md_code(t.key)}: samples over the time of {over}, ampbench "
                     f"{num_g(float(ours))} samples/s, the program's log {num_g(float(c['program_samples_per_s']))} "
                     f"(its {int(c.get('lines') or 0)} line(s), their samples over their time); ratio "
                     f"{num_g(float(c['ratio']), 3)}"
                     + (f", tolerance {num_g(float(tol) * 100, 3)}%" if isinstance(tol, (int, float)) else "")
                     + (f"; {md_text(c['cause'], 300)}" if isinstance(c.get("cause"), str) else "")
                     + f"; the trial's samples/s (its median per-step rate) is {num_g(t.throughput.samples_per_s)}")
    if len(rows) > MAX_LINES:
        lines.append(f"> - and {len(rows) - MAX_LINES} more (workload_info.throughput_check in the trial files)")
    return "\n".join(lines)
