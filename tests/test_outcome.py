"""The outcome a person reads in ten seconds: `ampbench run` and `ampbench check` end with one table
(one row per mode) and one line per next step; the full rule text is behind -v / --explain; report.md
opens with the same table and says advice several rules share once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.judge.rules.advice_kit import INACTIVE
from ampbench.report.markdown import write_report
from tests.factories import make_run, make_suite, make_trials

cli = CliRunner()
MODES = ("fp32", "amp-o1-fp16", "amp-o2-bf16")


def invoke(*args: str, columns: int = 100):
    return cli.invoke(app, list(args), env={"COLUMNS": str(columns)})


def inactive_run(root: Path) -> Path:
    """3 modes x 2 seeds where AMP stayed inactive (as on CPU): every AMP mode INCONCLUSIVE on amp-active,
    with parity, speedup and memory only informational."""
    suite = make_suite(modes=MODES, seeds=(0, 1))
    return make_run(root, suite, make_trials(suite, amp_active=False))


def table_rows(output: str) -> dict[str, list[str]]:
    """mode -> cells of the outcome table (ASCII box: not a terminal)."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] in MODES:
            rows[cells[0]] = cells
    return rows


def test_check_ends_with_one_row_per_mode_and_one_line_per_next_step(tmp_path: Path) -> None:
    run = inactive_run(tmp_path)
    r = invoke("check", str(run))
    assert r.exit_code == 3, r.output
    rows = table_rows(r.output)
    assert list(rows) == list(MODES)
    assert rows["fp32"][1] == "PASS" and rows["fp32"][-1].startswith("all ")
    for mode in MODES[1:]:
        verdict, speedup, memory, delta, decided = rows[mode][1:]
        assert verdict == "INCONCLUSIVE" and decided == "amp-active"
        assert re.fullmatch(r"\d+\.\d\dx \[\d+\.\d\d, \d+\.\d\d\]\*", speedup), speedup  # interval, marked informational
        assert memory.endswith("%*") and delta.endswith("pt*")
    text = " ".join(r.output.split())  # lines wrapped at 100 columns joined
    assert text.count(" -> ") == 2, r.output  # one next step (both modes' amp-active share it) + the exit line
    assert ("amp-active INCONCLUSIVE (amp-o1-fp16, amp-o2-bf16); so accuracy-parity, speedup, memory, energy "
            "only informational -> AMP cannot run on this device") in text
    assert "-> exit 3" in r.output.splitlines()[-1]
    assert "Informational (AMP inactive)" not in r.output  # no rule's full text by default
    assert len(r.output.splitlines()) <= 17, r.output  # 15 + the note beside 2-3 seed intervals + the Δ header's 2nd line


def test_check_explain_adds_every_rule_full_text(tmp_path: Path) -> None:
    run = inactive_run(tmp_path)
    short, full = invoke("check", str(run)), invoke("check", str(run), "--explain")
    assert short.exit_code == full.exit_code == 3
    assert "Informational (AMP inactive)" in full.output and "stability" in full.output
    assert full.output.endswith(short.output.split("ampbench check:", 1)[1])  # the same outcome closes both
    assert invoke("check", str(run), "-v").output == full.output


def test_a_failing_rule_gets_its_own_next_step(tmp_path: Path) -> None:
    """AMP active, parity broken in one mode: that mode FAILs on accuracy-parity with the parity advice."""
    suite = make_suite(modes=MODES, seeds=(0, 1, 2))
    bad = {"fp32": [0.90, 0.91, 0.92], "amp-o1-fp16": [0.90, 0.91, 0.92], "amp-o2-bf16": [0.60, 0.61, 0.62]}
    run = make_run(tmp_path, suite, make_trials(suite, metrics=bad))
    r = invoke("check", str(run))
    rows = table_rows(r.output)
    assert rows["amp-o2-bf16"][1] == "FAIL" and "accuracy-parity" in rows["amp-o2-bf16"][-1]
    assert rows["amp-o2-bf16"][4].startswith("-30.00 pt"), rows
    text = " ".join(r.output.split())
    assert "accuracy-parity FAIL (amp-o2-bf16) -> " in text and "*" not in rows["amp-o2-bf16"][2]


