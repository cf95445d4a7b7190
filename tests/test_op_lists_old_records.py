"""A trial recorded before its effective op lists were (issue 58.9): `ampbench check` computes Paddle's default
lists for it where the Paddle it ran is installed (engine/op_lists.py; the analysis side never imports paddle),
and otherwise the why-not-faster census says it is partial instead of calling Paddle's default-list ops
"on neither list"."""

from __future__ import annotations

from ampbench.engine.op_lists import complete_lists, installed_paddle
from ampbench.judge import why_slow
from tests.factories import make_trial

CALLS = {"conv2d": {"float16": 40}, "matmul_v2": {"float32": 50}, "relu": {"float32": 50},
         "elementwise_add": {"float32": 10}}


def _old(paddle: str):
    t = make_trial("amp-o1-fp16", env={"paddle": paddle, "device": "gpu:0"})   # AMP active: conv2d ran in float16
    t.amp.op_calls, t.amp.white_list, t.amp.black_list = dict(CALLS), [], ["relu"]
    assert not t.amp.effective_white_list   # what an older file holds
    return t


def test_an_old_record_gets_paddles_default_lists_where_its_paddle_is_installed():
    t = _old(installed_paddle())
    before = why_slow.op_census(t)["unlisted"]   # main: conv2d, matmul_v2 (default white list) counted unlisted
    assert complete_lists([t]) == 1
    assert "matmul_v2" in t.amp.effective_white_list and "relu" in t.amp.effective_black_list
    after = why_slow.op_census(t)
    assert before == 100 and after["unlisted"] == 10 and after["white_list_fp32"] == 50
    assert not why_slow.lists_partial(t)


def test_without_its_paddle_the_census_says_it_is_partial_and_claims_no_unlisted_ops():
    t = _old("2.6.2")
    assert complete_lists([t]) == 0 and why_slow.lists_partial(t)
    causes = why_slow.rank([t])
    assert any(c.kind == "census-partial" for c in causes)
    assert not any(c.kind == "unlisted" for c in causes)   # main: "100 of 150 op calls are on neither list"


def test_check_computes_the_lists_of_an_old_run(tmp_path):
    from ampbench.commands.check import check_run
    from tests.factories import make_run, make_suite

    suite = make_suite(seeds=(0,))
    old = _old(installed_paddle())
    fp32 = make_trial("fp32", env={"paddle": installed_paddle(), "device": "gpu:0"})
    run = make_run(tmp_path, suite, [fp32, old])
    report = check_run(run)
    texts = " ".join(r.message + str(r.details) for v in report.verdicts for r in v.rules)
    assert "op calls are on neither list" not in texts and "census is partial" not in texts   # main: "100 of 150 ..."
