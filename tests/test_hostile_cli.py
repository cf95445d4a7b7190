"""Issue 59: options and tables a user or a cluster sees. `--slurm-arg` is parsed as sbatch parses it (a unique
prefix is the option, the later one wins), so no prefix of an option ampbench sets reaches sbatch; `compare`
labels a row by the run it belongs to, not by whether the other run had a figure to compare with.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import ConfigError
from ampbench.launch import slurm
from tests.factories import make_run, make_suite, make_trials

cli = CliRunner()


def invoke(*args: str):
    r = cli.invoke(app, list(args), env={"COLUMNS": "250"})
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


# ---------------------------------------------------------------- 6. --slurm-arg: sbatch's prefixes


@pytest.mark.parametrize("arg,own", [
    ("outp=/tmp/x", "output"), ("comm=forged", "comment"), ("array=0-3", "array"), ("o=/tmp/x", "output"),
    ("OUTPUT=/tmp/x", "output"), ("--job=x", "job-name"), ("ch=/", "chdir"), ("exp=NONE", "export"),
    ("open=truncate", "open-mode"), ("wai", "wait"), ("dep=afterok:1", "dependency"), ("e=/tmp/e", "error"),
    ("ntasks-per=2", "ntasks-per-node"), ("hol", "hold"), ("pars", "parsable"),
])
def test_a_prefix_of_an_option_ampbench_sets_is_refused(arg, own):
    """sbatch's getopt_long takes `--outp=` as `--output=` and the later of two as the one: on main these
    replaced the run's log, its ownership token (the job comment) or made one trial an array of four."""
    with pytest.raises(ConfigError, match=f"--{own}"):
        slurm.parse_slurm_args([arg])


def test_other_options_and_exact_names_pass():
    """An sbatch option's exact name is that option even where it prefixes a guarded one (`ntasks`)."""
    ok = ["account=proj", "exclusive", "--qos=high", "ntasks=2", "gpus=2", "mem=8G", "time-min=5", "reservation=r"]
    assert slurm.parse_slurm_args(ok) == ["--account=proj", "--exclusive", "--qos=high", "--ntasks=2", "--gpus=2",
                                          "--mem=8G", "--time-min=5", "--reservation=r"]


def test_the_cli_refuses_a_prefix_in_one_line_before_anything(tmp_path):
    r = invoke("run", "toy", "--launcher", "slurm", "--slurm-arg", "comm=forged", "--out", str(tmp_path / "runs"))
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "--comment" in r.output and not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- 10. compare: whose row is it


def test_compare_labels_this_runs_row_when_the_other_has_no_ok_amp_trial(tmp_path):
    """The other run's AMP trials all crashed: this run's AMP row is this run's (on main it read "(other)"),
    with no change to show."""
    suite = make_suite(("fp32", "amp-o1-fp16"), seeds=(0, 1, 2))
    other_trials = [t if t.mode == "fp32" else t.model_copy(update={"status": "crashed"})
                    for t in make_trials(suite, config_hash=suite.config_hash())]
    other = make_run(tmp_path, suite, other_trials, run_id="other")
    cur = make_run(tmp_path, suite, make_trials(suite, config_hash=suite.config_hash()), run_id="cur")
    r = invoke("compare", str(cur), str(other))
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "amp-o1-fp16 (cur)" in line)
    assert "(other)" not in row and "no ok trial in the other run" in row, row
    other_row = next(line for line in r.output.splitlines() if "fp32 (other)" in line)
    assert "(other)" in other_row.split("fp32 (other)", 1)[1], other_row
    assert not any("amp-o1-fp16 (other)" in line for line in r.output.splitlines())


# ---------------------------------------------------------------- 9. `ulimit -f`: the cause, not only in logs/

EFBIG_WORKER = r'''
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))   # `ulimit -f 4`, as the shell would set it
print("training ...", flush=True)
with open(sys.argv[1], "w") as f:   # Python ignores SIGXFSZ: the write fails with EFBIG
    f.write("x" * 100_000)
'''


def test_a_worker_killed_by_the_file_size_limit_says_so(run_dir, monkeypatch, tmp_path):
    """A worker whose write hit RLIMIT_FSIZE dies before writing its result; the trial's error names the cause
    (on main only "worker died with exit code 1 before writing its result", EFBIG in logs/ alone)."""
    import sys

    from ampbench.commands.run import trial_files
    from ampbench.launch import launcher
    from ampbench.results import RunDir
    from ampbench.trial.spec import TrialSpec

    rd = RunDir(run_dir)
    path = rd.trial_path("fp32", 5)
    spec = TrialSpec(suite=make_suite(seeds=(5,)), suite_file="s.toml", mode="fp32", seed=5, profile="default",
                     trial_path=str(path), config_hash="", cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr(launcher, "worker_command",
                        lambda spec_path: [sys.executable, "-c", EFBIG_WORKER, str(tmp_path / "out.bin")])
    t = launcher.launch(spec, trial_files(rd, "fp32", 5))
    assert t.status == "crashed" and "exit code 1" in t.error, t.error
    assert "File too large" in t.error and "Errno 27" in t.error, t.error


# ---------------------------------------------------------------- 7. every verb's console: text shown, not obeyed


def test_the_console_escapes_control_characters_in_everything_it_prints():
    """core/terminal.py: after rich's markup and layout, each text segment's control characters are shown as
    their escapes; rich's own styles still reach a terminal."""
    import io

    from rich.table import Table
    from rich.text import Text

    from ampbench.core.terminal import TerminalConsole

    buf = io.StringIO()
    c = TerminalConsole(file=buf, force_terminal=True, width=120)
    t = Table("cell")
    t.add_row(Text("\x1b]8;;https://evil.example\x07link\x1b]8;;\x07"))
    c.print("[bold]ok[/] \x1b[2J \u202eevil\tx", t, highlight=False)
    out = buf.getvalue()
    assert "\x1b[2J" not in out and "\x1b]8" not in out and "\u202e" not in out, repr(out)
    assert "\\x1b[2J" in out and "\\x1b]8;;https://evil.example" in out and "\\u202e" in out, repr(out)
    assert "\x1b[1m" in out   # the console's own bold


def test_a_path_with_escapes_reaches_the_terminal_escaped(tmp_path):
    """A run folder whose name holds a hyperlink and a screen clear: `report` names it escaped (on main: raw)."""
    import shutil

    suite = make_suite(seeds=(0, 1))
    run = make_run(tmp_path, suite, make_trials(suite, n_steps=10, config_hash=suite.config_hash()))
    odd = run.parent / "r\x1b]8;;https://evil.example\x07x\x1b[2J"
    shutil.move(run, odd)
    r = invoke("report", str(odd))
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output, repr(r.output)
    assert "\\x1b]8;;https:/evil.example" in r.output and "\\x1b[2J" in r.output, r.output
