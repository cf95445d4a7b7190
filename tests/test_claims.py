"""Published claims as judged rules (issue 60): a suite's `[[claims]]` (source, mode, figure, the claimed value
within a tolerance or a bound) judged against a run as confirmed (the figure's interval lies within what the
claim allows), refuted (wholly outside) or not decidable (straddling, with the seeds that would decide it; or a
run that cannot speak to it: AMP inactive, no probe, emulated AMP for a device figure).  A claim never changes a
mode's verdict or the exit code; `check --claims` exits 1 on a refuted one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import ConfigError, Suite, load_suite
from ampbench.judge.claims import RunFacts, decide, judge_claim, seeds_to_decide
from ampbench.judge.rules.traits import FigureInterval
from ampbench.report.markdown import write_report
from ampbench.results.verdicts import ModeVerdict, RuleResult
from tests.factories import CPU_ENV, make_run, make_suite, make_trials

cli = CliRunner()
GUIDE = "Paddle AMP guide | *scenario 1*"


def claim(**kw) -> dict:
    return {"source": GUIDE, "mode": "amp-o1-fp16", "figure": "speedup", "value": 1.8, "tolerance": 0.15, **kw}


def suite_with(*claims: dict, seeds=(0, 1, 2)) -> Suite:
    data = make_suite(seeds=seeds).model_dump(mode="json")
    data["claims"] = list(claims)
    return Suite.model_validate(data)


def speedup_verdict(low: float, high: float, est: float | None = None) -> ModeVerdict:
    """A verdict whose speedup result holds this interval (the speed rule's details, which its declared
    interval reads)."""
    est = math.sqrt(low * high) if est is None else est
    r = RuleResult(suite="toy", mode="amp-o1-fp16", rule="speedup", status="INCONCLUSIVE", observed=est,
                   threshold=1.0, message="", details={"estimate": est, "ci_low": low, "ci_high": high,
                                                       "seeds": [3, 3]})
    return ModeVerdict(suite="toy", mode="amp-o1-fp16", verdict="PASS", rules=[r])


def facts(suite: Suite, verdict: ModeVerdict, trials=None) -> RunFacts:
    trials = make_trials(suite) if trials is None else trials
    return RunFacts(suite, "default", trials, {verdict.mode: verdict}, [])


@pytest.mark.parametrize(("low", "high", "outcome"), [(0.9, 1.1, "refuted"), (1.6, 2.0, "confirmed"),
                                                      (0.5, 3.0, "not decidable")])
def test_the_issues_three_intervals_against_a_claimed_1_8x_within_15_percent(low, high, outcome):
    s = suite_with(claim())
    got = judge_claim(s.claims[0], facts(s, speedup_verdict(low, high)))
    assert got.outcome == outcome, got.message
    assert (got.claimed_low, got.claimed_high) == pytest.approx((1.53, 2.07))
    assert (got.low, got.high) == (low, high) and got.source == GUIDE and got.claimed == "1.8x ± 15%"
    if outcome == "not decidable":
        assert "straddles" in got.message


def test_an_undecided_claim_says_how_many_seeds_would_decide_it():
    """[0.5, 3.0] around 1.22x from 3 seeds: the planner's speedup spread (its row) sizes the seeds at which an
    interval around the estimate would clear the claim's band: refuted there, since 1.22 < 1.53."""
    from ampbench.judge.planner import PlanRow

    s = suite_with(claim())
    row = PlanRow(mode="amp-o1-fp16", rule="speedup", spread=0.3, effect="", seeds_needed=None, seeds_run=3)
    f = RunFacts(s, "default", make_trials(s), {"amp-o1-fp16": speedup_verdict(0.5, 3.0)}, [row])
    got = judge_claim(s.claims[0], f)
    assert got.outcome == "not decidable" and got.seeds_needed is not None
    n = got.seeds_needed
    assert f"about {n} seeds per mode would decide it" in got.message
    iv = FigureInterval(math.sqrt(1.5), 0.5, 3.0, log=True)
    band = s.claims[0].band()
    assert seeds_to_decide(iv, 0.3, band, 0.95) == n
    # at n seeds the projected interval clears the band; at n - 1 it does not
    from ampbench.judge.distributions import t_ppf

    def projected(k: int) -> str:
        half = float(t_ppf(0.975, 2 * k - 2)) * 0.3 * math.sqrt(2 / k)
        c = math.log(iv.estimate)
        return decide(math.exp(c - half), math.exp(c + half), band)
    assert projected(n) == "refuted" and (n == 2 or projected(n - 1) == "not decidable")
    assert seeds_to_decide(iv, None, band, 0.95) is None              # spread unknown: no number
    assert seeds_to_decide(FigureInterval(1.53, 1.0, 2.0, log=True), 0.3, band, 0.95) is None  # on the edge