def test_report_opens_with_the_outcome_and_says_shared_advice_once(tmp_path: Path) -> None:
    run = inactive_run(tmp_path)
    invoke("check", str(run))
    md = write_report([run]).read_text(encoding="utf-8")
    assert re.findall(r"^## (.+)$", md, re.MULTILINE)[0] == "Outcome"
    outcome = md.split("## Outcome", 1)[1].split("\n## ", 1)[0]
    assert all(f"| `{m}` |" in outcome for m in MODES)
    # the mode's figures headed as report.md's summary table heads them (the field catalog's columns)
    header = next(ln for ln in outcome.splitlines() if ln.startswith("| Mode |"))
    assert all(f"| {h} |" in header for h in ("Verdict", "Speedup [95% CI]", "Memory vs fp32", "Δ accuracy vs fp32",
                                              "Decided by"))
    # the informational rules' advice (4 rules x 2 modes) is said once, naming the rules it also answers
    assert md.count(INACTIVE) == 1, md
    assert "Try (also for speedup, memory, energy, amp-o2-bf16 accuracy-parity" in md


@pytest.mark.parametrize("metric", ["accuracy", "eval_loss"])
def test_the_delta_column_names_the_metric_and_no_mode_name_folds_at_100_columns(tmp_path: Path, metric: str) -> None:
    """Issue 62: "Δ vs fp32" did not say of what; "{metric} Δ vs fp32" on one line folded the mode names at 100
    columns.  The console breaks the header in two ("Δ accuracy" over "vs fp32"; "d accuracy" in a pipe's ASCII),
    report.md keeps one line."""
    suite = make_suite(modes=MODES, seeds=(0, 1), metric=metric, goal="min" if "loss" in metric else "max")
    run = make_run(tmp_path, suite, make_trials(suite, metrics={m: [0.91, 0.92] for m in MODES}, amp_active=False))
    r = invoke("check", str(run))
    assert list(table_rows(r.output)) == list(MODES), r.output   # every mode name whole on its line
    head = [ln for ln in r.output.splitlines() if ln.startswith("|")][:2]
    assert f"d {metric}" in head[0] and "vs fp32" in head[1] and "Mode" in head[1], r.output   # Δ in ASCII: a pipe
    assert all(len(ln) <= 100 for ln in r.output.splitlines()), r.output
    invoke("check", str(run))
    md = write_report([run]).read_text(encoding="utf-8")
    assert f"| Δ {metric} vs fp32 |" in md and "Δ vs fp32" not in md


@pytest.mark.slow
def test_a_3_mode_2_seed_run_prints_at_most_25_lines(toy_suite, tmp_path: Path, cache_env: Path) -> None:
    """The real `ampbench run` (6 trials of the toy workload) at the default verbosity, 100 columns."""
    body = toy_suite().read_text().replace("seeds = [0]", "seeds = [0, 1]").replace(
        'custom_black_list = ["embedding"]', "") + '\n[[modes]]\nname = "amp-o2-bf16"\nlevel = "O2"\ndtype = "bfloat16"\n'
    assert "custom_black_list" not in body  # a plain suite: no unknown op name to warn about
    r = invoke("run", str(toy_suite(body=body)), "--out", str(tmp_path / "runs"))
    assert r.exit_code == 3, r.output  # AMP inactive on CPU: INCONCLUSIVE
    lines = [ln for ln in r.output.splitlines() if not ln.startswith("status ")]  # the pipe's timed status lines
    # 25, + the note beside 2-seed intervals, + the metric-delta header's second line (issue 62: "d accuracy"
    # over "vs fp32"); the checker's notes wrap at the 100 columns now (a loaded machine's "measurement
    # disturbed" note takes two lines where it ran 170 characters past the width)
    assert len(lines) <= 28, f"{len(lines)} lines:\n{r.output}"
    assert all(len(ln) <= 100 for ln in lines if not ln.startswith(("suite ", "run folder: ", "report: "))), r.output
    assert list(table_rows(r.output)) == list(MODES)
    assert lines[-1].startswith("report: ") and "-> exit 3" in lines[-2]
    assert sum(1 for ln in lines if ln.startswith("  ") and " seed " in ln) == 6  # one line per finished trial


