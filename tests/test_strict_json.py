"""check.json, probe.json and diagnosis.json are strict JSON: a non-finite number is `null` with its value in
the top-level `nonfinite` map (core.docs), read back as the number; files written before, with `NaN`, still read."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ampbench.core.docs import load_doc, restore_nonfinite, write_doc
from ampbench.record.models import Memory
from ampbench.results.diagnosis_file import DiagnosisFile, Finding, ModeDiagnosis
from ampbench.results.probe_file import ProbeAttempt, ProbeFile, ProbeMode
from ampbench.results.verdicts import CheckReport, ModeVerdict, RuleResult, load_check
from tests.test_schemas import errors

NAN, INF = math.nan, math.inf


def strict_loads(text: str) -> Any:
    """What a strict reader (jq, JSON.parse, serde_json) accepts: no NaN, Infinity or -Infinity."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _check() -> CheckReport:
    rule = RuleResult(suite="toy", mode="amp-o1-fp16", rule="history-throughput", status="INCONCLUSIVE",
                      observed=NAN, threshold={"min_change": 0.05}, message="m",
                      details={"fail_upper": INF, "bounds": [0.9, -INF], "ratio": 0.97})
    return CheckReport(suite="toy", run_dir="r", verdicts=[ModeVerdict(suite="toy", mode="amp-o1-fp16",
                                                                       verdict="INCONCLUSIVE", rules=[rule])],
                       exit_code=3)


def _probe() -> ProbeFile:
    attempt = ProbeAttempt(batch_size=8, fits=True, status="ok", peak_bytes=100,
                           memory=Memory(source="host", energy_j=NAN, energy_j_per_sample=INF))
    return ProbeFile(suite="toy", suite_file="toy.toml", profile="cpu", run_id="p", device="cpu",
                     ceiling="memory_limit", steps=2, max_batch_limit=8, seed=0,
                     modes={"fp32": ProbeMode(configured_batch=8, max_batch=8, attempts=[attempt])})


def _diagnosis() -> DiagnosisFile:
    finding = Finding(index=5, step=1, phase="forward", op="exp", kind="amp-nonfinite", amp_max_abs="inf",
                      fp32_mean=NAN, amp_nan_inf=(0, 3))
    return DiagnosisFile(suite="toy", run_dir="r", modes={"amp-o1-fp16": ModeDiagnosis(
        mode="amp-o1-fp16", seed=0, steps=2, batch_size=8, loss_scale=INF, findings=[finding])})


CASES = {
    "check": (_check, CheckReport, {"/verdicts/0/rules/0/observed": "NaN",
                                    "/verdicts/0/rules/0/details/fail_upper": "Infinity",
                                    "/verdicts/0/rules/0/details/bounds/1": "-Infinity"}),
    "probe": (_probe, ProbeFile, {"/modes/fp32/attempts/0/memory/energy_j": "NaN",
                                  "/modes/fp32/attempts/0/memory/energy_j_per_sample": "Infinity"}),
    "diagnosis": (_diagnosis, DiagnosisFile, {"/modes/amp-o1-fp16/loss_scale": "Infinity",
                                              "/modes/amp-o1-fp16/findings/0/fp32_mean": "NaN"}),
}


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("name", list(CASES))
def test_non_finite_numbers_are_written_as_null_with_the_reason(tmp_path: Path, name: str) -> None:
    make, model, pointers = CASES[name]
    doc = make()
    path = tmp_path / f"{name}.json"
    write_doc(path, doc)
    raw = strict_loads(path.read_text())          # main wrote NaN / Infinity: a strict reader refused it
    assert raw["nonfinite"] == pointers
    for pointer in pointers:
        here: Any = raw
        for part in pointer[1:].split("/"):
            here = here[int(part)] if isinstance(here, list) else here[part]
        assert here is None, pointer
    assert errors(name, raw) == []                # the committed schema accepts the strict file
    back = load_doc(path, model)
    assert _same(back.model_dump(), doc.model_dump())  # the numbers come back, not nulls
    assert "nonfinite" not in back.model_dump(by_alias=True)


def test_a_finite_document_is_unchanged(tmp_path: Path) -> None:
    rep = _check()
    rep.verdicts[0].rules[0].observed = 0.5
    rep.verdicts[0].rules[0].details = {"ratio": 0.97}
    rep.write(tmp_path / "check.json")
    assert "nonfinite" not in strict_loads((tmp_path / "check.json").read_text())


@pytest.mark.parametrize("name", list(CASES))
def test_files_written_before_with_bare_nan_still_read(tmp_path: Path, name: str) -> None:
    make, model, _ = CASES[name]
    doc = make()
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc.model_dump(by_alias=True), allow_nan=True))  # how main wrote them
    assert "NaN" in path.read_text() or "Infinity" in path.read_text()
    assert _same(load_doc(path, model).model_dump(), doc.model_dump())


def test_check_json_round_trips_through_its_own_reader(tmp_path: Path) -> None:
    _check().write(tmp_path / "check.json")
    back = load_check(tmp_path / "check.json")
    r = back.verdicts[0].rules[0]
    assert math.isnan(r.observed) and r.details["fail_upper"] == INF and r.details["bounds"] == [0.9, -INF]


def test_a_tampered_nonfinite_map_only_fills_nulls() -> None:
    """An entry that names no null (a number, a string, a path that is not there) or no known value is ignored."""
    data = {"a": 1.5, "b": None, "c": "x", "d": [None], "nonfinite": {
        "/a": "NaN", "/b": "Infinity", "/c": "NaN", "/zz/q": "NaN", "/d/0": "-Infinity", "/d/7": "NaN", "x": "NaN",
        "/b/": "bogus"}}
    out = restore_nonfinite(data)
    assert out == {"a": 1.5, "b": INF, "c": "x", "d": [-INF]}
