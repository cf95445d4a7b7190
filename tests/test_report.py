"""report.md: content from a hand-built GPU-like run and from a real CPU run, and markdown quality.

Quality bar checked on every report: parses as CommonMark (+ GitHub tables) with markdown-it-py,
every image and relative link points at an existing file, every table row has the header's
number of cells, and nothing from a trial turns into HTML.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from markdown_it import MarkdownIt

from ampbench.commands.history import append_history
from ampbench.report import fmt
from ampbench.report.markdown import INACTIVE_LINE, write_report
from ampbench.results import ResultsError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "gpu_run"
GIB = 1024**3


# ---------------------------------------------------------------- helpers


def copy_run(tmp_path: Path, name: str = "run", **run_fields) -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURE, dst)
    if run_fields:
        p = dst / "run.json"
        p.write_text(json.dumps({**json.loads(p.read_text()), **run_fields}))
    return dst


def edit_trials(run: Path, fn) -> None:
    for p in (run / "trials").glob("*.json"):
        t = json.loads(p.read_text())
        fn(t)
        p.write_text(json.dumps(t))


def _table_blocks(md: str) -> list[list[str]]:
    blocks, cur, fence = [], [], None
    for line in md.splitlines():
        m = re.match(r"^(`{3,})", line)
        if m and (fence is None or m.group(1).startswith(fence)):
            fence = None if fence else m.group(1)
            continue
        if fence is None and line.startswith("|"):
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def check_markdown(path: Path) -> str:
    """The quality bar; returns the rendered HTML for content checks."""
    md = path.read_text(encoding="utf-8")
    parser = MarkdownIt("commonmark").enable("table")  # raw HTML on, as GitHub before sanitising
    tokens = parser.parse(md)
    html = parser.render(md)
    # tables: same unescaped-pipe count on every line of a block, and the parser sees them as tables
    blocks = _table_blocks(md)
    assert blocks, "expected at least one table"
    for block in blocks:
        counts = {len(re.findall(r"(?<!\\)\|", line)) for line in block}
        assert len(counts) == 1, "ragged table:\n" + "\n".join(block)
    assert sum(t.type == "table_open" for t in tokens) == len(blocks)
    # images and relative links resolve
    targets = []
    for tok in tokens:
        for child in tok.children or []:
            if child.type == "image":
                targets.append(("image", child.attrs["src"]))
            elif child.type == "link_open":
                targets.append(("link", child.attrs["href"]))
    images = [t for k, t in targets if k == "image"]
    assert images, "expected plots"
    for kind, target in targets:
        if re.match(r"^[a-z]+:", target):
            continue
        from urllib.parse import unquote

        assert (path.parent / unquote(target)).exists(), f"{kind} {target} does not exist"
    # nothing from trials became HTML
    assert "<script" not in html
    assert html.count("<img ") == len(images), "an <img> that is not one of our plots"
    assert html.count("<a ") == sum(k == "link" for k, _ in targets), "an <a> that is not one of our links"
    assert not any(t.type in ("html_inline", "html_block") for tok in tokens for t in [tok, *(tok.children or [])])
    assert not re.search(r"<(?!/?(h\d|p|ul|ol|li|table|thead|tbody|tr|th|td|code|pre|em|strong|a|img|"
                         r"blockquote|hr|br)\b)[a-z]", html), "unexpected HTML element"
    return html


def mode_rate(trials: list[dict], mode: str) -> float:
    """judge/measure.py's definition: geometric mean of the ok trials' median per-step rates."""
    meds = [np.median([s["samples"] / s["time_s"] for s in t["steps"] if not s["warmup"]])
            for t in trials if t["mode"] == mode and t["status"] == "ok"]
    return float(np.exp(np.mean(np.log(meds))))


def rates(trials: list[dict], mode: str) -> list[float]:
    return [s["samples"] / s["time_s"] for t in trials if t["mode"] == mode and t["status"] == "ok"
            for s in t["steps"] if not s["warmup"]]


def load_trials(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "trials").glob("*.json"))]


def summary_row(md: str, mode: str) -> list[str]:
    section = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    line = next(ln for ln in section.splitlines() if ln.startswith(f"| `{mode}` |"))
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


# ---------------------------------------------------------------- hand-built GPU-like run


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory) -> tuple[Path, str, str]:
    run = copy_run(tmp_path_factory.mktemp("gpu"))
    path = write_report([run])
    md = path.read_text()
    return path, md, check_markdown(path)


def test_gpu_report_location_and_plots(gpu_report):
    path, md, _ = gpu_report
    assert path == path.parent / "report.md" and (path.parent / "run.json").exists()
    names = sorted(p.name for p in (path.parent / "plots").glob("*.png"))
    assert names == ["loss.png", "loss_scale.png", "metric.png", "throughput_memory.png"]
    for name in names:
        assert f"](plots/{name})" in md
        assert (path.parent / "plots" / name).stat().st_size > 10_000


def test_gpu_report_header_and_verdicts(gpu_report):
    _, md, html = gpu_report
    assert md.startswith("# ampbench report: ocr\n")
    assert "**Verdict: ERROR** (exit code 2, strict; 1 ERROR, 1 FAIL, 1 PASS)" in md
    assert "NVIDIA A100-SXM4-40GB" in html and "550.54.15" in md and "CUDA 12.6, cuDNN 9.5" in md
    assert "`0123456789`" in md and "profile `gpu`" in md
    assert INACTIVE_LINE not in md  # AMP was active in this (imitated) run
    assert "- `amp-o1-fp16`: **PASS** (all 6 rules passed" in md
    assert "- `amp-o2-fp16`: **FAIL**" in md and "- `amp-o2-bf16`: **ERROR**" in md
    # each failing rule: sentence, observed value, threshold and a link to the trial file
    line = next(ln for ln in md.splitlines() if "**FAIL** `accuracy-parity`" in ln)
    check = json.loads((FIXTURE / "check.json").read_text())
    rule = next(r for v in check["verdicts"] for r in v["rules"] if r["rule"] == "accuracy-parity"
                and r["status"] == "FAIL")
    assert f"observed {fmt.num_g(rule['observed'])}; threshold {fmt.num_g(rule['threshold'])}" in line
    assert "[`amp-o2-fp16__seed1`](trials/amp-o2-fp16__seed1.json)" in line
    line = next(ln for ln in md.splitlines() if "**FAIL** `stability`" in ln)
    assert "collapsed from step 30" in line and "collapse_step 30" in line
    assert "## Claims" not in md  # the fixture's suite states no seed claims
    assert "**ERROR** `completeness`" in md and "[`amp-o2-bf16__seed2`](trials/amp-o2-bf16__seed2.json)" in md


def test_gpu_report_summary_numbers(gpu_report):
    _, md, _ = gpu_report
    trials = load_trials(FIXTURE)
    fp32 = summary_row(md, "fp32")
    assert fp32[3].startswith(fmt.num(mode_rate(trials, "fp32")) + " [")
    assert fp32[5] == "15.0 GiB (cuda)" and fp32[-1] == "reference"  # the fixture has no fp32 verdict
    o1 = summary_row(md, "amp-o1-fp16")
    speed = mode_rate(trials, "amp-o1-fp16") / mode_rate(trials, "fp32")
    assert o1[4].startswith(fmt.ratio(speed) + " [")
    assert o1[5] == "9.10 GiB (cuda)" and o1[6] == fmt.pct(9.1 / 15.0 - 1) == "-39.3%"
    ref = np.mean([t["metrics"]["hmean"] for t in trials if t["mode"] == "fp32"])
    o1m = [t["metrics"]["hmean"] for t in trials if t["mode"] == "amp-o1-fp16"]
    assert o1[7] == f"{fmt.metric_pm(np.mean(o1m), np.std(o1m, ddof=1), True)} (n=3)"
    assert o1[8] == fmt.pt(np.mean(o1m) - ref, 2)
    assert o1[1] == "O1 float16, active" and o1[-1] == "PASS"
    o2 = summary_row(md, "amp-o2-fp16")
    skipped = sum(t["skipped_steps"] for t in trials if t["mode"] == "amp-o2-fp16")
    assert o2[2] == "32" and o2[9] == f"{skipped} / 180" and o2[-1] == "**FAIL** (accuracy-parity, stability)"
    bf = summary_row(md, "amp-o2-bf16")
    assert bf[10] == "2/3" and bf[-1] == "**ERROR** (completeness)"


def test_gpu_report_crash_is_escaped_and_shown(gpu_report):
    _, md, html = gpu_report
    assert "`amp-o2-bf16__seed2`: **crashed** after step 17" in md
    assert "&lt;script&gt;alert('x')&lt;/script&gt; | col2 | ```not a fence```" in html
    assert "CUDA error: an illegal memory access was encountered" in html
    assert html.count("<pre>") == 1  # the backticks in the error did not close the block


def test_gpu_report_op_coverage_and_target(gpu_report):
    _, md, _ = gpu_report
    cov = md.split("## Op precision coverage", 1)[1].split("\n## ", 1)[0]
    assert "### `amp-o2-fp16` (O2, float16)" in cov
    assert "**Unknown op names**" in cov and "`embeding`" in cov
    assert "| `sigmoid` | 0 | 0 | 120 | 0 | 0% | black |" in cov
    assert "| `conv2d` | 0 | 120 | 0 | 0 | 100% |   |" in cov  # bf16 column for the bf16 mode
    assert "720 of 964 forward op calls (74.7%) ran in low precision" in cov
    ttt = md.split("## Time to target", 1)[1].split("\n## ", 1)[0]
    assert "| `amp-o2-fp16` | 1 | hmean ≥ 78.00% | **no** | — | — | 61.20% |" in ttt
    assert ttt.count("| yes |") == 10


def test_trials_table_links_every_trial(gpu_report):
    path, md, _ = gpu_report
    for p in (path.parent / "trials").glob("*.json"):
        assert f"[`{p.stem}`](trials/{p.name})" in md


def test_unchecked_and_inactive_run(tmp_path):
    run = copy_run(tmp_path)
    (run / "check.json").unlink()

    def inactive(t):
        t["amp"]["active"] = False
        t["amp"]["inactive_reason"] = "AMP inactive on this device (cpu): every op ran in float32"
        for op in t["amp"]["op_calls"].values():
            op["float32"] += op["float16"] + op["bfloat16"]
            op["float16"] = op["bfloat16"] = 0
        for s in t["steps"]:
            s["loss_scale"], s["found_inf"] = None, False
    edit_trials(run, inactive)
    path = write_report([run])
    md = path.read_text()
    check_markdown(path)
    assert "**Verdict: not checked**" in md and "Not checked: this run folder has no check.json" in md
    assert f"> **{INACTIVE_LINE}** Recorded reason: AMP inactive on this device (cpu)" in md
    assert summary_row(md, "amp-o1-fp16")[1] == "O1 float16, **inactive**"
    assert summary_row(md, "amp-o1-fp16")[-1] == "not checked"
    assert not (run / "plots" / "loss_scale.png").exists()
    assert "Not drawn: Loss scale over steps" in md
    assert "AMP was **inactive**: every op ran in float32." in md


def test_run_with_keys_the_suite_schema_rejects_is_refused(tmp_path):
    """open_run validates run.json's suite: a key the schema rejects (e.g. `seed_claims`) is an error, not a section."""
    run = copy_run(tmp_path)
    info = json.loads((run / "run.json").read_text())
    info["config"]["seed_claims"] = [{"scenario": "DBNet"}]
    (run / "run.json").write_text(json.dumps(info))
    with pytest.raises(ResultsError, match="seed_claims"):
        write_report([run])


