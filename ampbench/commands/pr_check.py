"""`ampbench pr-check SUITE --base REV [--head REV] [--repo PATH]`: a pull request's speed, judged.

What the pull-request workflows call (docs/pr-check.md: the GitHub Actions and GitLab CI files users copy), and
what a person runs locally before pushing.  A command suite (`workload = "command"`) runs the program of the
repository; pr-check runs the suite on the base commit, then on the head, each checked out in its own clone
(commands.bisect_repo: `git clone --shared`, hooks off, the user's working tree only read, the suite's
`workload.cwd` and program paths moved into the clone as bisect moves them), compares the head's run with the
base's by `check --baseline`'s history-throughput test both ways (judge/run_change.py, as `ampbench compare`),
and prints the comparison as one markdown table, the pull-request comment (report/pr_comment.py).

Exit 1 when a mode is significantly slower (beyond `--fail-above PCT`, default any significant slowdown,
which is already beyond the suite's `history_min_change`); 3 when it is slower by more but the measurement
was disturbed; 2 on bad input or when a side's trials did not finish; else 0.  Both sides run at least 3
seeds (fewer can never be significant).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.commands import bisect_repo
from ampbench.commands.bisect import _retarget
from ampbench.commands.compare import exit_code, two_run_doc
from ampbench.commands.run import execute, load_for_run
from ampbench.commands.run_plan import RunOptions
from ampbench.config import ConfigError
from ampbench.core.files import atomic_write_text, check_output
from ampbench.core.names import new_run_id
from ampbench.core.store import RUNS_DIR
from ampbench.report.pr_comment import Side, pr_comment
from ampbench.results.compare_file import Significance
from ampbench.results.verdicts import EXIT_ERROR

MIN_SEEDS = 3   # judge/run_change.py: fewer trials a side are never significant


@dataclass
class PrCheckOptions:
    suite_file: Path
    base: str | None
    head: str = "HEAD"
    repo: Path = Path(".")
    modes: list[str] = field(default_factory=list)
    seeds: str | None = None
    profile: str | None = None
    overrides: list[str] = field(default_factory=list)
    out_dir: Path = RUNS_DIR
    fail_above: float = 0.0       # percent: a significant slowdown beyond it fails (0: any significant one)
    output: Path | None = None    # the comment also written here


def _seeds(opts: PrCheckOptions) -> str:
    """--seeds, else the suite's, extended to MIN_SEEDS."""
    if opts.seeds is not None:
        return opts.seeds
    seeds = list(load_for_run(RunOptions(suite_file=opts.suite_file, profile=opts.profile,
                                         overrides=opts.overrides)).suite.suite.seeds)
    while len(seeds) < MIN_SEEDS:
        seeds.append(max(seeds) + 1)
    return ",".join(map(str, seeds))


def _run_side(opts: PrCheckOptions, folder: Path, token: str, side: str, sha: str, retarget: list[str], seeds: str,
              console: Console) -> tuple[Path, int]:
    """Check `sha` out in the clone and run the suite there; (its run folder, the run's exit code)."""
    bisect_repo.checkout(folder, "src", token, sha)
    run_id = f"{side}-{sha[:10]}"
    console.print(f"pr-check: {side} {sha[:10]}: running the suite (seeds {seeds})", soft_wrap=True, highlight=False)
    code = execute(RunOptions(suite_file=opts.suite_file, profile=opts.profile, modes=list(opts.modes), seeds=seeds,
                              overrides=[*opts.overrides, *retarget], out_dir=folder / "runs", run_id=run_id,
                              report=False), console=console)
    runs = sorted((folder / "runs").glob(f"*/{run_id}"))
    if not runs:
        raise ConfigError(str(opts.suite_file), side, "the run wrote no run folder")
    return runs[0], code


def run_pr_check(opts: PrCheckOptions, console: Console, progress: Console) -> int:
    """Both sides run, compared; the comment printed on `console` (and written to --output and the folder's
    comment.md), the runs' progress on `progress`; returns the exit code (module docstring)."""
    if opts.output is not None:
        check_output(opts.output, kinds=(".md", ".txt"))
    root = bisect_repo.repo_root(opts.repo)
    base, head = bisect_repo.commit_of(root, "--base", opts.base), bisect_repo.commit_of(root, "--head", opts.head)
    loaded = load_for_run(RunOptions(suite_file=opts.suite_file, profile=opts.profile, modes=list(opts.modes),
                                     overrides=opts.overrides))
    suite = loaded.suite
    if suite.suite.workload != "command":
        raise ConfigError(str(opts.suite_file), "suite.workload", "pr-check runs your program at two commits: it "
                          "needs a workload = \"command\" suite (docs/command.md)")
    seeds = _seeds(opts)
    bisect_repo.refuse_submodules(root, [base[0], head[0]], "pr-check")   # before anything is made
    folder = Path(opts.out_dir).resolve() / suite.suite.name / f"pr-{new_run_id()}"  # absolute: {out} is read elsewhere
    folder.mkdir(parents=True, exist_ok=False)
    retarget = _retarget(suite, root, folder / "src")
    token = bisect_repo.new_token()   # the clone's ownership: checkouts run in it only (bisect_repo.own_clone)
    bisect_repo.clone(root, folder / "src", token)
    progress.print(f"pr-check: head {head[0][:10]} against base {base[0][:10]} of {escape(str(root))}: "
                   f"{escape(str(folder))}", soft_wrap=True)
    base_run, base_code = _run_side(opts, folder, token, "base", base[0], retarget, seeds, progress)
    head_run, head_code = _run_side(opts, folder, token, "head", head[0], retarget, seeds, progress)
    failed = [s for s, c in (("base", base_code), ("head", head_code)) if c == EXIT_ERROR]
    if failed:
        progress.print(f"pr-check: the {' and '.join(failed)} run's trials did not all finish ok (logs in "
                       f"{escape(str(folder))}/runs): nothing compared -> exit 2", soft_wrap=True, highlight=False)
        return EXIT_ERROR
    doc = two_run_doc([head_run, base_run])
    code = exit_code(doc.marks(), opts.fail_above, None)
    text = pr_comment(doc, Side(*base), Side(*head), suite.suite.name, _outcome(doc.marks(), code, opts.fail_above))
    atomic_write_text(folder / "comment.md", text, root=folder)
    if opts.output is not None:
        atomic_write_text(opts.output, text)
    console.out(text, end="", highlight=False)
    progress.print(f"pr-check: {escape(str(folder / 'comment.md'))} -> exit {code}", soft_wrap=True, highlight=False)
    return code


def _outcome(marks: dict[str, Significance], code: int, fail_above: float) -> str:
    """The line the comment states the result with (the exit code's meaning, compare --fail-above's rule)."""
    beyond = f" by more than {fail_above:g}%" if fail_above else ""
    past = {m: s for m, s in marks.items() if s.change is not None and s.change < -fail_above / 100}
    slower = [m for m, s in past.items() if s.mark == "slower"]
    disturbed = [m for m, s in past.items() if s.mark == "disturbed"]
    if code == 1:
        return f"Significantly slower{beyond}: {', '.join(slower)}. This check fails."
    if code == 3:
        return (f"Slower{beyond} but the measurement was disturbed ({', '.join(disturbed)}): not decided; re-run on a "
                "quiet machine.")
    return f"No mode significantly slower{beyond}."
