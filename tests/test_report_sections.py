"""The report's decision sections (issue 17): advice under failing rules, probe, diagnosis, Paddle flags,
op-list hash, processor model, forward-op share, and what the plots say (AMP inactive, parity margin,
user text drawn literally)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ampbench.report import plots as P
from ampbench.report.markdown import write_report
from tests.test_report import FIXTURE, check_markdown, copy_run, edit_trials


def section(md: str, name: str) -> str:
    return md.split(f"## {name}", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def spy_figures(monkeypatch):
    """Every figure the report saves, by file name, with the stamp it was given."""
    seen: dict[str, object] = {}
    orig = P._save

    def save(fig, path, inactive=None):
        seen[Path(path).name] = fig
        return orig(fig, path, inactive)
    monkeypatch.setattr(P, "_save", save)
    return seen


def test_advice_under_each_failing_rule(tmp_path):
    md = write_report([copy_run(tmp_path)]).read_text()
    verdicts = section(md, "Verdicts")
    parity = verdicts.split("`accuracy-parity`", 1)[1].split("  - **", 1)[0]
    assert "    - Try: " in parity and '`level = "O1"`' in parity   # from diagnose.advice.advice_for
    crash = verdicts.split("`completeness`", 1)[1]
    assert "    - Try: " in crash and "--resume" in crash
    assert "all 6 rules passed" in verdicts.split("`amp-o1-fp16`", 1)[1].split("\n- ", 1)[0]


def write_probe(folder: Path, profile: str = "gpu", started: str = "2025-03-01T00:00:00Z",
                finished: str | None = "2025-03-01T00:10:00Z", fp32_max: int = 12) -> Path:
    """A probe of the fixture's suite (ocr) beside its runs; the fixture run is of profile gpu."""
    folder.mkdir(parents=True)
    (folder / "probe.json").write_text(json.dumps({
        "schema": "ampbench.probe/1", "suite": "ocr", "suite_file": "suites/ocr.toml", "profile": profile,
        "run_id": folder.name, "ceiling": "device", "max_batch_limit": 64, "seed": 0,
        "device": "gpu", "steps": 2, "memory_limit_bytes": None, "started": started, "finished": finished,
        "modes": {"fp32": {"configured_batch": 8, "max_batch": fp32_max, "capped": False, "peak_bytes_at_max": 38 * 2**30,
                           "status": "ok", "error": None, "amp_requested": False, "amp_active": False,
                           "attempts": [{"batch_size": 8, "fits": True, "status": "ok"}, {"batch_size": 16, "fits": False, "status": "oom"}]},
                  "amp-o2-fp16": {"configured_batch": 32, "max_batch": 64, "capped": True,
                                  "peak_bytes_at_max": 20 * 2**30, "status": "ok", "error": None,
                                  "amp_requested": True, "amp_active": True,
                                  "attempts": [{"batch_size": 32, "fits": True, "status": "ok"}, {"batch_size": 64, "fits": True, "status": "ok"}]}}}))
    return folder


def test_probe_and_diagnosis_sections(tmp_path):
    run = copy_run(tmp_path, "runs/ocr/night")
    write_probe(run.parent / "20250301-000000-0001-probe")
    (run / "diagnosis.json").write_text(json.dumps({
        "schema": "ampbench.diagnosis/1", "suite": "ocr", "run_dir": str(run),
        "modes": {"amp-o2-fp16": {"mode": "amp-o2-fp16", "seed": 1, "steps": 3, "batch_size": 32,
                                  "summary": "First flagged op: `softmax` (beyond float16 range).",
                                  "black_list_candidates": ["softmax"],
                                  "findings": [{"index": 7, "step": 1, "phase": "forward", "op": "softmax",
                                                "kind": "fp16-range", "amp_dtype": "float16", "rel_diff": 0.5}]}}}))
    path = write_report([run])
    md = path.read_text()
    check_markdown(path)
    probe = section(md, "Batch-size probe")
    assert "| `amp-o2-fp16` | 32 | 64+ | 20.0 GiB | 32✓ 64✓ | active |" in probe
    assert "| `fp32` | 8 | 12 | 38.0 GiB | 8✓ 16✗ | — |" in probe
    diag = section(md, "Op-level diagnosis")
    assert "Black-list candidates: `softmax`." in diag and "| 7 | 1 | `softmax` | fp16-range |" in diag
    # the diagnosis reaches the advice: the black-list tip names the op that overflowed
    parity = section(md, "Verdicts").split("`accuracy-parity`", 1)[1].split("  - **", 1)[0]
    assert "softmax" in parity


