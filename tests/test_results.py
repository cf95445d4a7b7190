"""Result files: atomic writes, clear errors on corrupt or foreign files, summary.csv via pandas."""

from __future__ import annotations

import json

import pytest

from ampbench.record.assemble import throughput
from ampbench.results import (
    ResultsError,
    RunDir,
    StepRecord,
    Trial,
    atomic_write_json,
    load_summary,
    load_trial,
    write_summary_csv,
)
from tests.factories import write_trial


def trial(mode="fp32", seed=0, **kw) -> Trial:
    steps = [StepRecord(step=i, loss=1.0 / i, time_s=0.1 * i, samples=8, warmup=i <= 1) for i in range(1, 5)]
    return Trial(suite="s", workload="toy", mode=mode, seed=seed, status="ok", steps=steps,
                 metrics={"accuracy": 0.5}, **kw)


def test_round_trip_and_key(tmp_path):
    run = RunDir(tmp_path)
    p = write_trial(run, trial("amp-o2-fp16", 3))
    assert p.name == "amp-o2-fp16__seed3.json"
    t = load_trial(p)
    assert t.mode == "amp-o2-fp16" and t.seed == 3 and t.steps[0].warmup
    assert json.loads(p.read_text())["schema"] == "ampbench.trial/1"


def test_truncated_file_names_file(tmp_path):
    run = RunDir(tmp_path)
    p = write_trial(run, trial())
    p.write_text(p.read_text()[:50])
    with pytest.raises(ResultsError, match=r"fp32__seed0\.json: trial file is not valid JSON"):
        load_trial(p)


def test_foreign_json_names_file_and_schema(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "something/else", "a": 1}))
    with pytest.raises(ResultsError, match=r"x\.json: not an ampbench file \(expected schema 'ampbench.trial/1'"):
        load_trial(p)


def test_invalid_field_names_key(tmp_path):
    p = tmp_path / "t.json"
    data = trial().to_json()
    data["status"] = "exploded"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"t\.json: status:"):
        load_trial(p)


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    p = tmp_path / "a.json"
    atomic_write_json(p, {"v": 1})
    with pytest.raises(TypeError):
        atomic_write_json(p, {"v": object()})
    assert json.loads(p.read_text()) == {"v": 1}
    assert [x.name for x in tmp_path.iterdir()] == ["a.json"]  # no temp files left


def test_finished_keys_skip_non_ok_and_corrupt(tmp_path):
    run = RunDir(tmp_path)
    write_trial(run, trial("fp32", 0))
    write_trial(run, trial("fp32", 1).model_copy(update={"status": "crashed"}))
    (run.trials_dir / "amp__seed0.json").write_text("{")
    assert run.finished_keys() == {"fp32__seed0"}


def test_summary_csv_loads_in_pandas(tmp_path):
    run = RunDir(tmp_path)
    ts = [trial("fp32", 0), trial("amp", 0).model_copy(update={"status": "crashed", "error": "boom\nlast line"})]
    write_summary_csv(run, ts)
    df = load_summary(tmp_path)
    assert list(df["mode"]) == ["fp32", "amp"]
    assert df.loc[1, "error"] == "last line" and df.loc[0, "metric_accuracy"] == 0.5


def test_throughput_excludes_warmup():
    steps = [StepRecord(step=1, loss=1, time_s=5.0, samples=10, warmup=True)] + \
            [StepRecord(step=i, loss=1, time_s=t, samples=10) for i, t in [(2, 0.1), (3, 0.2), (4, 0.3)]]
    tp = throughput(steps, {"tokens": 600})
    assert tp.measured_steps == 3
    assert tp.samples_per_s == pytest.approx(30 / 0.6)
    assert tp.step_time_median_s == pytest.approx(0.2)
    assert tp.extra_per_s["tokens"] == pytest.approx(1000.0)
