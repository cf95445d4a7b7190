"""Max-batch probe: the search against an injected memory ceiling, and one real run in subprocesses."""

import json
from pathlib import Path

import pytest
from rich.console import Console

from ampbench.commands.probe import AttemptFailed, ProbeOptions, load_probe, run_probe, search_max_batch
from ampbench.config import ConfigError


class Ceiling:
    """attempt(batch): fits while `per_sample * batch + base` stays under the ceiling."""

    def __init__(self, ceiling: int, per_sample: int = 100, base: int = 50):
        self.ceiling, self.per_sample, self.base = ceiling, per_sample, base
        self.calls: list[int] = []

    def __call__(self, batch: int):
        self.calls.append(batch)
        peak = self.base + self.per_sample * batch
        return peak <= self.ceiling, peak


@pytest.mark.parametrize("ceiling,start,expected", [
    (850, 8, 8),      # exactly the configured size: one doubling fails, nothing in between fits
    (3250, 8, 32),    # "AMP fits 32": 8, 16, 32 fit, 64 fails, binary search confirms 32
    (2050, 1, 20),    # doubling from 1 then bisecting 16..32
    (450, 8, 4),      # the configured size does not fit: search below it
    (10, 4, 0),       # even batch 1 does not fit
])
def test_search_finds_the_largest_fitting_batch(ceiling, start, expected):
    att = Ceiling(ceiling)
    res = search_max_batch(att, start=start, max_batch=256)
    assert res.max_batch == expected
    assert not res.capped
    assert len(att.calls) == len(set(att.calls)), "a batch size was tried twice"
    fits = {a.batch_size: a.fits for a in res.attempts}
    if expected:
        assert fits[expected] and res.peak_at_max == 50 + 100 * expected
    assert fits[expected + 1] is False, "the size just above the answer must have been tried and failed"


def test_search_doubles_then_bisects_in_that_order():
    att = Ceiling(2050)  # limit 20
    search_max_batch(att, start=1, max_batch=256)
    assert att.calls == [1, 2, 4, 8, 16, 32, 24, 20, 22, 21]


def test_search_stops_at_max_batch_and_says_so():
    att = Ceiling(10**9)
    res = search_max_batch(att, start=8, max_batch=100)
    assert res.max_batch == 100 and res.capped
    assert att.calls == [8, 16, 32, 64, 100]


def test_search_propagates_a_crashed_attempt():
    def attempt(b):
        if b > 8:
            raise AttemptFailed("batch 16: trial crashed")
        return True, 1

    with pytest.raises(AttemptFailed):
        search_max_batch(attempt, start=8)


def test_cpu_probe_without_a_ceiling_is_a_user_error(tmp_path, monkeypatch):
    from ampbench.trackers import device

    monkeypatch.setattr(device, "has_gpu_cheap", lambda: False)
    with pytest.raises(ConfigError, match="memory-limit"):
        run_probe(ProbeOptions(suite_file=tmp_path / "x.toml", out_dir=tmp_path), Console(file=None, quiet=True))
    with pytest.raises(ConfigError, match="6GiB"):
        run_probe(ProbeOptions(suite_file=tmp_path / "x.toml", memory_limit="lots", out_dir=tmp_path),
                  Console(quiet=True))


TOY_SUITE = """
[suite]
name = "probe-toy"
workload = "toy"
metric = "accuracy"
seeds = [0]

[workload]
train_rows = 256
eval_rows = 64

[train]
batch_size = 2
steps = 10
warmup_steps = 1

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
"""


@pytest.mark.slow
def test_real_probe_in_subprocesses(tmp_path):
    """Real attempts through launch_trial: a generous ceiling fits up to --max-batch, a ceiling
    below an idle Paddle process fits nothing; probe.json records every attempt."""
    suite = tmp_path / "toy.toml"
    suite.write_text(TOY_SUITE)
    console = Console(quiet=True)
    code = run_probe(ProbeOptions(suite_file=suite, modes=["fp32"], max_batch=4, memory_limit="8GiB", steps=2,
                                  out_dir=tmp_path / "runs"), console)
    assert code == 0
    (folder,) = (tmp_path / "runs" / "probe-toy").iterdir()
    doc = load_probe(folder)
    assert doc is not None and doc.finished and doc.ceiling == "memory_limit"
    e = doc.modes["fp32"]
    assert (e.max_batch, e.capped) == (4, True)
    assert [a.batch_size for a in e.attempts] == [2, 4]
    assert all(a.status == "ok" and a.peak_bytes and a.peak_bytes > 0 for a in e.attempts)
    assert (folder / e.attempts[0].trial).is_file()

    code = run_probe(ProbeOptions(suite_file=suite, modes=["amp-o1-fp16"], max_batch=4, memory_limit="64MiB",
                                  steps=2, out_dir=tmp_path / "runs2"), console)
    assert code == 0
    (folder,) = (tmp_path / "runs2" / "probe-toy").iterdir()
    e = json.loads((folder / "probe.json").read_text())["modes"]["amp-o1-fp16"]
    assert e["max_batch"] == 0 and [a["status"] for a in e["attempts"]] == ["oom", "oom"]
    assert e["amp_requested"] and e["amp_active"] is False
    assert Path(folder / "run.json").is_file()


def test_probe_file_round_trips_and_refuses_other_files(tmp_path):
    from ampbench.results import ResultsError, write_doc
    from ampbench.results.probe_file import ProbeAttempt, ProbeFile, ProbeMode

    assert load_probe(tmp_path) is None  # no probe.json: nothing to report
    doc = ProbeFile(suite="toy", suite_file="toy.toml", profile="cpu", run_id="r-probe", device="cpu",
                    ceiling="memory_limit", memory_limit_bytes=2**30, steps=2, max_batch_limit=8, seed=0,
                    modes={"fp32": ProbeMode(configured_batch=2, max_batch=4, capped=True, attempts=[
                        ProbeAttempt(batch_size=2, fits=True, status="ok", peak_bytes=100)])})
    write_doc(tmp_path / "probe.json", doc)
    raw = json.loads((tmp_path / "probe.json").read_text())
    assert raw["schema"] == "ampbench.probe/1" and raw["modes"]["fp32"]["attempts"][0]["peak_bytes"] == 100
    back = load_probe(tmp_path)
    assert back == doc
    (tmp_path / "probe.json").write_text(json.dumps({**raw, "schema": "ampbench.trial/1"}))
    with pytest.raises(ResultsError, match="probe.json.*expected schema 'ampbench.probe/1'"):
        load_probe(tmp_path)
    (tmp_path / "probe.json").write_text(json.dumps({**raw, "steps": "two"}))
    with pytest.raises(ResultsError, match="probe.json: steps:"):
        load_probe(tmp_path)
