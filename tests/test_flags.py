"""Paddle FLAGS as a suite table (`[flags]`, per mode too): validated, merged, applied, recorded."""

import pytest

from ampbench.config import ConfigError
from ampbench.trial.flags import apply_flags, merged_flags
from ampbench.workloads.suites import load_suite


def test_suite_and_mode_flags_validate_and_merge(toy_suite):
    p = toy_suite("""
[flags]
FLAGS_max_inplace_grad_add = 8
FLAGS_check_nan_inf = false

[profiles.other]
flags = { FLAGS_max_inplace_grad_add = 4 }
""", body=toy_suite().read_text().replace('custom_black_list = ["embedding"]',
                                          'custom_black_list = ["embedding"]\nflags = { FLAGS_check_nan_inf = true }'))
    s = load_suite(p).suite
    assert s.flags == {"FLAGS_max_inplace_grad_add": 8, "FLAGS_check_nan_inf": False}
    amp = s.mode("amp-o1-fp16")
    assert merged_flags(s.flags, amp.flags) == {"FLAGS_max_inplace_grad_add": 8, "FLAGS_check_nan_inf": True}
    assert merged_flags(s.flags, s.mode("fp32").flags) == s.flags
    assert load_suite(p, profile="other").suite.flags["FLAGS_max_inplace_grad_add"] == 4
    # flags are part of the experiment: they change the config hash
    assert load_suite(p, profile="other").suite.config_hash() != s.config_hash()


def test_flag_names_must_be_paddle_flags(toy_suite):
    with pytest.raises(ConfigError, match="max_inplace_grad_add: Paddle flag names start with FLAGS_"):
        load_suite(toy_suite("[flags]\nmax_inplace_grad_add = 8\n"))


def test_apply_flags_sets_paddle_and_reports_back():
    paddle = pytest.importorskip("paddle")
    before = paddle.get_flags(["FLAGS_max_inplace_grad_add"])["FLAGS_max_inplace_grad_add"]
    try:
        got = apply_flags({"FLAGS_max_inplace_grad_add": 8}, {"FLAGS_cudnn_batchnorm_spatial_persistent": True})
        assert paddle.get_flags(["FLAGS_max_inplace_grad_add"])["FLAGS_max_inplace_grad_add"] == 8
        assert got["FLAGS_max_inplace_grad_add"] == 8
        if not paddle.is_compiled_with_cuda():   # a GPU-only flag: recorded as not applied
            assert got["FLAGS_cudnn_batchnorm_spatial_persistent"] is None
        assert apply_flags({}, {}) == {}
    finally:
        paddle.set_flags({"FLAGS_max_inplace_grad_add": before})
