"""The `ampbench` command: run, check, report, probe, baseline, diagnose, suites, env.

Thin: each verb parses its options and calls one function of the module that owns the work.
Errors the user can fix (bad suite file, corrupt results) print one line and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ampbench.config import ConfigError
from ampbench.results import ResultsError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])
baseline_app = typer.Typer(no_args_is_help=True, help="Save and inspect baselines for `check --baseline`.")
app.add_typer(baseline_app, name="baseline")
err = Console(stderr=True)
out = Console()

def _fail(msg: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def run(
    suite_file: Path = typer.Argument(..., help="Suite TOML file, or a bundled suite name (resnet, ocr, bert, ctr)"),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="Profile name; default: cpu when no GPU"),
    modes: Optional[list[str]] = typer.Option(None, "--mode", "-m", help="Run only these modes (fp32 is kept)"),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="Comma-separated seeds overriding the suite's"),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a key: --set train.steps=5"),
    out_dir: Path = typer.Option(Path("results/runs"), "--out", help="Where run folders are created"),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Finish an interrupted run folder"),
    strict: bool = typer.Option(False, "--strict", help="INCONCLUSIVE exits 1 instead of 3"),
    no_report: bool = typer.Option(False, "--no-report", help="Skip report.md and plots"),
) -> None:
    """Train matched FP32 and AMP trials, check them and write the report."""
    from ampbench.launch.runner import RunOptions, execute

    opts = RunOptions(
        suite_file=suite_file, profile=profile, modes=list(modes or []), seeds=seeds,
        overrides=list(set_ or []), out_dir=out_dir, resume=resume, strict=strict, report=not no_report,
    )
    try:
        code = execute(opts, console=out)
    except (ConfigError, ResultsError) as e:
        _fail(str(e))
    raise typer.Exit(code)


@app.command()
def check(
    run_dir: Path = typer.Argument(..., help="A run folder (results/runs/<suite>/<id>)"),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Run folder or baseline JSON (or a folder of them)"),
    strict: bool = typer.Option(False, "--strict", help="INCONCLUSIVE exits 1 instead of 3"),
    allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="Compare across suite/config/device anyway"),
) -> None:
    """Judge a run: parity, speedup, memory, stability, history. Writes check.json."""
    from ampbench.judge.check import check_run, print_check

    try:
        report = check_run(run_dir, baseline=baseline, strict=strict, allow_mismatch=allow_mismatch)
    except (ConfigError, ResultsError) as e:
        _fail(str(e))
    print_check(report, out)
    raise typer.Exit(report.exit_code)


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="One run folder, or several for a comparison/trend"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Output file (default: RUN_DIR/report.md)"),
    history: Optional[Path] = typer.Option(None, "--history", help="History folder or jsonl for the trend section"),
    fmt: str = typer.Option("md", "--format", help="md or html"),
) -> None:
    """Write the markdown report (with PNG plots) for one or more runs."""
    from ampbench.report.markdown import write_report

    try:
        path = write_report(run_dirs, output=output, history=history, fmt=fmt)
    except (ConfigError, ResultsError) as e:
        _fail(str(e))
    out.print(f"report: {path}")


@app.command()
def probe(
    suite_file: Path = typer.Argument(...),
    profile: Optional[str] = typer.Option(None, "--profile", "-p"),
    modes: Optional[list[str]] = typer.Option(None, "--mode", "-m"),
    max_batch: int = typer.Option(256, "--max-batch"),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help="Ceiling per attempt on CPU, e.g. 6GiB"),
    steps: int = typer.Option(3, "--steps", help="Training steps per attempt"),
    set_: Optional[list[str]] = typer.Option(None, "--set"),
    out_dir: Path = typer.Option(Path("results/runs"), "--out"),
) -> None:
    """Find the largest batch size each mode trains without running out of memory."""
    from ampbench.launch.probe import ProbeOptions, run_probe

    try:
        code = run_probe(
            ProbeOptions(suite_file=suite_file, profile=profile, modes=list(modes or []), max_batch=max_batch,
                         memory_limit=memory_limit, steps=steps, overrides=list(set_ or []), out_dir=out_dir),
            console=out,
        )
    except (ConfigError, ResultsError) as e:
        _fail(str(e))
    raise typer.Exit(code)


@app.command()
def diagnose(
    run_dir: Path = typer.Argument(...),
    mode: str = typer.Option(..., "--mode", "-m"),
    steps: int = typer.Option(3, "--steps"),
    seed: Optional[int] = typer.Option(None, "--seed"),
) -> None:
    """Re-run a short FP32/AMP pair with Paddle's numerics tools and name the ops that diverge."""
    from ampbench.diagnose.core import run_diagnose

    try:
        code = run_diagnose(run_dir, mode=mode, steps=steps, seed=seed, console=out)
    except (ConfigError, ResultsError) as e:
        _fail(str(e))
    raise typer.Exit(code)


