"""`ampbench pr-check` (issue 61): a pull request's base and head run, compared, the markdown comment printed.

The acceptance, on a small repository of a real Paddle program (tests/test_bisect.py's): a head commit whose
every step is 25% longer (throughput -20%) is marked significantly slower in the comment and the check exits
1; the same commit on both sides marks nothing and exits 0.  The quick tests cover the comment's rendering
and the refusals."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.commands.compare import two_run_doc
from ampbench.report.pr_comment import MARKER, Side, pr_comment
from tests.factories import make_run, make_suite, make_trials
from tests.test_bisect import _git, _repo, _suite

cli = CliRunner()


def invoke(*args: str):
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


def test_the_comment_marks_a_significant_slowdown_and_escapes_names(tmp_path):
    suite = make_suite(("fp32", "amp-o1-fp16"), seeds=(0, 1, 2))
    rng = np.random.default_rng(3)
    base = make_run(tmp_path, suite, make_trials(suite, base_time={"fp32": 0.05, "amp-o1-fp16": 0.04}, rng=rng),
                    run_id="base")
    head = make_run(tmp_path, suite, make_trials(suite, base_time={"fp32": 0.0625, "amp-o1-fp16": 0.04}, rng=rng),
                    run_id="head")
    doc = two_run_doc([head, base])
    text = pr_comment(doc, Side("a" * 40, "fix | <b>it</b>"), Side("b" * 40, "slower step"), "toy", "Significantly slower.")
    assert text.startswith(MARKER + "\n### ampbench: toy, head `bbbbbbbbbb` against base `aaaaaaaaaa`")
    rows = {ln.split("|")[1].strip(): ln for ln in text.splitlines() if ln.startswith("| `")}
    assert set(rows) == {"`fp32`", "`amp-o1-fp16`"}
    assert re.search(r"\| -(19|20|21)\.\d% \[[^]]+\] \| \*\*yes, slower\*\* \| 3 / 3 \|$", rows["`fp32`"]), rows
    assert "| no |" in rows["`amp-o1-fp16`"] and "**" not in rows["`amp-o1-fp16`"]
    assert "fix \\| &lt;b&gt;it&lt;/b&gt;" in text or "fix \\| \\<b\\>it\\</b\\>" in text   # a subject is text


def test_refusals_in_one_line(tmp_path):
    repo, shas = _repo(tmp_path, [0.01, 0.01])
    suite = _suite(tmp_path, repo)
    for args, key in ((["--base", "nope"], "--base"), (["--base", shas[0], "--head", "-x"], "--head"),
                      (["--base", shas[0], "--repo", str(tmp_path / "none")], "--repo")):
        r = invoke("pr-check", str(suite), "--repo", str(repo), *args) if "--repo" not in args else \
            invoke("pr-check", str(suite), *args)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and key in lines[0], r.output
    toy = invoke("pr-check", "toy", "--repo", str(repo), "--base", shas[0])
    assert toy.exit_code == 2 and "needs a workload = \"command\" suite" in toy.output


@pytest.mark.slow
def test_a_20pct_slower_head_is_marked_and_fails_identical_commits_mark_nothing(tmp_path):
    repo, shas = _repo(tmp_path, [0.010, 0.0125])      # head: every step 25% longer, throughput -20%
    suite = _suite(tmp_path, repo, steps=30)
    out = tmp_path / "out"
    r = invoke("pr-check", str(suite), "--repo", str(repo), "--base", shas[0], "--head", shas[1], "--out", str(out),
               "-o", str(tmp_path / "comment.md"))
    assert r.exit_code == 1, r.output
    comment = (tmp_path / "comment.md").read_text()
    assert comment.startswith(MARKER) and comment in r.stdout
    row = next(ln for ln in comment.splitlines() if ln.startswith("| `fp32`"))
    assert re.search(r"\| -(1[5-9]|2[0-5])\.\d% \[[^]]+\] \| \*\*yes, slower\*\* \| 3 / 3 \|$", row), comment
    assert "Significantly slower: fp32. This check fails." in comment
    folder = next(out.glob("prog/pr-*"))
    assert sorted(p.name for p in (folder / "runs" / "prog").iterdir()) == [f"base-{shas[0][:10]}", f"head-{shas[1][:10]}"]
    assert _git(repo, "rev-parse", "HEAD") == shas[1] and not (tmp_path / "HOOK-RAN").exists()   # only read

    same = invoke("pr-check", str(suite), "--repo", str(repo), "--base", shas[1], "--head", shas[1], "--out", str(out))
    assert same.exit_code == 0, same.output
    assert "yes, slower" not in same.stdout and "yes, faster" not in same.stdout
    assert "No mode significantly slower." in same.stdout
    second = sorted(out.glob("prog/pr-*"))[1]
    runs = sorted((second / "runs" / "prog").iterdir())   # base-..., head-...
    marks = two_run_doc([runs[1], runs[0]]).marks()
    assert {s.mark for s in marks.values()} <= {"not significant", "disturbed"}, marks


# ---------------------------------------------------------------- the workflow files users copy

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "ci"
GITHUB, GITLAB = TEMPLATES / "github-ampbench-pr.yml", TEMPLATES / "gitlab-ampbench-pr.yml"


def _scripts() -> dict[str, list[str]]:
    """Each template's shell scripts: GitHub's `run:` steps (each its own shell), GitLab's script (one shell)."""
    yaml = pytest.importorskip("yaml")
    gh, gl = yaml.safe_load(GITHUB.read_text()), yaml.safe_load(GITLAB.read_text())
    return {"github": [s["run"] for s in gh["jobs"]["pr-check"]["steps"] if "run" in s],
            "gitlab": ["\n".join(gl["ampbench-pr"]["script"])]}


@pytest.mark.parametrize(("path", "schema"), [(GITHUB, "vendor.github-workflows"), (GITLAB, "vendor.gitlab-ci")])
def test_templates_are_valid_workflows(path: Path, schema: str) -> None:
    exe = shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema not installed (the test extra)")
    r = subprocess.run([exe, "--builtin-schema", schema, str(path)], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_templates_call_pr_check_with_options_it_has_and_fail_on_1_and_2() -> None:
    from typer.main import get_command

    known = {o for p in get_command(app).commands["pr-check"].params for o in p.opts}
    for name, scripts in _scripts().items():
        script = "\n".join(scripts)
        call = script.split("ampbench pr-check", 1)[1].split("||", 1)[0]
        used = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", call))
        assert used and used <= known, (name, used - known)
        assert '"$AMPBENCH_SUITE" --base' in call and "-o comment.md" in call, name
        assert 'if [ "$CODE" = 1 ] || [ "$CODE" = 2 ]; then exit "$CODE"; fi'.lower() in script.lower(), name
        assert "${{" not in script, name      # the event's values reach the shell through env, never inline
    if shutil.which("shellcheck"):
        for name, scripts in _scripts().items():
            for script in scripts:
                r = subprocess.run(["shellcheck", "-s", "bash", "-"], input="#!/bin/bash\n" + script,
                                   capture_output=True, text=True, check=False, timeout=60)
                assert r.returncode == 0, (name, r.stdout)
