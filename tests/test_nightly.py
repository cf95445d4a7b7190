"""scripts/nightly.sh --dry-run on CPU (toy suites cut to a few steps), and the GPU workflow file:
valid for GitHub Actions, and calling only commands that exist in this project."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TOY_SUITE

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = ROOT / "scripts" / "nightly.sh"
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-gpu.yml"
CPU_PROFILE = "\n[profiles.cpu]\ntrain = { steps = 40, warmup_steps = 1 }\n"


def nightly(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(NIGHTLY), *args], capture_output=True, text=True, check=False, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=ROOT)


def history_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_dry_run_checks_reports_writes_history_and_exits_inconclusive(tmp_path):
    toy = tmp_path / "toy.toml"
    toy.write_text(TOY_SUITE + CPU_PROFILE)
    other = tmp_path / "toy2.toml"
    other.write_text(TOY_SUITE.replace('name = "toy"', 'name = "toy2"') + CPU_PROFILE)
    base, hist = tmp_path / "baselines", tmp_path / "history"

    # night 1: one suite, no baseline yet; save one on purpose
    out1 = tmp_path / "night1"
    r = nightly("--dry-run", "--suite", str(toy), "--out", str(out1), "--baselines", str(base), "--history",
                str(hist), "--save-baselines", "--set", "train.steps=4")
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]       # AMP inactive on CPU: INCONCLUSIVE
    assert "no baseline" in r.stdout
    saved = base / "cpu" / "toy.json"                                    # <device-slug>/<suite>.json
    assert json.loads(saved.read_text())["suite"] == "toy"
    (run1,) = out1.joinpath("runs.txt").read_text().split()
    check = json.loads((Path(run1) / "check.json").read_text())
    assert check["baseline"] is None and check["strict"] is False
    assert len(json.loads((Path(run1) / "run.json").read_text())["plan"]) == 2
    assert all(len(json.loads(p.read_text())["steps"]) == 4 for p in (Path(run1) / "trials").glob("*.json"))

    # night 2: two suites through the env knobs; toy is checked against night 1's baseline
    out2 = tmp_path / "night2"
    r = nightly("--dry-run", "--out", str(out2), "--baselines", str(base), "--history", str(hist),
                "--until-decided", "--max-seeds", "2",
                env={"NIGHTLY_SUITES": f"{toy},{other}", "NIGHTLY_SET": "train.steps=4 train.warmup_steps=1"})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    for name in ("toy", "toy2"):   # each suite's check table once (the one against the baseline)
        assert r.stdout.count(f"ampbench check: {name} (") == 1, r.stdout[-3000:]
    runs = out2.joinpath("runs.txt").read_text().split()
    assert [Path(p).parent.name for p in runs] == ["toy", "toy2"]
    own = json.loads((Path(runs[0]) / "check.json").read_text())   # the run's own check is kept
    check = json.loads((Path(runs[0]) / "check-vs-toy.json").read_text())  # the comparison in its own file
    assert own["baseline"] is None and check["baseline"] == str(saved)
    # the history kept by the nightly reaches the check (its drift), and --until-decided reaches the run
    assert any("History rules allow" in n for n in check["notes"]), check["notes"]
    info = json.loads((Path(runs[0]) / "run.json").read_text())
    assert info["sequential"] is not None and info["sequential"]["max_seeds"] == 2
    assert json.loads((Path(runs[1]) / "check.json").read_text())["baseline"] is None
    assert not list(Path(runs[1]).glob("check-vs-*.json"))
    assert [h["run_id"] for h in history_lines(hist / "toy.jsonl")] == [Path(run1).name, Path(runs[0]).name]
    assert len(history_lines(hist / "toy2.jsonl")) == 1
    report = (out2 / "report.md").read_text()
    assert "toy2" in report and "toy" in report.replace("toy2", "")
    summary = (out2 / "summary.txt").read_text()
    assert "exit=3" in summary and summary.count("exit 3") == 2


def test_bad_invocations_exit_2(tmp_path):
    assert nightly("--bogus").returncode == 2
    r = nightly("--dry-run", "--suite", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "suite file not found" in r.stderr


@pytest.mark.slow
def test_gpu_mode_refuses_a_machine_without_gpu(tmp_path):
    """On CPU the real nightly must not quietly fall back to the cpu profiles."""
    r = nightly("--suite", str(ROOT / "suites" / "resnet.toml"), "--out", str(tmp_path / "o"), timeout=120)
    assert r.returncode == 2 and "no GPU" in r.stderr
    assert not (tmp_path / "o").exists()


SCRIPTS = [NIGHTLY, ROOT / "scripts" / "setup.sh"]  # both run by the workflow


def test_scripts_parse():
    for script in SCRIPTS:
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert r.returncode == 0, f"{script}: {r.stderr}"


def test_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):  # CI installs it (setup.sh --test): a missing linter must fail, not hide
            pytest.fail("shellcheck not installed in CI: scripts/setup.sh --test installs the Debian package")
        pytest.skip("shellcheck not installed (Debian package shellcheck; scripts/setup.sh --test installs it)")


def test_setup_test_installs_the_linters_ci_needs():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    test_debs = re.search(r"--test\)(.*?);;", text, re.DOTALL)
    assert test_debs and "shellcheck" in test_debs.group(1)


# Each action's first major that runs on Node 24 (node20 actions are deprecated on GitHub's runners).
NODE24 = {"actions/checkout": 5, "actions/setup-python": 6, "actions/cache": 5, "actions/upload-artifact": 6,
          "actions/download-artifact": 7, "actions/upload-pages-artifact": 5, "actions/deploy-pages": 5}


def test_workflow_actions_are_off_node20():
    uses = re.findall(r"uses:\s*([\w./-]+)@v(\d+)", (ROOT / ".github" / "workflows" / "nightly-gpu.yml").read_text())
    assert uses
    old = [f"{a}@v{v}" for a, v in uses if int(v) < NODE24.get(a, 0)]
    unknown = [a for a, _ in uses if a not in NODE24]
    assert not old and not unknown, (old, unknown)
    r = subprocess.run(["shellcheck", *map(str, SCRIPTS)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout


# ---------------------------------------------------------------- the workflow


def load_workflow() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(WORKFLOW.read_text())


def test_workflow_schema_valid():
    exe = shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema not installed (pip install check-jsonschema)")
    r = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
                       capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_workflow_actionlint():
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint binary not on PATH")
    r = subprocess.run([exe, str(WORKFLOW)], capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def _steps(wf: dict) -> list[dict]:
    return [s for job in wf["jobs"].values() for s in job.get("steps", [])]


def test_workflow_shape():
    wf = load_workflow()
    on = wf.get("on", wf.get(True))                      # YAML 1.1 reads a bare `on` as true
    assert "schedule" in on and "workflow_dispatch" in on
    jobs = wf["jobs"]
    # fan-out: one GPU job per suite from the plan job's list, then one combine job over all of them
    suite = jobs["suite"]
    assert {"self-hosted", "gpu"} <= set(suite["runs-on"])
    assert suite["strategy"]["matrix"]["suite"] == "${{ fromJSON(needs.plan.outputs.suites) }}"
    assert suite["strategy"]["fail-fast"] is False and suite["needs"] == "plan"
    assert suite["env"]["PADDLE_GPU_INDEX"] == "${{ vars.PADDLE_GPU_INDEX }}"
    combine = jobs["combine"]
    assert combine["needs"] == "suite" and combine["if"].startswith("always()")
    assert combine["permissions"]["contents"] == "write"          # pushes the history branch
    runs = "\n".join(s.get("run", "") for s in _steps(wf))
    assert "--runs-only" in runs and "--combine collected" in runs and "--history-branch ampbench-history --push" in runs
    uses = [s.get("uses", "") for s in _steps(wf)]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("actions/download-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
    cached = [s["with"]["path"] for s in _steps(wf) if s.get("uses", "").startswith("actions/cache@")]
    assert cached == ["~/.cache/ampbench"]                         # data only: the history is never a cache
    assert any(s.get("with", {}).get("cache") == "pip" for s in _steps(wf))
    assert "AMPBENCH_PADDLE=gpu bash scripts/setup.sh" in runs and "GITHUB_STEP_SUMMARY" in runs
    assert "${{ inputs" not in runs                      # inputs reach scripts through env, never inline
    # the artifact the GPU jobs upload is the one the combine job downloads
    up = next(s for s in suite["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))["with"]["name"]
    down = next(s for s in combine["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert up.replace("${{ strategy.job-index }}", "*") == down["with"]["pattern"]


def test_workflow_calls_only_commands_that_exist():
    from ampbench.cli import app

    wf = load_workflow()
    runs = "\n".join(s.get("run", "") for s in _steps(wf))
    scripts = set(re.findall(r"\bbash (scripts/[\w./-]+)", runs))
    assert scripts == {"scripts/setup.sh", "scripts/nightly.sh"}
    assert all((ROOT / s).is_file() for s in scripts)
    verbs = set(re.findall(r"python -m ampbench\.cli (\w[\w-]*)", runs))
    known = {c.name or c.callback.__name__ for c in app.registered_commands}
    assert verbs and verbs <= known, verbs - known
    # every option the workflow hands nightly.sh is one nightly.sh parses
    nightly_opts = set(re.findall(r"^\s+(--[\w-]+)\)", NIGHTLY.read_text(), re.MULTILINE))
    calls = re.findall(r"args\+?=\(([^)]*)\)", runs) + re.findall(r"bash scripts/nightly\.sh ([^\n]*)", runs)
    joined = " ".join(calls)
    passed = re.findall(r"--run-arg\s+(--[\w-]+)", joined)   # handed on to `ampbench run` verbatim
    used = set(re.findall(r"(--[\w-]+)", re.sub(r"--run-arg\s+\S+", "--run-arg", joined)))
    assert used and used <= nightly_opts, used - nightly_opts
    from typer.main import get_command

    run_opts = {o for p in get_command(app).commands["run"].params for o in p.opts}
    assert set(passed) <= run_opts, set(passed) - run_opts
    # and every env knob it sets is one nightly.sh or setup.sh reads
    knobs = {k for s in [*_steps(wf), *wf["jobs"].values()] for k in s.get("env", {}) if k.startswith("NIGHTLY_")}
    assert knobs and all(k in NIGHTLY.read_text() for k in knobs)


# ---------------------------------------------------------------- scale-out: --combine and the history branch


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_combine_collected_runs_into_one_history_report_dashboard_and_branch(tmp_path):
    """Run folders gathered from several machines: one history update, one report, one dashboard, and
    the history committed on a git branch and pushed (no CI cache)."""
    from tests.test_report import copy_run

    collected = tmp_path / "collected"
    copy_run(collected / "machine-a" / "runs" / "ocr", "night-1", run_id="night-1",
             started="2025-03-01T02:00:00+00:00")
    b = copy_run(collected / "machine-b", "night-1b", run_id="night-1b", started="2025-03-01T03:00:00+00:00")
    (b / "check.json").unlink()                           # not checked where it ran: checked when combined
    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    repo = tmp_path / "repo"
    git("init", "-q", str(repo), cwd=tmp_path)
    (repo / "README").write_text("x")
    git("add", "README", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init", cwd=repo)
    git("remote", "add", "origin", str(origin), cwd=repo)
    out = tmp_path / "night"
    r = nightly("--out", str(out), "--history-branch", "ampbench-history", "--push", "--combine", str(collected),
                env={"NIGHTLY_HISTORY_REPO": str(repo), "NIGHTLY_REPO_URL": "https://github.com/o/r"})
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]   # the fixture run holds an ERROR
    runs = out.joinpath("runs.txt").read_text().split()
    assert sorted(Path(p).name for p in runs) == ["night-1", "night-1b"]
    assert (b / "check.json").is_file()                             # checked during the combine
    assert (out / "report.md").is_file() and 'src="data:image/png;base64,' in (out / "report.html").read_text()
    assert (out / "site" / "index.html").is_file() and (out / "site" / "ocr.html").is_file()
    assert "reports/ocr/night-1.html" in (out / "site" / "ocr.html").read_text()
    # the history lives on the branch, pushed to origin
    files = git("ls-tree", "-r", "--name-only", "ampbench-history", cwd=origin).split()
    assert "history/ocr.jsonl" in files and "history/reports/ocr/night-1b.html" in files
    assert not any(f.endswith(".lock") for f in files), files   # the append's lock is not history
    lines = git("show", "ampbench-history:history/ocr.jsonl", cwd=origin).splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == ["night-1", "night-1b"]
    # the next night appends to the same branch
    out2 = tmp_path / "night2"
    copy_run(tmp_path / "collected2", "night-2", run_id="night-2", started="2025-03-02T02:00:00+00:00")
    r = nightly("--out", str(out2), "--history-branch", "ampbench-history", "--push", "--combine",
                str(tmp_path / "collected2"), env={"NIGHTLY_HISTORY_REPO": str(repo)})
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    lines = git("show", "ampbench-history:history/ocr.jsonl", cwd=origin).splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == ["night-1", "night-1b", "night-2"]
    assert len(git("log", "--oneline", "ampbench-history", cwd=origin).splitlines()) == 2


def test_combine_refuses_an_empty_collection(tmp_path):
    (tmp_path / "empty").mkdir()
    r = nightly("--out", str(tmp_path / "o"), "--combine", str(tmp_path / "empty"))
    assert r.returncode == 2 and "no run folders" in r.stderr
    assert nightly("--combine").returncode == 2