def test_trial_from_another_suite_is_refused(tmp_path):
    run = copy_run(tmp_path)
    p = min((run / "trials").glob("*.json"))
    t = json.loads(p.read_text())
    t["suite"] = "other"
    p.write_text(json.dumps(t))
    with pytest.raises(ResultsError, match="a trial of suite 'other'"):
        write_report([run])


def test_hostile_names_do_not_break_tables(tmp_path):
    run = copy_run(tmp_path)

    def hostile(t):
        t["amp"]["op_calls"]["we|ird<b>op\n"] = {"float16": 1, "bfloat16": 0, "float32": 0, "other": 0}
        t["amp"]["unknown_op_names"].append("<img src=x onerror=alert(1)>")
    edit_trials(run, hostile)
    html = check_markdown(write_report([run]))
    assert "<img src=x" not in html and "<b>" not in html


def test_comparison_and_history_trend(tmp_path):
    a = copy_run(tmp_path, "a", run_id="night-1", started="2025-03-01T02:00:00+00:00")
    b = copy_run(tmp_path, "b", run_id="night-2", started="2025-03-02T02:00:00+00:00")

    def slower(t):
        for s in t["steps"]:
            s["time_s"] *= 1.25
    edit_trials(b, slower)
    path = write_report([a, b])
    assert path == b / "comparison.md"
    md = path.read_text()
    check_markdown(path)
    assert "**Overall: ERROR** over 2 runs." in md
    assert "## Trend: `ocr` over 2 runs" in md
    assert (b / "plots" / "trend-ocr.png").exists()
    trend = md.split("## Trend:", 1)[1].split("\n### ", 1)[0]
    row = next(ln for ln in trend.splitlines() if "`night-2`" in ln)
    assert "-20.0%" in row  # 1/1.25 - 1 vs the previous run
    assert "**FAIL** (accuracy-parity, stability)" in trend
    # per-run plots do not collide
    assert (b / "plots" / "ocr-night-1-loss.png").exists() and (b / "plots" / "ocr-night-2-loss.png").exists()

    hist = tmp_path / "history"
    append_history(a, hist)
    out = write_report([b], output=tmp_path / "out" / "nightly.md", history=hist)
    md = out.read_text()
    check_markdown(out)
    assert "## Trend: `ocr` over 2 runs" in md
    assert (tmp_path / "out" / "nightly-plots" / "trend-ocr.png").exists()
    assert "](../b/trials/" in md  # links reach back into the run folder


