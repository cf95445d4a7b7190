"""Property-based fuzzing (hypothesis) of every reader of user or file input (issue 14).

Each reader gets valid documents with random mutations (a value replaced by any JSON/TOML value, a
key dropped or added), random JSON, random text and random bytes. Only the documented errors may
escape: ConfigError for suite and label files, ResultsError for ampbench's result files. (OS and
encoding errors on a label file are mapped to exit 2 by the CLI's one error guard; they are allowed
there and nowhere else.) About 4,000 generated inputs per run, well under a minute on one core.
"""

from __future__ import annotations

import atexit
import copy
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ampbench.commands.history import append_history
from ampbench.config import ConfigError
from ampbench.results import ResultsError, RunDir, RunInfo, load_doc, load_trial, open_run
from ampbench.results.baselines import read_baseline_file, save_baseline
from ampbench.results.history import load_history
from ampbench.results.verdicts import load_check
from ampbench.workloads.dbnet.data import read_label_file
from ampbench.workloads.suites import load_suite
from tests.conftest import TOY_SUITE
from tests.factories import CPU_ENV, make_run, make_suite, make_trials

FUZZ = settings(max_examples=250, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# ---------------------------------------------------------------- strategies

scalars = st.one_of(st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
                    st.text(max_size=12), st.sampled_from(["fp32", "O1", "O2", "float16", "toy", "accuracy", "", "[/]"]))
toml_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=10)
json_values = st.recursive(st.one_of(st.none(), scalars), lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=10)


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutated(draw: st.DrawFn, doc: Any, values: st.SearchStrategy) -> Any:
    """`doc` with 1-3 random edits: a value replaced, a key dropped, or a key added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        op = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if op == "replace":
            parent[path[-1]] = draw(values)
        elif op == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(values)
    return doc


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, (int, str)):
        return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return '""'


def to_toml(doc: dict[str, Any]) -> str:
    return "\n".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_value(v)}" for k, v in doc.items()) + "\n"


BASE_SUITE = tomllib.loads(TOY_SUITE + """
[profiles.cpu]
seeds = [0, 1]
train = { steps = 6, warmup_steps = 1 }
thresholds = { metric_abs_tol = 0.02 }
""")
OVERRIDE_KEYS = ["train.steps", "train.batch_size", "suite.seeds", "suite.metric", "thresholds.confidence",
                 "modes", "workload.train_rows", "suite", "distributed.nnodes", "x.y", "train..steps", ""]
overrides = st.lists(st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(OVERRIDE_KEYS), st.one_of(st.text(max_size=10),
                                                                               toml_values.map(toml_value))),
    st.text(max_size=20)), max_size=3)


def _scratch() -> Path:
    d = Path(tempfile.mkdtemp(prefix="ampbench-fuzz-"))
    atexit.register(shutil.rmtree, d, True)
    return d


# ---------------------------------------------------------------- suite loader (profiles, --set)


@FUZZ
@given(doc=mutated(BASE_SUITE, toml_values), profile=st.sampled_from([None, "cpu", "default", "gpu", "[/]"]),
       sets=overrides)
def test_suite_loader_raises_only_config_error(doc, profile, sets):
    p = _SCRATCH / "suite.toml"
    p.write_text(to_toml(doc), encoding="utf-8")
    try:
        load_suite(p, profile=profile, overrides=sets)
    except ConfigError as e:
        assert str(e)


@settings(FUZZ, max_examples=300)
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_suite_loader_on_random_text(text):
    p = _SCRATCH / "random.toml"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    with pytest.raises(ConfigError):
        load_suite(p)
        raise ConfigError(p, "", "loaded")  # a random text that happens to be a valid suite is fine too


@settings(FUZZ, max_examples=200)
@given(data=st.binary(max_size=200))
def test_suite_loader_on_random_bytes(data):
    p = _SCRATCH / "bytes.toml"
    p.write_bytes(data)
    with pytest.raises(ConfigError):
        load_suite(p)
        raise ConfigError(p, "", "loaded")


# ---------------------------------------------------------------- result files


def _valid_docs() -> dict[str, Any]:
    root = _SCRATCH / "valid"
    s = make_suite(seeds=(0, 1))
    run = make_run(root / "runs", s, make_trials(s, n_steps=12, env=CPU_ENV, config_hash=s.config_hash()))
    from ampbench.commands.check import check_run

    check_run(run)
    save_baseline(run, root / "baseline.json")
    hist = append_history(run, root / "history")
    return {
        "run_dir": run,
        "trial": json.loads((run / "trials" / "fp32__seed0.json").read_text()),
        "run": json.loads((run / "run.json").read_text()),
        "check": json.loads((run / "check.json").read_text()),
        "baseline": json.loads((root / "baseline.json").read_text()),
        "history": json.loads(hist.read_text().splitlines()[0]),
    }


_SCRATCH = _scratch()
VALID = _valid_docs()
READERS = {
    "trial": load_trial,
    "run": lambda p: load_doc(p, RunInfo, "run file"),
    "check": load_check,
    "baseline": read_baseline_file,
    "history": load_history,
}


def _as_file(kind: str, doc: Any) -> str:
    text = json.dumps(doc, allow_nan=True)
    return text + "\n" if kind == "history" else text


@pytest.mark.parametrize("kind", sorted(READERS))
def test_result_readers_raise_only_results_error(kind):
    @FUZZ
    @given(doc=st.one_of(mutated(VALID[kind], json_values), json_values))
    def fuzz(doc: Any) -> None:
        p = _SCRATCH / f"{kind}.json"
        p.write_text(_as_file(kind, doc), encoding="utf-8")
        try:
            READERS[kind](p)
        except ResultsError as e:
            assert str(p) in str(e)

    fuzz()


@pytest.mark.parametrize("kind", sorted(READERS))
def test_result_readers_on_random_bytes(kind):
    @settings(FUZZ, max_examples=60)
    @given(data=st.binary(max_size=120))
    def fuzz(data: bytes) -> None:
        p = _SCRATCH / f"{kind}.bin"
        p.write_bytes(data)
        try:
            READERS[kind](p)
        except ResultsError:
            return
        assert kind == "history" and not data.decode().strip()  # an empty history holds no runs

    fuzz()


@settings(FUZZ, max_examples=200)
@given(run_doc=st.one_of(st.just(None), mutated(VALID["run"], json_values)),
       trial_doc=st.one_of(st.just(None), mutated(VALID["trial"], json_values)))
def test_open_run_raises_only_results_error(run_doc, trial_doc):
    d = _SCRATCH / "open"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(VALID["run_dir"], d)
    if run_doc is not None:
        (d / "run.json").write_text(json.dumps(run_doc), encoding="utf-8")
    if trial_doc is not None:
        (d / "trials" / "fp32__seed0.json").write_text(json.dumps(trial_doc), encoding="utf-8")
    try:
        opened = open_run(d)
    except ResultsError:
        return
    assert {t.suite for t in opened.trials} <= {opened.info.suite}
    RunDir(d).finished_keys(opened.info.config_hash, opened.info.suite)


# ---------------------------------------------------------------- PaddleOCR det label files (dbnet/data.py)


point = st.one_of(st.lists(st.one_of(st.integers(-5, 5000), st.floats(), st.text(max_size=3)), max_size=3),
                  json_values)
label_item = st.one_of(st.fixed_dictionaries({"transcription": st.one_of(st.text(max_size=6), json_values),
                                              "points": st.one_of(st.lists(point, max_size=6), json_values)}),
                       json_values)
label_line = st.one_of(
    st.builds(lambda path, items: f"{path}\t{json.dumps(items)}", st.text(max_size=10).filter(lambda s: "\t" not in s),
              st.one_of(st.lists(label_item, max_size=3), json_values)),
    st.text(max_size=40))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@settings(FUZZ, max_examples=300)
@given(lines=st.lists(label_line, max_size=5))
def test_label_file_reader_raises_only_config_error(lines):
    p = _SCRATCH / "label.txt"
    p.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        recs = read_label_file(p)
    except ConfigError as e:
        assert str(p) in str(e)
        return
    assert recs and all(poly.ndim == 2 and poly.shape[1] == 2 and len(poly) >= 4 for r in recs for poly in r.polys)


@settings(FUZZ, max_examples=100)
@given(data=st.binary(max_size=120))
def test_label_file_reader_on_random_bytes(data):
    p = _SCRATCH / "label.bin"
    p.write_bytes(data)
    try:
        read_label_file(p)
    except (ConfigError, UnicodeDecodeError):  # non-UTF-8: mapped to exit 2 by the CLI's error guard
        pass
