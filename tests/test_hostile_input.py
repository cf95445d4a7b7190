"""Issue 24's second adversarial pass, the classes beside the security cases: importer values, publish and
summary outputs, history extremes, FIFOs, values, pre-run refusals, process faults. Each case ends with
its documented exit code and one line naming the file or key, no traceback, nothing half-written.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.results import RunDir
from tests.conftest import TOY_SUITE
from tests.factories import make_run, make_suite, make_trials

cli = CliRunner()
FIX = Path(__file__).parent / "fixtures"
MV3 = FIX / "paddleocr" / "det_mv3_db_global_amp.yml"  # the Global.use_amp format: the bad values go there
NLP = FIX / "paddlenlp" / "trainer_args_fp16_o2.json"


def invoke(*args: str, env: dict[str, str] | None = None):
    r = cli.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def one_error_line(r) -> str:
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.output
    return lines[0]


# ---------------------------------------------------------------- importers: every bad value is `file: key: reason`

OCR_BAD = {
    "global-list": (("Global:\n  use_gpu: true\n", "Global: [1, 2]\nOld:\n  use_gpu: true\n"), "Global"),
    "backbone-number": (("  Backbone:\n    name: MobileNetV3\n    scale: 0.5\n    model_name: large\n",
                         "  Backbone: 5\n"), "Architecture.Backbone"),
    "batch-string": (("batch_size_per_card: 16", "batch_size_per_card: eight"), "batch_size_per_card"),
    "epoch-zero": (("epoch_num: 2", "epoch_num: 0"), "epoch_num"),
    "epoch-inf": (("epoch_num: 2", "epoch_num: .inf"), "epoch_num"),
    "epoch-shell-var": (("epoch_num: 2", "epoch_num: ${EPOCHS}"), "shell variable"),
    "scale-string": (("scale_loss: 1024.0", "scale_loss: big"), "scale_loss"),
    "scale-bool": (("scale_loss: 1024.0", "scale_loss: true"), "scale_loss"),
    "lr-zero": (("learning_rate: 0.001", "learning_rate: 0"), "learning_rate"),
    "label-list-number": (("    label_file_list:\n      - ./train_data/text_localization/train_label.txt\n",
                           "    label_file_list: 5\n"), "label_file_list"),
    "black-list-map": (("amp_custom_black_list: ['reduce_mean', 'sigmoid']", "amp_custom_black_list: {a: 1}"),
                       "amp_custom_black_list"),
    "thresh-list": (("  thresh: 0.3", "  thresh: [0.3]"), "thresh"),
    "seed-huge": (("  use_amp: True", "  use_amp: True\n  seed: 99999999999999"), "seed"),
    "regularizer-list": (("  regularizer:\n    name: 'L2'\n    factor: 0\n", "  regularizer: [L2]\n"), "regularizer"),
}


@pytest.mark.parametrize("case", sorted(OCR_BAD))
def test_paddleocr_bad_value_exits_2_naming_the_key(work, case):
    (old, new), named = OCR_BAD[case]
    text = MV3.read_text()
    assert old in text, case
    cfg = work / "c.yml"
    cfg.write_text(text.replace(old, new, 1))
    r = invoke("import", "paddleocr", str(cfg), "-o", str(work / "s.toml"))
    assert r.exit_code == 2, r.output
    line = one_error_line(r)
    assert "c.yml" in line and named in line, line
    assert not (work / "s.toml").exists()


@pytest.mark.parametrize("how", ["deep-list", "deep-map", "not-utf8", "folder", "fifo", "empty", "recursive-alias"])
def test_paddleocr_unreadable_config_exits_2(work, how):
    cfg = work / "c.yml"
    if how == "deep-list":
        cfg.write_text("Global: " + "[" * 5000 + "]" * 5000 + "\n")
    elif how == "deep-map":
        cfg.write_text("".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "x: 1\n")
    elif how == "not-utf8":
        cfg.write_bytes(b"Global:\n  use_amp: \xff\xfe\n")
    elif how == "folder":
        cfg.mkdir()
    elif how == "fifo":
        os.mkfifo(cfg)
    elif how == "empty":
        cfg.write_text("")
    elif how == "recursive-alias":
        cfg.write_text("a: &a [*a]\n")
    r = invoke("import", "paddleocr", str(cfg))
    assert r.exit_code == 2, r.output
    assert "c.yml" in one_error_line(r)


def test_import_never_replaces_its_input_config(work):
    cfg = work / "c.yml"
    cfg.write_text(MV3.read_text())
    before = cfg.read_bytes()
    r = invoke("import", "paddleocr", str(cfg), "--synthetic-data", "-o", str(cfg))
    assert r.exit_code == 2 and "c.yml" in one_error_line(r) and "input" in r.output
    assert cfg.read_bytes() == before
    nlp = work / "a.json"
    nlp.write_text(NLP.read_text())
    r = invoke("import", "paddlenlp", str(nlp), "-o", str(nlp))
    assert r.exit_code == 2 and nlp.read_text() == NLP.read_text()


@pytest.mark.parametrize("how", ["missing-folder", "is-folder", "under-a-file", "a-record"])
def test_import_bad_output_path_exits_2_writing_nothing(work, run_dir, how):
    out = {"missing-folder": work / "nope" / "s.toml", "is-folder": work / "dir", "under-a-file": work / "f" / "s.toml",
           "a-record": run_dir / "run.json"}[how]
    (work / "dir").mkdir()
    (work / "f").write_text("x")
    before = (run_dir / "run.json").read_bytes()
    r = invoke("import", "paddleocr", str(MV3), "--synthetic-data", "-o", str(out))
    assert r.exit_code == 2, r.output
    assert str(out.name) in one_error_line(r) or str(out) in r.output
    assert not (work / "nope").exists() and (run_dir / "run.json").read_bytes() == before


NLP_BAD = {
    "unclosed-quote": (["--args", '--fp16 --output_dir "x'], "--args"),
    "shell-variable": (["--args", "--fp16 --max_steps ${max_steps}"], "max_steps"),
    "batch-string": ({"per_device_train_batch_size": "eight"}, "per_device_train_batch_size"),
    "lr-zero": ({"learning_rate": 0}, "learning_rate"),
    "steps-inf": ({"max_steps": float("inf")}, "max_steps"),
    "seed-list": ({"seed": [1]}, "seed"),
    "batch-bool": ({"per_device_train_batch_size": True}, "per_device_train_batch_size"),
    "black-list-map": ({"amp_custom_black_list": {"a": 1}}, "amp_custom_black_list"),
    "warmup-ratio-big": ({"warmup_ratio": 5}, "warmup_ratio"),
    "seq-len-string": ({"max_seq_length": "long"}, "max_seq_length"),
}


@pytest.mark.parametrize("case", sorted(NLP_BAD))
def test_paddlenlp_bad_value_exits_2_naming_the_key(work, case):
    given, named = NLP_BAD[case]
    if isinstance(given, dict):
        args = work / "a.json"
        args.write_text(json.dumps({**json.loads(NLP.read_text()), **given}).replace("Infinity", "1e400"))
        given = [str(args)]
    r = invoke("import", "paddlenlp", *given)
    assert r.exit_code == 2, r.output
    line = one_error_line(r)
    assert named in line, line


@pytest.mark.parametrize("how", ["deep", "not-utf8", "folder", "array"])
def test_paddlenlp_unreadable_args_file_exits_2(work, how):
    p = work / "a.json"
    if how == "deep":
        p.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif how == "not-utf8":
        p.write_bytes(b'{"fp16": "\xff"}')
    elif how == "folder":
        p.mkdir()
    else:
        p.write_text("[1, 2]")
    r = invoke("import", "paddlenlp", str(p))
    assert r.exit_code == 2 and "a.json" in one_error_line(r), r.output


# ---------------------------------------------------------------- publish and summary outputs


def _history(work: Path, lines: list[dict], name: str = "ocr.jsonl") -> Path:
    hist = work / "history"
    hist.mkdir(exist_ok=True)
    (hist / name).write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return hist


def _entry(run_id: str, day: int, suite: str = "ocr", sps: float = 10.0, **mode: object) -> dict:
    return {"schema": "ampbench.history/1", "suite": suite, "run_id": run_id,
            "started": f"2025-03-{day:02d}T02:00:00+00:00",
            "modes": {"fp32": {"mode": "fp32", "samples_per_s": sps, "peak_bytes": 2**30, "metric_mean": 0.8},
                      "amp-o2-fp16": {"mode": "amp-o2-fp16", "amp_requested": True, "samples_per_s": 18.0,
                                      "verdict": "PASS", **mode}}}


def test_publish_output_an_existing_file_or_a_foreign_folder_exits_2(work):
    hist = _history(work, [_entry("n1", 1)])
    (work / "file").write_text("keep")
    r = invoke("publish", str(hist), "-o", str(work / "file"))
    assert r.exit_code == 2 and "file" in one_error_line(r) and (work / "file").read_text() == "keep"
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("mine")
    r = invoke("publish", str(hist), "-o", str(work / "mine"))
    assert r.exit_code == 2 and "not an ampbench site" in r.output
    assert (work / "mine" / "notes.txt").read_text() == "mine"
    r = invoke("publish", str(hist), "-o", str(work / "missing" / "site"))
    assert r.exit_code == 2 and "does not exist" in r.output


@pytest.mark.parametrize("err,name", [(errno.ENOSPC, "ENOSPC"), (errno.EROFS, "EROFS")])
def test_publish_on_a_full_disk_leaves_the_previous_site_whole(work, monkeypatch, err, name):
    hist = _history(work, [_entry("n1", 1), _entry("n2", 2)])
    assert invoke("publish", str(hist), "-o", str(work / "site")).exit_code == 0
    before = {p.name: p.read_bytes() for p in (work / "site").iterdir() if p.is_file()}
    with open(hist / "ocr.jsonl", "a") as f:                  # the next publish has a new run to show
        f.write(json.dumps(_entry("n3", 3)) + "\n")
    real = os.replace
    calls = {"n": 0}

    def failing(src, dst, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:                      # the second page of the new site
            raise OSError(err, os.strerror(err))
        return real(src, dst, *a, **k)

    monkeypatch.setattr("ampbench.core.files.os.replace", failing)
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 2 and name in r.output
    assert {p.name: p.read_bytes() for p in (work / "site").iterdir() if p.is_file()} == before
    assert sorted(p.name for p in work.iterdir()) == ["cache", "history", "site"] or \
        not [p for p in work.iterdir() if p.name.startswith(".site")]


def test_report_output_onto_run_json_is_refused(run_dir):
    before = (run_dir / "run.json").read_bytes()
    r = invoke("report", str(run_dir), "-o", str(run_dir / "run.json"))
    assert r.exit_code == 2 and "run.json" in one_error_line(r)
    assert (run_dir / "run.json").read_bytes() == before
    trial = RunDir(run_dir).trial_path("fp32", 0)
    t_before = trial.read_bytes()
    r = invoke("compare", str(run_dir), "--format", "csv", "-o", str(trial))
    assert r.exit_code == 2 and trial.read_bytes() == t_before


@pytest.mark.parametrize("how", ["parquet-folder", "missing-parent", "under-a-file"])
def test_summary_bad_output_exits_2(run_dir, work, how):
    (work / "dir").mkdir()
    (work / "f").write_text("x")
    out = {"parquet-folder": work / "dir", "missing-parent": work / "nope" / "s.csv", "under-a-file": work / "f" / "s"}
    fmt = "parquet" if how == "parquet-folder" else "csv"
    r = invoke("compare", str(run_dir), "--format", fmt, "-o", str(out[how]))
    assert r.exit_code == 2, r.output
    one_error_line(r)
    assert not (work / "nope").exists()


# ---------------------------------------------------------------- history extremes


def test_history_with_extreme_values_publishes_and_reports(work, run_dir):
    hist = _history(work, [_entry("n1", 1, sps=1e308), _entry("n2", 2, sps=1e-300, metric_mean=1e308),
                           _entry("n3", 3, sps=5e-324), _entry("n4", 4)])
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    assert (work / "site" / "ocr.html").read_text().count("<tr>") >= 4
    s = RunDir(run_dir).load_run().suite
    (hist / f"{s}.jsonl").write_text("\n".join(json.dumps({**_entry(f"h{i}", i + 1, suite=s, sps=v)})
                                               for i, v in enumerate([1e308, 1e-300, 3.0])) + "\n")
    r = invoke("report", str(run_dir), "--history", str(hist))
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("mode,key", [
    ({"floor_samples_per_s": "inf"}, "floor_samples_per_s"),      # json.loads: Infinity
    ({"samples_per_s": "nan"}, "samples_per_s"),
    ({"samples_per_s": -5}, "samples_per_s"),
    ({"speedup": "inf"}, "speedup"),
    ({"speedup": 0}, "speedup"),
    ({"memory_reduction": "-inf"}, "memory_reduction"),
])
def test_history_lines_with_non_finite_or_negative_figures_are_refused_by_line_and_key(work, run_dir, mode, key):
    """Issue 41.6: a floor of inf, a rate of NaN or -5, a speedup of inf were read as figures (and would
    decide a comparison); each is refused naming the file, the line and the key, on every verb."""
    lits = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
    bad = json.dumps(_entry("n2", 2, **{k: f"@{v}@" if isinstance(v, str) else v for k, v in mode.items()}))
    for word, lit in lits.items():
        bad = bad.replace(f'"@{word}@"', lit)
    hist = work / "history"
    hist.mkdir()
    path = hist / "ocr.jsonl"
    path.write_text(json.dumps(_entry("n1", 1)) + "\n" + bad + "\n")
    for verb in (["publish", str(hist), "-o", str(work / "site")], ["check", str(run_dir), "--history", str(path)]):
        r = invoke(*verb)
        line = one_error_line(r)
        assert r.exit_code == 2 and "ocr.jsonl:2" in line and key in line, (verb, r.output)


def test_history_long_run_id_publishes(work):
    long_id = "r" + "x" * 299
    hist = _history(work, [_entry(long_id, 1), _entry("n2", 2)])
    reports = hist / "reports" / "ocr"
    reports.mkdir(parents=True)
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    assert long_id in (work / "site" / "ocr.html").read_text()


def test_two_history_files_of_one_suite_are_merged_not_listed_twice(work):
    hist = _history(work, [_entry("n1", 1), _entry("n2", 2)], "ocr.jsonl")
    _history(work, [_entry("n3", 3), _entry("n2", 2)], "ocr-copy.jsonl")
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    index = (work / "site" / "index.html").read_text()
    assert index.count('href="ocr.html"') == 1
    assert '<td class="num">3</td>' in index               # n1, n2, n3: nothing lost, n2 once
    page = (work / "site" / "ocr.html").read_text()
    assert all(rid in page for rid in ("n1", "n2", "n3"))


def test_history_run_id_starting_a_formula_is_refused(work):
    hist = _history(work, [_entry("=cmd|calc", 1)])
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 2 and "run_id" in one_error_line(r)


def test_dashboard_of_a_long_history_has_thin_ticks_and_pages(work):
    from ampbench.report import dashboard_plots as D
    from ampbench.report import publish as pub

    entries = [_entry(f"n{i}", 1 + i % 28) for i in range(3 * D.MAX_POINTS)]
    for i, e in enumerate(entries):
        e["started"] = f"2025-{1 + i // 700:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00+00:00"
    hist = _history(work, entries)
    t0 = time.monotonic()
    r = invoke("publish", str(hist), "-o", str(work / "site"))
    assert r.exit_code == 0, r.output
    assert time.monotonic() - t0 < 120                     # the loaded CI machine; the goal is 100,000 in 60 s
    page = (work / "site" / "ocr.html").read_text()
    assert page.count("<tr>") <= pub.LATEST_RUNS * 2 + 10   # the latest runs only; older ones on their pages
    assert (work / "site" / "ocr-runs-1.html").is_file()
    assert "older runs" in page
    bundle = 0
    if "plotly-graph-div" in page:   # the interactive view embeds plotly.js (4.6 MB) once; the data stays bounded
        from plotly.offline import get_plotlyjs

        bundle = len(get_plotlyjs())
    assert len(page) - bundle < 5 * 2**20
    assert D.P.thin_ticks(100_000) == sorted(set(D.P.thin_ticks(100_000))) and len(D.P.thin_ticks(100_000)) <= 12


# ---------------------------------------------------------------- FIFOs never hang a reader


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["run.json", "trial"])
@pytest.mark.parametrize("verb", ["check", "report"])
def test_fifo_instead_of_a_result_file_is_refused_not_waited_on(run_dir, where, verb):
    p = run_dir / "run.json" if where == "run.json" else RunDir(run_dir).trial_path("fp32", 0)
    p.unlink()
    os.mkfifo(p)
    r = invoke(verb, str(run_dir))
    assert r.exit_code == 2 and "regular file" in one_error_line(r)


# ---------------------------------------------------------------- values and pre-run refusals


def _suite(work: Path) -> Path:
    p = work / "s.toml"
    p.write_text(TOY_SUITE)
    return p


@pytest.mark.parametrize("args,named", [
    (["--set", "train.batch_size=true"], "train.batch_size"),
    (["--set", "suite.seeds=[true]"], "seeds"),
    (["--set", "train.steps=5.0"], "train.steps"),
    (["--seeds", ""], "--seeds"),
])
def test_values_that_are_not_integers_are_refused(work, args, named):
    r = invoke("run", str(_suite(work)), "--out", "runs", *args)
    assert r.exit_code == 2 and named in one_error_line(r), r.output
    assert not (work / "runs").exists()


def test_cache_that_is_a_file_is_refused_before_any_run_folder(work, monkeypatch):
    (work / "cachefile").write_text("x")
    r = invoke("run", str(_suite(work)), "--out", "runs", env={"AMPBENCH_CACHE": str(work / "cachefile")})
    assert r.exit_code == 2 and "AMPBENCH_CACHE" in one_error_line(r) and "cachefile" in r.output
    assert not (work / "runs").exists()


def test_dangling_out_link_names_the_missing_target(work):
    (work / "runs").symlink_to(work / "gone")
    r = invoke("run", str(_suite(work)), "--out", "runs")
    assert r.exit_code == 2 and "gone" in one_error_line(r) and "does not exist" in r.output


def test_non_utf8_suite_name_is_refused_before_any_run_folder(work):
    name = os.fsdecode(b"s\xff.toml")
    (work / name).write_text(TOY_SUITE)
    r = invoke("run", str(work / name), "--out", "runs")
    assert r.exit_code == 2 and "UTF-8" in one_error_line(r)
    assert not (work / "runs").exists()


@pytest.mark.slow
def test_deleted_working_folder_is_named(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os,sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
            "from ampbench.cli import main; sys.argv=['ampbench','run','toy','--out','runs']; main()")
    r = subprocess.run([sys.executable, "-c", code, str(gone)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                            "PWD": str(gone)})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "no longer exists" in r.stderr and str(gone) in r.stderr


def test_columns_zero_still_prints(work, run_dir):
    r = invoke("check", str(run_dir), env={"COLUMNS": "0"})
    assert r.exit_code in (0, 1, 3) and "amp-o1-fp16" in r.output


# ---------------------------------------------------------------- process faults


def test_sigkilled_rank_without_oom_evidence_is_a_crash(tmp_path):
    from ampbench.launch import distributed

    launcher = tmp_path / "launcher.log"
    launcher.write_text(f"Container rank 1 status failed cmd ['python'] code {-signal.SIGKILL} log x\n")
    f = distributed.rank_failure(tmp_path, launcher, 1, 2)
    assert f.status == "crashed" and "no kernel OOM kill" in f.message
    f = distributed.rank_failure(tmp_path, launcher, 1, 2, oom_kills=1)
    assert f.status == "oom"


def test_worker_that_exited_is_not_killed_by_a_late_clock(tmp_path, monkeypatch):
    """Ctrl-Z on ampbench past timeout_s while the worker finishes: after `fg` the clock is far past the
    limit, but the worker already exited; it is not a timeout."""
    from ampbench.launch import process

    started: dict[str, subprocess.Popen] = {}
    real_spawn, real_clock = process.spawn, time.monotonic

    def spawn(cmd, env, log):
        started["p"] = real_spawn(cmd, env, log)
        return started["p"]

    def clock():
        p = started.get("p")
        return real_clock() + (10**6 if p is not None and p.poll() is not None else 0)

    monkeypatch.setattr(process, "spawn", spawn)
    monkeypatch.setattr(process.time, "monotonic", clock)
    from ampbench.core.protocol import EVENT_PREFIX

    code = f"for i in range(5): print({EVENT_PREFIX!r} + '{{\"event\": \"step\", \"i\": %d}}' % i, flush=True)"
    seen = []
    out = process.run_worker([sys.executable, "-c", code], {}, tmp_path / "w.log", process.Limits(60, None),
                             lambda ev: (seen.append(ev), time.sleep(0.3)))  # events still queued after it exits
    assert out.killed is None and out.returncode == 0 and len(seen) == 5


def test_a_finished_ok_trial_is_never_replaced_by_a_failure(run_dir):
    from ampbench.launch.launcher import _record_failure
    from ampbench.launch.process import Outcome
    from ampbench.trial.spec import TrialSpec

    rd = RunDir(run_dir)
    info = rd.load_run()
    path = rd.trial_path("fp32", 0)
    before = path.read_bytes()
    suite = make_suite(seeds=(0, 1))
    spec = TrialSpec(suite=suite, suite_file="s.toml", mode="fp32", seed=0, profile="default", trial_path=str(path),
                     config_hash=info.config_hash, cache_dir=str(run_dir / "cache"))
    t = _record_failure(spec, Outcome(returncode=0, killed="timeout", peak_rss=0, wall_s=1e6, oom_kills=0),
                        None, [], rd.log_path("fp32", 0), 10.0)
    assert t.status == "ok" and path.read_bytes() == before


# ---------------------------------------------------------------- what a new user hits


def test_export_benchmark_into_a_new_folder_with_a_trailing_slash(run_dir, work):
    r = invoke("compare", str(run_dir), "--format", "pytest-benchmark", "-o", "exports/")
    assert r.exit_code == 0, r.output
    assert (work / "exports").is_dir() and (work / "exports" / "r1.json").is_file()
    (work / "plain").write_text("x")
    r = invoke("compare", str(run_dir), "--format", "pytest-benchmark", "-o", "plain/")
    assert r.exit_code == 2 and "plain" in one_error_line(r) and (work / "plain").read_text() == "x"


def test_help_names_every_verb():
    r = invoke("--help")
    summary = r.output.split("Options", 1)[0]
    for verb in ("run", "check", "compare", "tune", "bisect", "plan", "report", "publish", "probe", "diagnose",
                 "baseline", "history", "import", "suites", "schema", "env", "selftest"):
        assert verb in summary, verb
    for retired in ("summary", "export-benchmark"):   # removed at 0.1.0 (one line naming compare), not listed
        assert retired not in summary, retired


def test_end_before_start_is_not_a_negative_duration(run_dir):
    rj = run_dir / "run.json"
    info = json.loads(rj.read_text())
    rj.write_text(json.dumps({**info, "started": "2025-01-04T00:00:00+00:00", "finished": "2025-01-01T01:00:00+00:00"}))
    r = invoke("report", str(run_dir))
    assert r.exit_code == 0, r.output
    md = (run_dir / "report.md").read_text()
    assert "took -" not in md and "before its start" in md


def test_baseline_save_of_a_cpu_run_warns(work):
    from tests.factories import CPU_ENV

    s = make_suite(seeds=(0, 1))
    run_dir = make_run(work / "runs", s, make_trials(s, n_steps=20, config_hash=s.config_hash(), env=CPU_ENV))
    r = invoke("baseline", "save", str(run_dir), "-o", str(work / "b.json"))
    assert r.exit_code == 0 and "warning:" in r.output and "CPU" in r.output
    r = invoke("baseline", "save", str(run_dir), "-o", str(run_dir / "run.json"))
    assert r.exit_code == 2 and "run.json" in one_error_line(r)


def test_short_run_hint_names_the_warmup_key(work):
    r = invoke("run", str(_suite(work)), "--out", "runs", "--set", "train.steps=2")
    assert r.exit_code == 2 and "--set train.warmup_steps=" in one_error_line(r)


def test_advice_names_the_real_run_folder(work):
    s = make_suite(seeds=(0, 1))
    trials = make_trials(s, n_steps=20, config_hash=s.config_hash())
    trials[-1].status, trials[-1].error = "crashed", "RuntimeError: boom"
    run = make_run(work / "runs", s, trials)
    assert invoke("check", str(run)).exit_code == 2
    r = invoke("report", str(run))
    assert r.exit_code == 0, r.output
    md = (run / "report.md").read_text()
    assert "RUN_DIR" not in md and f"--resume {run}" in md


def test_piped_check_lines_fit_columns_and_keep_mode_names_whole(run_dir):
    for cols in ("100", "200"):
        r = invoke("check", str(run_dir), "--explain", env={"COLUMNS": cols})   # the rule lines: behind --explain
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert lines and all(len(ln) <= int(cols) for ln in lines), max(map(len, lines))
        assert sum("amp-o1-fp16  " in ln for ln in lines) >= 3   # rule lines start with the whole mode name


def test_piped_tables_and_progress_use_no_box_drawing():
    import io

    from rich.console import Console

    from ampbench.report.console import print_trials
    from tests.factories import make_trials as trials_of

    buf = io.StringIO()
    console = Console(file=buf, width=200, no_color=True)
    print_trials(trials_of(make_suite(seeds=(0,)), n_steps=10), console, "accuracy")
    text = buf.getvalue()
    assert "fp32" in text and not any(ch in text for ch in "━┃│─┏┓┗┛┡┩")


def test_code_spans_in_rule_messages_render_as_code_not_escaped_backticks():
    from ampbench.report.fmt import md_prose
    from ampbench.report.html import to_html

    md = md_prose("raise `train.steps` or set `x|y` <b>now</b> *really*")
    html = to_html(md, "t")
    assert "<code>train.steps</code>" in html and "\\`" not in html and "<b>" not in html
    assert "&lt;b&gt;now" in html and "<em>" not in html


def test_non_utf8_run_path_in_summary(work, run_dir):
    odd = work / os.fsdecode(b"runs-\xff")
    run_dir.parent.parent.rename(odd)
    moved = odd / run_dir.parent.name / run_dir.name
    for fmt in ("md", "csv"):
        r = invoke("compare", str(moved), "--format", fmt, "-o", str(work / f"s.{fmt}"))
        assert r.exit_code == 0, r.output
        assert "\\xff" in (work / f"s.{fmt}").read_text() or fmt == "md"


@pytest.mark.slow
def test_ascii_only_output_encoding_with_a_non_ascii_name(run_dir, work):
    out = work / "rapport-é.md"
    r = subprocess.run([sys.executable, "-m", "ampbench.cli", "report", str(run_dir), "-o", str(out)],
                       capture_output=True, timeout=300, cwd=work,
                       env={**os.environ, "PYTHONIOENCODING": "ascii",
                            "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 0, r.stderr[-500:]
    assert out.is_file() and b"Traceback" not in r.stderr + r.stdout and b"rapport-\\xe9" in r.stdout


def test_check_against_its_own_baseline_shows_no_change(run_dir, work):
    from ampbench.commands.check import check_run

    assert invoke("baseline", "save", str(run_dir), "-o", str(work / "b.json")).exit_code == 0
    report = check_run(run_dir, baseline=work / "b.json")
    rules = [r for v in report.verdicts for r in v.rules if r.rule == "history-throughput"]
    assert rules and all(r.observed == 0.0 for r in rules), [r.observed for r in rules]


def test_paddlenlp_short_max_steps_imports_with_a_fitting_measurement_warmup(work):
    import tomllib

    r = invoke("import", "paddlenlp", "--args", "--fp16 --max_steps 10 --warmup_steps 50", "-o", str(work / "s.toml"))
    assert r.exit_code == 0, r.output
    train = tomllib.loads((work / "s.toml").read_text())["train"]
    assert train["steps"] == 10 and train["warmup_steps"] < 10 and train["optimizer"]["lr_warmup_steps"] == 50
