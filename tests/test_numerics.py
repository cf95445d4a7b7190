"""`check_numerics = true`: Paddle's NaN/Inf checker around the training steps, first offending op recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from ampbench.trial.numerics import (
    LEVEL_ENV,
    NumericsHook,
    parse_dump_line,
    parse_level,
    read_dump,
)

ERROR_LINE = ("[PRECISION] [ERROR] in [device=cpu, op=exp, tensor=, dtype=fp32], numel=6, num_nan=0, num_inf=1, "
              "num_zero=2, max=inf, min=0.000000e+00, mean=inf")
PLAIN_LINE = ("[PRECISION] in [device=cpu, op=matmul, tensor=, dtype=fp16], numel=6, num_zero=0, max=5.8e+04, "
              "min=-6.9e+04, mean=-7.5e+02")


def test_parse_level_accepts_names_and_numbers_and_refuses_the_aborting_mode() -> None:
    assert parse_level("CHECK_ALL") == parse_level("all") == parse_level("3") == 3
    assert parse_level("check_nan_inf") == 1
    with pytest.raises(ValueError, match=LEVEL_ENV):
        parse_level("0")


def test_dump_lines_parse_with_paddles_parser() -> None:
    bad = parse_dump_line(ERROR_LINE)
    assert bad is not None and bad.op == "exp" and bad.error and bad.nonfinite and bad.num_inf == 1
    assert bad.phase == "forward"
    ok = parse_dump_line(PLAIN_LINE)
    assert ok is not None and not ok.nonfinite and ok.dtype == "fp16" and ok.magnitude == pytest.approx(6.9e4)
    assert parse_dump_line("some other log line") is None
    grad = parse_dump_line(ERROR_LINE.replace("op=exp", "op=exp_grad"))
    assert grad is not None and grad.phase == "backward"


def test_hook_is_inert_unless_asked(tmp_path: Path) -> None:
    hook = NumericsHook.for_trial(False, tmp_path / "trials" / "fp32__seed0.json", env={})
    assert not hook.active and hook.record is None
    hook.begin(1)
    hook.end(1)
    assert hook.close() is None
    assert not (tmp_path / "numerics").exists()


def test_other_ranks_dump_beside_rank_zero(tmp_path: Path) -> None:
    trial = tmp_path / "trials" / "amp__seed0.json"
    r0 = NumericsHook.for_trial(True, trial, rank=0, env={})
    r1 = NumericsHook.for_trial(True, trial, rank=1, env={})
    assert r0.dump_dir == tmp_path / "numerics" / "amp__seed0"
    assert r1.dump_dir == tmp_path / "numerics" / "amp__seed0.rank1"
    r0.close(), r1.close()


def test_hook_records_the_first_offending_op_per_step_and_skips_unchecked_code(tmp_path: Path) -> None:
    import paddle

    hook = NumericsHook.for_trial(True, tmp_path / "trials" / "amp__seed0.json", env={})
    assert hook.active and hook.dump_dir == tmp_path / "numerics" / "amp__seed0"
    x = paddle.to_tensor([[0.5, 1.0], [2.0, 3.0]])
    w = paddle.to_tensor([[1.0, -1.0], [0.5, 2.0]])

    hook.begin(1)
    paddle.matmul(x, w).mean()          # clean step
    hook.end(1)
    hook.begin(2)
    h = paddle.matmul(x, w) * 100.0     # finite
    paddle.exp(h).sum()                 # exp overflows float32: the planted NaN/Inf source
    hook.end(2)
    paddle.log(paddle.to_tensor([-1.0]))  # NaN outside begin/end (e.g. evaluation): not checked
    rec = hook.close()

    assert rec is not None and rec["level"] == "CHECK_NAN_INF"
    assert rec["steps_checked"] == 2 and rec["lines_per_step"][0] == 0
    first = rec["first_bad"]
    assert first["op"] == "exp" and first["step"] == 2 and first["num_inf"] > 0 and first["max"] == "inf"
    assert rec["first_bad_forward"]["op"] == "exp"
    assert rec["bad_steps"] == 1 and "log" not in rec["bad_ops"]


def test_check_all_level_dumps_every_op_with_its_step(tmp_path: Path) -> None:
    import paddle

    hook = NumericsHook.for_trial(False, tmp_path / "trials" / "m__seed0.json", env={LEVEL_ENV: "all"})
    x = paddle.ones([4, 4])
    for step in (1, 2):
        hook.begin(step)
        (paddle.matmul(x, x) * float(step)).sum()
        hook.end(step)
    rec = hook.close()
    assert rec is not None and rec["level"] == "CHECK_ALL" and rec["first_bad"] is None
    assert all(n >= 3 for n in rec["lines_per_step"])  # matmul, scale, sum at least
    ops = read_dump(hook.dump_dir, rec["lines_per_step"])
    assert {s for s, _ in ops} == {1, 2}
    sums = [st for s, st in ops if st.op == "sum"]
    assert [st.max for st in sums] == [64.0, 128.0]  # 16 elements of 4, times the step


@pytest.mark.slow
def test_worker_records_the_planted_nan_source(tmp_path: Path, cache_env: Path) -> None:
    """The real worker, in its own process, with `check_numerics = true` on a model that overflows."""
    from ampbench.config import Suite
    from ampbench.engine.trials import launch_trial
    from ampbench.results import RunDir
    from ampbench.trial.spec import TrialSpec

    suite = Suite.model_validate({
        "suite": {"name": "toy", "workload": "toy", "metric": "accuracy", "seeds": [0]},
        "workload": {"train_rows": 128, "eval_rows": 32, "nan_above": 1.0},
        "train": {"batch_size": 32, "steps": 3, "warmup_steps": 1, "timeout_s": 120},
        "modes": [{"name": "fp32"}, {"name": "amp-o1-fp16", "level": "O1", "check_numerics": True}],
    })
    run = RunDir(tmp_path / "run")
    spec = TrialSpec(suite=suite.model_dump(mode="json"), suite_file="toy.toml", profile="cpu",
                     config_hash=suite.config_hash(), mode="amp-o1-fp16", seed=0,
                     trial_path=str(run.trial_path("amp-o1-fp16", 0)), cache_dir=str(cache_env))
    trial = launch_trial(spec, run)
    assert trial.status == "ok", trial.error
    assert trial.nonfinite_losses == 3  # NaN reaches the loss every step...
    num = trial.numerics
    assert num is not None and num["first_bad"]["op"] == "exp" and num["first_bad"]["step"] == 1
    assert num["steps_checked"] == 3 and num["bad_steps"] == 3  # ...and the checker named where it began
    assert (run.path / "numerics" / "amp-o1-fp16__seed0").is_dir()
