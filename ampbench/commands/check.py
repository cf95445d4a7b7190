"""`ampbench check RUN_DIR`: open the run, judge it (against a baseline when given), write check.json."""

from __future__ import annotations

from pathlib import Path

from ampbench.core.errors import ResultsError
from ampbench.judge.check import judge_run
from ampbench.results.baselines import device_slug, load_baseline
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import CheckReport


def check_run(run_dir: Path, baseline: Path | None = None, strict: bool = False,
              allow_mismatch: bool = False) -> CheckReport:
    """Load a run folder, judge it, write check.json next to the trials, return the report."""
    run = open_run(Path(run_dir))
    base = None
    if baseline is not None:
        ok = [t for t in run.trials if t.status == "ok"]
        base = load_baseline(Path(baseline), suite=run.info.suite, device=device_slug(ok[0].env) if ok else None)
    report = judge_run(run, base, strict=strict, allow_mismatch=allow_mismatch)
    try:
        report.write(run.dir.check_path)
    except ResultsError as e:  # a read-only run folder is judged and printed all the same
        report.notes.append(f"check.json not written: {e}")
    return report
