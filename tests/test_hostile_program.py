"""Issues 41 and 48: what a program under test does to its own run folder and to the user's terminal.

Each case runs the real CLI as a subprocess (`python -m ampbench.cli run`, real workers) on a command
suite whose program is a small hostile script written here: it swaps `trials/` for a link, removes its
run folder, or ends with an error full of escape sequences and rich markup. On main before these issues
every one of them fails (the trial file written through the link, exit 3 for a destroyed run, ESC bytes
on the terminal and in report.md, a crashed trial's reason only behind --explain).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def suite(tmp_path: Path, program: str, seeds: str = "[0]") -> Path:
    """A command suite running `program` as prog.py --seed S --out OUT --steps N, no hook (fast)."""
    (tmp_path / "prog.py").write_text(program)
    s = tmp_path / "suite.toml"
    s.write_text(f"""
[suite]
name = "mine"
workload = "command"
metric = "accuracy"
seeds = {seeds}
[workload]
command = [{json.dumps(sys.executable)}, "prog.py", "--seed", "{{seed}}", "--out", "{{out}}", "--steps", "{{steps}}"]
instrument = false
metric = {{ patterns = {{ accuracy = 'accuracy: (\\S+)' }} }}
[train]
batch_size = 16
steps = 4
warmup_steps = 2
timeout_s = 120
[[modes]]
name = "fp32"
""")
    return s


def ampbench(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("AMPBENCH_FAULT", None)
    return subprocess.run([sys.executable, "-m", "ampbench.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr


# ---------------------------------------------------------------- 41.2: trials/ swapped for a link

SWAP_TRIALS = r'''
import shutil, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
trials = out.parent.parent / "trials"
evil = Path(__file__).with_name("evil").resolve()
evil.mkdir(exist_ok=True)
if trials.exists():                 # an earlier trial's file goes with it: the run must say it is missing
    for p in trials.iterdir():
        shutil.move(str(p), str(evil / p.name))
    trials.rmdir()
trials.symlink_to(evil, target_is_directory=True)
print("accuracy: 0.5")
'''


@pytest.mark.slow
def test_a_trial_file_is_never_written_through_a_trials_folder_the_program_made_a_link(tmp_path):
    r = ampbench("run", str(suite(tmp_path, SWAP_TRIALS)), "--out", "runs", "--no-report", cwd=tmp_path)
    no_traceback(r)
    assert r.returncode == 2, r.stdout + r.stderr
    evil = tmp_path / "evil"
    assert list(evil.iterdir()) == [], "the worker wrote its trial file through the link"
    run_dir = next((tmp_path / "runs" / "mine").iterdir())
    trials = run_dir / "trials"
    assert trials.is_dir() and not trials.is_symlink()
    t = json.loads((trials / "fp32__seed0.json").read_text())           # recorded as tampered, not lost
    assert t["status"] == "crashed" and "tampered:" in t["error"] and "symbolic link" in t["error"], t["error"]
    assert "fp32__seed0 crashed: tampered:" in r.stdout, r.stdout       # and said on the first screen


@pytest.mark.slow
def test_an_earlier_record_moved_out_through_the_link_is_named_missing(tmp_path):
    r = ampbench("run", str(suite(tmp_path, SWAP_TRIALS, seeds="[0, 1]")), "--out", "runs", "--no-report",
                 cwd=tmp_path)
    no_traceback(r)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "fp32__seed0.json" in r.stderr and "missing" in r.stderr, r.stderr
    assert [p.name for p in (tmp_path / "evil").iterdir()] == ["fp32__seed0.json"]   # only what the program moved


# ---------------------------------------------------------------- 48.1: a program that removes its run folder

REMOVE_RUN = r'''
import shutil, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
print("accuracy: 0.5")
if sys.argv[sys.argv.index("--seed") + 1] == "1":
    shutil.rmtree(out.parent.parent)
'''


SWAP_RUN = r'''
import os, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
print("accuracy: 0.5")
if sys.argv[sys.argv.index("--seed") + 1] == "1":
    run = out.parent.parent.resolve()
    os.rename(run, f"{run}.moved")
    evil = Path(__file__).with_name("evil").resolve()
    evil.mkdir()
    os.symlink(evil, run)
'''


@pytest.mark.slow
@pytest.mark.parametrize("program", ["removed", "replaced by a link"])
def test_a_program_that_removes_its_run_folder_is_an_error_naming_what_was_lost(tmp_path, program):
    r = ampbench("run", str(suite(tmp_path, REMOVE_RUN if program == "removed" else SWAP_RUN, seeds="[0, 1]")),
                 "--out", "runs", cwd=tmp_path)
    no_traceback(r)
    assert r.returncode == 2, r.stdout + r.stderr                       # not INCONCLUSIVE -> exit 3
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1, r.stderr
    assert "removed or replaced" in err[0] and "run.json" in err[0] and "fp32__seed0.json" in err[0], err[0]
    if program == "removed":
        assert list((tmp_path / "runs" / "mine").iterdir()) == [], "the removed run folder was re-created"
    else:
        assert list((tmp_path / "evil").iterdir()) == [], "written into the folder the link points to"


# ---------------------------------------------------------------- 41.4 / 48.5: the program's text, literally

HOSTILE_ERROR = r'''
import sys
sys.stderr.write("RuntimeError: bad \x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\x1b[31m"
                 "[red]red[/] [/] \u202eevil\x07\n")
sys.exit(3)
'''


@pytest.mark.slow
def test_a_crash_line_shows_the_programs_text_literally_and_nothing_acts_on_the_terminal(tmp_path):
    r = ampbench("run", str(suite(tmp_path, HOSTILE_ERROR)), "--out", "runs", cwd=tmp_path)
    no_traceback(r)
    assert r.returncode == 2, r.stdout + r.stderr
    run_dir = next((tmp_path / "runs" / "mine").iterdir())
    for text in (r.stdout, (run_dir / "report.md").read_text(), (run_dir / "report.html").read_text()):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    shown = r"\x1b]8;;http://evil.example/\x1b\click"          # escaped, not dropped
    assert shown in r.stdout and shown in (run_dir / "report.md").read_text()
    crash = [ln for ln in r.stdout.splitlines() if ln.startswith("fp32__seed0 crashed:")]
    assert len(crash) == 1 and "[red]red[/] [/]" in crash[0] and r"\u202eevil\x07" in crash[0], r.stdout
    r = ampbench("check", str(run_dir), cwd=tmp_path)                 # check says why too, not only --explain
    assert r.returncode == 2 and "\x1b" not in r.stdout
    crash = [ln for ln in r.stdout.splitlines() if ln.startswith("fp32__seed0 crashed:")]
    assert len(crash) == 1 and "[red]red[/] [/]" in crash[0] and shown in crash[0], r.stdout


def test_printable_escapes_controls_and_keeps_everything_else():
    from ampbench.core.text import printable

    assert printable("a\x1b[2Jb\rc\x9bd\u202ee") == r"a\x1b[2Jb\rc\x9bd\u202ee"
    assert printable("x\ny\tz") == r"x\ny\tz"
    assert printable("x\ny\tz", newlines=True) == "x\ny\tz"
    assert printable("[red]é ü 中[/]") == "[red]é ü 中[/]"


# ---------------------------------------------------------------- 41.6: a model nested 3,000 Layers deep

DEEP_CHAIN = r'''
import sys
import paddle
class Wrap(paddle.nn.Layer):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
chain = paddle.nn.Linear(4, 3)
for _ in range(3000):                  # deeper than Python's recursion limit: named_sublayers raises
    chain = Wrap(chain)
model = paddle.nn.Linear(4, 2)
opt = paddle.optimizer.SGD(parameters=model.parameters())
for i in range(int(sys.argv[sys.argv.index("--steps") + 1])):
    model(paddle.ones([3, 4])).mean().backward(); opt.step(); opt.clear_grad()
print("accuracy: 0.5")
'''


@pytest.mark.slow
def test_a_model_nested_3000_deep_says_why_its_shape_audit_is_absent(tmp_path):
    s = suite(tmp_path, DEEP_CHAIN)
    s.write_text(s.read_text().replace("instrument = false\n", ""))
    r = ampbench("run", str(s), "--out", "runs", "--no-report", cwd=tmp_path)
    no_traceback(r)
    t = json.loads(next(tmp_path.glob("runs/mine/*/trials/fp32__seed0.json")).read_text())
    assert t["status"] == "ok", t["error"]
    audit = t["shape_audit"]
    assert "RecursionError" in audit.get("absent", "") and "recursion limit" in audit["absent"], audit
    assert "odd_count" not in audit          # never an empty audit that reads as "nothing odd"


# ---------------------------------------------------------------- 48.5: a Criteo file with a bad label on line 10

@pytest.mark.slow
def test_a_ctr_run_over_a_bad_criteo_line_names_file_line_and_value_on_run_and_check(tmp_path):
    import random

    rng = random.Random(0)
    rows = []
    for i in range(1, 201):
        label = "7" if i == 10 else str(rng.randint(0, 1))
        rows.append("\t".join([label, *(str(rng.randint(0, 50)) for _ in range(13)),
                               *(f"{rng.getrandbits(32):08x}" for _ in range(26))]))
    (tmp_path / "c.tsv").write_text("\n".join(rows) + "\n")
    r = ampbench("run", "ctr", "--profile", "cpu", "--set", "workload.dataset=criteo", "--set",
                 "workload.criteo.path=c.tsv", "--mode", "fp32", "--seeds", "0", "--out", "runs", "--no-report",
                 cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    want = "c.tsv:10: label must be 0 or 1, found '7'"
    assert any(ln.startswith("fp32__seed0 crashed:") and want in ln for ln in r.stdout.splitlines()), r.stdout
    assert any("seed 0: crashed:" in ln and want in ln for ln in r.stdout.splitlines()), r.stdout   # as it ended
    r = ampbench("check", str(next(tmp_path.glob("runs/ctr/*"))), cwd=tmp_path)
    assert r.returncode == 2 and any(ln.startswith("fp32__seed0 crashed:") and want in ln
                                     for ln in r.stdout.splitlines()), r.stdout
