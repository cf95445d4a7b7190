"""A command program's own AMP calls recorded with what they used (issue 58.5, 58.8): the hook's "amp_order"
settings events (workloads/command/hook/_ampbench_hook/ampcalls.py) into the trial's AMP record, and the
why-not-faster census judging from them. The events here are what the hook sends for PaddleSeg's train loop
(paddleseg/core/train.py: GradScaler(init_loss_scaling=1024); auto_cast(custom_white_list={"elementwise_add",
"batch_norm", "sync_batch_norm"}, custom_black_list={"bilinear_interp_v2"})); the real PaddleSeg run is in
tests/test_command_acceptance.py."""

from __future__ import annotations

import json

from ampbench.config.suite import ModeConfig
from ampbench.judge import why_slow
from ampbench.record.models import AmpInfo, Trial
from ampbench.trial.command_amp import record_calls, seen_calls
from ampbench.trial.command_record import EventReader
from ampbench.trial.precision import effective_lists

SEG_WHITE = ["batch_norm", "elementwise_add", "sync_batch_norm"]
SEG_BLACK = ["bilinear_interp_v2"]


def _reader(*events: dict) -> EventReader:
    reader = EventReader()
    lines = [{"e": "start", "pid": 7, "rank": 0, "world": 1}, *events]
    reader.ingest(7, b"\n".join(json.dumps(e).encode() for e in lines))
    return reader


def _seen(*events: dict) -> dict:
    """The calls' settings as the worker reads them: the checked events of the program's one process."""
    return seen_calls(_reader(*events).procs[7].amp_order)


def _seg_events() -> list[dict]:
    eff = effective_lists("float16", "O1", SEG_WHITE, SEG_BLACK)   # what the program's own Paddle merges
    return [{"e": "amp_order", "call": "grad_scaler",
             "scaler": {"init_loss_scaling": 1024.0, "incr_ratio": 2.0, "decr_ratio": 0.5, "incr_every_n_steps": 2000.0,
                        "decr_every_n_nan_or_inf": 1.0, "use_dynamic_loss_scaling": 1.0}},
            {"e": "amp_order", "call": "auto_cast", "level": "O1", "dtype": "float16", "white": SEG_WHITE,
             "black": SEG_BLACK, "use_promote": True, "effective_white": eff["white"], "effective_black": eff["black"]}]


def _amp(mode: ModeConfig) -> AmpInfo:
    scaler = mode.scaler.model_dump()    # what command_finish records before the calls are read: the suite's
    return AmpInfo.model_validate({"requested": True, "level": "O1", "dtype": "float16", "scaler": scaler})


def test_a_program_applying_amp_itself_is_recorded_with_its_own_scaler_and_lists():
    mode = ModeConfig(name="amp-o1-fp16", level="O1", args=["--precision", "fp16"])
    amp = _amp(mode)
    assert amp.scaler["init_loss_scaling"] == 65536.0          # the suite's default, as main recorded it
    record_calls(amp, mode, _seen(*_seg_events()))
    assert amp.scaler["init_loss_scaling"] == 1024.0 and amp.scaler["incr_every_n_steps"] == 2000
    assert amp.scaler["use_dynamic_loss_scaling"] is True
    assert amp.white_list == SEG_WHITE and amp.black_list == SEG_BLACK
    assert "elementwise_add" in amp.effective_white_list and "bilinear_interp_v2" in amp.effective_black_list
    assert "bilinear_interp_v2" not in amp.effective_white_list
    assert amp.program["grad_scaler"]["scaler"]["init_loss_scaling"] == 1024.0
    assert amp.program["auto_cast"]["white"] == SEG_WHITE


def _trial(amp: AmpInfo) -> Trial:
    return Trial(suite="s", workload="command", mode="amp-o1-fp16", seed=0, status="ok", amp=amp)


def test_the_census_counts_the_programs_own_white_list_ops_as_listed():
    """elementwise_add is on no default float16 O1 list: with the suite's (empty) lists the census called its
    calls "on neither list"; with the program's, they are white-list ops."""
    mode = ModeConfig(name="amp-o1-fp16", level="O1", args=["--precision", "fp16"])
    calls = {"conv2d": {"float16": 10}, "elementwise_add": {"float32": 30}, "bilinear_interp_v2": {"float32": 5}}
    before, after = _amp(mode), _amp(mode)
    before_lists = effective_lists("float16", "O1", [], [])     # what main recorded for a command trial
    before.effective_white_list, before.effective_black_list = before_lists["white"], before_lists["black"]
    record_calls(after, mode, _seen(*_seg_events()))
    for amp in (before, after):
        amp.op_calls = calls
    c0 = why_slow.op_census(_trial(before))
    c1 = why_slow.op_census(_trial(after))
    assert c0["unlisted"] == 30 and c1["unlisted"] == 0      # bilinear_interp_v2 is on the default black list
    assert c1["white_list_fp32"] == 30          # the program white-listed it and it still ran in float32


