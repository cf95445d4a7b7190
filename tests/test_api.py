"""`ampbench.api` (issue 45): docs/api.md's notebook cells run as written, and the frames hold what the
verbs print (the same verdicts as `ampbench check`, the same significance as `ampbench compare`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from ampbench import api
from ampbench.cli import app
from ampbench.core.errors import ResultsError
from tests.factories import make_run, make_suite, make_trials

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def _runs(root: Path, slow: float = 1.0) -> tuple[Path, Path]:
    import numpy as np

    suite = make_suite(("fp32", "amp-o1-fp16"), seeds=(0, 1, 2))
    rng = np.random.default_rng(7)
    base = {"fp32": 0.05, "amp-o1-fp16": 0.04}
    other = make_run(root / "results" / "runs", suite, make_trials(suite, base_time=base, rng=rng),
                     run_id="20261203-100000-aaaaaaaa")
    cur = make_run(root / "results" / "runs", suite,
                   make_trials(suite, base_time={m: t * slow for m, t in base.items()}, rng=rng),
                   run_id="20261203-110000-bbbbbbbb")
    return cur, other


def test_the_documented_notebook_runs_as_written(tmp_path, monkeypatch, capsys):
    cur, other = _runs(tmp_path, slow=1.25)
    monkeypatch.chdir(tmp_path)
    cells = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(cells) >= 4
    ns: dict[str, object] = {}
    for cell in cells:
        exec(compile(cell, str(DOC), "exec"), ns)   # noqa: S102  the documentation's own code, run as a notebook would
    assert Path(str(ns["current"])).resolve() == cur and Path(str(ns["other"])).resolve() == other
    printed = capsys.readouterr().out
    assert re.search(r"^fp32 slower -(?:18|19|20|21|22)\.\d%$", printed, re.MULTILINE), printed
    assert isinstance(ns["change"], pd.DataFrame) and isinstance(ns["summary"], pd.DataFrame)


def test_the_frames_hold_what_the_verbs_print(tmp_path):
    cur, other = _runs(tmp_path, slow=1.25)
    run = api.load(cur)
    assert run.info.run_id == cur.name and len(run.trials) == 6 and len(run.frame()) == 6
    report = api.check(cur, baseline=other)
    assert not list(cur.glob("check*.json"))                 # judged in memory, nothing written
    r = CliRunner().invoke(app, ["check", str(cur), "--baseline", str(other)], env={"COLUMNS": "200"})
    written = json.loads(next(cur.glob("check-vs-*.json")).read_text())
    assert [v.verdict for v in report.verdicts] == [v["verdict"] for v in written["verdicts"]]
    assert r.exit_code == report.exit_code
    table = api.verdicts(report)
    hist = table[table["rule"] == "history-throughput"].set_index("mode")["status"]
    assert hist.to_dict() == {"fp32": "FAIL", "amp-o1-fp16": "FAIL"}
    change = api.compare(cur, other).set_index("mode")
    assert change["significant"].all() and (change["mark"] == "slower").all()
    assert change["change"].between(-0.23, -0.17).all()
    assert set(api.summary(other, cur)["mode"]) == {"fp32", "amp-o1-fp16"}


def test_a_folder_that_is_not_a_run_is_a_results_error(tmp_path):
    with pytest.raises(ResultsError):
        api.load(tmp_path)
