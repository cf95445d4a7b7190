"""The docs say what the files hold: profiles named in docs exist, numbers quoted about suite files
match them, the documented set-up installs what documented commands need, and docs/report.md lists
exactly the sections the report writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib

from ampbench.config.bundled import bundled_suites
from ampbench.config.loading import read_toml
from ampbench.report.markdown import write_report
from ampbench.workloads.suites import load_suite
from tests.test_report import copy_run

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SUITES = bundled_suites()


def profiles(name: str) -> set[str]:
    return {"default", *read_toml(SUITES[name]).get("profiles", {})}


def suite(name: str, profile: str):
    return load_suite(SUITES[name], profile, has_gpu=False).suite


def test_every_profile_named_in_the_docs_exists():
    every = set().union(*(profiles(n) for n in SUITES))
    bad = []
    for doc in DOCS:
        for line in doc.read_text().splitlines():
            named = re.findall(r"(?:suites/|ampbench run )(\w+)(?:\.toml)?", line)
            for prof in re.findall(r"--profile[ =]([\w-]+)", line):
                if prof.isupper():          # a placeholder (P, NAME)
                    continue
                where = [n for n in named if n in SUITES] or list(SUITES)
                if not any(prof in profiles(n) for n in where):
                    bad.append(f"{doc.name}: --profile {prof} ({line.strip()[:80]})")
            for prof in re.findall(r"\[profiles\.([\w-]+)", line):
                if prof not in every and not prof.isupper():
                    bad.append(f"{doc.name}: [profiles.{prof}] is in no bundled suite")
    assert not bad, "\n".join(bad)


def test_ocr_profile_table_matches_the_suite():
    text = (ROOT / "docs" / "ocr.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| batch, steps |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    default_cell, cpu_cell = cells[0], cells[-1]  # columns: default, other GPU profiles, cpu (last)
    d, c = suite("ocr", "default"), suite("ocr", "cpu")
    assert re.match(rf"{d.train.batch_size} .*, {d.train.steps}\b", default_cell), default_cell
    assert re.match(rf"{c.train.batch_size}, {c.train.steps}\b", cpu_cell), cpu_cell
    seeds = next(ln for ln in text.splitlines() if ln.startswith("| seeds |"))
    seed_cells = [c.strip() for c in seeds.strip("|").split("|")][1:]
    assert [seed_cells[0], seed_cells[-1]] == [", ".join(map(str, d.suite.seeds)), ", ".join(map(str, c.suite.seeds))]


def test_suite_table_steps_match_the_cpu_profiles():
    rows = [ln for ln in (ROOT / "docs" / "suites.md").read_text().splitlines()
            if re.match(r"\| `suites/\w+\.toml` \|", ln)]
    assert len(rows) == len(SUITES)
    for ln in rows:
        name = re.match(r"\| `suites/(\w+)\.toml`", ln).group(1)
        steps = [int(x) for x in re.findall(r"(\d+) steps", ln.split("|")[4])]
        cpu = "cpu" if "cpu" in profiles(name) else "default"   # the toy is CPU-sized as it is
        assert steps and steps[0] == suite(name, cpu).train.steps, (name, steps)


def test_readme_is_a_quickstart_and_every_doc_is_reachable():
    """README: the two set-up commands first (.ci/run runs the second), under 8,000 characters, a sample
    of the outcome table as `ampbench run` prints it; docs/index.md links every page; no relative link
    in the README or docs/ points at a missing file."""
    readme = (ROOT / "README.md").read_text()
    assert readme.startswith("```bash\nbash scripts/setup.sh && ampbench run toy\n"
                             "bash scripts/setup.sh --test && python3 -m pytest -q -n 3 --dist loadfile\n```\n")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == readme.splitlines()[2]
    assert len(readme) < 8000, len(readme)
    # the quick test subset beside the full one (issue 45), by a marker pytest knows
    assert 'python3 -m pytest -q -m "not slow"' in readme
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)
    sample = readme.split("```text\n", 1)[1].split("```", 1)[0]
    assert "| Mode        | Verdict      |" in sample and "Decided by" in sample and "-> exit 3" in sample
    # the sample is the bundled toy suite's (issue 45): its modes, in its order, and its run folder
    toy = [m.name for m in suite("toy", "default").modes]
    names = [ln.split("|")[1].strip() for ln in sample.splitlines() if ln.startswith("| ") and "Verdict" not in ln]
    assert [n for n in names if n] == toy   # a folded cell's line names no mode
    assert re.search(r"^report: results/runs/toy/\d{8}-\d{6}-\w{8}/report\.md$", sample, re.MULTILINE)
    index = (ROOT / "docs" / "index.md").read_text()
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert pages == set(re.findall(r"\]\(([\w-]+\.md)\)", index)), pages ^ set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_ctr_auc_bucket_count_is_paddles():
    paddle = pytest.importorskip("paddle")
    import inspect

    n = inspect.signature(paddle.metric.Auc.__init__).parameters["num_thresholds"].default
    doc = (ROOT / "docs" / "ctr.md").read_text()
    code = (ROOT / "ampbench" / "workloads" / "ctr" / "metrics.py").read_text()
    assert f"num_thresholds = {n}" in doc and f"{n + 1} score buckets" in doc
    assert f"num_thresholds = {n}" in code
    for text in (doc, code):
        assert not re.search(r"\b\d+-bucket\b", text)   # no other bucket count left


def test_report_doc_lists_exactly_the_report_sections(tmp_path):
    run = copy_run(tmp_path)
    (run / "diagnosis.json").write_text(json.dumps({"schema": "ampbench.diagnosis/1", "suite": "ocr", "run_dir": "x",
                                                    "modes": {}}))
    (run / "probe.json").write_text(json.dumps({
        "schema": "ampbench.probe/1", "suite": "resnet", "suite_file": "suites/resnet.toml", "profile": "cpu",
        "run_id": "x-probe", "device": "cpu", "ceiling": "memory_limit", "steps": 2, "max_batch_limit": 64,
        "seed": 0, "modes": {}}))
    md = write_report([run]).read_text()
    headings = set(re.findall(r"^## (.+)$", md, re.MULTILINE))
    doc = (ROOT / "docs" / "report.md").read_text()
    sections = doc.split("## Sections, top to bottom", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^- \*\*([^*]+)\*\*", sections, re.MULTILINE)) | \
        set(re.findall(r"\) and a \*\*([^*]+)\*\*", sections))
    assert headings - {"Trend"} <= documented, headings - documented
    assert "Claims" in documented and "seed_claims" not in sections


def test_documented_setup_installs_what_documented_commands_need():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = py["optional-dependencies"]

    def resolve(names: list[str]) -> set[str]:
        out: set[str] = set()
        for n in names:
            for req in extras[n]:
                m = re.match(r"ampbench\[([\w,]+)\]", req)
                out |= resolve(m.group(1).split(",")) if m else {re.split(r"[<>=\[ ]", req)[0]}
        return out

    setup = (ROOT / "scripts" / "setup.sh").read_text()
    default = re.search(r'^extras="([\w,]+)"', setup, re.MULTILINE).group(1).split(",")
    core = {re.split(r"[<>=\[ ]", r)[0] for r in py["dependencies"]}
    installed = resolve(default) | core
    assert "pandas" in installed and "matplotlib" in installed and "markdown-it-py" in installed  # run, report
    assert "paddlepaddle" in installed           # the README's first line trains
    # --test (the README's second line, CI's) adds the test tools and what the export formats need
    with_test = resolve(re.search(r'extras="\$extras,([\w,]+)"', setup).group(1).split(",")) | installed
    assert "pytest-benchmark" in with_test       # ampbench compare --format pytest-benchmark
    assert "pyarrow" in with_test                # ampbench compare --format parquet
    assert "websocket-client" in resolve(["test"])
    assert "plotly" in with_test and "plotly" not in installed   # publish's interactive view: --test, not the light default
    assert re.search(r"debs\+=\(chromium\b", setup)   # the dashboard's browser test (tests/test_setup.py: --test)


def test_throughput_samples_per_s_is_documented_as_the_record_holds_it():
    """The docs say what `throughput.samples_per_s` is in the field's own words (the median per-step rate the
    assembler stores: docs/reference/record.md, rendered from the field), not "total samples / total time"
    (issue 60), there or in the hand-written result-file page."""
    from ampbench.core.field_docs import described
    from ampbench.record.models import Throughput

    desc = described(Throughput).model_fields["samples_per_s"].description
    doc = " ".join((ROOT / "docs" / "reference" / "record.md").read_text().split())
    hand = " ".join((ROOT / "docs" / "results-format.md").read_text().split())
    assert desc and "median" in desc and desc in doc
    assert "total samples / total time" not in doc + hand