def test_an_injected_modes_own_lists_are_recorded_never_as_the_programs():
    """amp = "inject": the auto_cast calls are the hook's, with the mode's custom lists (main recorded none and
    merged only Paddle's defaults, so the census called the mode's own white-list ops unlisted)."""
    mode = ModeConfig(name="amp-o1-fp16", level="O1", amp="inject", custom_white_list=["elementwise_add"],
                      custom_black_list=["relu"])
    eff = effective_lists("float16", "O1", ["elementwise_add"], ["relu"])
    ev = {"e": "amp_order", "call": "auto_cast", "level": "O1", "dtype": "float16", "white": ["elementwise_add"],
          "black": ["relu"], "use_promote": True, "effective_white": eff["white"], "effective_black": eff["black"]}
    amp = _amp(mode)
    record_calls(amp, mode, _seen(ev))
    assert amp.white_list == ["elementwise_add"] and amp.black_list == ["relu"]
    assert "elementwise_add" in amp.effective_white_list and "relu" in amp.effective_black_list
    assert amp.program == {} and amp.scaler["init_loss_scaling"] == 65536.0


def test_without_an_auto_cast_seen_the_modes_lists_are_merged():
    mode = ModeConfig(name="amp-o1-fp16", level="O1", custom_black_list=["relu"])
    amp = _amp(mode)
    record_calls(amp, mode, _seen())
    assert amp.black_list == ["relu"] and "relu" in amp.effective_black_list and amp.program == {}


def test_stability_advice_starts_from_the_programs_own_scaler_and_names_its_call():
    """Issue 58.8: skipped steps in a program that builds GradScaler(init_loss_scaling=1024): main advised
    starting lower at 32768 (the suite's default 65536 read as the start) in a suite `scaler` line the program
    never reads; now 1024 / 8 in the program's own GradScaler call. The rule passes the program's calls on."""
    from ampbench.diagnose.advice import advice_for
    from ampbench.judge.rules import advice_kit as kit
    from ampbench.results.verdicts import RuleResult

    mode = ModeConfig(name="amp-o1-fp16", level="O1", dtype="float16", args=["--precision", "fp16"])
    amp = _amp(mode)
    record_calls(amp, mode, _seen(*_seg_events()))
    prog = kit.program_amp([_trial(amp)])
    assert prog["grad_scaler"]["scaler"]["init_loss_scaling"] == 1024.0
    r = RuleResult(suite="s", mode=mode.name, rule="stability", status="FAIL", message="many skipped",
                   observed={"max_skipped_fraction": 0.4}, details={"reasons": ["skipped"], "program_amp": prog})
    tips = " ".join(advice_for(r, mode))
    assert "`paddle.amp.GradScaler(init_loss_scaling=128.0)` in the program's own GradScaler call" in tips
    assert "scaler = {" not in tips and "32768" not in tips
    plain = RuleResult(**{**r.model_dump(), "details": {"reasons": ["skipped"]}})
    assert "init_loss_scaling = 32768.0" in " ".join(advice_for(plain, mode))   # a suite-applied scaler: a suite line


def test_the_stability_rule_hands_the_programs_own_calls_to_its_advice():
    from ampbench.judge.rules.context import Ctx
    from ampbench.judge.rules.stability import rule_stability
    from tests.factories import make_suite, make_trial

    suite = make_suite(seeds=(0,))
    t = make_trial("amp-o1-fp16", found_inf=[i % 2 == 0 for i in range(40)], loss_scale=[1024.0] * 40)
    t.amp.program = {"grad_scaler": {"scaler": {"init_loss_scaling": 1024.0}}}
    (r,) = rule_stability(Ctx(suite, "amp-o1-fp16", [("amp-o1-fp16", 0)], {("amp-o1-fp16", 0): t}, None, ""))
    assert r.status == "FAIL" and r.details["program_amp"]["grad_scaler"]["scaler"]["init_loss_scaling"] == 1024.0