def test_the_report_shows_the_probe_of_its_own_profile_by_the_runs_rule(tmp_path):
    """Beside the run: a probe of its profile (gpu), a newer one of another profile, and a newer unfinished
    one of its profile.  The report shows the first, the probe `run --at-max-batch` would size this run with
    (results.probe_file.find_probe): another profile sized another program; an unfinished probe sized nothing."""
    from ampbench.report.view import load_view
    from ampbench.results.probe_file import find_probe

    run = copy_run(tmp_path, "runs/ocr/night")
    mine = write_probe(run.parent / "20250301-000000-0001-probe", fp32_max=12)
    write_probe(run.parent / "20250302-000000-0001-probe", profile="default", started="2025-03-02T00:00:00Z",
                finished="2025-03-02T00:10:00Z", fp32_max=99)
    write_probe(run.parent / "20250303-000000-0001-probe", started="2025-03-03T00:00:00Z", finished=None, fp32_max=77)
    view = load_view(run)
    assert view.probe is not None and view.probe[1] == mine / "probe.json"
    assert find_probe(run.parent, "ocr", "gpu")[1] == mine   # what --at-max-batch takes
    probe = section(write_report([run]).read_text(), "Batch-size probe")
    assert "| `fp32` | 8 | 12 |" in probe and "99" not in probe and "77" not in probe
    other = copy_run(tmp_path, "runs/ocr/cpu-night", profile="cpu")   # no probe of its profile: no section
    assert load_view(other).probe is None and "## Batch-size probe" not in write_report([other]).read_text()


def test_flags_oplist_hash_and_cpu_model(tmp_path):
    run = copy_run(tmp_path)

    def cpu(t):
        t["env"].update(device="cpu", device_name="AMD EPYC 7B13 64-Core Processor")
        t["flags"] = {"FLAGS_cudnn_deterministic": True, "NVIDIA_TF32_OVERRIDE": "0"}
        t["amp"]["default_lists_hash"] = "sha256:abc123"
    edit_trials(run, cpu)
    info = json.loads((run / "run.json").read_text())
    info["env"] = {**info["env"], "paddle": ""}   # use the trials' env
    (run / "run.json").write_text(json.dumps(info))
    md = write_report([run]).read_text()
    assert "- **Device:** cpu: AMD EPYC 7B13 64-Core Processor;" in md
    assert "x86_64" not in md.split("## Summary")[0]
    assert "`FLAGS_cudnn_deterministic=True`, `NVIDIA_TF32_OVERRIDE=0`" in md
    assert "default lists hash `sha256:abc123`" in md


def test_forward_share_leaves_out_optimizer_and_fill_ops(tmp_path):
    run = copy_run(tmp_path)

    def bookkeeping(t):
        t["amp"]["op_calls"]["adam_"] = {"float16": 0, "bfloat16": 0, "float32": 500, "other": 0}
        t["amp"]["op_calls"]["full_"] = {"float16": 0, "bfloat16": 0, "float32": 300, "other": 0}
    edit_trials(run, bookkeeping)
    md = write_report([run]).read_text()
    cov = section(md, "Op precision coverage").split("### `amp-o2-fp16`", 1)[1].split("\n### ", 1)[0]
    assert "720 of 964 forward op calls (74.7%) ran in low precision" in cov   # unchanged by adam_/full_
    assert "| `adam_` |" not in cov and "| `full_` |" not in cov
    assert "Optimizer and loss-scaling ops (not in the share): `adam_` 500" in cov
    assert "Fill ops (not in the share): `full_` 300" in cov