def test_bounds_and_ranges():
    assert decide(0.41, 0.45, (0.40, math.inf)) == "confirmed"
    assert decide(0.20, 0.35, (0.40, math.inf)) == "refuted"
    assert decide(0.35, 0.45, (0.40, math.inf)) == "not decidable"
    assert decide(-0.0004, 0.0006, (-0.001, 0.001)) == "confirmed"


def real_run(tmp_path: Path, claims: list[dict], **kw) -> Path:
    s = suite_with(*claims)
    trials = make_trials(s, base_time={"fp32": 0.09, "amp-o1-fp16": 0.05}, peak={"fp32": 15 << 30,
                         "amp-o1-fp16": 8 << 30}, metrics={"fp32": [0.80, 0.81, 0.79],
                                                           "amp-o1-fp16": [0.80, 0.80, 0.81]}, **kw)
    return make_run(tmp_path, s, trials)


def test_check_judges_a_runs_claims_and_never_its_verdicts(tmp_path):
    """The same run judged with and without claims: identical verdicts and exit code; the claims in check.json,
    on the console after the outcome, and in report.md's Claims section citing the source, escaped."""
    claims = [claim(), claim(figure="memory", value=None, tolerance=None, at_least=0.4),
              claim(figure="speedup", value=3.0, tolerance=0.1), claim(figure="metric_delta", value=0.0,
                                                                      tolerance=0.05)]
    run = real_run(tmp_path / "c", claims)
    plain = real_run(tmp_path / "p", [])
    r = cli.invoke(app, ["check", str(run)], env={"COLUMNS": "250"})
    p = cli.invoke(app, ["check", str(plain)], env={"COLUMNS": "250"})
    assert r.exit_code == p.exit_code == 0, r.output
    doc = json.loads((run / "check.json").read_text())
    same = json.loads((plain / "check.json").read_text())
    assert [v["verdict"] for v in doc["verdicts"]] == [v["verdict"] for v in same["verdicts"]]
    assert [c["outcome"] for c in doc["claims"]] == ["confirmed", "confirmed", "refuted", "confirmed"]
    assert same["claims"] == []
    assert "claims (published; judged on this run, never its verdict)" in r.output and "refuted" in r.output
    gate = cli.invoke(app, ["check", str(run), "--claims"], env={"COLUMNS": "250"})
    assert gate.exit_code == 1, gate.output
    assert cli.invoke(app, ["check", str(plain), "--claims"]).exit_code == 0
    md = write_report([run]).read_text()
    section = md.split("## Claims", 1)[1].split("\n## ", 1)[0]
    assert "Paddle AMP guide \\| \\*scenario 1\\*" in section and "**refuted**" in section
    assert md.index("## Outcome") < md.index("## Claims") < md.index("## Summary")


def test_a_cpu_run_of_the_bundled_suites_decides_no_claim_amp_inactive(tmp_path):
    """suites/ocr.toml and suites/ctr.toml carry the seed's claims, the guide named as their source and its
    hardware stated; a CPU run (AMP inactive) says "not decidable: AMP inactive" for each, whatever mode of the
    profile it names."""
    for name, metric in (("ocr", "hmean"), ("ctr", "auc")):
        loaded = load_suite(name, profile="cpu").suite
        assert loaded.claims and all("Paddle AMP guide" in c.source and c.hardware for c in loaded.claims)
        suite = Suite.model_validate({**loaded.model_dump(mode="json"), "suite": {
            **loaded.suite.model_dump(mode="json"), "metric": metric, "seeds": [0, 1]}})
        run = make_run(tmp_path / name, suite, make_trials(suite, amp_active=False, env=CPU_ENV,
                                                          memory_source="host"), env=CPU_ENV)
        r = cli.invoke(app, ["check", str(run), "--claims"], env={"COLUMNS": "250"})
        assert r.exit_code == 3, r.output      # nothing refuted: the run's own exit code
        got = json.loads((run / "check.json").read_text())["claims"]
        assert len(got) == len(loaded.claims)
        for c in got:
            assert c["outcome"] == "not decidable" and c["why"].startswith("AMP inactive"), c
            assert c["message"].startswith("Not decidable: AMP inactive")
    ocr = load_suite("ocr").suite
    assert {(c.mode, c.figure) for c in ocr.claims} >= {("amp-o1-fp16", "memory"), ("amp-o2-fp16-b32", "speedup"),
                                                       ("amp-o1-fp16", "max_batch"), ("fp32", "max_batch")}
    ctr = load_suite("ctr").suite
    assert {(c.figure, c.value, c.tolerance) for c in ctr.claims} == {("time_to_train", 0.375, 0.15),
                                                                      ("metric_delta", 0.0, 0.001)}