@app.command("export-benchmark")
def export_benchmark(
    run_dir: Path = typer.Argument(...),
    output: Path = typer.Option(..., "-o", "--output"),
) -> None:
    """Export a run's per-mode step times as pytest-benchmark JSON (for `pytest-benchmark compare`)."""
    from ampbench.results.export import export_run

    try:
        path = export_run(run_dir, output)
    except ResultsError as e:
        _fail(str(e))
    out.print(f"wrote {path}")


@baseline_app.command("save")
def baseline_save(
    run_dir: Path = typer.Argument(...),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Default: results/baselines/<device>/<suite>.json"),
) -> None:
    """Write the compact baseline file that nightly CI commits."""
    from ampbench.judge.baseline import save_baseline

    try:
        path = save_baseline(run_dir, output)
    except (ConfigError, ResultsError) as e:
        _fail(str(e))
    out.print(f"baseline: {path}")


@app.command()
def suites(
    copy: Optional[str] = typer.Option(None, "--copy", help="Write an editable copy of bundled suite NAME"),
    dest: Path = typer.Option(Path("."), "--to", help="Folder for --copy"),
) -> None:
    """List the bundled suites (run one by name: `ampbench run resnet`), or copy one to edit."""
    from ampbench.config import read_toml
    from ampbench.config.bundled import bundled_suites

    table = bundled_suites()
    if copy is not None:
        if copy not in table:
            _fail(f"--copy: no bundled suite {copy!r}; bundled: {', '.join(sorted(table))}")
        target = dest / f"{copy}.toml"
        if target.exists():
            _fail(f"{target}: already exists; remove it or choose another --to folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(table[copy].read_text(encoding="utf-8"), encoding="utf-8")
        out.print(f"wrote {target}: edit it, then `ampbench run {target}`", markup=False)
        return
    for name, p in table.items():
        raw = read_toml(p)
        meta = raw.get("suite", {})
        profs = ", ".join(["default", *sorted(raw.get("profiles", {}))])
        out.print(f"{name:8} workload={meta.get('workload')}  profiles: {profs}  ({p})", markup=False)


@app.command()
def env() -> None:
    """Print the environment fingerprint and whether AMP can be active on this device."""
    from ampbench.trackers import device

    fp = device.environment()
    for k, v in fp.model_dump().items():
        out.print(f"{k:14} {v}", markup=False)
    out.print(f"{'amp':14} {device.amp_support_summary()}", markup=False)


@app.command()
def selftest(
    out_dir: Path = typer.Option(Path("results/selftest"), "--out", help="Where run folders and selftest.json go"),
) -> None:
    """GPU self-test (<= 10 min on one GPU): gpu-smoke profile of every bundled suite, GPU evidence
    asserted. Exit 0 all checks hold, 1 one failed, 3 no GPU (prints what it would check)."""
    from ampbench.launch.selftest import run_selftest

    raise typer.Exit(run_selftest(out_dir, console=out))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted: finished trials are kept; continue with `ampbench run --resume RUN_DIR`")
        sys.exit(130)


if __name__ == "__main__":
    main()