def test_inactive_stamp_on_every_plot_and_parity_limit(tmp_path, spy_figures):
    run = copy_run(tmp_path)

    def inactive(t):
        t["amp"]["active"] = False
        for s in t["steps"]:
            s["loss_scale"], s["found_inf"] = None, False
    edit_trials(run, inactive)
    (run / "check.json").unlink()   # its PASS was of the active trials: read back now, it would be refused
    write_report([run])
    assert set(spy_figures) == {"loss.png", "throughput_memory.png", "metric.png"}
    for name, fig in spy_figures.items():
        assert fig._suptitle is not None and "AMP inactive" in fig._suptitle.get_text(), name
    ax = spy_figures["metric.png"].axes[0]
    limit = [ln for ln in ax.get_lines() if ln.get_label().startswith("parity limit")]
    fp32 = [json.loads(p.read_text())["metrics"]["hmean"] for p in (run / "trials").glob("fp32__*.json")]
    import numpy as np

    from ampbench.judge.stats import parity_margin
    m = parity_margin(fp32, 0.01, 2.0).value
    assert limit and limit[0].get_ydata()[0] == pytest.approx(100 * (np.mean(fp32) - m))


def test_active_run_has_no_stamp(tmp_path, spy_figures):
    write_report([copy_run(tmp_path)])
    assert spy_figures and all(f._suptitle is None for f in spy_figures.values())


def test_math_text_in_user_names_is_drawn_literally(tmp_path):
    run = copy_run(tmp_path)
    name = r"x$\frac{$y"
    info = json.loads((run / "run.json").read_text())
    info["config"]["suite"]["metric"] = name
    (run / "run.json").write_text(json.dumps(info))

    def rename(t):
        if "hmean" in t["metrics"]:
            t["metrics"][name] = t["metrics"].pop("hmean")
        t["config"]["suite"]["metric"] = name
    edit_trials(run, rename)
    (run / "check.json").unlink()
    md = write_report([run]).read_text()
    assert (run / "plots" / "metric.png").stat().st_size > 1000
    assert "Not drawn" not in md or "per seed" not in md.split("Not drawn", 1)[1]


def test_fixture_has_no_side_files():
    assert not (FIXTURE / "probe.json").exists() and not (FIXTURE / "diagnosis.json").exists()


def test_partly_inactive_run_names_the_modes_on_every_plot(tmp_path, spy_figures):
    run = copy_run(tmp_path)

    def one_off(t):
        if t["mode"] == "amp-o1-fp16":
            t["amp"]["active"] = False
    edit_trials(run, one_off)
    (run / "check.json").unlink()   # its PASS was of an active amp-o1-fp16: read back now, it would be refused
    md = write_report([run]).read_text()
    assert spy_figures
    for name, fig in spy_figures.items():
        assert fig._suptitle.get_text() == "AMP inactive for amp-o1-fp16: those modes ran in FP32", name
    assert "Every plot is stamped *AMP inactive for amp-o1-fp16" in md


def test_default_lists_hash_per_dtype_is_no_alarm(tmp_path):
    """float16 and bfloat16 (and O1 and O2) have their own default lists, so one hash each is expected: shown
    per dtype and level, never "differ"; trials of one dtype and level with two hashes are the warning."""
    run = copy_run(tmp_path)

    def per_mode(t):
        t["amp"]["default_lists_hash"] = f"h-{t['amp']['dtype']}-{t['amp']['level']}" if t["amp"]["requested"] else ""
    edit_trials(run, per_mode)
    line = next(ln for ln in write_report([run]).read_text().splitlines() if ln.startswith("- **AMP op lists:**"))
    groups = {(t["amp"]["dtype"], t["amp"]["level"]) for t in map(json.loads, map(Path.read_text, (run / "trials").glob("*.json")))
              if t["amp"]["requested"]}
    assert len(groups) >= 2, groups    # the fixture holds two AMP dtypes or levels
    assert "warning" not in line and "differ" not in line, line
    assert all(f"`h-{d}-{lv}` ({d} {lv})" in line for d, lv in groups), line

    def per_seed(t):
        if t["amp"]["requested"]:
            t["amp"]["default_lists_hash"] = f"h-{t['amp']['dtype']}-{t['seed']}"
    edit_trials(run, per_seed)
    line = next(ln for ln in write_report([run]).read_text().splitlines() if ln.startswith("- **AMP op lists:**"))
    assert "**warning:** trials of one dtype and level recorded different default lists" in line, line