def test_the_largest_batch_claims_are_judged_by_the_probe(tmp_path):
    """"Batch 32 fits where FP32 batch 8 ran out of memory": the probe's largest batch per mode (a GPU probe of
    the suite and profile beside the run); a capped search is a lower bound; no probe: not decidable."""
    from ampbench.results.probe_file import ProbeFile, ProbeMode

    claims = [claim(figure="max_batch", value=None, tolerance=None, at_least=32),
              claim(mode="fp32", figure="max_batch", value=None, tolerance=None, at_most=7)]
    run = real_run(tmp_path, claims)
    r = cli.invoke(app, ["check", str(run)])
    got = json.loads((run / "check.json").read_text())["claims"]
    assert all(c["outcome"] == "not decidable" and "no max-batch probe" in c["why"] for c in got), r.output
    probe = run.parent / "p1-probe"
    probe.mkdir()
    doc = ProbeFile(suite="toy", suite_file="x.toml", profile="default", run_id="p1-probe", device="gpu",
                    ceiling="device", steps=5, max_batch_limit=64, seed=0, started="2025-01-01T00:00:00Z",
                    finished="2025-01-01T01:00:00Z",
                    modes={"fp32": ProbeMode(configured_batch=8, max_batch=12),
                           "amp-o1-fp16": ProbeMode(configured_batch=8, max_batch=64, capped=True, amp_active=True)})
    (probe / "probe.json").write_text(doc.model_dump_json(by_alias=True))
    cli.invoke(app, ["check", str(run)])
    got = json.loads((run / "check.json").read_text())["claims"]
    assert [c["outcome"] for c in got] == ["confirmed", "refuted"], got
    assert got[0]["low"] == 64 and got[0]["high"] is None       # capped: at least 64


def test_time_to_train_is_judged_on_the_time_to_target_ratio(tmp_path):
    """"4 h -> 1.5 h" as AMP/FP32 time to the suite's target: the time-to-target rule's ratio and interval."""
    s = suite_with(claim(figure="time_to_train", value=0.375, tolerance=0.15))
    r = RuleResult(suite="toy", mode="amp-o1-fp16", rule="time-to-target", status="PASS", observed=0.6,
                   threshold={}, message="", details={"amp_wall_s": [60.0, 62.0, 58.0], "fp32_wall_s": [100.0, 101.0,
                                                                                                     99.0]})
    got = judge_claim(s.claims[0], facts(s, ModeVerdict(suite="toy", mode="amp-o1-fp16", verdict="PASS", rules=[r])))
    assert got.outcome == "refuted" and 0.55 < got.low < got.high < 0.65, got.message


def test_emulated_amp_judges_the_metric_claims_only_marked_emulated():
    """Under emulated AMP (issue 56's `amp.emulated`) the numerics are real: a metric claim is judged and marked
    emulated; a speed or memory claim is not measured there."""
    s = suite_with(claim(figure="metric_delta", value=0.0, tolerance=0.05), claim(), seeds=(0, 1, 2))
    trials = make_trials(s, amp_active=False, metrics={"fp32": [0.8, 0.81, 0.79], "amp-o1-fp16": [0.8, 0.8, 0.81]})
    for t in trials:
        if t.amp.requested:
            t.amp.emulated = True   # issue 56's field; an extra of the open AmpInfo until it lands
    parity = RuleResult(suite="toy", mode="amp-o1-fp16", rule="accuracy-parity", status="PASS", observed=0.0,
                        threshold=0.01, message="", details={"amp_values": [0.8, 0.8, 0.81],
                                                             "fp32_values": [0.8, 0.81, 0.79]})
    v = ModeVerdict(suite="toy", mode="amp-o1-fp16", verdict="PASS", rules=[parity])
    metric, speed = (judge_claim(c, facts(s, v, trials)) for c in s.claims)
    assert metric.outcome == "confirmed" and metric.emulated and "Emulated AMP" in metric.message
    assert speed.outcome == "not decidable" and "not measured under emulation" in speed.why


@pytest.mark.parametrize(("bad", "key", "reason"), [
    (claim(tolerance=None), "claims[0]", "needs its `tolerance`"),
    (claim(at_least=1.5), "claims[0]", "give one"),
    (claim(mode="fp32"), "claims[0]", "name the AMP mode"),
    (claim(mode="amp-o9"), "claims[0].mode", "no mode of this suite"),
    (claim(tolerance=1.5), "claims[0]", "below 1"),
    (claim(figure="speed"), "claims[0].figure", "Input should be"),
])
def test_a_bad_claim_is_one_line_naming_it(tmp_path, bad, key, reason):
    import tomli_w

    data = make_suite().model_dump(mode="json", exclude_none=True)
    given = {k: v for k, v in bad.items() if v is not None}
    path = tmp_path / "s.toml"
    path.write_text(tomli_w.dumps({k: v for k, v in data.items() if v not in ({}, [])} | {"claims": [given]}))
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    assert e.value.key.startswith(key) and reason in e.value.reason, (e.value.key, e.value.reason)


def test_the_claims_page_shows_the_figures_as_the_code_declares_them():
    """docs/claims.md's figure table is a generated block (`ampbench docs --write docs/`), fresh."""
    from ampbench.judge.claims import figures_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "claims.md").read_text()
    assert "<!-- generated: claim-figures" in doc and figures_table() in doc
