"""Property-based fuzzing (hypothesis) of the importers and of the dashboard's history reader (issue 24),
in the style of tests/test_fuzz_readers.py.

Importers get PaddleOCR configs and PaddleNLP Trainer arguments with random edits (a value replaced by
any YAML/JSON value, a key dropped, a key added, keys and values holding newlines and TOML syntax),
random `--args` command lines and random bytes. Only ConfigError may escape, and whatever is written
reads back as exactly the imported data: no key or value ever becomes a live TOML line. The history
reader gets mutated history lines with extreme numbers; it raises only ResultsError, and what it
accepts renders as a dashboard page.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import tomllib
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ampbench.core.errors import ConfigError, ResultsError
from ampbench.importers.base import header_lines, render_checked, to_toml
from ampbench.importers.paddlenlp import import_paddlenlp, parse_cli_args
from ampbench.importers.paddleocr import import_paddleocr
from tests.test_fuzz_readers import FUZZ, _scratch, mutated

FIX = Path(__file__).parent / "fixtures"
OCR_BASE = yaml.safe_load((FIX / "paddleocr" / "det_mv3_db_amp.yml").read_text())
NLP_BASE = json.loads((FIX / "paddlenlp" / "trainer_args_fp16_o2.json").read_text())
SUITE_TABLES = {"suite", "workload", "train", "modes", "profiles", "thresholds", "distributed"}

hostile_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["x\nthresholds = { metric_abs_tol = 1.0 }\n#", "\r\n[profiles.gpu]\n", "a\u2028b", "${max_steps}",
                     "\x00", "=cmd|calc", "'''", '"""', "[[modes]]", "# c"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), hostile_text)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(hostile_text, inner, max_size=3)), max_leaves=8)
_DIR = _scratch()


def _written_reads_back(imported: Any, source: str) -> None:
    """Rendering refuses with ConfigError or yields TOML that parses to exactly the data, comments inert."""
    try:
        text = render_checked(imported, source, "out.toml")
    except ConfigError as e:
        assert str(e)
        return
    data = tomllib.loads(text)
    assert data == tomllib.loads(to_toml(imported.suite))
    assert set(data) <= SUITE_TABLES
    header = [ln for ln in text.splitlines() if ln.startswith("#")]
    assert len(header) == len(header_lines(source, imported)), "a header line was split"


@settings(FUZZ, max_examples=60)
@given(doc=mutated(OCR_BASE, values), key=hostile_text, synthetic=st.booleans())
def test_paddleocr_importer_raises_only_config_error(doc, key, synthetic):
    if isinstance(doc, dict) and isinstance(doc.get("Global"), dict):
        doc["Global"][key] = 1                     # a hostile key: must end in "not honoured", escaped
    p = _DIR / "c.yml"
    try:
        p.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    except (yaml.YAMLError, UnicodeEncodeError):
        return
    try:
        imported = import_paddleocr(p, synthetic=synthetic)
    except ConfigError as e:
        assert str(e).startswith(str(p))
        return
    _written_reads_back(imported, str(p))


@settings(FUZZ, max_examples=60)
@given(doc=mutated(NLP_BASE, values), key=hostile_text)
def test_paddlenlp_importer_raises_only_config_error(doc, key):
    doc[key] = True
    try:
        imported = import_paddlenlp(doc, "a.json")
    except ConfigError as e:
        assert str(e).startswith("a.json")
        return
    _written_reads_back(imported, "a.json")


@settings(FUZZ, max_examples=150)
@given(text=st.one_of(st.text(max_size=80), st.lists(st.sampled_from(
    ["--fp16", "--bf16", "--max_steps", "${max_steps}", "'", '"', "10", "--learning_rate=0", "--seed", "-1",
     "--amp_custom_black_list", "a", "b", "=", "--", "inf", "nan", "[1]", "{}"]), max_size=8).map(" ".join)))
def test_paddlenlp_cli_args_raise_only_config_error(text):
    try:
        args = parse_cli_args(text)
        imported = import_paddlenlp(args, "--args")
    except ConfigError as e:
        assert str(e)
        return
    _written_reads_back(imported, "--args")


@settings(FUZZ, max_examples=200)
@given(data=st.binary(max_size=300))
def test_paddleocr_importer_on_random_bytes(data):
    p = _DIR / "r.yml"
    p.write_bytes(data)
    try:
        import_paddleocr(p, synthetic=True)
    except ConfigError as e:
        assert "r.yml" in str(e)


# ---------------------------------------------------------------- the dashboard's history reader

HISTORY_LINE = {"schema": "ampbench.history/1", "suite": "ocr", "run_id": "n1", "started": "2025-03-01T02:00:00+00:00",
                "git_sha": "1" * 40, "metric": "hmean",
                "modes": {"fp32": {"mode": "fp32", "samples_per_s": 10.0, "peak_bytes": 2**30, "metric_mean": 0.8},
                          "amp-o2-fp16": {"mode": "amp-o2-fp16", "amp_requested": True, "samples_per_s": 18.0,
                                          "peak_bytes": 2**29, "metric_mean": 0.79, "verdict": "FAIL",
                                          "flagged_rules": ["accuracy-parity"]}}}
extreme = st.one_of(st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0, 2**63, -(2**63)]), st.floats(allow_nan=False),
                    st.integers(-(2**70), 2**70), hostile_text, st.none())


@settings(FUZZ, max_examples=25)
@given(lines=st.lists(mutated(HISTORY_LINE, extreme), min_size=1, max_size=4), ids=st.lists(
    st.text(st.characters(codec="ascii"), min_size=1, max_size=300), min_size=4, max_size=4))
def test_history_reader_and_dashboard_page(lines, ids):
    from ampbench.report.publish import load_suites, suite_page, verdict_changes

    hist = _DIR / "hist"
    hist.mkdir(exist_ok=True)
    for i, line in enumerate(lines):
        if isinstance(line, dict) and "run_id" in line:
            line["run_id"] = ids[i]
    try:
        (hist / "ocr.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    except (ValueError, TypeError):
        return
    try:
        suites = load_suites(hist)
    except ResultsError as e:
        assert "ocr.jsonl" in str(e)
        return
    for suite, entries in suites:
        html = suite_page(suite, entries, verdict_changes(entries), {}, None)
        assert html.startswith("<!DOCTYPE html>") and "<script>alert" not in html
        if importlib.util.find_spec("plotly") is not None:  # the interactive view's figures: user text escaped
            from ampbench.report import dashboard_interactive as DI
            from ampbench.report.dashboard_series import breaks

            for fig in (DI.history_figure(entries, "m", False, breaks(entries), None), DI.histogram_figure(entries)):
                for t in fig.data if fig is not None else ():
                    rows = t.customdata if getattr(t, "customdata", None) is not None else ()
                    assert "<" not in str(t.name) and not any("<" in str(c) for row in rows for c in row)