def test_advice_reads_the_reason_code_not_the_message(tmp_path: Path) -> None:
    """A crashed trial whose error text happens to contain "oom" ("boom") is not advised to halve its
    batch: completeness carries the end states as reason codes (details.reasons) and advice reads those."""
    from tests.factories import make_trial

    s = make_suite(modes=("fp32", "amp-o1-fp16"), seeds=(0,))
    crashed = make_trial("amp-o1-fp16", 0, status="crashed", error="RuntimeError: boom")
    oom = make_trial("amp-o1-fp16", 0, status="oom", error="ResourceExhaustedError: out of memory")
    for trial, expect, never in ((crashed, "Read the trial's log", "ran out of memory"),
                                 (oom, "ran out of memory", "Read the trial's log")):
        run = make_run(tmp_path / trial.status, s, [make_trial("fp32", 0), trial])
        r = invoke("check", str(run), columns=200)
        text = " ".join(r.output.split())
        head = f"completeness {'ERROR' if trial.status == 'crashed' else 'FAIL'} (amp-o1-fp16) -> "
        assert head in text, r.output
        step = text.split(head, 1)[1][:100]
        assert expect in step and never not in step, step


def test_a_next_step_from_a_message_is_its_whole_first_sentence() -> None:
    """A rule without advice shows its message's first sentence: never cut inside parentheses or after an
    abbreviation ("(e.g." was printed as a whole next step), nor at a character count (issue 60)."""
    from ampbench.report.outcome import first_sentence

    msg = ("Custom op list names lookup_table that Paddle does not know; Paddle ignores them silently (e.g. "
           "embedding is lookup_table_v2), so the list cannot have taken effect. Second sentence.")
    assert first_sentence(msg) == msg.split(" Second")[0]
    long = "A " + "very " * 80 + "long sentence vs. an abbreviation (i.e. none of this ends it). Next."
    assert first_sentence(long) == long.removesuffix(" Next.")
    assert first_sentence("Runs `x. y` then stops. More.") == "Runs `x. y` then stops."


def _errored_mode_run(root: Path) -> Path:
    """fp32 and amp-o1-fp16 ran; amp-o2-fp16 errored before any step in every seed (a refused inject mode)."""
    from tests.factories import make_trial

    suite = make_suite(modes=("fp32", "amp-o1-fp16", "amp-o2-fp16"), seeds=(0, 1))
    trials = [make_trial(m, s, times=[], status="crashed", metric=None,
                         error='amp = "inject" refused: the program applies AMP itself') if m == "amp-o2-fp16"
              else make_trial(m, s) for m in ("fp32", "amp-o1-fp16", "amp-o2-fp16") for s in (0, 1)]
    return make_run(root, suite, trials)


def test_a_mode_that_errored_before_any_step_gets_no_tuning_advice(tmp_path: Path) -> None:
    """Its completeness ERROR is the one next step; its other results (parity, speedup, memory ...) join that
    line as not judged, with no `diagnose` or `level = "O2"` advice, on the console and in report.md; and the
    checker does not call AMP inactive on a device where the other AMP mode ran (issue 60)."""
    run = _errored_mode_run(tmp_path)
    r = invoke("check", str(run), columns=250)
    assert r.exit_code == 2, r.output
    steps = [ln for ln in r.output.splitlines() if " -> " in ln and "exit" not in ln]
    assert len(steps) == 1 and steps[0].startswith("completeness ERROR (amp-o2-fp16); so amp-active"), r.output
    assert "not judged (no step recorded)" in steps[0]
    for advice in ("ampbench diagnose", "level = ", "batch_size = ", "master_weight"):
        assert advice not in r.output, advice
    assert "AMP inactive on this device" not in r.output
    md = write_report([run]).read_text()
    assert "ampbench diagnose" not in md and "level = " not in md and "Try: Read the trial's log" in md