def test_html_format(tmp_path):
    run = copy_run(tmp_path)
    path = write_report([run], fmt="html")
    assert path.name == "report.html"
    html = path.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<table>" in html
    srcs = re.findall(r'<img src="([^"]*)"', html)
    assert len(srcs) >= 3 and all(s.startswith("data:image/png;base64,") for s in srcs)  # self-contained
    import base64

    assert base64.b64decode(srcs[0].split(",", 1)[1]) == (run / "plots" / "loss.png").read_bytes()
    moved = tmp_path / "elsewhere.html"
    shutil.copy(path, moved)  # opens anywhere: no relative image link left
    assert 'src="plots/' not in moved.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html
    with pytest.raises(ResultsError, match="unknown report format"):
        write_report([run], fmt="pdf")
    # what `ampbench run` writes: report.md and, from the same plots, the self-contained page
    (run / "report.html").unlink()
    md = write_report([run], also_html=True)
    page = (run / "report.html").read_text()
    assert md.name == "report.md" and page.count('<img src="data:image/png;base64,') == html.count("<img ")


def test_missing_run_folder_is_a_results_error(tmp_path):
    with pytest.raises(ResultsError, match="run folder not found"):
        write_report([tmp_path / "nope"])


def test_fixture_matches_its_generator(tmp_path):
    """The committed hand-made GPU-like run is exactly what make_gpu_run.py writes (no silent edits)."""
    spec = importlib.util.spec_from_file_location("make_gpu_run", FIXTURE.parent / "make_gpu_run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(tmp_path / "gen")
    made = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json"))
    committed = sorted(p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*.json"))
    assert made == committed
    for rel in made:
        assert (out / rel).read_text() == (FIXTURE / rel).read_text(), rel


# ---------------------------------------------------------------- a real CPU run


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory) -> Path:
    """`ampbench run` of the ResNet suite's cpu profile, shortened, in a temporary folder."""
    if importlib.util.find_spec("ampbench.commands.run") is None:
        pytest.skip("ampbench.commands.run is not written yet: the real CPU run cannot be made")
    out = tmp_path_factory.mktemp("cpu_run")
    cmd = [sys.executable, "-m", "ampbench.cli", "run", str(ROOT / "suites" / "resnet.toml"), "--profile", "cpu",
           "--mode", "amp-o1-fp16", "--set", "train.steps=6", "--set", "train.batch_size=16",
           "--set", "workload.dataset.limit=200", "--out", str(out), "--no-report"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    runs = list(out.glob("resnet/*/run.json"))
    assert runs, f"no run folder made (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return runs[0].parent


@pytest.mark.slow
def test_report_from_real_cpu_run(cpu_run):
    path = write_report([cpu_run])
    md = path.read_text()
    check_markdown(path)
    trials = load_trials(cpu_run)
    assert {t["mode"] for t in trials} == {"fp32", "amp-o1-fp16"} and all(t["status"] == "ok" for t in trials)
    assert md.startswith("# ampbench report: resnet\n")
    assert f"> **{INACTIVE_LINE}**" in md
    if (cpu_run / "check.json").exists():
        assert "**Verdict: INCONCLUSIVE**" in md
        assert "- `amp-o1-fp16`: **INCONCLUSIVE**" in md and "`amp-active`" in md
    else:
        assert "**Verdict: not checked**" in md
    fp32 = summary_row(md, "fp32")
    assert fp32[3].startswith(fmt.num(mode_rate(trials, "fp32")))
    peak = max(t["memory"]["peak_allocated_bytes"] for t in trials if t["mode"] == "fp32")
    assert fp32[5] == f"{fmt.bytes_h(peak)} (host)"
    amp = summary_row(md, "amp-o1-fp16")
    assert amp[1] == "O1 float16, **inactive**"
    top1 = [t["metrics"]["top1"] for t in trials if t["mode"] == "amp-o1-fp16"]
    assert amp[7].startswith(fmt.metric_pm(np.mean(top1), np.std(top1, ddof=1), True))
    for t in trials:
        assert f"[`{t['mode']}__seed{t['seed']}`](trials/{t['mode']}__seed{t['seed']}.json)" in md
    assert (cpu_run / "plots" / "loss.png").exists() and not (cpu_run / "plots" / "loss_scale.png").exists()
    assert "AMP was **inactive**: every op ran in float32." in md



def test_command_throughput_disagreement_is_shown_escaped_and_agreement_is_not(tmp_path):
    """A command trial whose own log's samples/s disagree with ampbench's (workload_info.throughput_check)
    gets a warning in report.md and report.html; an agreeing cross-check adds nothing."""
    def check(agrees: bool):
        def edit(t):
            t["workload_info"] = {"throughput_check": {"ampbench_samples_per_s": 160.0, "program_samples_per_s": 40.0,
                                                       "lines": 3, "ratio": 4.0,
                                                       "agrees": agrees, "tolerance": 0.25}}
        return edit

    agreeing = copy_run(tmp_path, "agree")
    edit_trials(agreeing, check(True))
    md = write_report([agreeing]).read_text()
    assert "Throughput disagrees" not in md

    run = copy_run(tmp_path, "disagree")
    edit_trials(run, lambda t: check(t["mode"] != "fp32" or t["seed"] != 0)(t))
    path = write_report([run], also_html=True)
    md = path.read_text()
    html = check_markdown(path)
    assert "> **Throughput disagrees with the program's own log** in 1 trial(s)" in md
    line = next(ln for ln in md.splitlines() if ln.startswith("> - `fp32__seed0`"))
    assert "samples over the time of the measured steps, ampbench 160 samples/s, the program's log 40 (its 3 " \
        "line(s), their samples over their time); ratio 4, tolerance 25%" in line
    assert "median of" not in line and "the trial's samples/s (its median per-step rate) is " in line
    assert "Throughput disagrees" in html and "<blockquote>" in html
    assert "Throughput disagrees" in (run / "report.html").read_text()

    def windowed(t):   # a PaddleClas line compared over its own iterations (issue 62): the line names them
        check(t["mode"] != "fp32" or t["seed"] != 0)(t)
        t["workload_info"]["throughput_check"]["window"] = [6, 11]
    clas = copy_run(tmp_path, "window")
    edit_trials(clas, windowed)
    line = next(ln for ln in write_report([clas]).read_text().splitlines() if ln.startswith("> - `fp32__seed0`"))
    assert "samples over the time of steps 6-11, the iterations of its line, ampbench 160 samples/s" in line


def test_report_html_flag_writes_both_pages_from_one_rendering(tmp_path):
    """`report --html` (what the nightly runs): the markdown and its HTML page, the same content with the
    plots embedded; with `--format html` it is refused in one line (exit 2)."""
    from typer.testing import CliRunner

    from ampbench.cli import app

    run = copy_run(tmp_path)
    out = tmp_path / "night" / "report.md"
    out.parent.mkdir()
    r = CliRunner().invoke(app, ["report", str(run), "-o", str(out), "--html"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert f"report: {out}" in r.output and f"report: {out.with_suffix('.html')}" in r.output
    md, html = out.read_text(), out.with_suffix(".html").read_text()
    assert md.startswith("# ampbench report: ") and 'src="data:image/png;base64,' in html
    import html as h

    assert h.escape(md.splitlines()[0][2:], quote=False) in html          # the same report, as a page
    r = CliRunner().invoke(app, ["report", str(run), "-o", str(tmp_path / "x.html"), "--format", "html", "--html"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "--html" in r.output, r.output


def test_the_recorded_reason_is_said_once_per_cause_not_once_per_mode(tmp_path):
    """Every AMP mode on a CPU records the same cause in words that differ by dtype, level or how AMP was
    applied: the report's warning says it once (issue 60); different causes are each named with their modes."""
    from ampbench.report.header import recorded_reasons
    from ampbench.report.view import load_view
    from tests.factories import make_run, make_suite, make_trials

    suite = make_suite(modes=("fp32", "amp-o1-fp16", "amp-o2-bf16", "amp-o2-fp16"), seeds=(0,))
    trials = make_trials(suite, amp_active=False)
    for t in trials:
        if t.amp.requested:
            t.amp.inactive_reason = (f"AMP inactive on this device (cpu): {t.amp.dtype} AMP is unsupported here "
                                     f"(a probe under auto_cast {t.mode[4:6].upper()} stayed float32)")
    run = make_run(tmp_path, suite, trials)
    text = recorded_reasons(load_view(run))
    assert text.count("AMP inactive on this device") == 1 and text.startswith(" Recorded reason: "), text
    trials[-1].amp.inactive_code = "op-lists"
    trials[-1].amp.inactive_reason = "AMP requested but no op ran in low precision (check the custom op lists)"
    run2 = make_run(tmp_path / "two", suite, trials)
    text = recorded_reasons(load_view(run2))
    assert text.startswith(" Recorded reasons: ") and text.count("AMP inactive on this device") == 1
    assert "`amp-o2-fp16`: AMP requested but no op ran" in text
