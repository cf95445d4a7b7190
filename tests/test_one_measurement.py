"""One samples/s per mode, everywhere: a real `ampbench run`, then every surface read back.

The console's per-mode line, summary.csv's trials, `ampbench summary`, check.json's speedup evidence
and report.md's summary table must all show judge/measure.py's figure for each mode.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.report import fmt

cli = CliRunner()


@pytest.mark.slow
def test_every_surface_shows_the_same_samples_per_s(toy_suite, tmp_path, cache_env):
    suite = toy_suite(extra="")
    r = cli.invoke(app, ["run", str(suite), "-v", "--out", str(tmp_path / "runs"), "--seeds", "0,1",
                         "--set", "train.steps=30", "--set", "train.warmup_steps=3"], env={"COLUMNS": "200"})
    assert r.exit_code in (0, 1, 3), r.output
    run = next(p for p in (tmp_path / "runs" / "toy").iterdir() if p.is_dir())

    # the definition, recomputed from the raw steps of the trial files
    expected: dict[str, float] = {}
    for mode in ("fp32", "amp-o1-fp16"):
        meds = []
        for f in sorted((run / "trials").glob(f"{mode}__seed*.json")):
            t = json.loads(f.read_text())
            meds.append(np.median([s["samples"] / s["time_s"] for s in t["steps"] if not s["warmup"]]))
        expected[mode] = float(np.exp(np.mean(np.log(meds))))
    shown = {m: fmt.num(v) for m, v in expected.items()}

    # console (-v: the trial table and its per-mode lines): one line per mode under the trial table
    for mode, text in shown.items():
        assert f"{mode}: {text} samples/s" in r.output, r.output

    # summary.csv: each trial's own figure is its median rate; their geometric mean is the mode's
    csv = pd.read_csv(run / "summary.csv")
    for mode, value in expected.items():
        per_trial = csv[csv["mode"] == mode]["samples_per_s"].to_numpy(float)
        assert float(np.exp(np.mean(np.log(per_trial)))) == pytest.approx(value, rel=1e-9)

    # ampbench compare --format csv (was `summary`; csv: full precision)
    s = cli.invoke(app, ["compare", str(run), "--format", "csv"])
    assert s.exit_code == 0, s.output
    frame = pd.read_csv(pd.io.common.StringIO(s.output))
    for mode, value in expected.items():
        assert float(frame[frame["mode"] == mode]["samples_per_s"].iloc[0]) == pytest.approx(value, rel=1e-9)

    # check.json: the speed rule's evidence
    check = json.loads((run / "check.json").read_text())
    speed = next(rr for v in check["verdicts"] for rr in v["rules"] if rr["rule"] == "speedup")
    assert speed["details"]["amp_samples_per_s"] == pytest.approx(expected["amp-o1-fp16"], rel=1e-5)
    assert speed["details"]["fp32_samples_per_s"] == pytest.approx(expected["fp32"], rel=1e-5)
    assert speed["details"]["estimate"] == pytest.approx(expected["amp-o1-fp16"] / expected["fp32"], rel=1e-5)

    # report.md: the summary table's samples/s column (the outcome table opens the report, without it)
    report = (run / "report.md").read_text()
    for mode, text in shown.items():
        rows = [line for line in report.splitlines() if line.startswith(f"| `{mode}`")]  # the outcome, then the summary
        assert any(re.search(rf"\| {re.escape(text)}( \[|\s*\|)", row) for row in rows), rows


# A per-trial rate, a mode's geometric mean or a sum of step samples computed anywhere but the one
# model (core/records.py: Trial's step rates, trial_rate, floor_rate, mean_rate, measured_samples;
# judge/measure.py: judged_rate, judged_floor, run_floor, geomean, log_rates) is a second definition
# that can drift from it.
MODEL = {Path("ampbench/core/records.py"), Path("ampbench/judge/measure.py")}
SECOND_DEFINITION = re.compile(
    r"median\([^)]*rate|percentile\([^)]*rate|np\.median\(\s*r\s*\)|exp\((?:float\()?np\.mean\((?:np\.)?log|"
    r"sum\(s\.samples|samples\s*/\s*s\.time_s|/\s*s\.time_s|np\.log\(self\.(?:num|den)\)")


def rate_definitions(root: Path) -> list[str]:
    """`path:line: text` of each line that computes a per-trial rate or a geometric mean itself."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if rel in MODEL:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SECOND_DEFINITION.search(line.split("#", 1)[0]):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_per_trial_rate_is_computed_outside_the_one_model() -> None:
    root = Path(__file__).resolve().parents[1] / "ampbench"
    assert rate_definitions(root) == []


def test_the_check_sees_a_second_definition(tmp_path: Path) -> None:
    pkg = tmp_path / "ampbench"
    (pkg / "judge").mkdir(parents=True)
    (pkg / "judge" / "rules.py").write_text(
        "import numpy as np\n"
        "def f(t):\n"
        "    a = float(np.median(t.rates()))\n"
        "    c = np.percentile(t.rates(), 95)\n"
        "    b = float(np.exp(np.mean(np.log(a))))\n"
        "    return sum(s.samples for s in t.steps) / a\n", encoding="utf-8")
    (pkg / "judge" / "measure.py").write_text("x = float(np.exp(np.mean(np.log(v))))\n", encoding="utf-8")
    assert [x.split(":")[1] for x in rate_definitions(pkg)] == ["3", "4", "5", "6"]
