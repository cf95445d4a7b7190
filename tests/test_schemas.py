"""The committed JSON Schemas (schemas/) match the models, and real files validate against them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import tomllib
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.commands.schema import FILES, json_schema, schema_text

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
FIXTURE = ROOT / "tests" / "fixtures" / "gpu_run"
REFRESH = ("refresh with `ampbench schema --write schemas/` and `ampbench docs --write docs/` (the reference lists every "
           "field; a breaking change also goes in docs/results-format.md)")


def committed(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def errors(name: str, doc: Any) -> list[str]:
    v = Draft202012Validator(committed(name))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}" for e in v.iter_errors(doc)]


def test_committed_schemas_are_exactly_the_generated_ones() -> None:
    stale = [n for n in FILES if not (SCHEMAS / f"{n}.schema.json").is_file()
             or (SCHEMAS / f"{n}.schema.json").read_text(encoding="utf-8") != schema_text(n)]
    extra = sorted(p.name for p in SCHEMAS.glob("*.schema.json") if p.name.removesuffix(".schema.json") not in FILES)
    assert not stale and not extra, f"schemas/ out of date: stale {stale}, unknown {extra}; {REFRESH}"


@pytest.mark.parametrize("name", list(FILES))
def test_each_schema_is_valid_draft_2020_12_and_pins_its_tag(name: str) -> None:
    schema = committed(name)
    Draft202012Validator.check_schema(schema)
    tag = schema.get("x-ampbench-schema-tag")
    if name == "suite":
        assert tag is None
    else:
        assert tag == f"ampbench.{name}/1" and schema["properties"]["schema"]["const"] == tag


def fixture_files() -> list[tuple[str, Path]]:
    files = [("run", FIXTURE / "run.json"), ("check", FIXTURE / "check.json")]
    return files + [("trial", p) for p in sorted((FIXTURE / "trials").glob("*.json"))]


@pytest.mark.parametrize(("name", "path"), fixture_files(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_gpu_fixture_files_validate(name: str, path: Path) -> None:
    assert errors(name, json.loads(path.read_text(encoding="utf-8"))) == []


def test_schemas_reject_what_the_loader_rejects() -> None:
    trial = json.loads((FIXTURE / "trials" / "fp32__seed0.json").read_text(encoding="utf-8"))
    assert any("'ampbench.trial/1' was expected" in e for e in errors("trial", {**trial, "schema": "ampbench.run/1"}))
    assert any("'status' is a required property" in e
               for e in errors("trial", {k: v for k, v in trial.items() if k != "status"}))
    assert errors("trial", {**trial, "status": "melted"}) != []
    assert errors("trial", {**trial, "added_by_a_later_version": 1}) == []  # readers tolerate added fields


@pytest.mark.parametrize("path", sorted((ROOT / "ampbench" / "config" / "suites").glob("*.toml")),
                         ids=lambda p: p.name)
def test_bundled_suite_files_validate_and_a_typo_does_not(path: Path) -> None:
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    assert errors("suite", raw) == []
    assert errors("suite", {**raw, "trian": {}}) != []


def test_files_ampbench_writes_validate(tmp_path: Path) -> None:
    """Baseline and history line derived from the fixture, a diagnosis and a probe file, as written."""
    from ampbench.commands.history import append_history
    from ampbench.results import write_doc
    from ampbench.results.baselines import save_baseline
    from ampbench.results.diagnosis_file import DiagnosisFile, Finding, ModeDiagnosis
    from ampbench.results.probe_file import ProbeAttempt, ProbeFile, ProbeMode

    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    docs = {"baseline": json.loads(save_baseline(run, tmp_path / "b.json").read_text())}
    docs["history"] = json.loads(append_history(run, tmp_path / "hist").read_text().splitlines()[-1])
    finding = Finding(index=5, step=1, phase="forward", op="exp", kind="fp32-nonfinite", amp_max_abs="inf",
                      fp32_nan_inf=(0, 3))
    diag = DiagnosisFile(suite="ocr", run_dir=str(run), modes={"amp-o1-fp16": ModeDiagnosis(
        mode="amp-o1-fp16", seed=0, steps=2, batch_size=8, findings=[finding])})
    probe = ProbeFile(suite="ocr", suite_file="ocr.toml", profile="cpu", run_id="r-probe", device="cpu",
                      ceiling="memory_limit", steps=2, max_batch_limit=8, seed=0, modes={"fp32": ProbeMode(
                          configured_batch=8, max_batch=0, attempts=[ProbeAttempt(batch_size=8, fits=False,
                                                                                  status="oom")])})
    for name, doc in (("diagnosis", diag), ("probe", probe)):
        write_doc(tmp_path / f"{name}.json", doc)
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert {n: errors(n, d) for n, d in docs.items()} == {n: [] for n in docs}


def test_cli_prints_one_schema_lists_them_and_refuses_unknown_names(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["schema", "probe"])
    assert res.exit_code == 0 and json.loads(res.output) == json_schema("probe")
    listing = runner.invoke(app, ["schema"])
    assert listing.exit_code == 0 and all(n in listing.output for n in FILES)
    bad = runner.invoke(app, ["schema", "trails"])
    assert bad.exit_code == 2
    wrote = runner.invoke(app, ["schema", "--write", str(tmp_path)])
    assert wrote.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.schema.json" for n in FILES)
    assert (tmp_path / "trial.schema.json").read_text() == (SCHEMAS / "trial.schema.json").read_text()
