"""The conventions a newcomer expects of a command line (issue 45): --version, shell completion, "did you
mean" for verbs and suite names, --help without the deprecated verbs, --explain within the width, no
advice that cannot apply to the device, and a note beside intervals from 2-3 seeds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ampbench
from ampbench.cli import app
from ampbench.judge import why_slow
from ampbench.record.models import AmpInfo, Env, StepRecord, Trial
from tests.factories import CPU_ENV, make_run, make_suite, make_trials

REPO = Path(__file__).resolve().parent.parent
cli = CliRunner()


def invoke(*args: str, columns: int = 200):
    return cli.invoke(app, list(args), env={"COLUMNS": str(columns)})


def _real(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point in a subprocess, as a shell runs it (`ampbench` is `ampbench.cli:main`)."""
    code = "import sys; sys.argv[0] = 'ampbench'; from ampbench.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, check=False)


def test_version_names_ampbench_and_paddle():
    r = _real("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(f"ampbench {ampbench.__version__} (paddle {metadata.version('paddlepaddle')},")


def test_help_lists_the_verbs_once_and_never_the_deprecated_ones():
    r = invoke("--help")
    assert r.exit_code == 0
    head = r.output.split("Options:", 1)[0]
    assert "summary" not in head and "export-benchmark" not in head
    named = set(re.findall(r"[\w-]+", head.split("command:", 1)[1]))
    listed = {ln.split()[0] for ln in r.output.split("Commands:", 1)[1].split("Exit codes:", 1)[0].splitlines()
              if ln.strip()}
    assert "summary" not in listed and "export-benchmark" not in listed
    assert listed <= named, listed - named          # the first line names every verb --help lists
    assert "--version" in r.output and "--install-completion" in r.output


@pytest.mark.slow
def test_did_you_mean_for_a_verb_and_a_suite_name():
    verb = _real("compar")
    assert verb.returncode == 2 and "Did you mean 'compare'?" in verb.stderr
    suite = _real("run", "resnt")
    lines = [ln for ln in suite.stderr.splitlines() if ln.strip()]
    assert suite.returncode == 2 and len(lines) == 1, suite.stderr
    assert "resnt: suite file not found" in lines[0] and "did you mean resnet?" in lines[0]
    far = _real("run", "zzzz")
    assert far.returncode == 2 and "did you mean" not in far.stderr


@pytest.mark.slow
def test_shell_completion_of_verbs_and_bundled_suite_names():
    def complete(words: str, cword: int) -> list[str]:
        r = _real(env={"_AMPBENCH_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert complete("ampbench ru", 1) == ["run"]
    assert complete("ampbench run re", 2) == ["resnet"]
    assert set(complete("ampbench tune ", 2)) >= {"toy", "resnet", "ocr", "bert", "ctr"}
    # typer detects the shell from the process tree, so the script is asked for from a bash, as a user would
    code = "import sys; sys.argv[0] = 'ampbench'; from ampbench.cli import main; main()"
    shown = subprocess.run(["bash", "-c", '"$0" -c "$1" --show-completion; exit $?', sys.executable, code], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert shown.returncode == 0 and "_AMPBENCH_COMPLETE=complete_bash" in shown.stdout, shown.stderr


def _cpu_run(root: Path, seeds: tuple[int, ...]) -> Path:
    suite = make_suite(("fp32", "amp-o1-fp16"), seeds=seeds)
    trials = make_trials(suite, env=CPU_ENV, amp_active=False, memory_source="host")
    return make_run(root, suite, trials, run_id=f"cpu{len(seeds)}", env=CPU_ENV)


def test_explain_stays_within_the_width_in_a_pipe(tmp_path):
    run = _cpu_run(tmp_path, (0, 1))
    r = invoke("check", str(run), "--explain", columns=80)
    assert r.exit_code == 3, r.output
    long = [ln for ln in r.output.splitlines() if len(ln) > 80]   # the rules, the table, the notes
    assert not long, long
    assert sum(ln.startswith(("fp32  ", "amp-o1-fp16  ")) for ln in r.output.splitlines()) >= 3


@pytest.mark.parametrize(("seeds", "noted"), [((0, 1), True), ((0, 1, 2), True), ((0, 1, 2, 3, 4), False)])
def test_a_note_beside_intervals_from_two_or_three_seeds(tmp_path, seeds, noted):
    run = _cpu_run(tmp_path, seeds)
    r = invoke("check", str(run))
    assert re.search(r"\[\d\.\d\d, \d\.\d\d\]", r.output), r.output     # an interval is shown
    note = f"note: {len(seeds)} seeds per mode: wide intervals are expected; more seeds narrow them"
    assert (note in r.output) is noted, r.output
    md = invoke("report", str(run))
    assert md.exit_code == 0, md.output
    assert (f"{len(seeds)} seeds per mode: wide intervals are expected" in (run / "report.md").read_text()) is noted


def _odd_shapes(device: str) -> Trial:
    steps = [StepRecord(step=i, loss=1.0, time_s=0.1, samples=8) for i in range(1, 6)]
    audit = {"multiple": 8, "layers": 2, "odd_count": 1, "batch_ok": True,
             "odd": [{"layer": "2", "type": "Linear", "dims": [32, 4], "odd_dims": [4]}]}
    return Trial(suite="s", workload="toy", mode="amp", seed=0, status="ok", steps=steps, env=Env(device=device),
                 amp=AmpInfo(active=device.startswith("gpu")), shape_audit=audit)


def test_tensor_core_advice_only_where_there_are_tensor_cores():
    on_gpu = [c.text for c in why_slow.rank([_odd_shapes("gpu:0")])]
    assert any("Tensor Cores need multiples of 8" in t and "Linear [32, 4]" in t for t in on_gpu), on_gpu
    assert not any("Tensor Cores" in c.text for c in why_slow.rank([_odd_shapes("cpu")]))


# ---------------------------------------------------------------- issue 61: help, typos, missing extras


def _verbs() -> list[list[str]]:
    """Every verb's words, sub-commands included (`history append`)."""
    from typer.main import get_command

    out = []
    for name, cmd in get_command(app).commands.items():
        subs = getattr(cmd, "commands", None)
        out += [[name, sub] for sub in subs] if subs else [[name]]
    return out


def test_help_names_types_users_know_and_the_choices():
    typed = re.compile(r"<(?:str|int|float|bool|path|Path|list\[[^]]*\])>|\{\w+\}")
    for words in _verbs():
        r = invoke(*words, "--help")
        assert r.exit_code == 0, (words, r.output)
        assert not typed.search(r.output), (words, typed.findall(r.output))
    run = invoke("run", "--help").output
    assert "--mode NAME" in run and "--max-seeds INTEGER" in run and "--set KEY=VALUE" in run and "--out PATH" in run
    assert "--launcher [local|slurm]" in run
    assert "--format [table|json|md|csv|parquet|pytest-benchmark]" in invoke("compare", "--help").output
    assert "report [OPTIONS] RUN_DIR..." in invoke("report", "--help").output


def test_the_listed_choices_are_the_codes():
    from ampbench import cli as c
    from ampbench.commands.compare import FORMATS
    from ampbench.report.compare_runs import COLUMNS
    from ampbench.report.dashboard_interactive import VIEWS
    from ampbench.workloads.bert.source import SOURCES

    assert c.COMPARE_FORMATS == FORMATS and c.COMPARE_SORTS == COLUMNS
    help_text = invoke("publish", "--help").output + invoke("import", "paddlenlp", "--help").output
    assert c._choices(*VIEWS) in help_text and c._choices(*SOURCES) in help_text


@pytest.mark.parametrize(("where", "text", "said"), [
    ("train", "batch_sise = 3", "train.batch_sise: unknown key (did you mean batch_size?)"),
    ("thresholds", "min_speedupp = 1.1", "thresholds.min_speedupp: unknown key (did you mean min_speedup?)"),
    ("workload", "hiden = 3", "workload.hiden: unknown key (did you mean hidden?)"),
    ("train", "zzzzzz = 3", "train.zzzzzz: unknown key (check the spelling"),
])
def test_a_mistyped_suite_key_gets_did_you_mean_in_one_line(tmp_path, where, text, said):
    suite = tmp_path / "s.toml"
    suite.write_text(f'[suite]\nname = "s"\nworkload = "toy"\nmetric = "accuracy"\n[{where}]\n{text}\n'
                     '[[modes]]\nname = "fp32"\n')
    r = invoke("run", str(suite))
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and said in lines[0], r.output
    assert "did you mean" not in lines[0] or "zzzz" not in text
    mode = invoke("run", "toy", "--set", 'modes=[{name="fp32", scaler={init_loss_scalin=2.0}}]')
    assert mode.exit_code == 2 and "scaler.init_loss_scalin: unknown key (did you mean init_loss_scaling?)" in mode.output


def test_every_missing_extra_message_names_its_setup_flag(tmp_path, monkeypatch):
    """Each extra's setup.sh flag exists and installs it (a dry run), no message spells `pip install` past the
    one table, and two of them said as a user meets them: one line each."""
    from ampbench.core.install import SETUP_FLAGS, install_hint

    for extra, flag in SETUP_FLAGS.items():
        r = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh"), "--dry-run", *flag.split()],
                           capture_output=True, text=True, check=False, timeout=60)
        assert r.returncode == 0, r.stderr
        installed = re.search(r"-e \.\[([\w,]+)\]", r.stdout)
        assert installed and extra in installed.group(1).split(","), (extra, r.stdout)
        assert install_hint(extra).startswith(f"bash scripts/setup.sh {flag}".rstrip() + " (or pip install")
    # the table; pip's own commands; paddlenlp (no extra: the user's choice); advice for the program's own Python
    allowed = {"core/install.py", "commands/bisect_packages.py", "workloads/bert/source.py", "trial/command_crash.py"}
    spelled = [f"{p.relative_to(REPO / 'ampbench')}" for p in (REPO / "ampbench").rglob("*.py")
               if "pip install" in p.read_text(encoding="utf-8") and "hook" not in p.parts
               and str(p.relative_to(REPO / "ampbench")) not in allowed]
    assert not spelled, spelled
    # compare --format parquet without pyarrow: one line naming the flag, not pandas' five-line error
    suite = make_suite(seeds=(0, 1))
    a = make_run(tmp_path, suite, make_trials(suite), run_id="a")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    r = invoke("compare", str(a), "--format", "parquet", "-o", str(tmp_path / "x.parquet"))
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "bash scripts/setup.sh --bench" in lines[0], r.output
    from ampbench.report import dashboard_interactive

    monkeypatch.setattr(dashboard_interactive.importlib.util, "find_spec", lambda name: None)
    pub = invoke("publish", str(tmp_path), "--view", "interactive", "-o", str(tmp_path / "site"))
    assert pub.exit_code == 2 and "bash scripts/setup.sh --dashboard" in pub.output, pub.output


def test_one_seed_recommendation_in_the_note_explain_plan_and_report(tmp_path):
    """Two undecided rules needing 3 and 13 seeds: the outcome note, `check --explain`, `ampbench plan` and
    report.md give one recommendation, 13 (the most any needs), with one option to run it; no rule text
    suggests a count of its own (it said "run 1 more seed(s) per mode (3 in all)" beside "13 in all")."""
    import numpy as np

    suite = make_suite(("fp32", "amp-o1-fp16"), seeds=(0, 1, 2))
    trials = make_trials(suite, base_time={"fp32": 0.05, "amp-o1-fp16": 0.048}, rng=np.random.default_rng(5),
                         metrics={"fp32": [0.90, 0.91, 0.905], "amp-o1-fp16": [0.895, 0.90, 0.905]})
    run = make_run(tmp_path, suite, trials)
    want = ("13 seeds per mode decide every rule (the most any needs: accuracy-parity in amp-o1-fp16): "
            "--seeds 0,1,2,3,4,5,6,7,8,9,10,11,12")
    explain = invoke("check", str(run), "--explain")
    assert explain.exit_code == 3 and f"note: 3 seeds per mode: wide intervals are expected; {want}" in explain.output
    assert not re.search(r"run \d+ more seed|in all;", explain.output), explain.output
    assert re.search(r"speedup .* this rule alone needs 3 per mode", " ".join(explain.output.split()))
    plan = invoke("plan", str(run))
    assert plan.output.strip().splitlines()[-1] == f"recommendation: {want}"
    assert invoke("report", str(run)).exit_code == 0
    assert want in (run / "report.md").read_text()
